"""torch.cuda: whether CUDA is there (the GPU build on a machine with a GPU)."""

from __future__ import annotations

from typing import Any

from . import _dispatch, _interop


def is_available() -> bool:
    return bool(_dispatch.JAVA.cudaAvailable())


def device_count() -> int:
    return int(_dispatch.JAVA.cudaDeviceCount())


def manual_seed(seed: int) -> None:
    _interop.call(_dispatch.JAVA.manualSeed, int(seed))


manual_seed_all = manual_seed


def synchronize(device: Any = None) -> None:
    """Waits for the GPU's queued work: reading a value to the host does, so this copies one element."""
    if is_available():
        from ._factories import zeros
        zeros(1, device="cuda").cpu()
