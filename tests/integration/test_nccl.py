# SPDX-License-Identifier: MIT
"""NCCL calls recorded end to end: the nccl_ranks workload (every
collective and point-to-point call, grouped and ungrouped, communicator
creation, split and destruction) on the fake libnccl.so.2, with ranks as
threads of one process and as separate processes. Every call's
arguments are checked against the workload's script, the call counts,
grouped operations and bytes against the library's own counts
(FAKENCCL_STATS), the communicator tracks against the ranks, and the
summary's figures are recomputed here from the trace's durations."""
import glob
import json
import os
import re

from harness import check, clean_trace, env_with, eq, need_nccl_ranks, no_drops, record, tmpdir, wl

UUID_NCCL = 5 << 56
UUID_PROCESS = 1 << 56
COLL = ["ncclAllReduce", "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather",
        "ncclReduceScatter", "ncclAlltoAll", "ncclSend", "ncclRecv"]
TABLE = COLL + ["ncclGroupStart", "ncclGroupEnd", "ncclCommInitRank", "ncclCommInitRankConfig",
                "ncclCommInitAll", "ncclCommSplit", "ncclCommDestroy", "ncclCommAbort",
                "ncclCommCount", "ncclCommUserRank"]
SIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "float16": 2,
        "float32": 4, "float64": 8, "bfloat16": 2}
# nccl-tests: the size multiplier (per-rank counts) and the bus factor.
PER_RANK = {"ncclAllGather", "ncclReduceScatter", "ncclAlltoAll"}


def bus_factor(name, n):
    if name == "ncclAllReduce":
        return 2.0 * (n - 1) / n
    if name in PER_RANK:
        return (n - 1) / n
    return 1.0


THREADS = dict(ranks=4, iters=3)
PROCS = dict(ranks=3, iters=2, late_ms=50)
_res = {}


def need_workload():
    need_nccl_ranks()


def res(mode):
    """One recording per mode, shared by the tests of this file."""
    need_workload()
    if mode not in _res:
        cfg = THREADS if mode == "threads" else PROCS
        tmp = tmpdir()
        cmd = [wl("nccl_ranks"), "--ranks", str(cfg["ranks"]), "--iters", str(cfg["iters"])]
        if mode == "procs":
            cmd += ["--procs", "--late-ms", str(cfg["late_ms"])]
        env = env_with(FAKENCCL_STATS=os.path.join(tmp, "stats-%p.json"))
        r = record([], cmd=cmd, env=env, tmp=tmp, child_gate=(mode == "procs"))
        eq(r.rc, 0, "cgbpf/workload exit (stderr: %r)" % r.stderr[-800:])
        line = [ln for ln in r.stdout.splitlines() if ln.startswith('{"pid"')]
        eq(len(line), 1, "the workload's JSON line")
        r.wl = json.loads(line[0])
        eq(r.wl["errors"], 0, "the workload saw only expected results")
        r.stats = {}
        for p in glob.glob(os.path.join(tmp, "stats-*.json")):
            with open(p) as f:
                s = json.load(f)
            r.stats[s["pid"]] = s
        r.cfg = cfg
        _res[mode] = r
    return _res[mode]


def nccl_slices(r, pid=None, tid=None):
    """NCCL call slices on thread tracks, in time order."""
    return sorted((s for s in r.trace.slices
                   if s.name in TABLE and s.tid is not None and
                   (pid is None or s.pid == pid) and (tid is None or s.tid == tid)),
                  key=lambda s: (s.ts, s.depth))


def app_slices(r, **kw):
    """The calls the application made (not NCCL's own nested ones)."""
    return [s for s in nccl_slices(r, **kw) if "nested" not in s.args]


def ok(s):
    return "result" not in s.args


def comm_tracks(r):
    return {u: t for u, t in r.trace.tracks.items() if u >> 56 == 5}


# ------------------------------------------------------------ the script


