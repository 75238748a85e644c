# SPDX-License-Identifier: MIT
"""Symbol resolution and probing on NVIDIA's real binaries from the CUDA
toolkit (skipped, saying so, where the toolkit is absent)."""
import os
import re
import subprocess

from harness import CGBPF, OUT, Skip, check, eq, record, tmpdir

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
CUDART = os.path.join(CUDA, "lib64", "libcudart.so.13")
STUB = os.path.join(CUDA, "lib64", "stubs", "libcuda.so")
NCCL = os.path.join(CUDA, "lib64", "libnccl.so.2")


def need(path):
    if not os.path.exists(path):
        raise Skip("%s not present (no CUDA toolkit)" % path)


def readelf_offsets(path):
    """name -> file offset of defined FUNC symbols, from binutils' readelf
    (independent of cgbpf's libelf code)."""
    loads = []
    for line in subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, vaddr, memsz = int(f[1], 16), int(f[2], 16), int(f[5], 16)
            loads.append((vaddr, memsz, off))
    out = {}
    for line in subprocess.run(["readelf", "-WsD", path], capture_output=True,
                               text=True).stdout.splitlines() + \
            subprocess.run(["readelf", "-Ws", "--dyn-syms", path], capture_output=True,
                           text=True, check=True).stdout.splitlines():
        f = line.split()
        if len(f) < 8 or f[3] != "FUNC" or f[6] == "UND":
            continue
        name = f[7].split("@")[0]
        v = int(f[1], 16)
        for vaddr, memsz, off in loads:
            if vaddr <= v < vaddr + memsz:
                out.setdefault(name, v - vaddr + off)
    return out


def check_lib(path, names):
    want = readelf_offsets(path)
    p = subprocess.run([CGBPF, "check", "--attach", path] + names, capture_output=True,
                       text=True, timeout=120)
    eq(p.returncode, 0, "cgbpf check exit (stderr %r)" % p.stderr[-300:])
    # Names at one address (pncclX and ncclX) are one probe.
    distinct = len({want[n] for n in names if n in want})
    line = "# %d resolved, 0 missing, %d aliases, %d attached, 0 failed" % (
        distinct, len(names) - distinct, distinct)
    check(line in p.stdout, "%r in %r" % (line, p.stdout[-200:]))
    got = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^(\S+)\s+0x([0-9a-f]+)(\s|$)", line)
        if m:
            got[m.group(1)] = int(m.group(2), 16)
    for n in names:
        check(n in got, "%s resolved and attached" % n)
        eq(got[n], want[n], "%s offset vs readelf" % n)


def test_cudart_symbols_resolve_and_attach():
    need(CUDART)
    check_lib(CUDART, ["cudaLaunchKernel", "cudaMemcpy", "cudaMemcpyAsync", "cudaMalloc",
                       "cudaFree", "cudaStreamSynchronize", "cudaDeviceSynchronize",
                       "cudaGraphLaunch", "cudaLaunchKernelExC"])


def test_stub_libcuda_whole_table():
    need(STUB)
    p = subprocess.run([CGBPF, "check", "--attach", STUB], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "exit")
    m = re.search(r"# (\d+) resolved, (\d+) missing, (\d+) aliases, (\d+) attached, 0 failed",
                  p.stdout)
    check(m, "summary line in %r" % p.stdout[-300:])
    eq(int(m.group(2)), 0, "every table function exists in NVIDIA's stub libcuda")
    want = readelf_offsets(STUB)
    for line in p.stdout.splitlines():
        mm = re.match(r"^(cu\w+)\s+0x([0-9a-f]+)$", line)
        if mm:
            eq(int(mm.group(2), 16), want[mm.group(1)], "%s offset" % mm.group(1))


def test_nccl_symbols_resolve_and_attach():
    need(NCCL)
    check_lib(NCCL, ["ncclAllReduce", "ncclGetVersion", "ncclCommInitRank", "pncclAllReduce"])


# cgbpf's NCCL table (bpf/nccl_funcs.h). NCCL spells all-to-all
# ncclAlltoAll; it is exported since 2.28 (absent from older builds).
NCCL_TABLE = ["ncclAllReduce", "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather",
              "ncclReduceScatter", "ncclAlltoAll", "ncclSend", "ncclRecv", "ncclGroupStart",
              "ncclGroupEnd", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll",
              "ncclCommSplit", "ncclCommDestroy", "ncclCommAbort", "ncclCommCount",
              "ncclCommUserRank"]


