# SPDX-License-Identifier: MIT
"""The CUDA runtime API: rt_train (cuda_runtime_api.h, a kernel host stub
passed to cudaLaunchKernel) on the fake libcudart.so.13, which makes its
work's driver calls on the fake driver like NVIDIA's runtime does; and an
executable with NVIDIA's static runtime (libcudart_static.a) linked in."""
import json
import os
import re
import subprocess

import harness
from harness import check, clean_trace, env_with, eq, record, tmpdir

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
FLAGS = ["--sched", "off", "--sample-hz", "0", "--syscall-threshold", "off"]


def need():
    if not os.path.exists(harness.wl("rt_train")):
        raise harness.Skip("rt_train / fake libcudart not built (no CUDA toolkit)")


def test_runtime_calls_names_and_nesting():
    need()
    r = record(FLAGS, cmd=[harness.wl("rt_train")])
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-300:])
    check(re.search(r"probing \d+ CUDA runtime functions in \S+/libcudart.so.13", r.stderr),
          "the runtime probed: %r" % r.stderr[-300:])
    pid = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith('{"pid"')][0])["pid"]
    t = r.trace
    clean_trace(t)
    rt = [s for s in t.slices if s.pid == pid and s.name.startswith("cuda")]
    drv = [s for s in t.slices if s.pid == pid and s.name.startswith("cu") and
           not s.name.startswith("cuda")]
    names = {}
    for s in rt:
        names[s.name] = names.get(s.name, 0) + 1
    eq(names, {"cudaSetDevice": 1, "cudaStreamCreate": 1, "cudaMalloc": 1, "cudaMallocHost": 1,
               "cudaMemcpy": 1, "cudaLaunchKernel": 5, "cudaMemcpyAsync": 5,
               "cudaStreamSynchronize": 5, "cudaMemset": 1, "cudaDeviceSynchronize": 1,
               "cudaFreeHost": 1, "cudaFree": 1, "cudaStreamDestroy": 1},
       "every runtime call once")
    for s in rt:
        if s.name == "cudaLaunchKernel":
            eq(s.args.get("kernel"), "rt_saxpy(float*, int)", "kernel named from its host stub")
            eq(s.args.get("launch"), "<<<(4,2,1), (128,1,1), 256, stream 1>>>",
               "grid and block from dim3 registers, smem and stream from the stack")
        if s.name == "cudaMemcpy":
            eq((s.args.get("bytes"), s.args.get("kind")), (1 << 20, "HtoD"), "cudaMemcpy args")
        if s.name == "cudaMemcpyAsync":
            eq((s.args.get("bytes"), s.args.get("kind")), (4096, "DtoH"), "async copy args")
    # Each driver call sits inside the runtime call that made it.
    for d in drv:
        outer = [s for s in rt if s.tid == d.tid and s.ts <= d.ts and d.end <= s.end]
        eq(len(outer), 1, "%s at %d nested in one runtime call" % (d.name, d.ts))
        check(d.depth > outer[0].depth, "%s deeper than %s" % (d.name, outer[0].name))
    launches = [d for d in drv if d.name == "cuLaunchKernel"]
    eq(len(launches), 5, "the runtime's driver launches")
    # Summary: runtime calls counted, their driver calls not again.
    api = r.stdout.split("** CUDA API Summary")[1].split("\n** ")[0]
    check("driver calls made inside runtime calls are part of those calls" in api,
          "says nested driver calls are not counted again")
    check(re.search(r"\s5\s.*\scudaLaunchKernel$", api, re.M), "cudaLaunchKernel 5 in the table")
    check(not re.search(r"\scuLaunchKernel$", api, re.M), "cuLaunchKernel not counted again")
    kern = r.stdout.split("** Top kernels by launches")[1].split("\n** ")[0]
    check(re.search(r"^\s+5\s+100\.0\s+\S+\s+rt_saxpy\(float\*, int\)$", kern, re.M),
          "the kernel counted once per launch: %r" % kern)


def test_static_runtime_in_the_executable():
    """nvcc links the runtime statically by default: its functions are in
    the executable, which cgbpf finds and probes. NVIDIA's static runtime
    cannot run on the fake driver: its first call fails, traced as such."""
    need()
    lib = os.path.join(CUDA, "lib64", "libcudart_static.a")
    if not os.path.exists(lib):
        raise harness.Skip("no %s" % lib)
    d = tmpdir()
    exe = os.path.join(d, "rt_static")
    subprocess.run(["gcc", "-I", os.path.join(CUDA, "include"),
                    os.path.join(harness.REPO, "tests", "workloads", "rt_train.c"), "-o", exe,
                    "-L", os.path.join(CUDA, "lib64"), "-l:libcudart_static.a", "-ldl",
                    "-lpthread", "-lrt"], check=True)
    r = record(FLAGS, cmd=[exe], tmp=d)
    check("probing" in r.stderr and "CUDA runtime functions in %s" % exe in r.stderr,
          "the executable's own runtime probed: %r" % r.stderr[-400:])
    t = r.trace
    clean_trace(t)
    first = [s for s in t.slices if s.name == "cudaSetDevice"]
    eq(len(first), 1, "its first runtime call traced")
    check(first[0].args.get("result", "").startswith("cudaError_t "),
          "with the runtime's error: %r" % first[0].args)
    eq(r.rc, 1, "the command's own exit status (it stops at the error)")