def rank_script(r, n, k):
    """(name, {arg: value}) of rank r's NCCL calls in program order (the
    comment of tests/workloads/nccl_ranks.c), comm labels left out."""
    out = [("ncclCommInitRankConfig" if r % 2 else "ncclCommInitRank", {"nranks": n, "rank": r}),
           ("ncclCommCount", {"count": n}), ("ncclCommUserRank", {"rank": r})]
    ar = {"count": 1024, "datatype": "float32", "bytes": 4096, "op": "sum"}
    # seq: each collective's number on its communicator, from 1; sends
    # and receives numbered per peer and direction.
    out += [("ncclAllReduce", dict(ar, seq=i + 1)) for i in range(k)]
    colls = [("ncclAllGather", {"count": 256, "datatype": "int32", "bytes": 1024}),
            ("ncclReduceScatter", {"count": 128, "datatype": "float64", "bytes": 1024, "op": "sum"}),
            ("ncclBroadcast", {"count": 4096, "datatype": "uint8", "bytes": 4096, "root": 0}),
            ("ncclBcast", {"count": 2048, "datatype": "int64", "bytes": 16384, "root": n - 1}),
            ("ncclReduce", {"count": 512, "datatype": "bfloat16", "bytes": 1024, "op": "max",
                            "root": 0}),
            ("ncclAlltoAll", {"count": 64, "datatype": "float16", "bytes": 128}),
            ("ncclGroupStart", {}),
            ("ncclAllReduce", {"count": 2048, "datatype": "float32", "bytes": 8192, "op": "sum",
                               "group": "enqueued: runs at ncclGroupEnd"}),
            ("ncclAllReduce", {"count": 16, "datatype": "float64", "bytes": 128, "op": "sum",
                               "group": "enqueued: runs at ncclGroupEnd"}),
            ("ncclGroupEnd", {})]
    seq = k
    for name, args in colls:
        if name.startswith("ncclGroup"):
            out.append((name, args))
            continue
        seq += 1
        out.append((name, dict(args, seq=seq)))
    if n >= 2:
        g = {"count": 1000, "datatype": "float32", "bytes": 4000,
             "group": "enqueued: runs at ncclGroupEnd"}
        out += [("ncclGroupStart", {}), ("ncclSend", dict(g, peer=(r + 1) % n, seq=1)),
                ("ncclRecv", dict(g, peer=(r + n - 1) % n, seq=1)), ("ncclGroupEnd", {})]
        # Rank 0's second send to rank 1, rank 1's second receive from 0.
        if r == 0:
            out.append(("ncclSend", {"count": 333, "datatype": "int8", "bytes": 333, "peer": 1,
                                     "seq": 2}))
        elif r == 1:
            out.append(("ncclRecv", {"count": 333, "datatype": "int8", "bytes": 333, "peer": 0,
                                     "seq": 2}))
    cn, cr = child_rank(r, n)
    out += [("ncclCommSplit", {"color": r % 2, "key": -r}), ("ncclCommCount", {"count": cn}),
            ("ncclCommUserRank", {"rank": cr}),
            ("ncclAllReduce", {"count": 100, "datatype": "uint32", "bytes": 400, "op": "sum",
                               "seq": 1}),
            ("ncclCommAbort" if r % 2 else "ncclCommDestroy", {}), ("ncclCommDestroy", {})]
    return out


def child_rank(r, n):
    """(size, rank) of rank r's communicator after split(color r % 2, key -r)."""
    size = (n + 1 - r % 2) // 2
    return size, size - 1 - r // 2


def rank_threads(r):
    """{rank: (pid, tid)} of the rank threads (threads mode) or processes."""
    if not r.wl["procs"]:
        return {i: (r.wl["pid"], tid) for i, tid in enumerate(r.wl["rank_tids"])}
    out = {}
    for pid in r.stats:
        if pid == r.wl["pid"]:
            continue
        init = [s for s in app_slices(r, pid=pid) if s.name.startswith("ncclCommInitRank")]
        eq(len(init), 1, "one init in rank process %d" % pid)
        out[init[0].args["rank"]] = (pid, pid)
    eq(sorted(out), list(range(r.cfg["ranks"])), "a process per rank")
    return out


def check_script(r):
    n, k = r.cfg["ranks"], r.cfg["iters"]
    for rank, (pid, tid) in rank_threads(r).items():
        got = [(s.name, {a: v for a, v in s.args.items()
                         if a in ("nranks", "rank", "count", "datatype", "bytes", "op", "root",
                                  "peer", "color", "key", "group", "seq")})
               for s in app_slices(r, pid=pid, tid=tid)]
        eq(got, rank_script(rank, n, k), "rank %d's NCCL calls and arguments" % rank)


def test_threads_arguments_follow_the_script():
    check_script(res("threads"))


def test_procs_arguments_follow_the_script():
    check_script(res("procs"))


# ------------------------------------------------------------ counts


