"""dtorch.load_state_dict / save_state_dict and dtorch.safetensors: round trips of every supported dtype between meshes
of 1, 4 and 2 x 2 devices compared with the torch tensors they came from, a file checked by a reader written here with
struct and json, plans as dicts and functions, strict and reported mismatches, uneven and empty shards, sharded
checkpoints through their index, plain torch tensors through load_file/save_file, and the memory a load holds."""

import json
import os
import struct
import tempfile

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run, settled

DIR = tempfile.mkdtemp(prefix="dtorch-safetensors-")
GRID = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
LINE = dtorch.init_device_mesh("cpu", (4,))
ONE = dtorch.DeviceMesh("cpu", [0])
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool]
NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
         torch.uint8: "U8", torch.bool: "BOOL"}


def path(name):
    return os.path.join(DIR, name)


def values(dtype, *shape):
    n = 1
    for s in shape:
        n *= s
    flat = torch.arange(n)
    if dtype == torch.bool:
        return (flat % 3 == 0).reshape(shape)
    if dtype == torch.uint8:
        return (flat % 256).to(dtype).reshape(shape)
    if dtype.is_floating_point:
        return (flat * 0.37 - 1.5).to(dtype).reshape(shape)
    return (flat * -7919).to(dtype).reshape(shape)


