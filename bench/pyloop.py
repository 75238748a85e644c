# SPDX-License-Identifier: MIT
"""bench/python.sh's workload: N cuLaunchKernel calls through ctypes and
the fake driver from one line, DEPTH Python frames deep (a recursion of
user functions), after a setup and a start delay (CGBPF_START_DELAY_MS,
so that cgbpf has found the interpreter). Prints ns_per_call=..., the
wall time of the loop per launch.

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

    def loop():
        t = time.perf_counter_ns()
        for _ in range(n):
            launch(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None)
        return time.perf_counter_ns() - t

    def down(d):
        return down(d - 1) if d > 1 else loop()

    ns = down(max(depth, 1))
    print("ns_per_call=%.1f" % (ns / n))


if __name__ == "__main__":
    main()
