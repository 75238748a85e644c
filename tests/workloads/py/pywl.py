# SPDX-License-Identifier: MIT
"""Shared helpers of the Python test workloads (issue 12): the fake driver
through ctypes, the start gates, and the ground-truth manifest of every
CUDA call with the Python frame it was made from.

Every CUDA call is written as

    check(cu.cuLaunchKernel(*here("cuLaunchKernel", arg, ...)))

on ONE line: here() records the frame that calls it (sys._getframe(1)) and
returns the arguments, and the ctypes call that follows runs in that same
frame at that same line. ctypes pushes no Python frame, so the innermost
Python frame while the driver runs is exactly the one here() recorded.

Runs on CPython 3.8 to 3.13 (pyenv shared builds and Debian's static
/usr/bin/python3.11).

Environment (as the C workloads, tests/workloads/manifest.h):
  CGBPF_MANIFEST=path      the manifest, written atomically at the end
  CGBPF_WAIT_FILE=path     wait (<= 30 s) for path before any Python work
                           that touches the driver (cgbpf attached first)
  CGBPF_START_DELAY_MS=n   then sleep n ms
  CGBPF_PAUSE_FILE=path    after setup (driver loaded, context, module),
                           create "<path>.ready" and wait (<= 30 s) for
                           path: lets a test attach with -p mid-run
  CGBPF_LIBCUDA=path       the driver to load (default libcuda.so.1, found
                           through LD_LIBRARY_PATH: build/fake in tests)
  SIGUSR1                  also ends a pause (wait_pause() returns early)

Manifest:
  {"pid": N, "python": "3.11.7", "hexversion": N, "executable": path,
   "implementation": "cpython",
   "calls": {"<symbol>": count, ...},
   "threads": [native tid, ...]            threads that made CUDA calls,
   "records": [                            every CUDA call, in order per thread
     {"seq": i, "call": sym, "tid": native tid, "thread": python name,
      "scenario": name,
      "leaf": FRAME,                       innermost Python frame
      "user": FRAME or null,               innermost frame of user code
      "stack": [FRAME, ...]},              innermost first, whole stack
     ...],
   ...workload-specific fields}
  FRAME = {"file": co_filename, "line": f_lineno, "name": co_name,
           "qualname": co_qualname (3.11+) or null,
           "func": co_qualname where the version has it, else co_name,
           "firstlineno": co_firstlineno, "user": bool}

"user" follows the rule documented in docs/python.md (user/sources/python/pycode.c):
a file is not user code when it starts with "<" (e.g. "<frozen ...>"),
when a path component is "site-packages" or "dist-packages", or when it
lies under a "lib/pythonX.Y" (or lib64/pythonX.Y) directory of the
running version.
"""
import ctypes
import json
import os
import signal
import sys
import threading
import time

_lock = threading.Lock()
_records = []
_calls = {}
_tids = set()
_local = threading.local()
_paused = threading.Event()
scenario_name = "setup"

VERSION_DIR = "python%d.%d" % sys.version_info[:2]


def is_user(path):
    """The user-code rule of docs/python.md."""
    if not path or path.startswith("<"):
        return False
    parts = path.split("/")
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    for i in range(len(parts) - 1):
        if parts[i] in ("lib", "lib64") and parts[i + 1] == VERSION_DIR:
            return False
    return True


def frame_info(f):
    co = f.f_code
    qual = getattr(co, "co_qualname", None)
    return {
        "file": co.co_filename,
        "line": f.f_lineno,
        "name": co.co_name,
        "qualname": qual,
        "func": qual if qual is not None else co.co_name,
        "firstlineno": co.co_firstlineno,
        "user": is_user(co.co_filename),
    }


def stack_of(f):
    """Every frame from f outwards, innermost first."""
    out = []
    while f is not None:
        out.append(frame_info(f))
        f = f.f_back
    return out


def here(sym, *args):
    """Records a call of sym made from the caller's frame; returns args."""
    stack = stack_of(sys._getframe(1))
    user = next((fr for fr in stack if fr["user"]), None)
    tid = threading.get_native_id()
    with _lock:
        _records.append({
            "seq": len(_records), "call": sym, "tid": tid,
            "thread": threading.current_thread().name,
            "scenario": getattr(_local, "scenario", None) or scenario_name,
            "leaf": stack[0], "user": user, "stack": stack,
        })
        _calls[sym] = _calls.get(sym, 0) + 1
        _tids.add(tid)
    return args


def set_scenario(name, thread_local=False):
    """Names the calls that follow (in this thread only if thread_local)."""
    global scenario_name
    if thread_local:
        _local.scenario = name
    else:
        scenario_name = name


