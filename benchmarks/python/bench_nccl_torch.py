"""PyTorch's side of the multi-GPU benchmark (MultiGpuBenchmark.java runs it in the same call and compares).

Starts one process per GPU (torch.multiprocessing, spawn), joins them with init_process_group("nccl") over a FileStore,
and times torch.distributed's collectives on float32 tensors with CUDA events on rank 0: all_reduce (SUM, in place),
all_gather_into_tensor and reduce_scatter_tensor at each size, all_to_all_single at the all-to-all size. A size is the
bytes of the largest tensor of the call: the all-reduce's tensor, the all-gather's output, the reduce-scatter's input,
each rank's all-to-all input. Each figure is the best of a few repeats of a few calls, after warm-ups, as bus bandwidth
in GB/s: size / time * 2(W-1)/W for all-reduce, size / time * (W-1)/W for the others.

Prints one JSON object: {"torch": version, "device": name, "world": W, "<op>_<size>_busbw": GB/s, ...} with op one of
allreduce, allgather, reducescatter, alltoall and size like 1m, 16m, 256m, 1g (MiB, GiB).

Usage: python3 bench_nccl_torch.py --world W [--sizes 1m,16m,256m,1g] [--alltoall 64m] [--repeats 3]

The caller sets NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 (NVLink multicast
off); this script refuses to start without them, and the spawned processes inherit them.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WARM_UPS = 5
SMALL_WARM_UPS = 200


def parse_size(text):
    """Bytes of '1m' or '1g' (MiB, GiB)."""
    unit = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[text[-1].lower()]
    return int(text[:-1]) * unit


def calls_for(size):
    """Calls per timed repeat: many for small sizes, where one call is a few microseconds."""
    if size <= 16 << 20:
        return 50
    if size <= 256 << 20:
        return 10
    return 5


def time_calls(fn, calls, repeats):
    """Seconds per call, best of the repeats, each timed with CUDA events on the current stream after a barrier."""
    for _ in range(WARM_UPS):
        fn()
    best = float("inf")
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / calls)
    return best


def rank_main(rank, world, store_path, sizes, alltoall, repeats, result_path):
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("nccl", store=store, rank=rank, world_size=world, device_id=dev)
    figures = {}
    small = torch.ones(world * 4, device=dev)
    for _ in range(SMALL_WARM_UPS):
        dist.all_reduce(small)
    for name, size in sizes:
        elements = size // 4
        calls = calls_for(size)
        full = torch.ones(elements, device=dev)
        part = torch.ones(elements // world, device=dev)
        seconds = time_calls(lambda: dist.all_reduce(full), calls, repeats)
        figures["allreduce_%s_busbw" % name] = size / seconds * 2 * (world - 1) / world / 1e9
        seconds = time_calls(lambda: dist.all_gather_into_tensor(full, part), calls, repeats)
        figures["allgather_%s_busbw" % name] = size / seconds * (world - 1) / world / 1e9
        seconds = time_calls(lambda: dist.reduce_scatter_tensor(part, full), calls, repeats)
        figures["reducescatter_%s_busbw" % name] = size / seconds * (world - 1) / world / 1e9
        full = part = None  # frees the GPU memory (the timed lambdas still name them, so no del)
    name, size = alltoall
    inp = torch.ones(size // 4, device=dev)
    out = torch.empty_like(inp)
    seconds = time_calls(lambda: dist.all_to_all_single(out, inp), calls_for(size), repeats)
    figures["alltoall_%s_busbw" % name] = size / seconds * (world - 1) / world / 1e9
    dist.barrier()
    if rank == 0:
        figures.update({"torch": torch.__version__, "device": torch.cuda.get_device_name(dev), "world": world})
        with open(result_path, "w") as out_file:
            json.dump(figures, out_file)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--sizes", default="1m,16m,256m,1g")
    parser.add_argument("--alltoall", default="64m")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    wrong = {k: os.environ.get(k) for k, v in MULTICAST_OFF.items() if os.environ.get(k) != v}
    if wrong:
        sys.exit("NVLink multicast must be off: set %s (found %s)" % (MULTICAST_OFF, wrong))
    if args.world < 2 or args.world > torch.cuda.device_count():
        sys.exit("--world %d: must be at least 2 and at most the visible GPUs (%d visible)" % (args.world, torch.cuda.device_count()))
    sizes = [(s.lower(), parse_size(s)) for s in args.sizes.split(",")]
    alltoall = (args.alltoall.lower(), parse_size(args.alltoall))
    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "result.json")
        mp.spawn(rank_main, args=(args.world, os.path.join(tmp, "store"), sizes, alltoall, args.repeats, result_path),
                 nprocs=args.world, join=True)
        with open(result_path) as result:
            print(json.dumps(json.load(result)))


if __name__ == "__main__":
    main()
