# SPDX-License-Identifier: MIT
"""Ranks forked by Python's multiprocessing (the fork start method), each
creating an NCCL communicator and all-reducing at once through ctypes, as
a forking launcher does (issue 27). Loads libcuda.so.1 and libnccl.so.2 by
their sonames (LD_LIBRARY_PATH names the fakes).

    python mp_nccl.py RANKS ITERS [STALL_RANK STALL_MS [AT_ITER]]

With STALL_RANK, that rank stalls STALL_MS in load_batch() (a traced
cuStreamSynchronize, then a sleep) before each all-reduce (a slow rank),
or with AT_ITER before that one only (a hang while it lasts); either way
its last Python call site is load_batch. Then every rank starts 0.5 s after its
fork, so its probes are in place before its first call.

Prints "rank R pid P done" per rank and "ranks ok" when every rank exited
0; exits 1 otherwise."""
import ctypes
import multiprocessing as mp
import sys
import time


def load_batch(cu, stream, ms):
    """The slow rank's stall: a traced call from here, then a wait."""
    cu.cuStreamSynchronize(stream)
    time.sleep(ms / 1000.0)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def rank_main(r, n, uid, iters, stall):
    cu = ctypes.CDLL("libcuda.so.1")
    nccl = ctypes.CDLL("libnccl.so.2")
    vp = ctypes.c_void_p

    def ok(res, what):
        if res != 0:
            sys.exit("mp_nccl rank %d: %s failed: %d" % (r, what, res))

    if stall:
        # Past the fork's window (its probes come a few ms after the
        # fork): this run is about the stall, not the window.
        time.sleep(0.5)
    ok(cu.cuInit(0), "cuInit")
    dev, ctx, stream, buf, comm = ctypes.c_int(), vp(), vp(), ctypes.c_uint64(), vp()
    ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ok(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate_v2")
    ok(cu.cuStreamCreate(ctypes.byref(stream), 0), "cuStreamCreate")
    ok(cu.cuMemAlloc_v2(ctypes.byref(buf), 4096), "cuMemAlloc_v2")
    ok(nccl.ncclCommInitRank(ctypes.byref(comm), n, uid, r), "ncclCommInitRank")
    for i in range(iters):
        if stall and stall[0] == r and stall[2] in (None, i):
            load_batch(cu, stream, stall[1])
        # 1024 x float32 (ncclFloat32 = 7), sum (ncclSum = 0), in place.
        ok(nccl.ncclAllReduce(vp(buf.value), vp(buf.value), ctypes.c_size_t(1024), 7, 0,
                              comm, stream), "ncclAllReduce")
    ok(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
    ok(nccl.ncclCommDestroy(comm), "ncclCommDestroy")
    print("rank %d pid %d done" % (r, mp.current_process().pid), flush=True)


def main():
    n, iters = int(sys.argv[1]), int(sys.argv[2])
    stall = None
    if len(sys.argv) > 4:
        stall = (int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else None)
    nccl = ctypes.CDLL("libnccl.so.2")
    uid = UniqueId()
    if nccl.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        sys.exit("mp_nccl: ncclGetUniqueId failed")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=rank_main, args=(r, n, uid, iters, stall)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        sys.exit("mp_nccl: exit codes %r" % [p.exitcode for p in procs])
    print("ranks ok", flush=True)


if __name__ == "__main__":
    main()
