# SPDX-License-Identifier: MIT
"""Self-test of the fake libnccl.so.2 (tests/fake/libnccl.c): its exports
against the real library's, and the nccl_ranks workload's calls, grouped
operations and bytes (FAKENCCL_STATS) against counts derived here from
the workload's documented script, with ranks as threads and as processes.
Usage: nccl_selftest.py [OUT]"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = sys.argv[1] if len(sys.argv) > 1 else "build"
OUT = OUT if os.path.isabs(OUT) else os.path.join(ROOT, OUT)
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
LIB = os.path.join(OUT, "fake", "libnccl.so.2")
WL = os.path.join(OUT, "workloads", "nccl_ranks")

# The API the fake implements; every one must exist in the real library.
API = ["ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll",
       "ncclCommInitRankConfig", "ncclCommSplit", "ncclCommFinalize", "ncclCommDestroy",
       "ncclCommAbort", "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank",
       "ncclCommGetAsyncError", "ncclGetErrorString", "ncclGetLastError", "ncclAllReduce",
       "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
       "ncclAlltoAll", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd"]
TYPE = {"f32": 4, "i32": 4, "f64": 8, "u8": 1, "i64": 8, "bf16": 2, "f16": 2, "u32": 4, "i8": 1}


class Fail(Exception):
    pass


def eq(got, want, what):
    if got != want:
        raise Fail("%s: got %r, want %r" % (what, got, want))


def check(cond, what):
    if not cond:
        raise Fail(what)


def dynsyms(path):
    """{name: (type letter, address)} of the defined dynamic symbols."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms[parts[2]] = (parts[1], int(parts[0], 16))
    return syms


def real_nccl():
    for d in ("lib64", "lib", "targets/x86_64-linux/lib"):
        p = os.path.join(CUDA_HOME, d, "libnccl.so.2")
        if os.path.exists(p):
            return p
    return None


def test_exports():
    syms = dynsyms(LIB)
    for name in API:
        check(name in syms and "p" + name in syms, "%s/p%s not exported" % (name, name))
        eq(syms[name][0], "W", "%s binding" % name)
        eq(syms["p" + name][0], "T", "p%s binding" % name)
        eq(syms[name][1], syms["p" + name][1], "%s and p%s address" % (name, name))
    addrs = [syms[n][1] for n in API]
    eq(len(set(addrs)), len(API), "distinct addresses (no two functions folded)")
    extra = sorted(n for n in syms if re.match(r"p?nccl", n) and n.lstrip("p") not in API)
    eq(extra, [], "exports beyond the API list")


def test_exports_match_real_library():
    real = real_nccl()
    if not real:
        return "skip: no real libnccl.so.2 under %s" % CUDA_HOME
    rs = dynsyms(real)
    for name in API:
        check(name in rs and "p" + name in rs, "real %s lacks %s or p%s" % (real, name, name))
        eq(rs[name][0], "W", "real %s binding" % name)
        eq(rs[name][1], rs["p" + name][1], "real %s and p%s address" % (name, name))


def expected(nranks, iters, procs):
    """(main, per_rank list) dicts of calls, grouped and bytes, from the
    script documented in tests/workloads/nccl_ranks.c."""
    def zero():
        return {"calls": {}, "grouped": {}, "bytes": {}, "groups": 0}

    def add(d, table, name, v):
        d[table]["nccl" + name] = d[table].get("nccl" + name, 0) + v

    def op(d, name, count, t, grouped=False):
        add(d, "calls", name, 1)
        add(d, "bytes", name, count * TYPE[t])
        if grouped:
            add(d, "grouped", name, 1)

    main = zero()
    for name in ("GetVersion", "GetUniqueId"):
        add(main, "calls", name, 1)
    for name in ("AllReduce", "GroupEnd"):       # the two error cases
        add(main, "calls", name, 1)
    add(main, "calls", "GetErrorString", 2)
    add(main, "calls", "GetLastError", 2)
    ranks = []
    n = nranks
    for r in range(n):
        d = zero()
        odd = r % 2 == 1
        for name, k in (("CommInitRankConfig" if odd else "CommInitRank", 1), ("CommCount", 2),
                        ("CommUserRank", 2), ("CommCuDevice", 1), ("CommSplit", 1),
                        ("CommDestroy", 1 if odd else 2), ("CommAbort", 1 if odd else 0)):
            if k:
                add(d, "calls", name, k)
        for _ in range(iters):
            op(d, "AllReduce", 1024, "f32")
        op(d, "AllGather", 256, "i32")
        op(d, "ReduceScatter", 128, "f64")
        op(d, "Broadcast", 4096, "u8")
        op(d, "Bcast", 2048, "i64")
        op(d, "Reduce", 512, "bf16")
        op(d, "AlltoAll", 64, "f16")
        add(d, "calls", "GroupStart", 1)
        op(d, "AllReduce", 2048, "f32", True)
        op(d, "AllReduce", 16, "f64", True)
        add(d, "calls", "GroupEnd", 1)
        d["groups"] += 1
        if n >= 2:
            add(d, "calls", "GroupStart", 1)
            op(d, "Send", 1000, "f32", True)
            op(d, "Recv", 1000, "f32", True)
            add(d, "calls", "GroupEnd", 1)
            d["groups"] += 1
            if r == 0:
                op(d, "Send", 333, "i8")
            elif r == 1:
                op(d, "Recv", 333, "i8")
        op(d, "AllReduce", 100, "u32")
        ranks.append(d)
    if not procs:
        add(main, "calls", "CommInitAll", 1)
        add(main, "calls", "GroupStart", 1)
        for _ in range(n):
            op(main, "AllReduce", 4096, "f32", True)
        add(main, "calls", "GroupEnd", 1)
        main["groups"] += 1
        add(main, "calls", "CommDestroy", n)
    return main, ranks


