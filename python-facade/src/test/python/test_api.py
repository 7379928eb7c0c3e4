"""Every public name of dtorch, in the call forms DTorch's documentation shows."""

import dtorch
import torch
from dtorch import Partial, Replicate, Shard
from _testing import close, raises, run


def test_names_import_from_both_modules():
    from dtorch.distributed_spec import DeviceMesh, Partial as P2, Replicate as R2, Shard as S2, init_device_mesh
    assert DeviceMesh is dtorch.DeviceMesh and init_device_mesh is dtorch.init_device_mesh
    assert S2 is Shard and R2 is Replicate and P2 is Partial
    for name in dtorch.__all__:
        assert hasattr(dtorch, name), name


def test_meshes_in_every_documented_form():
    nested = dtorch.DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"])
    assert nested.shape == (2, 2) and nested.mesh_dim_names == ("dp", "tp") and nested.mesh == [[0, 1], [2, 3]]
    made = dtorch.init_device_mesh("cpu", mesh_shape=(2, 2), mesh_dim_names=["dp", "tp"])
    assert made == nested
    line = dtorch.init_device_mesh("cpu", (4,))
    assert line.device_ids == [0, 1, 2, 3] and line.mesh_dim_names is None and line.size() == 4
    assert nested["tp"].device_ids == [0, 1]
    assert "DeviceMesh(cpu, [[0, 1], [2, 3]], dims=[dp, tp])" == repr(nested)
    raises(ValueError, dtorch.DeviceMesh, "cuda", [0, 1], contains="./dtorch run --devices cuda:N")
    raises(ValueError, dtorch.init_device_mesh, "cuda", (2, 2), contains="--same-device")
    raises(ValueError, dtorch.DeviceMesh, "cuda", [[0, 0], [0, 0]], contains="this runtime has 4 cpu devices")
    # Repeated ids mean ranks sharing a GPU only on a same-device CUDA runtime; on CPU they are refused as before.
    raises(ValueError, dtorch.DeviceMesh, "cpu", [0, 0], contains="distinct")
    assert dtorch.device_type() == "cpu"
    raises(ValueError, dtorch.DeviceMesh, "cpu", [[0, 1], [2]])


def test_placements():
    assert repr(Shard(0)) == "Shard(dim=0)" and repr(Replicate()) == "Replicate()" and repr(Partial()) == "Partial(sum)"
    assert Shard(1) == Shard(1) and Shard(1) != Shard(0) and Partial("max").reduce_op == "max"
    assert Shard(1).is_shard() and Shard(1).is_shard(1) and Replicate().is_replicate() and Partial().is_partial()
    assert Shard(-1).dim == -1 and repr(Shard(-1)) == "Shard(dim=-1)"
    raises(TypeError, Shard, 1.5)
    raises(ValueError, Partial, "mode")
    assert Replicate() == Replicate() and Shard(0) != Replicate() and Replicate() != Shard(0) and Shard(0) != "S(0)"
    assert Partial() == Partial("sum") and Partial("sum") != Partial("max") and Partial() != Replicate()
    assert len({Shard(1), Shard(1), Replicate(), Replicate(), Partial()}) == 3


def test_placement_lists_compare_as_a_tensor_of_some_dimensions_reads_them():
    from dtorch._distribute_module import same_placements
    assert same_placements([Shard(-1), Replicate()], [Shard(2), Replicate()], 3)
    assert same_placements((Shard(1),), [Shard(1)], 3) and not same_placements([Shard(-1)], [Shard(1)], 3)
    assert not same_placements([Replicate()], [Replicate(), Replicate()], 3)
    raises(ValueError, same_placements, [Shard(-4)], [Shard(0)], 3, contains="out of range")


def test_factories_with_varargs_tuples_and_keywords():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    a = dtorch.zeros(4, 2, device_mesh=mesh, placements=[Shard(0)])
    b = dtorch.zeros((4, 2), device_mesh=mesh, placements=[Shard(0)])
    assert a.shape == b.shape == (4, 2) and a.placements == (Shard(0),) and a.dtype == dtorch.float32
    assert dtorch.ones(3, dtype=dtorch.int64).to_torch().tolist() == [1, 1, 1]
    assert dtorch.full((2,), 7).to_torch().tolist() == [7, 7]
    assert dtorch.full((2,), 1.5).to_torch().tolist() == [1.5, 1.5]
    assert dtorch.empty(5, device_mesh=mesh, placements=[Shard(0)]).shape == (5,)
    assert dtorch.arange(6, device_mesh=mesh, placements=[Shard(0)]).to_torch().tolist() == [0, 1, 2, 3, 4, 5]
    close(dtorch.arange(0, 1, 0.25).to_torch().tolist(), [0.0, 0.25, 0.5, 0.75])
    r1 = dtorch.randn(4, 3, seed=5, device_mesh=mesh, placements=[Shard(0)]).to_torch().tolist()
    r2 = dtorch.randn(4, 3, seed=5).to_torch().tolist()
    assert r1 == r2, "the same seed gives the same values whatever the mesh"
    dtorch.manual_seed(3)
    u1 = dtorch.rand(3).to_torch().tolist()
    dtorch.manual_seed(3)
    assert dtorch.rand(3).to_torch().tolist() == u1 and all(0 <= v < 1 for v in u1)
    t = dtorch.tensor([[1, 2], [3, 4]], device_mesh=mesh.__class__("cpu", [0, 1]), placements=[Shard(1)])
    assert t.dtype == dtorch.int64 and t.to_torch().tolist() == [[1, 2], [3, 4]]
    assert dtorch.tensor([1.5, 2.5]).dtype == dtorch.float32
    assert dtorch.tensor([True, False]).to_torch().tolist() == [True, False]
    host = t.to_torch()
    pair = dtorch.DeviceMesh("cpu", [2, 3])
    assert dtorch.tensor(host, device_mesh=pair, placements=[Shard(0)]).to_torch().tolist() == [[1, 2], [3, 4]]


