"""torch.nn.utils: clipping of gradients (clip_grad_norm_, clip_grad_value_)."""

from .clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