class CudaError(Exception):
    pass


def check(rc):
    if rc != 0:
        raise CudaError("CUDA call failed: %d" % rc)
    return rc


def load_driver():
    """The driver through ctypes, with the prototypes the workloads use."""
    cu = ctypes.CDLL(os.environ.get("CGBPF_LIBCUDA") or "libcuda.so.1")
    vp, u = ctypes.c_void_p, ctypes.c_uint
    protos = {
        "cuInit": [u],
        "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
        "cuCtxCreate_v2": [ctypes.POINTER(vp), u, ctypes.c_int],
        "cuCtxSetCurrent": [vp],
        "cuCtxSynchronize": [],
        "cuCtxDestroy_v2": [vp],
        "cuModuleLoadData": [ctypes.POINTER(vp), ctypes.c_char_p],
        "cuModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
        "cuModuleUnload": [vp],
        "cuLaunchKernel": [vp, u, u, u, u, u, u, u, vp, vp, vp],
        "cuStreamSynchronize": [vp],
    }
    for name, argtypes in protos.items():
        fn = getattr(cu, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    return cu


class Gpu:
    """cuInit, device 0, a context, a module and one kernel."""

    KERNEL = b"_Z9py_kernelv"

    def __init__(self):
        self.cu = cu = load_driver()
        self.ctx = ctypes.c_void_p()
        self.mod = ctypes.c_void_p()
        self.fn = ctypes.c_void_p()
        dev = ctypes.c_int()
        check(cu.cuInit(*here("cuInit", 0)))
        check(cu.cuDeviceGet(*here("cuDeviceGet", ctypes.byref(dev), 0)))
        check(cu.cuCtxCreate_v2(*here("cuCtxCreate_v2", ctypes.byref(self.ctx), 0, dev.value)))
        check(cu.cuModuleLoadData(*here("cuModuleLoadData", ctypes.byref(self.mod),
                                         b"\x7fELF fake cubin for cgbpf python")))
        check(cu.cuModuleGetFunction(*here("cuModuleGetFunction", ctypes.byref(self.fn),
                                            self.mod, self.KERNEL)))

    def launch_args(self, grid=1, block=32):
        """cuLaunchKernel's arguments: here("cuLaunchKernel", *gpu.launch_args())."""
        return (self.fn, grid, 1, 1, block, 1, 1, 0, None, None, None)

    def bind(self):
        """Makes the context current in a new thread."""
        check(self.cu.cuCtxSetCurrent(*here("cuCtxSetCurrent", self.ctx)))

    def close(self):
        cu = self.cu
        check(cu.cuCtxSynchronize(*here("cuCtxSynchronize")))
        check(cu.cuModuleUnload(*here("cuModuleUnload", self.mod)))
        check(cu.cuCtxDestroy_v2(*here("cuCtxDestroy_v2", self.ctx)))


def _wait_file(path, what):
    for _ in range(30000):
        if os.path.exists(path) or _paused.is_set():
            return
        time.sleep(0.001)
    sys.exit("%s: %s did not appear within 30 s" % (what, path))


def gate():
    """Waits for CGBPF_WAIT_FILE, then CGBPF_START_DELAY_MS."""
    path = os.environ.get("CGBPF_WAIT_FILE")
    if path:
        _wait_file(path, "CGBPF_WAIT_FILE")
    delay = os.environ.get("CGBPF_START_DELAY_MS")
    if delay:
        time.sleep(int(delay) / 1000.0)


def _on_usr1(signum, frame):
    _paused.set()


def pause():
    """With CGBPF_PAUSE_FILE: creates "<it>.ready", waits for it (or SIGUSR1)."""
    path = os.environ.get("CGBPF_PAUSE_FILE")
    if not path:
        return
    signal.signal(signal.SIGUSR1, _on_usr1)
    with open(path + ".ready", "w"):
        pass
    _wait_file(path, "CGBPF_PAUSE_FILE")


def write_manifest(**extra):
    """Writes CGBPF_MANIFEST (atomically) if set."""
    path = os.environ.get("CGBPF_MANIFEST")
    if not path:
        return
    with _lock:
        m = {
            "pid": os.getpid(),
            "python": "%d.%d.%d" % sys.version_info[:3],
            "hexversion": sys.hexversion,
            "executable": sys.executable,
            "implementation": sys.implementation.name,
            "calls": dict(sorted(_calls.items())),
            "threads": sorted(_tids),
            "records": list(_records),
        }
    m.update(extra)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(m, f, indent=1)
        f.write("\n")
    os.rename(tmp, path)