def check_counts(r):
    clean_trace(r.trace)
    no_drops(r)
    eq(sorted(r.stats), sorted({s.pid for s in nccl_slices(r)} | {r.wl["pid"]}),
       "processes with NCCL calls")
    for pid, st in r.stats.items():
        calls = {}
        grouped = {}
        nbytes = {}
        for s in app_slices(r, pid=pid):
            calls[s.name] = calls.get(s.name, 0) + 1
            if "group" in s.args:
                grouped[s.name] = grouped.get(s.name, 0) + 1
            if s.name in COLL and ok(s):
                nbytes[s.name] = nbytes.get(s.name, 0) + s.args["bytes"]
        eq(calls, {f: v for f, v in st["calls"].items() if f in TABLE},
           "pid %d: calls per function, each seen once" % pid)
        eq(grouped, st["grouped"], "pid %d: operations enqueued in groups" % pid)
        eq(nbytes, st["bytes"], "pid %d: bytes per function" % pid)
        groups = [s for s in r.trace.slices if s.pid == pid and s.name == "NCCL group"]
        eq(len(groups), st["groups"], "pid %d: group slices" % pid)
    unended = [s for s in nccl_slices(r) if s.dur is None]
    eq(unended, [], "every NCCL call returned")


def test_threads_counts_match_the_library():
    check_counts(res("threads"))


def test_procs_counts_match_the_library():
    check_counts(res("procs"))


def test_nested_broadcast_is_marked_not_counted():
    """ncclBcast calls ncclBroadcast itself (as NVIDIA's build does): that
    slice nests in the ncclBcast slice, says so, and is counted nowhere."""
    r = res("threads")
    bcasts = [s for s in nccl_slices(r) if s.name == "ncclBcast"]
    nested = [s for s in nccl_slices(r) if "nested" in s.args]
    eq(len(bcasts), r.cfg["ranks"], "one ncclBcast per rank")
    eq(len(nested), len(bcasts), "one nested call per ncclBcast")
    for b in bcasts:
        inner = [s for s in nested if s.tid == b.tid and b.ts <= s.ts and s.end <= b.end]
        eq(len(inner), 1, "ncclBroadcast inside ncclBcast on tid %d" % b.tid)
        i = inner[0]
        eq((i.name, i.depth, i.args["nested"]), ("ncclBroadcast", b.depth + 1, "ncclBcast"),
           "the nested call")
        for a in ("count", "datatype", "bytes", "root", "comm", "stream"):
            eq(i.args[a], b.args[a], "nested %s" % a)
    on_tracks = [s for s in r.trace.slices if s.track_uuid >> 56 == 5 and
                 s.name == "ncclBroadcast" and s.args.get("count") == 2048]
    eq(on_tracks, [], "nested calls are not on communicator tracks")
    check("%d calls NCCL made to its own API" % len(bcasts) in r.stdout, "summary says so")


# ------------------------------------------------------------ errors


def test_error_results():
    r = res("threads")
    main = r.wl["pid"]
    errs = [(s.name, s.args["result"]) for s in nccl_slices(r, tid=main) if not ok(s)]
    eq(errs, [("ncclAllReduce", "ncclInvalidArgument (4)"),
              ("ncclGroupEnd", "ncclInvalidUsage (5)")], "failed calls of the main thread")
    bad = [s for s in nccl_slices(r, tid=main) if s.name == "ncclGroupEnd" and not ok(s)][0]
    eq([s for s in r.trace.slices if s.name == "NCCL group" and s.ts <= bad.ts < s.end], [],
       "a ncclGroupEnd without a group opens and closes no group")
    check("2 calls returned an error" in r.stdout, "summary counts NCCL errors")


# ------------------------------------------------------------ communicators


def label_parts(label):
    m = re.match(r"^([0-9a-f]{4}) rank (\d+|\?)/(\d+|\?)$", label)
    check(m, "comm label %r" % label)
    return m.group(1), m.group(2), m.group(3)


