#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes fuzz/corpus/fuzz_gpu's seeds in fuzz/fuzz_gpu.c's framing: a
measured process (status, device, stream, names, calls, their API records,
kernels, a copy, a memset, a synchronization, lost records, a flush, an
exit), a process only estimated from its calls, and batches whose entry
sizes do not add up. Entry layouts: bpf/gpu_rec.h.
Usage: /usr/bin/python3 fuzz/tools/gpu_seeds.py [DIR]"""
import os
import re
import struct
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUNCS = re.findall(r"^\s*X\((\w+),", open(os.path.join(TOP, "bpf", "cuda_funcs.h")).read(), re.M)


def op(code, proc, body):
    return struct.pack("<BH", code | proc << 3, len(body)) + body


def ent(kind, body):
    size = (4 + len(body) + 7) & ~7
    return struct.pack("<HH", kind, size) + body + b"\0" * (size - 4 - len(body))


def text(kind, head, s):
    return ent(kind, head + s.encode() + b"\0")


def kernel(corr, start, end, name_id, stream, graph=0):
    return ent(1, struct.pack("<IQQIIII3I3HHIIB7x", corr, start, end, name_id, stream, 1, graph,
                              4, 1, 1, 256, 1, 1, 32, 0, 0, 0))


def memcpy(corr, start, end, nbytes, stream, kind):
    return ent(2, struct.pack("<IQQQIIIBBBBBB6x", corr, start, end, nbytes, stream, 1, 0, kind,
                              2, 3, 1, 0, 0))


def memset(corr, start, end, nbytes, stream, graph=0):
    return ent(3, struct.pack("<IQQQIIIBB2xI4x", corr, start, end, nbytes, 0, stream, 1, 0, 3,
                              graph))


def sync(corr, start, end, stream):
    return ent(4, struct.pack("<IQQIIII", corr, start, end, 3, stream, 1, 0))


def api(corr, start, end, tid):
    return ent(5, struct.pack("<IQQII B7x", corr, start, end, tid, 307, 0))


def device():
    return ent(7, struct.pack("<IQ16sIIII48s", 0, 80 << 30, bytes(range(16)), 132, 9, 0, 0,
                              b"seed GPU"))


def call(name, dur, *args):
    return struct.pack("<HI", FUNCS.index(name), dur) + struct.pack("<%dQ" % len(args), *args)


def measured():
    pid = 0x40000000 | 1
    t = 1000000000
    out = bytes([0])
    out += op(0, 1, text(8, struct.pack("<IiI", 1, 0, 0), "/usr/local/cuda/lib64/libcupti.so.13")
              + device() + ent(10, struct.pack("<IIiIB3x", 1, 7, -1, 0, 0))
              + text(6, struct.pack("<I", 1), "_Z6vecAddPfS_S_i")
              + text(6, struct.pack("<I", 2), "ncclDevKernel_AllReduce_Sum_f32_RING_LL"))
    calls = []
    for i in range(3):
        out += op(2, 1, call("cuLaunchKernel", 5000, 0xf00, 4, 1, 1, 256, 1, 1, 0, 0x7000))
        calls.append(t + i * 6000)
    out += op(2, 1, call("cuMemcpyHtoDAsync_v2", 6000, 0x1000, 0x2000, 1 << 20, 0x7000))
    out += op(2, 1, call("cuMemsetD8Async", 3000, 0x1000, 0, 1 << 20, 0x7000))
    out += op(2, 1, call("cuGraphLaunch", 8000, 0xa000, 0x7000))
    out += op(2, 1, call("cuStreamSynchronize", 50000, 0x7000))
    b = b""
    for i, c in enumerate(calls):
        b += api(10 + i, c + 100, c + 200, pid)
    b += kernel(12, t + 60000, t + 90000, 1, 7)
    b += kernel(10, t + 20000, t + 30000, 1, 7) + kernel(11, t + 30000, t + 50000, 2, 7)
    b += memcpy(13, t + 100000, t + 150000, 1 << 20, 7, 1)
    b += memset(14, t + 150000, t + 160000, 1 << 20, 7)
    b += kernel(15, t + 160000, t + 170000, 1, 7, graph=3) * 2
    b += sync(16, t + 60000, t + 170000, 7)
    b += ent(9, struct.pack("<IQII", 1, 4, 0, 0))
    out += op(0, 1, b)
    out += op(5, 1, b"")
    out += op(0, 1, text(8, struct.pack("<IiI", 7, 0, 0), ""))
    out += op(3, 1, struct.pack("<I", 3000000000))
    out += op(4, 1, b"")
    return out


def estimated():
    out = bytes([1])
    for s in (0x5100, 0x5200):
        out += op(2, 2, call("cuLaunchKernel", 5000, 0xf00, 4, 1, 1, 256, 1, 1, 0, s))
    out += op(2, 2, call("cuEventRecord", 2000, 0xe1, 0x5100))
    out += op(2, 2, call("cuEventSynchronize", 20000, 0xe1))
    out += op(2, 2, call("cuCtxSynchronize", 30000))
    out += op(2, 2, call("cuMemcpyDtoH_v2", 30000, 0x3000, 0x1000, 4096))
    out += op(0, 3, text(8, struct.pack("<IiI", 3, 0, 0), "libcupti.so.13, /usr/local/cuda"))
    out += op(2, 3, call("cuLaunchKernel", 5000, 0xf00, 4, 1, 1, 256, 1, 1, 0, 0))
    return out


def malformed():
    out = bytes([2])
    out += op(0, 4, struct.pack("<HH", 1, 12) + b"\0" * 12)
    out += op(0, 4, struct.pack("<HH", 77, 16) + b"\xee" * 12 + kernel(1, 5, 9, 1, 1))
    out += op(0, 4, ent(6, struct.pack("<I", 3) + b"x" * 12))
    out += op(1, 4, struct.pack("<HHIIIQ", 19, 40, 0, 0x40000004, 0x40000004, 1) + b"\0" * 8)
    out += op(0, 4, kernel(1, 5, 9, 1, 1)[:-8])
    return out


def nccl_plugin():
    """NCCL's profiler plugin (GPU_NCCL_*): two ranks of one communicator
    in two processes, tasks, channel spans (one overlapping, one of a
    task never sent), a proxy operation, then truncated entries."""
    out = bytes([0])
    h = 0x908d020a2e6d79ef
    for proc, rank in ((5, 0), (6, 1)):
        b = text(11, struct.pack("<IQQiiiI", 100 + proc, h, 1000, rank, 2, 1, 0), "world")
        for seq in range(3):
            t0 = 2000000 + seq * 1000000
            b += ent(12, struct.pack("<IQQQQQiiBBBBBB2x", 100 + proc, h, seq, t0, t0 + 5000,
                                     4096, rank, -1, 1, 2, 3, 2, 8, 4))
            for ch in range(2):
                b += ent(13, struct.pack("<IQQQQIiB7x", ch, h, seq, t0 + 100000 * rank + ch,
                                         t0 + 400000, 1500, rank, 1))
        b += ent(13, struct.pack("<IQQQQIiB7x", 1, h, 2, 2100000, 2800000, 0, rank, 1))
        b += ent(13, struct.pack("<IQQQQIiB7x", 0, h, 99, 9000000, 9100000, 0, rank, 2))
        b += ent(14, struct.pack("<IQQQQQiiIBBBx", 200 + proc, h, 1, 2200000, 2300000, 65536,
                                 rank, 1 - rank, 4, 1, 1, 1))
        out += op(0, proc, b)
    out += op(0, 5, ent(12, b"\0" * 40))
    out += op(0, 5, ent(13, struct.pack("<IQQQQIiB7x", 200, h, 1, 5, 4, 0, 0, 1)))
    out += op(3, 5, struct.pack("<I", 3000000000))
    out += op(4, 6, b"")
    return out


def main(d):
    os.makedirs(d, exist_ok=True)
    for name, f in (("seed-measured", measured), ("seed-estimated", estimated),
                    ("seed-malformed", malformed), ("seed-nccl-plugin", nccl_plugin)):
        with open(os.path.join(d, name), "wb") as out:
            out.write(f())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(TOP, "fuzz", "corpus", "fuzz_gpu"))
