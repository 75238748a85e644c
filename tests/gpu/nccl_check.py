# SPDX-License-Identifier: MIT
"""Checks what tests/gpu/nccl.sh wrote in OUT (a folder, or the
nccl.tar.gz it packs), with tests/lib/ptrace.py: needs Debian's
python3-protobuf (/usr/bin/python3). Prints "ok ..."/"FAIL ..." lines
and "N failed"; exits 1 when any failed.

    /usr/bin/python3 tests/gpu/nccl_check.py OUT [ITERS]"""
import bisect
import os
import re
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ptrace  # noqa: E402

out, iters = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
if os.path.isfile(out):
    d = tempfile.mkdtemp(prefix="cgbpf-nccl-check.")
    with tarfile.open(out) as tf:
        tf.extractall(d)
    out = d
fails = 0
MIB = 1 << 20


def ok(cond, what):
    global fails
    print(("ok " if cond else "FAIL ") + what)
    fails += 0 if cond else 1


def read(n):
    try:
        return open(os.path.join(out, n), errors="replace").read()
    except OSError:
        return ""


def load(name):
    path = os.path.join(out, name + ".perfetto-trace")
    if not os.path.exists(path):
        ok(False, "%s: a trace (stderr %r)" % (name, read(name + ".err")[-600:]))
        return None
    return ptrace.load(path)


def section(text, head):
    if head not in text:
        return ""
    return text.split(head, 1)[1].split("\n**", 1)[0]


def comm_tracks(t):
    return {u: tr.name for u, tr in t.tracks.items() if u >> 56 == 5}