def test_factories_without_a_mesh_make_single_device_tensors_and_like_factories_copy_the_layout():
    one = dtorch.init_device_mesh("cpu", (1,))
    for t in (dtorch.randn(4, 8), dtorch.zeros(3), dtorch.full((2,), 1.5), dtorch.arange(5), dtorch.tensor([1, 2])):
        assert t.device_mesh == one and t.placements == (Replicate(),), (t.device_mesh, t.placements)
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = dtorch.Tensor(torch.arange(15, dtype=torch.float32).reshape(5, 3), device_mesh=mesh,
                      placements=[Shard(0), Replicate()]).redistribute(mesh, [Shard(0), Partial()])
    for made, expected in ((dtorch.zeros_like(x), torch.zeros(5, 3)), (dtorch.ones_like(x, dtype=dtorch.int64),
                                                                        torch.ones(5, 3, dtype=torch.int64)),
                           (dtorch.full_like(x, 7.0), torch.full((5, 3), 7.0))):
        assert made.device_mesh == mesh and made.placements == (Shard(0), Replicate()), made.placements
        assert torch.equal(made.to_torch(), expected)
    r = dtorch.rand_like(x, seed=3)
    assert r.shape == (5, 3) and r.dtype == dtorch.float32 and r.placements == (Shard(0), Replicate())
    assert torch.equal(r.to_torch(), dtorch.rand_like(x, seed=3).to_torch()) and 0 <= r.to_torch().min().item() < 1
    assert dtorch.randn_like(x).shape == (5, 3) and dtorch.empty_like(x).dtype == dtorch.float32
    raises(TypeError, dtorch.zeros_like, torch.zeros(2), contains="dtorch.Tensor")


def test_operators_and_methods():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = dtorch.tensor([[1.0, -2.0], [3.0, -4.0], [5.0, 6.0], [7.0, 8.0]], device_mesh=mesh, placements=[Shard(0)])
    assert (x + x).to_torch().tolist() == [[2.0, -4.0], [6.0, -8.0], [10.0, 12.0], [14.0, 16.0]]
    assert (x - 1).to_torch().tolist()[0] == [0.0, -3.0]
    assert (1 - x).to_torch().tolist()[0] == [0.0, 3.0]
    assert (2 * x).to_torch().tolist()[1] == [6.0, -8.0]
    assert (x / 2).to_torch().tolist()[0] == [0.5, -1.0]
    assert (2 / dtorch.tensor([4.0, 8.0])).to_torch().tolist() == [0.5, 0.25]
    assert (-x).to_torch().tolist()[0] == [-1.0, 2.0]
    assert x.relu().to_torch().tolist()[0] == [1.0, 0.0]
    close(x.exp().to_torch().tolist()[0][0], 2.718281828)
    close(x.sigmoid().to_torch().tolist()[0][1], 0.11920292)
    close(x.tanh().to_torch().tolist()[0][0], 0.76159416)
    close(x.silu().to_torch().tolist()[0][0], 0.7310586)
    close(x.gelu().to_torch().tolist()[0][0], 0.8413447)
    w = dtorch.tensor([[1.0, 0.0], [0.0, 1.0]], device_mesh=mesh, placements=[Replicate()])
    assert (x @ w).to_torch().tolist() == x.to_torch().tolist()
    assert x.sum().to_torch().item() == 24.0
    assert x.sum(0).to_torch().tolist() == [16.0, 8.0]
    assert x.sum(1, keepdim=True).shape == (4, 1)
    assert x.mean(0).to_torch().tolist() == [4.0, 2.0]
    assert x.max(0).values.to_torch().tolist() == [7.0, 8.0] and x.max(0).indices.to_torch().tolist() == [3, 3]
    close(x.softmax(1).to_torch().tolist()[0], [0.95257413, 0.04742587])
    assert x.transpose(0, 1).shape == (2, 4) and x.T.placements == (Shard(1),)
    assert x.permute(1, 0).to_torch().tolist()[0] == [1.0, 3.0, 5.0, 7.0]
    assert x.reshape(4, 2, 1).shape == (4, 2, 1) and x.view((4, 2)).shape == (4, 2)
    assert x.narrow(1, 1, 1).to_torch().tolist() == [[-2.0], [-4.0], [6.0], [8.0]]
    assert x.to(dtorch.int64).dtype == dtorch.int64 and x.to("float64").dtype == dtorch.float64
    assert dtorch.cat([x, x], dim=1).shape == (4, 4)
    y = dtorch.linear(x, w, dtorch.tensor([1.0, 1.0], device_mesh=mesh, placements=[Replicate()]))
    assert y.to_torch().tolist()[0] == [2.0, -1.0]
    assert dtorch.relu(x).to_torch().tolist() == x.relu().to_torch().tolist()
    assert x.numel() == 8 and x.ndim == 2 and len(x) == 4 and x.size(1) == 2