def check_comm_tracks(r):
    n = r.cfg["ranks"]
    tracks = comm_tracks(r)
    ranks = rank_threads(r)
    world = set()
    children = {}
    for rank, (pid, tid) in ranks.items():
        mine = {t.name: (u, t) for u, t in tracks.items() if t.pid == pid}
        init = [s for s in app_slices(r, pid=pid, tid=tid) if s.name.startswith("ncclCommInit")][0]
        cid, rr, nn = label_parts(init.args["comm"])
        eq((rr, nn), (str(rank), str(n)), "rank %d: comm label of its init" % rank)
        eq(init.args["comm_id"], cid, "the id of the unique id at entry is the comm's")
        world.add(cid)
        name = "NCCL comm %s rank %d/%d" % (cid, rank, n)
        check(name in mine, "track %r in pid %d: %r" % (name, pid, sorted(mine)))
        u, t = mine[name]
        eq(t.parent_uuid, UUID_PROCESS | pid, "comm track under its process")
        check(u & ~((1 << 56) - 1) == UUID_NCCL and (u >> 24) & ((1 << 32) - 1) == pid,
              "uuid %x in the NCCL namespace, with the pid" % u)
        # The track carries exactly the thread's collectives on that comm.
        want = [(s.name, s.ts, s.dur) for s in app_slices(r, pid=pid, tid=tid)
                if s.name in COLL and s.args.get("comm") == init.args["comm"]]
        got = [(s.name, s.ts, s.dur) for s in sorted(r.trace.slices_on(track_uuid=u),
                                                     key=lambda s: s.ts)]
        eq(got, want, "rank %d: slices on %s" % (rank, name))
        eq(len(want), r.cfg["iters"] + 8 + (2 if n >= 2 else 0) + (1 if rank < 2 else 0),
           "rank %d: collectives on its comm" % rank)
        # The split child: named with its rank and size once ncclCommCount
        # and ncclCommUserRank told them; one id per color in all processes.
        split = [s for s in app_slices(r, pid=pid, tid=tid) if s.name == "ncclCommSplit"][0]
        ccid, _, _ = label_parts(split.args["new_comm"])
        cn, cr = child_rank(rank, n)
        cname = "NCCL comm %s rank %d/%d" % (ccid, cr, cn)
        check(cname in mine, "child track %r in pid %d: %r" % (cname, pid, sorted(mine)))
        child_ar = [s for s in r.trace.slices_on(track_uuid=mine[cname][0])]
        eq([(s.name, s.args["count"]) for s in child_ar], [("ncclAllReduce", 100)],
           "the child's all-reduce on its track")
        children.setdefault(rank % 2, set()).add(ccid)
    eq(len(world), 1, "every rank's track has the same communicator id")
    eq({c: len(v) for c, v in children.items()}, {0: 1, 1: 1} if n >= 2 else {0: 1},
       "one child id per color, in every process")
    check(not (children.get(0, set()) & children.get(1, set())), "colors have distinct ids")
    return world.pop(), children


def test_threads_comm_tracks():
    r = res("threads")
    wid, _ = check_comm_tracks(r)
    n = r.cfg["ranks"]
    # ncclCommInitAll in the main thread: comms[0 .. n - 1] are read back
    # at its return (one record), rank i of n each, one id for all.
    pid = r.wl["pid"]
    names = sorted(t.name for t in comm_tracks(r).values() if t.pid == pid)
    init_all = [re.match(r"^NCCL comm ([0-9a-f]{4}) rank (\d+)/%d$" % n, nm) for nm in names
                if not nm.startswith("NCCL comm %s " % wid)]
    init_all = sorted(m.groups() for m in init_all if m)
    eq(sorted(rk for _, rk in init_all), sorted(str(i) for i in range(n)),
       "comms[0 .. %d] of ncclCommInitAll by rank: %r" % (n - 1, names))
    eq(len({cid for cid, _ in init_all}), 1, "one id for ncclCommInitAll's: %r" % init_all)
    unknown = [nm for nm in names if re.match(r"^NCCL comm \(0x[0-9a-f]+\) rank \?/\?$", nm)]
    eq(unknown, [], "no communicator of unknown id")
    # The world and the split child of each rank, and ncclCommInitAll's n.
    eq(len(names), n + n + n, "comm tracks in all: %r" % names)


def test_procs_comm_tracks_match_across_processes():
    r = res("procs")
    check_comm_tracks(r)


def test_late_rank_holds_the_others():
    """The last rank enters its first all-reduce late: on the comm tracks
    it begins last, and no rank's all-reduce ends before it began."""
    r = res("procs")
    firsts = {}
    for rank, (pid, tid) in rank_threads(r).items():
        firsts[rank] = [s for s in app_slices(r, pid=pid) if s.name == "ncclAllReduce"][0]
    late = firsts[r.cfg["ranks"] - 1]
    for rank, s in firsts.items():
        check(s.ts <= late.ts, "rank %d entered before the late rank" % rank)
        check(s.end >= late.ts, "rank %d's all-reduce waited for the late rank" % rank)


