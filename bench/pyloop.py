# SPDX-License-Identifier: MIT
"""bench/python.sh's workload: N cuLaunchKernel calls through ctypes and
the fake driver from one line, DEPTH Python frames deep (a recursion of
user functions), after a setup and a start delay (CGBPF_START_DELAY_MS,
so that cgbpf has found the interpreter), and after one warm-up launch
from that line and a pause (PY_BENCH_WARMUP_MS, default 300). Prints ns_per_call=..., the
wall time of the loop per launch, and cpu_ns_per_call=..., the thread's
CPU time (user + system: the probes' BPF programs run in it) per launch,
which the consumer's work on a busy machine does not inflate.

Usage: python pyloop.py N DEPTH
"""
import ctypes
import os
import sys
import time

LIB = os.environ.get("CGBPF_LIBCUDA", "libcuda.so.1")


def main():
    n, depth = int(sys.argv[1]), int(sys.argv[2])
    time.sleep(int(os.environ.get("CGBPF_START_DELAY_MS", "0")) / 1000)
    cu = ctypes.CDLL(LIB)
    ctx, mod, fn, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
    assert cu.cuInit(0) == 0
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev.value) == 0
    assert cu.cuModuleLoadData(ctypes.byref(mod), b"\x7fELF fake cubin") == 0
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"_Z5benchv") == 0
    launch = cu.cuLaunchKernel

    def loop(k):
        t, c = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(k):
            launch(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None)
        return time.perf_counter_ns() - t, time.thread_time_ns() - c

    def down(d, k):
        return down(d - 1, k) if d > 1 else loop(k)

    # Warm-up: one launch from the same line, then a pause, so that cgbpf
    # has seen the call site's code objects before the timed loop (the
    # steady state of a long-running program; until it has, every call
    # walks to the outermost frame and wakes the consumer).
    down(max(depth, 1), 1)
    time.sleep(int(os.environ.get("PY_BENCH_WARMUP_MS", "300")) / 1000)
    ns, cpu = down(max(depth, 1), n)
    print("ns_per_call=%.1f cpu_ns_per_call=%.1f" % (ns / n, cpu / n))


if __name__ == "__main__":
    main()