def test_redistribution_forms():
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = dtorch.arange(16, dtype=dtorch.float32).reshape(4, 4)
    s = x.redistribute(mesh, [Shard(0), Shard(1)])
    assert s.placements == (Shard(0), Shard(1)) and s.device_mesh == mesh
    r = s.redistribute(placements=[Replicate(), Replicate()])
    assert r.to_torch().tolist() == x.to_torch().tolist()
    like = x.redistribute(mesh, [Replicate(), Replicate()]).redistribute_like(s)
    assert like.placements == s.placements
    by_name = s.redistribute_by_dict({"tp": Replicate()})
    assert by_name.placements == (Shard(0), Replicate())
    p = r.redistribute(placements=[Partial(), Replicate()])
    assert p.to_torch().tolist() == x.to_torch().tolist()
    raises(ValueError, s.redistribute_by_dict, {"pp": Replicate()}, contains="no dimension 'pp'")
    keyed = s.redistribute_by_dict(placements_dict={"dp": Replicate()}, device_mesh=mesh, default_placement_mode="keep")
    assert keyed.placements == (Replicate(), Shard(1))
    assert s.redistribute_by_dict(placements_dict={"dp": Shard(1)}, default_placement_mode="replicate").placements == (
        Shard(1), Replicate())
    raises(ValueError, s.redistribute_by_dict, {"dp": Replicate()}, default_placement_mode="raise_error",
           contains="no placement for mesh dimension(s) ['tp']")
    raises(ValueError, s.redistribute_by_dict, {}, default_placement_mode="sometimes", contains="keep, replicate, raise_error")
    other = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    moved = s.redistribute_by_dict(placements_dict={"dp": Shard(0)}, device_mesh=other)
    assert moved.device_mesh == other and moved.placements == (Shard(1),)
    assert moved.to_torch().tolist() == x.to_torch().tolist()
    dst = dtorch.zeros(4, 4, device_mesh=mesh, placements=[Shard(1), Replicate()])
    assert dst.copy_(s) is dst and dst.to_torch().tolist() == x.to_torch().tolist()


def test_print_shows_shape_dtype_mesh_and_placements():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    text = str(dtorch.zeros(8, 2, device_mesh=mesh, placements=[Shard(0)]))
    for part in ("shape=(8, 2)", "dtype=torch.float32", "DeviceMesh(cpu, [0, 1, 2, 3])", "Shard(dim=0)"):
        assert part in text, (part, text)


def test_host_values_shape_dtype_tolist_item_and_buffer():
    v = dtorch.arange(6, dtype=dtorch.float32).reshape(2, 3).to_torch()
    assert v.shape == (2, 3) and v.dtype == dtorch.float32 and v.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert dtorch.ones(1).sum().to_torch().item() == 1.0
    raises(RuntimeError, v.item)  # as torch: values are torch.Tensors
    m = v.memoryview()
    assert m.format == "f" and m.shape == (2, 3) and m[1, 2] == 5.0 and m.nbytes == 24
    assert m.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert len(v.tobytes()) == 24
    ints = dtorch.arange(4).to_torch()
    assert ints.memoryview().tolist() == [0, 1, 2, 3] and ints.dtype == dtorch.int64
    bf = dtorch.ones(3, dtype=dtorch.bfloat16).to_torch()
    assert bf.memoryview().nbytes == 6 and bf.tolist() == [1.0, 1.0, 1.0]


def test_errors_carry_the_java_message():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    rows = dtorch.zeros(4, 4, device_mesh=mesh, placements=[Shard(0)])
    cols = dtorch.zeros(4, 4, device_mesh=mesh, placements=[Shard(1)])
    dtorch.set_implicit_redistribution(False)
    try:
        e = raises(dtorch.ShardingError, lambda: rows + cols)
    finally:
        dtorch.set_implicit_redistribution(True)
    assert isinstance(e, ValueError)
    assert "add: cannot take inputs with placements [S(0)] and [S(1)]" in str(e) and "Legal:" in str(e), str(e)
    raises(ValueError, lambda: rows.reshape(3, 5), contains="is invalid for input of size 16")
    raises(ValueError, dtorch.zeros, 3, device_mesh=mesh, placements=[Shard(1)], contains="is out of range for a tensor of shape [3]")
    raises(ValueError, dtorch.tensor, [[1, 2], [3]], contains="rectangular")


run(globals())
