# SPDX-License-Identifier: MIT
"""The code subinterp.py runs inside its subinterpreter.

argv: ITERS CTX OUT: launches ITERS times from sub_launch() with the
context CTX (made by the main interpreter; the fake driver's handles are
plain pointers), waits in body() for CGBPF_HOLD_FILE (<= 30 s) if set
(having created "<it>.ready"),
writes pywl's records of its calls as JSON to OUT."""
import ctypes
import json
import os
import sys
import time

import pywl
from pywl import check, here


def sub_launch(cu, fn, n):
    for _ in range(n):
        check(cu.cuLaunchKernel(*here("cuLaunchKernel", fn, 9, 1, 1, 32, 1, 1, 0, None, None,
                                      None)))


def body():
    n, ctx, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    cu = pywl.load_driver()
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuCtxSetCurrent(*here("cuCtxSetCurrent", ctypes.c_void_p(ctx))))
    check(cu.cuModuleLoadData(*here("cuModuleLoadData", ctypes.byref(mod), b"\x7fELF sub")))
    check(cu.cuModuleGetFunction(*here("cuModuleGetFunction", ctypes.byref(fn), mod,
                                        pywl.Gpu.KERNEL)))
    pywl.set_scenario("sub")
    sub_launch(cu, fn, n)
    hold = os.environ.get("CGBPF_HOLD_FILE")
    if hold:
        with open(hold + ".ready", "w"):
            pass
    for _ in range(30000 if hold else 0):
        if os.path.exists(hold):
            break
        time.sleep(0.001)
    check(cu.cuModuleUnload(*here("cuModuleUnload", mod)))
    with open(out, "w") as f:
        json.dump(pywl._records, f)


body()
