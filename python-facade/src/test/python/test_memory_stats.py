"""dtorch.memory_stats and dtorch.reset_peak_memory_stats: the bytes of the tensors each device holds, exactly."""

import dtorch
from dtorch import Shard
from _testing import raises, run

KEYS = ["blobs.count", "blobs.live_bytes", "blobs.peak_bytes", "shm.live_bytes", "shm.peak_bytes", "cuda_ipc.live_bytes",
        "cuda_ipc.peak_bytes", "cuda.allocated_bytes", "cuda.peak_allocated_bytes", "cuda.reserved_bytes",
        "cuda.peak_reserved_bytes", "sync.growth_warnings", "mapped_files.live_bytes", "mapped_files.peak_bytes"]


def _all(key):
    return [dtorch.memory_stats(d)[key] for d in range(dtorch.device_count())]


def test_a_dict_of_ints_by_documented_keys():
    stats = dtorch.memory_stats(0)
    assert list(stats) == KEYS, list(stats)
    assert all(type(v) is int for v in stats.values()), stats
    assert stats["cuda.allocated_bytes"] == 0 and stats["cuda.reserved_bytes"] == 0  # CPU devices
    assert stats["sync.growth_warnings"] == 0


def test_live_and_peak_bytes_of_the_tensors_made():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    for d in range(4):
        dtorch.reset_peak_memory_stats(d)
    live, count = _all("blobs.live_bytes"), _all("blobs.count")
    assert _all("blobs.peak_bytes") == live
    with dtorch.zeros(10, 4, device_mesh=mesh, placements=[Shard(0)]):  # rows 3, 3, 2, 2 of 4 float32
        assert [a - b for a, b in zip(_all("blobs.live_bytes"), live)] == [48, 48, 32, 32]
        assert [a - b for a, b in zip(_all("blobs.count"), count)] == [1, 1, 1, 1]
    assert _all("blobs.live_bytes") == live
    assert [a - b for a, b in zip(_all("blobs.peak_bytes"), live)] == [48, 48, 32, 32]  # the peak survives the free
    after = dtorch.reset_peak_memory_stats(3)
    assert after["blobs.peak_bytes"] == live[3] and after["blobs.live_bytes"] == live[3]
    assert dtorch.memory_stats(2)["blobs.peak_bytes"] == live[2] + 32  # only device 3 was reset


def test_device_forms():
    with dtorch.ones(3, dtype=dtorch.int64):  # on the first device alone
        assert dtorch.memory_stats()["blobs.live_bytes"] == dtorch.memory_stats(0)["blobs.live_bytes"]
        assert dtorch.memory_stats("cpu:1")["blobs.live_bytes"] == dtorch.memory_stats(1)["blobs.live_bytes"]
        assert dtorch.memory_stats(0)["blobs.live_bytes"] - dtorch.memory_stats(1)["blobs.live_bytes"] >= 24
    raises(ValueError, dtorch.memory_stats, "cuda:0", contains="cpu:N")
    raises(ValueError, dtorch.memory_stats, 4, contains="device 4")
    raises(TypeError, dtorch.memory_stats, 1.5)


run(globals())
