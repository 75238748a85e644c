# SPDX-License-Identifier: MIT
"""A short program that loads the CUDA driver the way a Python program can
without any search: ctypes.CDLL("/an/absolute/path/libcuda.so.1"), then
cuInit, a context, a module, N launches and a synchronize (issue 27).

    python ctypes_abs.py LIBCUDA N

Prints "launched N" at the end; exits 1 on a driver error."""
import ctypes
import sys


def main():
    lib = ctypes.CDLL(sys.argv[1])
    n = int(sys.argv[2])
    vp = ctypes.c_void_p

    def ok(r, what):
        if r != 0:
            sys.exit("ctypes_abs: %s failed: %d" % (what, r))

    ok(lib.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ok(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx, mod, fn = vp(), vp(), vp()
    ok(lib.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate_v2")
    ok(lib.cuModuleLoadData(ctypes.byref(mod), b"\x7fELF fake cubin for ctypes_abs"),
       "cuModuleLoadData")
    ok(lib.cuModuleGetFunction(ctypes.byref(fn), mod, b"_Z9abs_stepv"), "cuModuleGetFunction")
    for _ in range(n):
        ok(lib.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None), "cuLaunchKernel")
    ok(lib.cuCtxSynchronize(), "cuCtxSynchronize")
    print("launched %d" % n, flush=True)


if __name__ == "__main__":
    main()
