# SPDX-License-Identifier: MIT
"""The CUDA runtime API: the fake libcudart.so.13 on the fake driver (every
call with its arguments, kernel names from host stubs, runtime -> driver
nesting, no double counting in the summary), NVIDIA's real libcudart.so.13
(attach of the whole table; an nvcc-built program, shared and static
runtime, traced on the fake driver)."""
import os
import re
import subprocess

from harness import (FAKE, Skip, check, clean_trace, env_with, eq,
                     no_drops, record, tmpdir, wl, REPO)
from test_real_libs import CUDART, check_lib, need

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
NVCC = os.path.join(CUDA, "bin", "nvcc")

SAXPY = "void thrust::detail::saxpy<float>(float, float*, int)"
NORM = "layernorm(float*, int)"
RELU = "relu_kernel"


def table_names():
    with open(os.path.join(REPO, "bpf", "cudart_funcs.h")) as f:
        return re.findall(r"^\s*X\((\w+),", f.read(), re.M)


def inside(outer, inner):
    return (inner.tid == outer.tid and inner.ts >= outer.ts and inner.dur is not None and
            inner.ts + inner.dur <= outer.ts + outer.dur)


def api_table(stdout):
    """{name: calls} of the main cuda_api_sum rows, and of the rows made
    inside them."""
    main, inner, cur = {}, {}, None
    for line in stdout.splitlines():
        if "cuda_api_sum" in line:
            cur = main
        elif "Made inside the calls above" in line:
            cur = inner
        elif line.startswith("** "):
            cur = None
        m = re.match(r"^\s+[\d.]+\s+\d+\s+(\d+)\s+[\d.]+\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+(\S+)$", line)
        if m and cur is not None:
            cur[m.group(2)] = int(m.group(1))
    return main, inner


