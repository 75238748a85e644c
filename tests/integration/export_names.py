# SPDX-License-Identifier: MIT
"""The program test_export.py traces for its hostile-name test: names a
JSON writer must escape (quotes, backslashes, control characters, U+2028)
and bytes that are not UTF-8, in a kernel name (through the fake driver
and the fake CUPTI to a GPU slice), an NVTX range (the fake legacy
libnvToolsExt.so.1) and a thread name. Calls the fake libraries through
ctypes; LD_LIBRARY_PATH must name them. Honours CGBPF_PAUSE_FILE as the
C workloads do (tests/workloads/manifest.h wl_pause): after its setup it
creates FILE.ready and waits for FILE, so the kernels are launched once
GPU activity is collected. Prints {"pid", "tid", "launches"}."""
import ctypes
import json
import os
import sys
import threading
import time

# No NUL: C strings. Each kind of trouble once.
NAME = (b'k"q \\b /s \x01\x1f\x7f \t\n \xff\xfe \xe4\xb8| \xed\xa0\x80 '
        b'\xe2\x80\xa8 \xc3\xa9 \xf0\x9f\x98\x80 end')
THREAD = b'th"r\\\x02\xff'
LAUNCHES = 3


def pause():
    f = os.environ.get("CGBPF_PAUSE_FILE")
    if not f:
        return
    open(f + ".ready", "w").close()
    for _ in range(30000):
        if os.path.exists(f):
            return
        time.sleep(0.001)


def ok(r, what):
    if r != 0:
        sys.exit("%s failed: %d" % (what, r))


def main():
    vp = ctypes.c_void_p
    # Global: the fake CUPTI finds the fake driver with dlsym(RTLD_DEFAULT).
    cu = ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    dev, ctx, mod, fn = ctypes.c_int(), vp(), vp(), vp()
    ok(cu.cuInit(0), "cuInit")
    ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ok(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate_v2")
    ok(cu.cuModuleLoadData(ctypes.byref(mod), b"fake image"), "cuModuleLoadData")
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, NAME), "cuModuleGetFunction")
    pause()
    cu.cuLaunchKernel.argtypes = [vp] + [ctypes.c_uint] * 7 + [vp, vp, vp]
    for _ in range(LAUNCHES):
        ok(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None), "cuLaunchKernel")
    ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    nvtx = ctypes.CDLL("libnvToolsExt.so.1")
    tid = threading.get_native_id()
    nvtx.nvtxNameOsThreadA(ctypes.c_uint32(tid), THREAD)
    nvtx.nvtxRangePushA(NAME)
    nvtx.nvtxRangePop()
    print(json.dumps({"pid": os.getpid(), "tid": tid, "launches": LAUNCHES}), flush=True)


if __name__ == "__main__":
    main()