def plugin_side(name, t, summary, least):
    """The plugin's spans of a self send/receive loop: Send and Recv on
    the channel tracks of one group, inside NCCL's kernels."""
    grp = [tr for tr in t.tracks.values() if (tr.name or "").endswith(": GPU (NCCL profiler)")]
    ok(len(grp) == 1 and " rank 0/1:" in grp[0].name, "%s: one plugin group, rank 0/1: %r" %
       (name, [g.name for g in grp]))
    if not grp:
        return
    chans = [tr.uuid for tr in t.tracks.values() if tr.parent_uuid == grp[0].uuid and
             (tr.name or "").startswith("channel ")]
    spans = [s for s in t.slices if s.track_uuid in chans]
    kinds = {}
    for s in spans:
        kinds.setdefault(s.name, set()).add(s.args.get("seq"))
    ok(set(kinds) == {"Send", "Recv"} and all(len(v) >= least for v in kinds.values()),
       "%s: Send and Recv spans of >= %d operations each (%s, over %d channel track(s))" %
       (name, least, {k: len(v) for k, v in kinds.items()}, len(chans)))
    bare = [s for s in spans if s.args.get("bytes") != MIB or not s.args.get("channels") or
            s.args.get("peer") != 0]
    ok(spans and not bare, "%s: every span carries 1 MiB, its channels, peer 0 (%d without; "
       "e.g. %r)" % (name, len(bare), (bare or spans or [None])[0] and
                     (bare or spans)[0].args))
    kern = sorted((s for s in t.slices if (s.name or "").startswith("ncclDevKernel")),
                  key=lambda s: s.ts)
    starts = [k.ts for k in kern]
    inside = 0
    for s in spans:
        i = bisect.bisect_right(starts, s.ts + 50000) - 1
        if i >= 0 and kern[i].ts - 50000 <= s.ts and \
           s.ts + s.dur <= kern[i].ts + kern[i].dur + 50000:
            inside += 1
    ok(spans and inside >= 0.95 * len(spans),
       "%s: channel spans inside an NCCL kernel's CUPTI span (%d of %d; %d kernels: %s)" %
       (name, inside, len(spans), len(kern), sorted({k.name for k in kern})[:3]))
    late = sorted(s.args.get("seen_late_ns", 0) for s in spans)
    if late:
        print("# %s: seen_late_ns median %d, max %d; span durations median %d ns" %
              (name, late[len(late) // 2], late[-1], sorted(s.dur for s in spans)[len(spans) // 2]))
    gpu = section(summary, "** NCCL operations, GPU side")
    rows = [ln.split() for ln in gpu.splitlines() if len(ln.split()) > 5]
    got = {f: sum(int(r[4]) for r in rows if r[3] == f) for f in ("Send", "Recv")}
    ok(all(v >= least for v in got.values()),
       "%s: the GPU-side table counts >= %d sends and receives: %r" % (name, least, got))
    print("# %s: nccl_sum:%s" % (name, "\n#   ".join(
        [""] + [ln for ln in section(summary, "** NCCL Summary (nccl_sum):").splitlines()
                if ln.startswith(" ncclSend ") or ln.startswith(" ncclRecv ")])))


# 1. record -- a 1-rank all-reduce loop: the host side.
t = load("allreduce")
if t:
    summary, err = read("allreduce.summary"), read("allreduce.err")
    line = [ln for ln in summary.splitlines() if ln.startswith('{"pid"')]
    ok(len(line) == 1, "allreduce: the loop's JSON line %s" % line)
    names = comm_tracks(t)
    ok(any(re.match(r"NCCL comm [0-9a-f]{4} rank 0/1$", n) for n in names.values()),
       "allreduce: the communicator rank 0/1: %r" % sorted(set(names.values())))
    ar = sorted((s for s in t.slices if s.track_uuid in names and s.name == "ncclAllReduce"),
                key=lambda s: s.ts)
    ok(len(ar) == iters, "allreduce: %d all-reduces on the comm track (%d)" % (iters, len(ar)))
    ok([s.args.get("seq") for s in ar] == list(range(1, len(ar) + 1)),
       "allreduce: seq 1..N in order")
    ok(all(s.args.get("bytes") == MIB for s in ar), "allreduce: 1 MiB each")
    ok("** NCCL Summary (nccl_sum):" in summary and "nccl_stragglers" not in summary,
       "allreduce: nccl_sum printed, no stragglers section for one rank")
    ok("NCCL hang?" not in err, "allreduce: no hang said")
    # NCCL runs a 1-rank collective as a copy (ncclLaunchOneRank): no
    # task for the plugin, so nccl_sum times it on the host.
    row = [ln.split() for ln in section(summary, "** NCCL Summary (nccl_sum):").splitlines()
           if ln.startswith(" ncclAllReduce ")]
    ok(row and row[0][-1] == "host", "allreduce: nccl_sum's row timed on the host: %r" % row)

# 2. record -- the self send/receive loop.
t = load("self")
if t:
    summary, err = read("self.summary"), read("self.err")
    ok('{"pid"' in summary, "self: the loop's JSON line")
    names = comm_tracks(t)
    sr = [s for s in t.slices if s.track_uuid in names and s.name in ("ncclSend", "ncclRecv")]
    ok(len(sr) == 2 * iters, "self: %d sends and receives on the comm track (%d)" %
       (2 * iters, len(sr)))
    ok("NCCL hang?" not in err, "self: no hang said")
    plugin_side("self", t, summary, iters)

# 3. record -p on the self loop started with NCCL_PROFILER_PLUGIN.
app = read("self_p.app.out")
ok('"pid"' in app, "self_p: the job ran to its end %r" % app[-300:])
t = load("self_p")
if t:
    summary, err = read("self_p.summary"), read("self_p.err")
    inits = [s for s in t.slices if (s.name or "").startswith("ncclCommInitRank")]
    ok(not inits, "self_p: no communicator made during the capture")
    ok("NCCL hang?" not in err, "self_p: no hang said")
    # Attached within the first half of 2N pauses of 20 ms: >= N/2 after.
    plugin_side("self_p", t, summary, iters // 2)
print("%d failed" % fails)
sys.exit(1 if fails else 0)
