# SPDX-License-Identifier: MIT
"""NCCL's GPU side on one GPU: a 1-rank communicator whose rank sends to
and receives from itself (ncclGroupStart; ncclSend; ncclRecv;
ncclGroupEnd), N times, 1 MiB each way, through ctypes on the
libnccl.so.2 torch loaded. Real NCCL refuses two ranks on one GPU, and
runs a 1-rank collective as a copy (ncclLaunchOneRank: no task, no
kernel, nothing for its profiler plugin); a send to self runs NCCL's
kernel with its task and kernel-channel events. Each iteration is
followed by a synchronization and, with SLEEP_MS, a pause (a job for
`record -p`). Prints "ready PID" on stderr after the first, then one
JSON line on stdout: {"pid", "iters", "bytes", "nccl"}. For
tests/gpu/nccl.sh.

    nccl_self.py [ITERS [SLEEP_MS]]"""
import ctypes
import json
import os
import sys
import time

import torch

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
pause = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.0
NCCL_FLOAT32 = 7                    # nccl.h: ncclFloat32

x = torch.ones(256 * 1024, device="cuda")           # 1 MiB of float32
y = torch.zeros_like(x)
path = next((ln.split()[-1] for ln in open("/proc/self/maps")
             if ln.rstrip().endswith("/libnccl.so.2")), "libnccl.so.2")
nccl = ctypes.CDLL(path)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]    # NCCL_UNIQUE_ID_BYTES


def ok(r, what):
    if r != 0:
        nccl.ncclGetErrorString.restype = ctypes.c_char_p
        sys.exit("%s: %s" % (what, nccl.ncclGetErrorString(r).decode()))


vp, sz, ci = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(vp), ci, UniqueId, ci]
nccl.ncclSend.argtypes = [vp, sz, ci, ci, vp, vp]
nccl.ncclRecv.argtypes = [vp, sz, ci, ci, vp, vp]
nccl.ncclCommDestroy.argtypes = [vp]
uid, comm = UniqueId(), vp()
ok(nccl.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
ok(nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0), "ncclCommInitRank")
stream = vp(torch.cuda.current_stream().cuda_stream)
for i in range(iters):
    ok(nccl.ncclGroupStart(), "ncclGroupStart")
    ok(nccl.ncclSend(x.data_ptr(), x.numel(), NCCL_FLOAT32, 0, comm, stream), "ncclSend")
    ok(nccl.ncclRecv(y.data_ptr(), y.numel(), NCCL_FLOAT32, 0, comm, stream), "ncclRecv")
    ok(nccl.ncclGroupEnd(), "ncclGroupEnd")
    torch.cuda.synchronize()
    if i == 0:
        print("ready %d" % os.getpid(), file=sys.stderr, flush=True)
    if pause:
        time.sleep(pause)
assert bool((y == 1).all()), "the data went through"
ok(nccl.ncclCommDestroy(comm), "ncclCommDestroy")
v = ctypes.c_int()
nccl.ncclGetVersion(ctypes.byref(v))
print(json.dumps({"pid": os.getpid(), "iters": iters, "bytes": x.numel() * 4,
                  "nccl": "%d.%d.%d" % (v.value // 10000, v.value // 100 % 100, v.value % 100)}),
      flush=True)