def test_streams_read_from_the_stack():
    """ncclAllReduce's stream is its 7th argument (the stack), ncclReduce's
    comm and stream its 7th and 8th: they name the rank's own stream."""
    r = res("threads")
    for rank, (pid, tid) in rank_threads(r).items():
        created = [s for s in r.trace.slices_on(tid=tid, name="cuStreamCreate")]
        eq(len(created), 1, "rank %d created one stream" % rank)
        stream = created[0].args["stream"]
        for s in app_slices(r, pid=pid, tid=tid):
            if s.name in COLL:
                eq(s.args["stream"], stream, "rank %d: %s stream" % (rank, s.name))
    for s in app_slices(r, tid=r.wl["pid"]):
        if s.name == "ncclAllReduce" and ok(s):
            eq(s.args["stream"], "default", "ncclCommInitAll group's NULL stream")


# ------------------------------------------------------------ groups


def test_group_slices():
    r = res("threads")
    n = r.cfg["ranks"]
    for rank, (pid, tid) in list(rank_threads(r).items()) + [(None, (r.wl["pid"], r.wl["pid"]))]:
        groups = [s for s in r.trace.slices_on(tid=tid, name="NCCL group")]
        eq(len(groups), 1 if rank is None else 2, "groups of %s" % tid)
        for g in groups:
            eq(g.depth, 0, "a group is a top-level slice")
            eq(g.categories, ["nccl"], "group category")
            inside = [s for s in nccl_slices(r, tid=tid) if g.ts <= s.ts and s.end <= g.end]
            eq(inside[0].name, "ncclGroupStart", "group begins with ncclGroupStart")
            eq(inside[-1].name, "ncclGroupEnd", "group ends with ncclGroupEnd")
            eq((inside[0].ts, inside[-1].end), (g.ts, g.end), "group spans them exactly")
            eq({s.depth for s in inside}, {1}, "calls nest in the group")
            ops = inside[1:-1]
            check(all(s.args.get("group") for s in ops), "grouped calls say so")
            eq(g.args["operations"], len(ops), "operations annotation")
            eq(g.args["bytes"], sum(s.args["bytes"] for s in ops), "bytes annotation")
        if rank is None:
            eq(groups[0].args["operations"], n, "ncclCommInitAll group")


# ------------------------------------------------------------ summary


def summary_rows(r):
    lines = r.stdout.splitlines()
    i = lines.index("** NCCL Summary (nccl_sum):")
    rows = {}
    head = [j for j in range(i, len(lines)) if lines[j].startswith(" Name ")][0]
    for ln in lines[head + 1:]:
        f = ln.split()
        if len(f) != 12:
            break
        rows[f[0]] = dict(zip(["calls", "grouped", "bytes", "timed", "total", "avg", "med",
                               "max", "algbw", "busbw", "time"], f[1:]))
    return rows, lines[i:]


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) // 2


GPU_GROUP = re.compile(r"^NCCL [0-9a-f]{4} rank (-?\d+|\?)/(-?\d+|\?): GPU \(NCCL profiler\)$")


def gpu_spans(r):
    """{ncclName: [(dur, bytes, nranks)]}: channel 0's spans of NCCL's
    profiler plugin (every lane of it), as nccl_sum times them."""
    out = {}
    t = r.trace
    groups = {x.uuid: GPU_GROUP.match(x.name or "") for x in t.tracks.values()}
    for tr in t.tracks.values():
        m = groups.get(tr.parent_uuid)
        if not m or not re.match(r"^channel 0( \(\d\))?$", tr.name or ""):
            continue
        n = int(m.group(2)) if m.group(2) != "?" else 0
        for s in t.slices_on(track_uuid=tr.uuid):
            out.setdefault("nccl" + s.name, []).append((s.dur, s.args.get("bytes", 0), n))
    return out


def check_gpu_row(name, row, spans):
    """A row timed on the GPU, recomputed from channel 0's spans."""
    durs = [d for d, _, _ in spans]
    eq(int(row["timed"]), len(durs), "%s timed on the GPU" % name)
    eq(int(row["total"]), sum(durs), "%s GPU total" % name)
    eq(int(row["max"]), max(durs), "%s GPU max" % name)
    eq(int(row["med"]), median(durs), "%s GPU median" % name)
    size = bus = 0.0
    t = 0
    for d, b, n in spans:
        if not b or n < 1:
            continue
        sz = b * (n if name in PER_RANK else 1)
        size += sz
        bus += sz * bus_factor(name, n)
        t += d
    for col, want in (("algbw", size / t if t else None), ("busbw", bus / t if t else None)):
        if want is None:
            eq(row[col], "-", "%s %s without sized spans" % (name, col))
            continue
        got = float(row[col])
        check(abs(got - want) <= 1e-5 * want + 1e-12,
              "%s GPU %s: summary %s, from the trace %.9g" % (name, col, row[col], want))


