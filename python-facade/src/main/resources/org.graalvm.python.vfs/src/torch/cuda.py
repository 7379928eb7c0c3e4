"""torch.cuda: whether CUDA is there (the GPU build on a machine with a GPU)."""

from . import _dispatch


def is_available():
    return bool(_dispatch.JAVA.cudaAvailable())


def device_count():
    return int(_dispatch.JAVA.cudaDeviceCount())


def manual_seed(seed):
    _dispatch.call_java(_dispatch.JAVA.manualSeed, int(seed))


manual_seed_all = manual_seed


def synchronize(device=None):
    """Waits for the GPU's queued work: reading a value to the host does, so this copies one element."""
    if is_available():
        from ._factories import zeros
        zeros(1, device="cuda").cpu()
