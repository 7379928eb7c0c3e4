"""Embedding."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .. import init
from ...autograd.grad_mode import no_grad
from ..parameter import Parameter
from .linear import empty_parameter
from .module import Module


class Embedding(Module):
    """A lookup table: row i of weight (num_embeddings, embedding_dim) for index i, drawn from N(0, 1); the row at
    padding_idx is zero. max_norm is not supported."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Any = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if max_norm is not None:
            raise NotImplementedError("Embedding(max_norm=...) is not supported yet")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise ValueError("Padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise ValueError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = empty_parameter(num_embeddings, embedding_dim, device=device, dtype=dtype)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Any) -> Any:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        s = "%s, %s" % (self.num_embeddings, self.embedding_dim)
        if self.padding_idx is not None:
            s += ", padding_idx=%s" % self.padding_idx
        if self.norm_type != 2:
            s += ", norm_type=%s" % self.norm_type
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=%s" % self.scale_grad_by_freq
        if self.sparse:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding whose weight is `embeddings` (2-dimensional), shared, not copied."""
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze)