def check_nccl_table(path):
    """The whole table resolves and attaches in path, at readelf's offsets;
    each pncclX is at its ncclX's address and is no second probe."""
    p = subprocess.run([CGBPF, "check", "--attach", path], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "cgbpf check exit (stderr %r)" % p.stderr[-300:])
    line = "# %d resolved, 0 missing, 0 aliases, %d attached, 0 failed" % (
        len(NCCL_TABLE), len(NCCL_TABLE))
    check(line in p.stdout, "%r in %r" % (line, p.stdout[-300:]))
    want = readelf_offsets(path)
    got = {}
    for ln in p.stdout.splitlines():
        m = re.match(r"^(nccl\w+)\s+0x([0-9a-f]+)$", ln)
        if m:
            got[m.group(1)] = int(m.group(2), 16)
    eq(sorted(got), sorted(NCCL_TABLE), "functions probed (ncclX names only)")
    for n in NCCL_TABLE:
        eq(got[n], want[n], "%s offset vs readelf" % n)
        eq(want["p" + n], want[n], "p%s at the address of %s" % (n, n))
    # Both names asked for: one probe per address, the alias says so.
    names = [x for n in NCCL_TABLE for x in (n, "p" + n)]
    check_lib(path, names)
    p = subprocess.run([CGBPF, "check", "--attach", path] + names, capture_output=True,
                       text=True, timeout=120)
    for n in NCCL_TABLE:
        check(re.search(r"^p%s\s+0x%x\s+same address as %s \(one probe\)$" % (n, got[n], n),
                        p.stdout, re.M), "p%s marked an alias of %s" % (n, n))


def test_nccl_whole_table_on_the_real_library():
    need(NCCL)
    check_nccl_table(NCCL)


def test_nccl_whole_table_on_the_fake():
    fake = os.path.join(OUT, "fake", "libnccl.so.2")
    if not os.path.exists(fake):
        raise Skip("fake libnccl.so.2 not built (no CUDA toolkit: it needs nccl.h)")
    check_nccl_table(fake)


def test_trace_real_stub_libcuda():
    """A program linked against NVIDIA's stub driver: every call returns
    CUDA_ERROR_STUB_LIBRARY (34), a real library traced for real."""
    need(STUB)
    d = tmpdir()
    lib = os.path.join(d, "lib")
    os.mkdir(lib)
    os.symlink(STUB, os.path.join(lib, "libcuda.so.1"))
    src = os.path.join(d, "stubuser.c")
    with open(src, "w") as f:
        f.write("""
#include <cuda.h>
int main(void) {
    CUdeviceptr p;
    for (int i = 0; i < 7; i++) cuInit(0);
    for (int i = 0; i < 3; i++) cuMemAlloc(&p, 4096);
    cuLaunchKernel((CUfunction)0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    return 0;
}
""")
    exe = os.path.join(d, "stubuser")
    subprocess.run(["gcc", "-I", os.path.join(CUDA, "include"), src, "-o", exe, "-L", lib,
                    "-l:libcuda.so.1", "-Wl,-rpath," + lib], check=True)
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)  # it would win over the RUNPATH to the stub
    r = record([], cmd=[exe], tmp=d, env=env)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-300:])
    t = r.trace
    eq(t.errors, [], "decoder errors")
    names = {}
    for s in t.slices:
        names[s.name] = names.get(s.name, 0) + 1
    eq(names, {"cuInit": 7, "cuMemAlloc_v2": 3, "cuLaunchKernel": 1}, "calls traced")
    for s in t.slices:
        eq(s.args.get("result"), "CUDA_ERROR_STUB_LIBRARY (34)", "result of %s" % s.name)
    check("11 calls returned an error" in r.stdout, "summary counts errors")


def test_cudart_whole_table():
    """Every function of cgbpf's runtime table resolves in NVIDIA's
    libcudart.so.13 at readelf's offset and attaches."""
    need(CUDART)
    p = subprocess.run([CGBPF, "check", "--attach", CUDART], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "exit (stderr %r)" % p.stderr[-300:])
    check("CUDA runtime" in p.stdout.splitlines()[0], "the runtime table: %r" % p.stdout[:200])
    m = re.search(r"# (\d+) resolved, (\d+) missing, (\d+) aliases, (\d+) attached, 0 failed",
                  p.stdout)
    check(m, "summary line in %r" % p.stdout[-300:])
    eq(int(m.group(2)), 0, "no runtime table function missing")
    check(int(m.group(1)) >= 30, "the whole table resolved (%s)" % m.group(1))
    want = readelf_offsets(CUDART)
    for line in p.stdout.splitlines():
        mm = re.match(r"^(cuda\w+)\s+0x([0-9a-f]+)(\s|$)", line)
        if mm:
            eq(int(mm.group(2), 16), want[mm.group(1)], "%s offset" % mm.group(1))
