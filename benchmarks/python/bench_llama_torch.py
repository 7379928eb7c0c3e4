"""PyTorch eager's side of the Llama benchmark: the same model code (examples/python/llama_model.py), the same weights
and prompt (the safetensors file examples/python/llama.py wrote with --weights, whose metadata carries the
configuration and the prompt), greedy generation with a key/value cache on cuda:0 (or --device).

    ./dtorch run --devices cuda:1 examples/python/llama.py --size 1b --weights /tmp/llama.safetensors --repeat 2
    python3 benchmarks/python/bench_llama_torch.py /tmp/llama.safetensors --new-tokens 32 --repeat 2

Prints the generated tokens (to compare with llama.py's "generated:" line) and one JSON line with prefill and decode
tokens/s of the last (warm) run. It reads the file with a small reader of its own (8-byte header length, JSON header,
raw little-endian bytes), so it needs PyTorch only.
"""
import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
from llama_model import Llama, LlamaConfig, generate  # noqa: E402

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
          "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        tensors[name] = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"]).clone()
    return tensors, metadata


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("weights")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--profile", action="store_true",
                        help="after the timed runs, one more generation under torch.profiler: its operators' host and "
                             "device times (the table of key_averages, by self CPU time)")
    args = parser.parse_args()
    tensors, metadata = read_safetensors(args.weights)
    config = LlamaConfig(**json.loads(metadata["config"]))
    prompt = torch.tensor(json.loads(metadata["prompt"]), dtype=torch.int64, device=args.device)
    with torch.device(args.device):
        model = Llama(config)
    model.load_state_dict({k: v.to(args.device) for k, v in tensors.items()}, strict=False)
    model.tie_weights()
    model.eval()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    shape = (prompt.shape[0], config.n_kv_heads, config.max_seq_len, config.head_dim)
    issued, decodes = [], []
    with torch.no_grad():
        for _ in range(args.repeat):
            caches = new_caches(config.n_layers, shape, args.device)
            generated, _, prefill, decode = generate(model, prompt, args.new_tokens, caches, wait=lambda t: sync(),
                                                     issued=issued)
            decodes.append(decode)
    if args.profile:
        profile(model, prompt, args, caches_shape=shape, sync=sync)
    batch, prompt_len = prompt.shape
    print("generated:", [t[0, 0].item() for t in generated])
    print(json.dumps({"device": args.device, "torch": torch.__version__, "layers": config.n_layers, "dim": config.dim,
                      "prefill_tokens_per_s": batch * prompt_len / prefill,
                      "decode_tokens_per_s": batch * (args.new_tokens - 1) / decode,
                      "decode_issued_fraction": issued[-1] / decode,
                      "decode_tokens_per_s_each_run": [batch * (args.new_tokens - 1) / d for d in decodes]}))


def new_caches(layers, shape, device):
    """Every layer's (keys, values) cache, zeros of `shape`."""
    return [(torch.zeros(shape, device=device), torch.zeros(shape, device=device)) for _ in range(layers)]


def profile(model, prompt, args, caches_shape, sync):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiled
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    caches = new_caches(model.config.n_layers, caches_shape, args.device)
    with torch.no_grad(), profiled(activities=activities) as prof:
        generate(model, prompt, args.new_tokens, caches, wait=lambda t: sync())
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


if __name__ == "__main__":
    main()