def check_summary(r):
    rows, lines = summary_rows(r)
    gpu = gpu_spans(r)
    for name, row in rows.items():
        eq(row["time"], "gpu" if name in gpu else "host",
           "%s timed on the GPU where the plugin's spans came" % name)
    if any(row["time"] == "host" for row in rows.values()):
        check(any("Time host: from a call's entry to its return" in ln for ln in lines),
              "the host time caveat")
    if gpu:
        check(any("Time gpu: on the GPU, from NCCL's profiler plugin" in ln for ln in lines),
              "the GPU time said")
    check(any("CUPTI" in ln for ln in lines), "GPU-side timing announced")
    comm_size = {}
    for t in comm_tracks(r).values():
        m = re.match(r"^NCCL comm (.*)$", t.name)
        cid, _, nn = m.group(1).rpartition("/")
        comm_size[m.group(1)] = int(nn) if nn != "?" else None
    seen = set()
    for name in COLL:
        sl = [s for s in app_slices(r) if s.name == name]
        if not sl:
            continue
        seen.add(name)
        row = rows[name]
        eq(int(row["calls"]), len(sl), "%s calls" % name)
        eq(int(row["grouped"]), sum(1 for s in sl if "group" in s.args), "%s grouped" % name)
        eq(int(row["bytes"]), sum(s.args["bytes"] for s in sl if ok(s)), "%s bytes" % name)
        if name in gpu:
            check_gpu_row(name, row, gpu[name])
            continue
        timed = [s for s in sl if ok(s) and "group" not in s.args]
        eq(int(row["timed"]), len(timed), "%s timed" % name)
        eq(int(row["total"]), sum(s.dur for s in timed), "%s total time from the trace" % name)
        eq(int(row["max"]), max(s.dur for s in timed), "%s max" % name)
        eq(int(row["med"]), median([s.dur for s in timed]), "%s median" % name)
        check(abs(float(row["avg"]) - sum(s.dur for s in timed) / len(timed)) < 0.06,
              "%s avg" % name)
        size = bus = 0.0
        t = 0
        for s in timed:
            n = comm_size[s.args["comm"]]
            check(n, "%s on a comm of known size" % name)
            sz = s.args["bytes"] * (n if name in PER_RANK else 1)
            size += sz
            bus += sz * bus_factor(name, n)
            t += s.dur
        for col, want in (("algbw", size / t), ("busbw", bus / t)):
            got = float(row[col])
            check(abs(got - want) <= 1e-5 * want + 1e-12,
                  "%s %s: summary %s, from the trace %.9g" % (name, col, row[col], want))
    eq(set(rows), seen, "a row per collective called")
    groups = [s for s in r.trace.slices if s.name == "NCCL group"]
    want = ("Groups (outermost ncclGroupStart entry to ncclGroupEnd return): %d groups, "
            "%d operations, %d bytes; time total %d ns" % (
                len(groups), sum(g.args["operations"] for g in groups),
                sum(g.args["bytes"] for g in groups), sum(g.dur for g in groups)))
    check(any(want in ln for ln in lines), "groups line %r in %r" % (want, lines))


def test_threads_summary_recomputed_from_the_trace():
    r = res("threads")
    check_summary(r)
    n = r.cfg["ranks"]
    _, lines = summary_rows(r)
    # The world, two split children and ncclCommInitAll's, all in one
    # process.
    want = "%d communicator(s), %d rank(s) traced" % (1 + 2 + 1, n + n + n)
    check(any(want in ln for ln in lines), "%r in the summary" % want)


def test_procs_summary_recomputed_from_the_trace():
    r = res("procs")
    check_summary(r)
    n = r.cfg["ranks"]
    _, lines = summary_rows(r)
    check(any("3 communicator(s), %d rank(s) traced" % (2 * n) in ln for ln in lines),
          "communicators in the summary")
    ranks = rank_threads(r)
    wid = label_parts([s for s in app_slices(r, pid=ranks[0][0])
                       if s.name == "ncclCommInitRank"][0].args["comm"])[0]
    want = "%s:" % wid + ",".join(" rank %d/%d in %d" % (i, n, ranks[i][0]) for i in range(n))
    check(any(ln.strip() == want for ln in lines), "world line %r in %r" % (want, lines))
