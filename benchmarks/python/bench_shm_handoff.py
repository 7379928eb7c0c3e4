"""CPython's multiprocessing.shared_memory hand-off, the baseline of ChannelBenchmark.

Usage: python3 bench_shm_handoff.py <transfers> <bytes> <warmup>

A producer process and a consumer process (multiprocessing, spawn) share one SharedMemory block of <bytes>.
Per transfer the producer stamps its clock (time.monotonic_ns) into the first 8 bytes of its source buffer,
copies the buffer into the block, and sends the transfer's number through a Pipe; the consumer copies the block
out into a fresh bytearray (as the channel's consumer copies into a fresh tensor), takes the latency from the
stamp, and answers through the Pipe before the next transfer starts. Prints "SAMPLES <ns> <ns> ..." for the
transfers after the warm-up.
"""
import multiprocessing as mp
import struct
import sys
import time
from multiprocessing import shared_memory


def consume(name, nbytes, count, conn):
    shm = shared_memory.SharedMemory(name=name)
    try:
        samples = []
        for _ in range(count):
            conn.recv()
            out = bytearray(shm.buf[:nbytes])
            samples.append(time.monotonic_ns() - struct.unpack_from("<q", out, 0)[0])
            del out
            conn.send(True)
        conn.send(samples)
    finally:
        shm.close()


def main():
    transfers, nbytes, warmup = (int(a) for a in sys.argv[1:4])
    ctx = mp.get_context("spawn")
    shm = shared_memory.SharedMemory(create=True, size=nbytes)
    try:
        src = bytearray(b"\x01" * nbytes)
        ours, theirs = ctx.Pipe()
        peer = ctx.Process(target=consume, args=(shm.name, nbytes, warmup + transfers, theirs))
        peer.start()
        for i in range(warmup + transfers):
            struct.pack_into("<q", src, 0, time.monotonic_ns())
            shm.buf[:nbytes] = src
            ours.send(i)
            ours.recv()
        samples = ours.recv()[warmup:]
        peer.join(60)
        print("SAMPLES " + " ".join(str(s) for s in samples), flush=True)
    finally:
        shm.close()
        shm.unlink()


if __name__ == "__main__":
    main()