def equal(got, want, what):
    assert tuple(got.shape) == tuple(want.shape), (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert torch.equal(got, want), (what, got.tolist(), want.tolist())


def every_dtype():
    return {"layer.%s" % NAMES[d].lower(): values(d, 5, 3) for d in DTYPES}


def test_every_dtype_from_a_2x2_mesh_onto_four_devices_and_one():
    host = every_dtype()
    state = {k: dtorch.distribute_tensor(v, GRID, [Shard(0), Shard(1)]) for k, v in host.items()}
    file = dtorch.save_state_dict(state, path("every.safetensors"), metadata={"format": "pt"})
    header = dtorch.safetensors.open_header(file)
    assert header.metadata == {"format": "pt"}, header.metadata
    assert list(header.tensors) == list(host), list(header.tensors)
    for k, v in host.items():
        assert header.tensors[k].dtype == v.dtype and header.tensors[k].shape == (5, 3), header.tensors[k]
    for plan in ({k: (LINE, [Shard(0)]) for k in host}, lambda name: (LINE, [Shard(1)]), lambda name: (ONE, [Replicate()]),
                 {k: (GRID, [Replicate(), Shard(0)], (5, 3)) for k in host}):
        loaded = dtorch.load_state_dict(file, plan)
        assert list(loaded) == list(host) and loaded.missing_keys == [] and loaded.unexpected_keys == []
        for k, v in host.items():
            equal(loaded[k].to_torch(), v, k)


def test_a_file_read_back_by_struct_and_json():
    x = values(torch.int32, 3, 4)
    dtorch.save_state_dict({"x": dtorch.distribute_tensor(x, LINE, [Shard(1)])}, path("plain.safetensors"))
    with open(path("plain.safetensors"), "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    entry = header["x"]
    assert entry["dtype"] == "I32" and entry["shape"] == [3, 4], entry
    begin, end = entry["data_offsets"]
    ints = struct.unpack("<12i", data[8 + n + begin:8 + n + end])
    assert list(ints) == x.flatten().tolist(), ints


def test_strict_refuses_and_non_strict_reports():
    a, b = values(torch.float32, 4, 2), values(torch.int64, 3)
    file = dtorch.save_state_dict({"a": dtorch.distribute_tensor(a, LINE, [Shard(0)]), "b": dtorch.distribute_tensor(b, LINE)},
                                  path("small.safetensors"))
    raises(ValueError, dtorch.load_state_dict, file, {"a": (LINE, [Shard(0)]), "b": (LINE, [Shard(0)]), "c": (LINE, [Shard(0)])},
           contains="missing [c]")
    raises(ValueError, dtorch.load_state_dict, file, {"a": (LINE, [Shard(0)])}, contains="unexpected [b]")
    loaded = dtorch.load_state_dict(file, {"a": (LINE, [Shard(0)]), "c": (LINE, [Shard(0)])}, strict=False)
    assert list(loaded) == ["a"] and loaded.missing_keys == ["c"] and loaded.unexpected_keys == ["b"], loaded
    equal(loaded["a"].to_torch(), a, "a")
    raises(ValueError, dtorch.load_state_dict, file, {"a": (LINE, [Shard(0)], (2, 4)), "b": (LINE, [Replicate()])},
           contains="but the target's is [2, 4]")
    raises(ValueError, dtorch.load_state_dict, file, {"a": (LINE, [Partial()]), "b": (LINE, [Replicate()])}, contains="not loadable")
    raises(ValueError, dtorch.load_state_dict, file, lambda name: (LINE, [Shard(1)]), contains="tensor 'b'")
    raises(TypeError, dtorch.load_state_dict, file, {"a": LINE, "b": LINE})
    raises(ValueError, dtorch.safetensors.open_header, path("absent.safetensors"), contains="no such file")
    with open(path("bad.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 7) + b"{nope}!")
    raises(ValueError, dtorch.safetensors.open_header, path("bad.safetensors"), contains="header is not JSON")
    raises(ValueError, dtorch.save_state_dict, {"d": dtorch.zeros(2, dtype=dtorch.float64)}, path("f64.safetensors"),
           contains="float64")
    assert not os.path.exists(path("f64.safetensors"))


def test_uneven_and_empty_shards():
    rows = values(torch.float32, 2, 3)
    file = dtorch.save_state_dict({"rows": dtorch.distribute_tensor(rows, ONE, [Replicate()])}, path("uneven.safetensors"))
    loaded = dtorch.load_state_dict(file, {"rows": (LINE, [Shard(0)])})
    shapes = [tuple(t.shape) for t in loaded["rows"].to_local()]
    assert shapes == [(1, 3), (1, 3), (0, 3), (0, 3)], shapes
    again = dtorch.save_state_dict(loaded, path("uneven-again.safetensors"))
    equal(dtorch.safetensors.load_file(again)["rows"], rows, "saved from 1, 1, 0, 0 shards")


def test_sharded_checkpoint_through_its_index():
    host = {"block.%d.weight" % i: values(torch.bfloat16, 8, 6) for i in range(5)}
    state = {k: dtorch.distribute_tensor(v, GRID, [Shard(0), Replicate()]) for k, v in host.items()}
    index = dtorch.save_state_dict(state, path("sharded"), max_shard_size=200)
    assert index.endswith("model.safetensors.index.json"), index
    assert sorted(os.listdir(path("sharded"))) == ["model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                                   "model-00003-of-00003.safetensors", "model.safetensors.index.json"]
    loaded = dtorch.load_state_dict(index, lambda name: (LINE, [Shard(1)]))
    for k, v in host.items():
        equal(loaded[k].to_torch(), v, k)
    plain = dtorch.safetensors.load_file(index)
    for k, v in host.items():
        equal(plain[k], v, k)


def test_plain_torch_tensors_through_load_file_and_save_file():
    host = every_dtype()
    dtorch.safetensors.save_file(host, path("torch.safetensors"), metadata={"who": "torch"})
    back = dtorch.safetensors.load_file(path("torch.safetensors"))
    assert list(back) == list(host)
    for k, v in host.items():
        equal(back[k], v, k)
    assert dtorch.safetensors.open_header(path("torch.safetensors")).metadata == {"who": "torch"}
    raises(TypeError, dtorch.safetensors.save_file, {"x": [1, 2]}, path("nope.safetensors"))


def test_a_load_holds_each_devices_shards_and_maps_nothing_after():
    state = {"w%d" % i: dtorch.full((64, 256), float(i), device_mesh=LINE, placements=[Shard(0)]) for i in range(4)}
    file = dtorch.save_state_dict(state, path("model.safetensors"))
    for d in range(4):  # what earlier tests dropped is freed first, not in the middle of the load
        settled(lambda: dtorch.memory_stats(d)["blobs.live_bytes"], "device %d's live bytes" % d)
    before = [dtorch.reset_peak_memory_stats(d)["blobs.live_bytes"] for d in range(4)]
    loaded = dtorch.load_state_dict(file, lambda name: (LINE, [Shard(0)]))
    for d in range(4):
        stats = dtorch.memory_stats(d)
        assert stats["blobs.peak_bytes"] == before[d] + 4 * 16 * 256 * 4, (d, stats)
        assert stats["mapped_files.live_bytes"] == 0, stats
        assert 0 < stats["mapped_files.peak_bytes"] <= 4 * 16 * 256 * 4, stats
    equal(loaded["w3"].to_torch(), torch.full((64, 256), 3.0), "w3")


run(globals())