def test_fake_runtime_calls_names_nesting():
    if not os.path.exists(os.path.join(FAKE, "libcudart.so.13")):
        raise Skip("no fake libcudart.so.13 (built only with the CUDA toolkit's headers)")
    res = record(["--sample-hz", "0"], [wl("crt_app"), "--iters", "3"])
    eq(res.rc, 0, "exit (stderr %r)" % res.stderr[-400:])
    t = res.trace
    clean_trace(t)
    no_drops(res)
    pid = [p for p in t.processes if t.processes[p].process_name == "crt_app"][0]
    sl = [s for s in t.slices if s.pid == pid and s.name]
    by = {}
    for s in sl:
        by.setdefault(s.name, []).append(s)

    # Every runtime call, with its arguments.
    launches = by["cudaLaunchKernel"]
    outer_launch = [s for s in launches if s.depth == 0]
    eq(len(outer_launch), 3, "cudaLaunchKernel called by the program")
    for s in outer_launch:
        eq(s.args["kernel"], SAXPY, "host stub demangled")
        eq(s.args["launch"], "<<<(4,2,1), (128,1,1), 256, stream 1>>>", "saxpy launch")
    for s in by["cudaLaunchKernelExC"]:
        eq(s.args["kernel"], RELU, "ExC kernel")
        eq(s.args["launch"], "<<<(7,1,1), (64,1,1), 512, stream 1>>>", "ExC launch")
    eq(len(by["__cudaGetKernel"]), 1, "__cudaGetKernel once")
    eq(by["__cudaGetKernel"][0].args["kernel"], NORM, "__cudaGetKernel names the stub")
    eq(len(by["__cudaLaunchKernel"]), 3, "__cudaLaunchKernel")
    for s in by["__cudaLaunchKernel"]:
        eq(s.args["kernel"], NORM, "kernel of a cudaKernel_t from __cudaGetKernel")
        eq(s.args["launch"], "<<<(3,3,1), (32,8,1), 0, stream 1>>>", "norm launch")
    eq(sorted((s.args["bytes"], s.args["kind"], s.args.get("stream"))
              for s in by["cudaMemcpyAsync"] + by["cudaMemcpy"]),
       sorted([(65536, "HtoD", "stream 1")] * 3 + [(65536, "DtoH", None)] * 3), "copies")
    m2 = by["cudaMemcpy2D"][0]
    eq((m2.args["bytes"], m2.args["kind"], m2.args["shape"]),
       (1024, "HtoD", "256 x 4 (dpitch 1024, spitch 512)"), "2D copy")
    eq([(s.args["bytes"], s.args["value"], s.args["stream"]) for s in by["cudaMemsetAsync"]],
       [(4096, 0, "stream 1")] * 3, "memsets")
    eq((by["cudaMemset"][0].args["bytes"], by["cudaMemset"][0].args["value"]), (100, 1), "memset")
    eq(sorted(s.args["bytes"] for s in by["cudaMalloc"] + by["cudaMallocHost"] +
              by["cudaMallocManaged"]), [4096, 65536, 1048576], "allocations")
    eq(by["cudaMallocManaged"][0].args["flags"], 1, "managed flags")
    eq(by["cudaStreamCreateWithFlags"][0].args["stream"], "stream 1", "stream created")
    eq(by["cudaStreamCreateWithFlags"][0].args["flags"], 1, "stream flags")
    eq(by["cudaSetDevice"][0].args["device"], 0, "device")
    eq([s.args["stream"] for s in by["cudaStreamWaitEvent"]], ["default"] * 3, "wait on NULL")
    eq([s.args["stream"] for s in by["cudaStreamSynchronize"]], ["stream 1"] * 3, "sync")
    for n in ("cudaEventRecord", "cudaDeviceSynchronize", "cudaEventSynchronize",
              "cudaFreeHost", "cudaStreamDestroy"):
        check(n in by, "%s traced" % n)
    frees = by["cudaFree"]
    eq(len(frees), 3, "cudaFree calls")
    bad = [s for s in frees if s.args["ptr"] == 0xdead00]
    eq(len(bad), 1, "failing free")
    eq(bad[0].args["result"], "cudaErrorInvalidValue (1)", "its result")
    eq(sorted(s.args.get("bytes") for s in frees if s is not bad[0]), [4096, 1048576],
       "free sizes from the runtime's allocations")

    # Nesting: each driver call made by the runtime lies inside its call.
    rt = [s for s in sl if s.name.startswith("cuda") or s.name.startswith("__cuda")]
    drv = [s for s in sl if s.name.startswith("cu") and not s.name.startswith("cuda")]
    for d in drv:
        check(any(inside(r, d) and d.depth > r.depth for r in rt),
              "%s at %d inside a runtime call" % (d.name, d.ts))
    for s in by["cuLaunchKernel"]:
        check(s.args["kernel"] in (SAXPY, NORM), "driver launch keeps its own name")
    for s in by["__cudaLaunchKernel"]:
        inner = [x for x in launches if inside(s, x)]
        eq(len(inner), 1, "cudaLaunchKernel inside __cudaLaunchKernel")
    eq(len(by["cuMemcpyHtoD_v2"]), 4, "cudaMemcpy2D: one driver copy per row")

    # Summary: the program's calls once; the runtime's driver calls apart.
    main, inner = api_table(res.stdout)
    eq(main.get("cudaLaunchKernel"), 3, "outer cudaLaunchKernel rows")
    eq(inner.get("cudaLaunchKernel"), 3, "cudaLaunchKernel inside __cudaLaunchKernel")
    eq(inner.get("cuLaunchKernel"), 6, "driver launches inside runtime launches")
    eq(inner.get("cuLaunchKernelEx"), 3, "driver Ex launches")
    check(not any(n.startswith("cu") and not n.startswith("cuda") for n in main),
          "no driver row in the main table: %r" % main)
    for k, n in ((NORM, 3), (RELU, 3), (SAXPY, 3)):
        check(re.search(r"^\s+%d\s+33\.3\s+[\d.]+\s+%s$" % (n, re.escape(k)), res.stdout, re.M),
              "kernel row %s x%d" % (k, n))
    check("9 launches of 3 kernels; 0 unnamed" in res.stdout, "launches counted once")
    check(re.search(r"^\s+4\s+197632\s+.*Host to Device$", res.stdout, re.M), "HtoD bytes")
    check(re.search(r"^\s+3\s+196608\s+.*Device to Host$", res.stdout, re.M), "DtoH bytes")
    check(re.search(r"^\s+4\s+12388\s+.*Memset$", res.stdout, re.M), "memset bytes")
    check(re.search(r"^\s+%d\s+crt_app\s+1\.0 MiB\s+64\.0 KiB$" % pid, res.stdout, re.M),
          "GPU memory counted once (1 MiB + 4 KiB), pinned 64 KiB")
    gpu = [v for _, v in t.counter_values("GPU memory (cuMemAlloc)")]
    eq(max(gpu), 1048576 + 4096, "GPU memory counter peak (each allocation once)")
    eq(gpu[-1], 0, "GPU memory counter back to 0 after the frees")


