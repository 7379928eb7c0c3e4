"""Memory statistics per device, in the manner of torch.cuda.memory_stats (docs/observability.md, "Memory statistics")."""

from __future__ import annotations

from . import _bridge


def _device_index(device):
    """The runtime's device id of `device`: None (device 0), an int, or "cpu:N" / "cuda:N" of the runtime's kind."""
    bridge = _bridge.bridge()
    if device is None:
        return 0
    if isinstance(device, str):
        kind, sep, index = device.partition(":")
        if not sep or kind != bridge.deviceType() or not index.isdigit():
            raise ValueError("device must be an int or '%s:N', got %r" % (bridge.deviceType(), device))
        device = int(index)
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError("device must be an int or a 'kind:N' string, got %r" % (device,))
    return device


def _as_dict(values):
    return dict(zip((str(k) for k in _bridge.bridge().memoryStatKeys()), (int(v) for v in values)))


def memory_stats(device: int | str | None = None) -> dict[str, int]:
    """The memory of `device` once it ran everything issued before, as a dict of ints (all in bytes but counts):

    blobs.count, blobs.live_bytes, blobs.peak_bytes: the tensors the device holds and their bytes (each local shard's
        numel times its element size), now and at the peak;
    shm.live_bytes, shm.peak_bytes: shared-memory regions mapped by the process that runs the device (its worker
        process with --per-device-process; in thread mode the one process, shared by every device);
    cuda_ipc.live_bytes, cuda_ipc.peak_bytes: other processes' CUDA memory that process opened through CUDA IPC;
    cuda.allocated_bytes, cuda.peak_allocated_bytes, cuda.reserved_bytes, cuda.peak_reserved_bytes: libtorch's CUDA
        caching allocator on the device's GPU in that process (0 on CPU devices);
    sync.growth_warnings: 1 once the device warned that its tensors grew at every sync, else 0;
    mapped_files.live_bytes, mapped_files.peak_bytes: bytes of files that process maps to read or write tensors
        (dtorch.load_state_dict and save_state_dict), per process as shm.

    Peaks are since the start or the last reset_peak_memory_stats(device). `device` is an int, "cpu:N" / "cuda:N"
    of the runtime's kind, or None for device 0.
    """
    return _as_dict(_bridge.call(_bridge.bridge().memoryStats, _device_index(device)))


def reset_peak_memory_stats(device: int | str | None = None) -> dict[str, int]:
    """Restarts the peaks of memory_stats(device) from the live values, in order with what was issued before; returns
    the statistics after that. The shm and cuda_ipc peaks belong to the process: in thread mode every device's restart."""
    return _as_dict(_bridge.call(_bridge.bridge().resetPeakMemoryStats, _device_index(device)))