def merge(ds):
    out = {"calls": {}, "grouped": {}, "bytes": {}, "groups": 0}
    for d in ds:
        for t in ("calls", "grouped", "bytes"):
            for k, v in d[t].items():
                out[t][k] = out[t].get(k, 0) + v
        out["groups"] += d["groups"]
    return out


def run(args, env_extra=None):
    tmp = tempfile.mkdtemp(prefix="fakenccl-")
    env = dict(os.environ)
    env["FAKENCCL_STATS"] = os.path.join(tmp, "stats-%p.json")
    env.update(env_extra or {})
    p = subprocess.run([WL] + args, capture_output=True, text=True, timeout=120, env=env)
    eq(p.returncode, 0, "nccl_ranks %s exit status (stderr: %s)" % (" ".join(args), p.stderr[-800:]))
    res = json.loads(p.stdout.strip().splitlines()[-1])
    eq(res["errors"], 0, "errors the workload saw")
    eq(glob.glob("/dev/shm/fakenccl-*"), [], "shared-memory worlds left behind")
    stats = {}
    for f in glob.glob(os.path.join(tmp, "stats-*.json")):
        with open(f) as fh:
            d = json.load(fh)
        stats[d["pid"]] = d
    return res, stats


def strip(d):
    return {k: d[k] for k in ("calls", "grouped", "bytes", "groups")}


def test_threads():
    for n, k in ((4, 2), (3, 1), (1, 1)):
        res, stats = run(["--ranks", str(n), "--iters", str(k)])
        eq(list(stats), [res["pid"]], "one stats file, from the workload (%d ranks)" % n)
        main, ranks = expected(n, k, False)
        eq(strip(stats[res["pid"]]), merge([main] + ranks), "stats, %d ranks as threads" % n)
        eq(len(set(res["rank_tids"])), n, "one thread per rank")


def test_processes():
    n, k = 3, 2
    res, stats = run(["--procs", "--ranks", str(n), "--iters", str(k)])
    eq(len(stats), n + 1, "stats files (parent + one per rank)")
    main, ranks = expected(n, k, True)
    eq(strip(stats.pop(res["pid"])), main, "parent stats")
    # Children are ranks in fork order; pids grow, but only the rank-0/1
    # send/recv differ, so compare the multiset.
    got = sorted(json.dumps(strip(d), sort_keys=True) for d in stats.values())
    want = sorted(json.dumps(d, sort_keys=True) for d in ranks)
    eq(got, want, "per-rank stats of %d ranks as processes" % n)


def test_late_rank_holds_collective():
    """A collective waits for the last rank (lower bounds only)."""
    for mode in ([], ["--procs"]):
        res, _ = run(mode + ["--ranks", "3", "--iters", "1", "--late-ms", "300"])
        for r in (0, 1):
            check(res["first_allreduce_ms"][r] >= 150,
                  "%s rank %d left its first all-reduce after %.1f ms, before the late rank"
                  % (mode or "threads", r, res["first_allreduce_ms"][r]))


def test_simulated_time():
    """FAKENCCL_NS_PER_BYTE: 4096-byte all-reduce at 10 us/byte >= 41 ms."""
    res, _ = run(["--ranks", "2", "--iters", "1"], {"FAKENCCL_NS_PER_BYTE": "10000"})
    for r in range(2):
        check(res["first_allreduce_ms"][r] >= 35,
              "rank %d all-reduce took %.1f ms" % (r, res["first_allreduce_ms"][r]))


def test_waits_are_bounded():
    """An ungrouped ring of sends deadlocks; each send fails with
    ncclSystemError after FAKENCCL_TIMEOUT_S instead of hanging."""
    for mode in ([], ["--procs"]):
        res, stats = run(mode + ["--ranks", "3", "--deadlock"], {"FAKENCCL_TIMEOUT_S": "1"})
        sends = sum(d["calls"].get("ncclSend", 0) for d in stats.values())
        eq(sends, 3, "%s sends attempted" % (mode or "threads"))
        eq(sum(d["bytes"].get("ncclSend", 0) for d in stats.values()), 0, "bytes of failed sends")


def main():
    if not os.path.exists(LIB) or not os.path.exists(WL):
        print("skip - %s or %s not built (needs the CUDA toolkit's nccl.h at %s)" % (LIB, WL, CUDA_HOME))
        print("0 passed, 0 failed, 1 skipped")
        return 0
    passed = failed = skipped = 0
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_")]
    for i, (name, fn) in enumerate(tests, 1):
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001
            failed += 1
            print("not ok %d - %s: %s" % (i, name, e))
            if not isinstance(e, Fail):
                traceback.print_exc()
            continue
        if isinstance(r, str) and r.startswith("skip"):
            skipped += 1
            print("ok %d - %s # SKIP %s" % (i, name, r[6:]))
        else:
            passed += 1
            print("ok %d - %s" % (i, name))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