def test_real_libcudart_whole_table():
    need(CUDART)
    check_lib(CUDART, table_names())


def nvcc_build(tmp, static):
    if not os.path.exists(NVCC):
        raise Skip("%s not present (no CUDA toolkit)" % NVCC)
    out = os.path.join(tmp, "crt_static" if static else "crt_shared")
    cmd = [NVCC, "-o", out, os.path.join(REPO, "tests", "workloads", "crt_nvcc.cu")]
    if not static:
        cmd[1:1] = ["-cudart", "shared"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    eq(p.returncode, 0, "nvcc (stderr %r)" % p.stderr[-300:])
    return out


def nvcc_run(static):
    tmp = tmpdir()
    exe = nvcc_build(tmp, static)
    # Only the fake driver: NVIDIA's runtime, not the fake one, must load.
    drv = os.path.join(tmp, "drv")
    os.mkdir(drv)
    os.symlink(os.path.join(FAKE, "libcuda.so.1"), os.path.join(drv, "libcuda.so.1"))
    env = env_with()
    env["LD_LIBRARY_PATH"] = drv
    res = record(["--sample-hz", "0", "-v"], [exe], env=env, tmp=tmp)
    eq(res.rc, 0, "exit (stderr %r)" % res.stderr[-400:])
    clean_trace(res.trace)
    pid = [p for p in res.trace.processes
           if res.trace.processes[p].process_name == os.path.basename(exe)][0]
    by = {}
    for s in res.trace.slices:
        if s.pid == pid and s.name:
            by.setdefault(s.name, []).append(s)
    # NVIDIA's runtime fails on the fake driver (cudaErrorCallRequiresNewerDriver:
    # no private export tables) but makes the calls, with nvcc 13's launch path.
    eq(sorted(s.args["kernel"] for s in by["__cudaGetKernel"]),
       ["plain(int*)", "void ns::scale<2>(float*, int)"], "__cudaGetKernel host stubs")
    got = sorted((s.args["kernel"], s.args["launch"]) for s in by["__cudaLaunchKernel"])
    eq(got, [("plain(int*)", "<<<(1,1,1), (1,1,1), 0, default>>>"),
             ("void ns::scale<2>(float*, int)", "<<<(4,2,1), (256,1,1), 128, default>>>")],
       "launches named from the stub the failed __cudaGetKernel left")
    for s in by["__cudaLaunchKernel"]:
        inner = [x for x in by.get("cudaLaunchKernel", []) if inside(s, x)]
        eq(len(inner), 1, "__cudaLaunchKernel jumps into cudaLaunchKernel")
    check(by["cudaDeviceSynchronize"][0].args.get("result", "").startswith("cudaError"),
          "failed sync has its cudaError name")
    check("2 launches of 2 kernels; 0 unnamed" in res.stdout, "summary counts 2 launches")
    return res, by, exe


def test_nvcc_shared_runtime_on_fake_driver():
    res, by, _ = nvcc_run(False)
    check(re.search(r"probing \d+ CUDA runtime functions in \S*libcudart\.so\.13", res.stderr),
          "libcudart attached: %r" % res.stderr[-300:])
    eq(sorted(s.args["bytes"] for s in by["cudaMalloc"]), [4, 4096], "both cudaMalloc")
    # The driver, loaded later by the runtime, is probed in time: cuInit
    # nested in the first runtime call.
    ci = by.get("cuInit", [])
    eq(len(ci), 1, "cuInit traced")
    check(any(inside(m, ci[0]) for m in by["cudaMalloc"]), "cuInit inside cudaMalloc")


def test_nvcc_static_runtime_in_executable():
    res, by, exe = nvcc_run(True)
    check(re.search(r"probing \d+ CUDA runtime functions in %s" % re.escape(exe), res.stderr),
          "runtime table attached to the executable: %r" % res.stderr[-400:])
    # The host's libcudart.so may be probed in advance (the loader could
    # find it); a static build never maps it.
    check(not re.search(r"pid \d+ mapped libcudart", res.stderr),
          "no libcudart.so mapped in a static build")
    check([s.args["bytes"] for s in by["cudaMalloc"]][-1:] == [4], "second cudaMalloc traced")
