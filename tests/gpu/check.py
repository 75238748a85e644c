#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks what tests/gpu/run.sh recorded on a GPU host (or what
tests/integration/test_gpu_check.py recorded on the fake driver).

    /usr/bin/python3 tests/gpu/check.py DIR|cgbpf-gpu.tar.gz [--only NAME]

Every NAME.manifest.json in DIR (or in the tarball run.sh packed) is a run,
with NAME.perfetto-trace and NAME.summary beside it. The trace is decoded
by tests/lib/ptrace.py (Debian's python3-protobuf and protoc). Per run:

program "kernels" (tests/gpu/kernels.cu) or "gpu_mix" (its fake-driver twin):
  * the process's GPU activity was measured (the summary says so, or why not);
  * in the checked part (the manifest's CLOCK_BOOTTIME span), every kernel
    launch of the manifest appears once on a stream track of the GPU's track
    group with its name, grid, block and dynamic shared memory; the kernels
    of one stream of the program share one track, those of different streams
    do not; no other kernel, copy or memset ran in that span; none of the
    manifest's kernels ran outside it;
  * slices of one track never overlap, and no operation needed an
    "(overlapping)" lane;
  * in the checked span, every GPU slice ends exactly one flow, from one API
    slice of the process, which began at or before the GPU slice; every API
    slice that starts a flow reaches exactly one GPU slice, a graph launch
    exactly its graph's kernels; graph kernels come from graph launches;
  * copies and memsets: per (kind, bytes, stream) the manifest's counts, and
    the bytes of the call that queued them;
  * the summary's cuda_gpu_kern_sum equals the kernel slices of the trace and
    the manifest's counts; cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum
    equal the trace's copies and memsets.
program "windows" (kernels --windows, one file per profiler window):
  * measured; each window's file holds exactly its k_in launches and its
    k_spin, which was still running when the window ended, with its whole
    duration; each kernel's flow comes from a launch inside the window; no
    k_out (launched outside every window); the summary's Capture windows
    table has one row per window whose GPU ops column equals the file's
    GPU operations, and no LOST line.
program "torch_step" (tests/gpu/torch_step.py):
  * measured; kernels in the checked span (the iterations after the
    pause), a GEMM among them; the same flow rules in that span; the three
    summary tables are there and agree with the trace.

Flows are read from ptrace's Slice.flow_out/flow_in/flow_end when the
decoder has them, else from the raw packets (TrackEvent.flow_ids = 47 or
flow_ids_old = 36, terminating_flow_ids = 48 or terminating_flow_ids_old
= 42, legacy_event.bind_id with FLOW_IN). A kernel's launch configuration
is read from its "config" arg ("grid (x,y,z) block (x,y,z) regs N smem
S+D"), or from the separate args older traces have.

Prints "ok NAME: ..." or "FAIL NAME: ..." with each problem; exit status 0
when every run passed, 1 when one failed, 2 when nothing could be read.
"""
import argparse
import json
import os
import re
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import ptrace  # noqa: E402

QUEUEING = re.compile(r"^_*(cu|cuda)(LaunchKernel|LaunchCooperativeKernel|Memcpy|Memset|"
                      r"GraphLaunch)")
GEMM = re.compile(r"gemm|nvjet|cutlass|xmma", re.I)
COPY_KIND = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device",
             "HtoH": "Host-to-Host", "peer": "Peer-to-Peer"}
MAX_LISTED = 12


class Problems:
    def __init__(self):
        self.items = []
        self.notes = []     # what the driver or CUPTI reported oddly, shown as it was

    def add(self, msg):
        self.items.append(msg)

    def check(self, cond, msg):
        """msg: the problem's text, or a function making it (called only on
        failure, for messages that index what a failure leaves empty)."""
        if not cond:
            self.add(msg() if callable(msg) else msg)
        return cond


# ---------------------------------------------------------------- reading

def runs_in(path, tmp):
    """[(name, folder)] of the runs in a folder or a run.sh tarball."""
    if os.path.isfile(path):
        with tarfile.open(path) as tf:
            for m in tf.getmembers():
                if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in m.name:
                    raise SystemExit("%s: refusing member %r" % (path, m.name))
            tf.extractall(tmp)
        path = tmp
    names = sorted(f[:-len(".manifest.json")] for f in os.listdir(path)
                   if f.endswith(".manifest.json"))
    return [(n, path) for n in names]


def flow_ids(t):
    """{id(slice): [flow ids it starts or ends]}."""
    if "flow_end" in getattr(ptrace.Slice, "__dataclass_fields__", {}):
        return {id(s): list(s.flow_out) + list(s.flow_in) + list(s.flow_end)
                for s in t.slices}
    # An older decoder: the ids from the raw begin events, matched to the
    # slices by (packet sequence, start time).
    by = defaultdict(list)
    for i, p in enumerate(t.packets):
        if not p.HasField("track_event") or p.track_event.type != ptrace.TYPE_SLICE_BEGIN:
            continue
        te = p.track_event
        ids = (list(te.flow_ids) + list(te.flow_ids_old) + list(te.terminating_flow_ids) +
               list(te.terminating_flow_ids_old))
        if te.HasField("legacy_event") and te.legacy_event.flow_direction == 1:
            ids.append(te.legacy_event.bind_id)
        if ids:
            by[(t.packet_seq[i], t.packet_ts[i])] += ids
    return {id(s): by.get((s.seq_id, s.ts), []) for s in t.slices}


class Gpu:
    """The process's measured GPU slices, its API slices and the flows."""

    def __init__(self, t, pid):
        self.t = t
        groups = {u for u, x in t.tracks.items()
                  if x.pid == pid and re.match(r"GPU \d+(:|$)", x.name or "")}
        self.groups = [t.tracks[u].name for u in groups]
        self.streams = {u: x for u, x in t.tracks.items() if x.parent_uuid in groups and
                        re.match(r"(stream \d+|other streams)", x.name or "")}
        self.ops = sorted([s for s in t.slices if s.track_uuid in self.streams],
                          key=lambda s: s.ts)
        self.kernels = [s for s in self.ops if not (s.name or "").startswith("[CUDA ")]
        self.api = [s for s in t.slices if s.pid == pid and s.tid is not None]
        ids = flow_ids(t)
        self.ids = {id(s): ids.get(id(s), []) for s in self.ops + self.api}
        self.api_by_id = defaultdict(list)
        self.ops_by_id = defaultdict(list)
        for s in self.api:
            for i in self.ids[id(s)]:
                self.api_by_id[i].append(s)
        for s in self.ops:
            for i in self.ids[id(s)]:
                self.ops_by_id[i].append(s)

    def stream_of(self, s):
        """The stream's track name without its lane and priority marks."""
        n = self.streams[s.track_uuid].name
        return re.sub(r" \((overlapping|priority -?\d+)\)", "", n)

    def source(self, s):
        """The API slice whose flow ends at GPU slice s, or a reason."""
        ids = self.ids[id(s)]
        if len(ids) != 1:
            return None, "%d flow ids (%r)" % (len(ids), ids[:4])
        src = self.api_by_id.get(ids[0], [])
        if len(src) != 1:
            return None, "flow %#x starts at %d API slices of the process" % (ids[0], len(src))
        return src[0], None


def corr_of(s):
    """A GPU slice's CUPTI correlation id (its `correlation` arg), or None."""
    c = s.args.get("correlation")
    return c if isinstance(c, int) else None


def kernel_matches(want, got):
    """A manifest name against the trace's: exact, or demangled with its
    return type and parameters ("void ns::f<float>(float*, int)")."""
    return bool(got) and re.fullmatch(r"(void )?%s(\(.*\))?" % re.escape(want), got) is not None


def summary_table(text, key):
    """{name: (count, total)} of a summary table (nsys stats' layout); None
    when the table is missing, {} when it says nothing was recorded."""
    at = text.find("(%s)" % key)
    if at < 0:
        return None
    sec = text[at:]
    end = sec.find("\n**")
    sec = sec[:end] if end >= 0 else sec
    rows = {}
    size = key == "cuda_gpu_mem_size_sum"   # Total (MB), Count, ..., Operation
    for line in sec.splitlines()[1:]:
        f = line.split(None, 7 if size else 8)
        if len(f) != (8 if size else 9) or not re.match(r"^[\d.]+$", f[0]):
            continue
        if size:
            rows[f[7]] = (int(f[1]), float(f[0]))
        else:                                # Time (%), Total (ns), Count, ...
            rows[f[8]] = (int(f[2]), int(f[1]))
    return rows


def process_status(summary, pid):
    m = re.search(r"^\s*pid %d \([^)]*\): (.*)$" % pid, summary, re.M)
    return m.group(1) if m else None


# ---------------------------------------------------------------- checks

def stream_overlaps(p, g):
    """A stream runs its work in the order it was queued (correlation ids
    grow with the calls). Work that overlaps earlier work of its stream
    is a problem of cgbpf's (a wrong stream, a wrong time): p.check fails,
    unless CUPTI itself reported the earlier operation as ending after
    work queued later had started: then the trace shows CUPTI's report on
    an "(overlapping)" lane, and p.notes says so. Without any overlap,
    a stream on more than one lane fails."""
    by_stream = defaultdict(list)
    for s in g.ops:
        by_stream[g.stream_of(s)].append(s)
    for name, ss in by_stream.items():
        lanes = {g.streams[s.track_uuid].name for s in ss}
        ss.sort(key=lambda s: s.ts)
        odd, bad = [], []
        for i, a in enumerate(ss):
            for b in ss[i + 1:]:
                if b.ts >= a.end:
                    break
                ca, cb = corr_of(a), corr_of(b)
                if ca is not None and cb is not None and cb > ca:
                    odd.append((a, b))
                else:
                    bad.append((a, b))
        p.check(not bad, lambda: "%s: %d pairs of its slices overlap in time, first %s "
                "[%d, %d] and %s at %d" % (name, len(bad), bad[0][0].name, bad[0][0].ts,
                                           bad[0][0].end, bad[0][1].name, bad[0][1].ts))
        if not bad and odd:
            firsts = {id(a): a for a, _ in odd}
            for a in firsts.values():
                inside = [b for x, b in odd if x is a]
                p.notes.append(
                    "%s: CUPTI reported %s (correlation %s%s) as lasting %d ns, and %d "
                    "operation(s) queued after it on that stream ran inside that time (the "
                    "first %s at +%d ns); the trace shows it as reported, on %s" %
                    (name, a.name, corr_of(a),
                     ", %s bytes, %.2f GB/s" % (a.args["bytes"], a.args["bytes"] / a.dur)
                     if a.args.get("bytes") and a.dur else "", a.dur, len(inside),
                     inside[0].name, inside[0].ts - a.ts, " and ".join(sorted(lanes))))
        elif not bad:
            p.check(len(lanes) == 1, "%s: slices on %s with nothing overlapping" %
                    (name, sorted(lanes)))


def common(p, t, g, m, summary, pid, t0, t1):
    """What every run must show; returns the GPU slices of the checked span."""
    st = process_status(summary, pid)
    if not p.check(st is not None and st.startswith("measured"),
                   "pid %d's GPU activity was not measured; the summary says: %s" %
                   (pid, st or "nothing about the pid (no \"GPU activity per process\" line)")):
        return None
    if not p.check(g.groups, lambda: "no \"GPU N: name\" track group under pid %d (tracks: %r)"
                   % (pid, sorted({str(x.display_name) for x in t.tracks.values()
                                   if x.pid == pid})[:20])):
        return None
    p.check(g.ops, "no GPU slices on stream tracks under %s" % g.groups)
    for u, tr in g.streams.items():
        ss = [s for s in g.ops if s.track_uuid == u]
        over = [(a, b) for a, b in zip(ss, ss[1:]) if b.ts < a.end]
        p.check(not over, "%s: %d overlapping slices, first %s [%d, %d] and %s at %d" %
                (tr.name, len(over), over[0][0].name, over[0][0].ts, over[0][0].end,
                 over[0][1].name, over[0][1].ts) if over else "")
    stream_overlaps(p, g)
    # Flows, from the GPU side, in the span where collection surely ran (a
    # call made while it was starting may have no flow, and says so in the
    # summary).
    span = [s for s in g.ops if t0 <= s.ts <= t1]
    bad = defaultdict(list)
    for s in span:
        src, why = g.source(s)
        if src is None:
            bad["no single launch flow"].append("%s at %d: %s" % (s.name, s.ts, why))
            continue
        if not QUEUEING.match(src.name or ""):
            bad["flow from a call that queues no work"].append("%s <- %s" % (s.name, src.name))
        if src.ts > s.ts:
            bad["starts before its launch call began"].append(
                "%s at %d, %d ns before its %s at %d" % (s.name, s.ts, src.ts - s.ts,
                                                         src.name, src.ts))
        if s.name.startswith("[CUDA memcpy") and "bytes" in src.args:
            if s.args.get("bytes") != src.args["bytes"]:
                bad["copy bytes differ from the call's"].append(
                    "%s %r vs %s %r" % (s.name, s.args.get("bytes"), src.name,
                                        src.args["bytes"]))
    for what, v in bad.items():
        p.add("%d GPU slices: %s: %s%s" % (len(v), what, "; ".join(v[:4]),
                                           " ..." if len(v) > 4 else ""))
    # Flows, from the API side.
    bad = []
    for s in g.api:
        for i in g.ids[id(s)]:
            n = len(g.ops_by_id.get(i, []))
            if "GraphLaunch" in (s.name or ""):
                continue   # checked against the manifest's graph
            if n != 1 and t0 <= s.ts <= t1:
                bad.append("%s at %d: flow %#x reaches %d GPU slices" % (s.name, s.ts, i, n))
    p.check(not bad, "%d API slices with a flow not reaching exactly one GPU slice: %s" %
            (len(bad), "; ".join(bad[:4])))
    return span


def summary_vs_trace(p, g, summary, all_ops):
    """The summary's GPU tables against the trace's GPU slices (all
    processes': the tables are the whole capture's)."""
    kern = summary_table(summary, "cuda_gpu_kern_sum")
    mt = summary_table(summary, "cuda_gpu_mem_time_sum")
    ms = summary_table(summary, "cuda_gpu_mem_size_sum")
    for key, tab in (("cuda_gpu_kern_sum", kern), ("cuda_gpu_mem_time_sum", mt)):
        p.check(tab is not None, "summary: no %s table" % key)
    ks = Counter(s.name for s in all_ops if not s.name.startswith("[CUDA "))
    if kern is not None:
        got = {n: c for n, (c, _) in kern.items()}
        p.check(got == dict(ks), "summary cuda_gpu_kern_sum instances differ from the "
                "trace's kernel slices: %s" % diff(got, ks))
    mem = [s for s in all_ops if s.name.startswith("[CUDA ")]
    mc = Counter(s.name for s in mem)
    if mt is not None:
        got = {n: c for n, (c, _) in mt.items()}
        p.check(got == dict(mc), "summary cuda_gpu_mem_time_sum counts differ from the "
                "trace's copies and memsets: %s" % diff(got, mc))
    if mem:
        if p.check(ms is not None, "summary: no cuda_gpu_mem_size_sum table"):
            size = defaultdict(int)
            for s in mem:
                size[s.name] += int(s.args.get("bytes", 0))
            for n, total in size.items():
                row = ms.get(n)
                p.check(row is not None and abs(row[1] - total / 1e6) < 0.0006,
                        "summary cuda_gpu_mem_size_sum %s: %r MB, the trace's slices carry "
                        "%.3f MB" % (n, row and row[1], total / 1e6))
    return kern


def diff(a, b):
    keys = sorted(set(a) | set(b))
    d = ["%s: %s vs %s" % (k, a.get(k, 0), b.get(k, 0)) for k in keys if a.get(k, 0) != b.get(k, 0)]
    return "; ".join(d[:MAX_LISTED]) + (" ..." if len(d) > MAX_LISTED else "")


def dims(v):
    return "(%d,%d,%d)" % tuple(v)


CONFIG = re.compile(r"^grid (\(\d+,\d+,\d+\)) block (\(\d+,\d+,\d+\)) regs (\d+)"
                    r"(?: smem (\d+)\+(\d+))?$")


def launch_config(s):
    """{grid, block, registers_per_thread, shared_static, shared_dynamic}
    of a kernel slice: parsed from its "config" arg (shared memory 0 when
    the string leaves it out), else its separate args (older traces)."""
    c = s.args.get("config")
    if c is None:
        return s.args
    m = CONFIG.match(c) if isinstance(c, str) else None
    if not m:
        return {}
    return {"grid": m.group(1), "block": m.group(2), "registers_per_thread": int(m.group(3)),
            "shared_static": int(m.group(4) or 0), "shared_dynamic": int(m.group(5) or 0)}


def check_kernels(p, t, m, summary):
    pid, gm = m["pid"], m["gpu"]
    t0, t1 = gm["checked_from_ns"], gm["checked_until_ns"]
    g = Gpu(t, pid)
    ops = common(p, t, g, m, summary, pid, t0, t1)
    if ops is None:
        return "no GPU activity"
    kernels = [s for s in ops if not s.name.startswith("[CUDA ")]
    used = set()
    user_stream = defaultdict(set)   # the program's stream -> track names
    launches = [(l, False) for l in gm["launches"]]
    for gr in gm["graphs"]:
        launches += [(dict(k, count=gr["launches"]), True) for k in gr["kernels"]]
    for l, in_graph in launches:
        mine = [s for s in kernels if kernel_matches(l["name"], s.name)]
        used.update(id(s) for s in mine)
        p.check(len(mine) == l["count"], "%s: %d slices in the checked span, the program "
                "launched it %d times%s" % (l["name"], len(mine), l["count"],
                                            " (by graph launches)" if in_graph else ""))
        for key, want in (("grid", dims(l["grid"])), ("block", dims(l["block"])),
                          ("shared_dynamic", l["shared_dynamic"])):
            wrong = [launch_config(s).get(key) for s in mine
                     if launch_config(s).get(key) != want]
            p.check(not wrong, "%s: %s %r on %d slices, launched with %r" %
                    (l["name"], key, wrong[:1], len(wrong), want))
        if "shared_static_min" in l:
            wrong = [launch_config(s).get("shared_static") for s in mine
                     if not isinstance(launch_config(s).get("shared_static"), int) or
                     launch_config(s)["shared_static"] < l["shared_static_min"]]
            p.check(not wrong, "%s: shared_static %r, the kernel declares %d bytes" %
                    (l["name"], wrong[:1], l["shared_static_min"]))
        names = {g.stream_of(s) for s in mine}
        if not in_graph:
            p.check(len(names) <= 1, "%s: on %d stream tracks %s, launched on one stream (%s)" %
                    (l["name"], len(names), sorted(names), l["stream"]))
            user_stream[l["stream"]] |= names
        for s in mine:
            src, _ = g.source(s)
            if src is None:
                continue
            graph_src = "GraphLaunch" in (src.name or "")
            p.check(graph_src == in_graph, "%s at %d comes from %s%s" %
                    (s.name, s.ts, src.name, ", not a graph launch" if in_graph else ""))
        outside = [s for s in g.kernels if kernel_matches(l["name"], s.name) and
                   not t0 <= s.ts <= t1]
        p.check(not outside, "%s: %d slices outside the checked span [%d, %d] the program "
                "measured (first at %d): the GPU's clock and the host's disagree" %
                (l["name"], len(outside), t0, t1, outside[0].ts if outside else 0))
    extra = Counter(s.name for s in kernels if id(s) not in used and
                    not any(kernel_matches(u, s.name) for u in gm["unchecked_kernels"]))
    p.check(not extra, "kernels the program did not launch in the checked span: %s" %
            dict(extra.most_common(MAX_LISTED)))
    # Graph launches reach exactly their graph's kernels.
    for gr in gm["graphs"]:
        calls = [s for s in g.api if "GraphLaunch" in (s.name or "") and t0 <= s.ts <= t1 and
                 g.ids[id(s)]]
        p.check(len(calls) == gr["launches"], "%d graph launch API slices with a flow, the "
                "program launched the graph %d times" % (len(calls), gr["launches"]))
        want = sorted(k["name"] for k in gr["kernels"])
        for c in calls:
            got = [s for i in g.ids[id(c)] for s in g.ops_by_id.get(i, [])]
            names = sorted(next((k for k in want if kernel_matches(k, s.name)), s.name)
                           for s in got)
            p.check(names == want, "%s at %d links to %r, its graph holds %r" %
                    (c.name, c.ts, names, want))
    # Copies and memsets.
    for key, prefix in (("copies", "[CUDA memcpy"), ("memsets", "[CUDA memset")):
        have = Counter()
        for s in ops:
            if s.name.startswith(prefix):
                kind = s.args.get("kind", "memset") if key == "copies" else "memset"
                have[(kind, s.args.get("bytes"), g.stream_of(s))] += 1
                if key == "copies":
                    p.check(s.name == "[CUDA memcpy %s]" % COPY_KIND.get(kind, "?"),
                            "%s has kind %r" % (s.name, kind))
        want = Counter()
        for o in gm[key]:
            want[(o["kind"], o["bytes"], o["stream"])] += o["count"]
        # The program's stream names map to track names through its kernels.
        mapped = Counter()
        for (kind, nbytes, stream), n in want.items():
            tracks = user_stream.get(stream, set())
            mapped[(kind, nbytes, next(iter(tracks)) if len(tracks) == 1 else stream)] += n
        p.check(have == mapped, "%s (kind, bytes, stream track): trace %s, program %s" %
                (key, dict(have), dict(mapped)))
    # One track per program stream, distinct tracks for distinct streams.
    for u, v in sorted(user_stream.items()):
        p.check(len(v) <= 1, "the program's stream %s: its kernels are on %d stream tracks %s"
                % (u, len(v), sorted(v)))
    flat = [(u, next(iter(v))) for u, v in user_stream.items() if len(v) == 1]
    tracks = Counter(n for _, n in flat)
    p.check(all(c == 1 for c in tracks.values()),
            "the program's streams share stream tracks: %r" % dict(flat))
    syncs = [s for s in t.slices if s.pid == pid and
             (t.tracks[s.track_uuid].name or "").startswith("CUDA synchronization")]
    if gm["syncs"]["stream"] + gm["syncs"]["device"]:
        p.check(syncs, "no slices on the \"CUDA synchronization\" track; the program "
                "synchronized %r" % gm["syncs"])
    kern = summary_vs_trace(p, g, summary, g.ops)
    if kern is not None:
        for l, in_graph in launches:
            n = sum(c for name, (c, _) in kern.items() if kernel_matches(l["name"], name))
            want = l["count"]
            if any(kernel_matches(l["name"], u) for u in gm["unchecked_kernels"]):
                continue
            p.check(n == want, "summary cuda_gpu_kern_sum: %s x%d, the program launched it "
                    "%d times" % (l["name"], n, want))
    delays = sorted(s.ts - src.ts for s in kernels for src in [g.source(s)[0]] if src)
    return "%d kernels, %d copies/memsets on %d stream tracks%s" % (
        len(kernels), len(ops) - len(kernels), len({g.stream_of(s) for s in ops}),
        ", launch to start p50 %d ns, max %d ns" % (delays[len(delays) // 2], delays[-1])
        if delays else "")


def check_torch(p, t, m, summary):
    pid = m["pid"]
    t0, t1 = m["checked_from_ns"], m["checked_until_ns"]
    g = Gpu(t, pid)
    ops = common(p, t, g, m, summary, pid, t0, t1)
    if ops is None:
        return "no GPU activity"
    kernels = [s for s in ops if not s.name.startswith("[CUDA ")]
    p.check(kernels, "no kernels in the checked span of %d iterations" % m["iters"])
    p.check(any(GEMM.search(s.name) for s in kernels),
            "no GEMM-like kernel (gemm, nvjet, cutlass, xmma) among %r" %
            sorted({s.name for s in kernels})[:MAX_LISTED])
    flows = sum(1 for s in ops if g.source(s)[0] is not None)
    p.check(flows, "no GPU slice of the checked span has a flow from its launch")
    summary_vs_trace(p, g, summary, g.ops)
    p.check(summary_table(summary, "cuda_gpu_mem_size_sum") is not None or
            "no GPU memory operations were recorded" in summary,
            "summary: no cuda_gpu_mem_size_sum table")
    return "%d kernels (%d names), %d of %d GPU operations with a flow, in %d iterations" % (
        len(kernels), len({s.name for s in kernels}), flows, len(ops), m["iters"])


WINDOW_ROW = re.compile(r"^\s+(\d+)\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+\d+\s+(\d+)\s+(\S+)\s*$", re.M)


def check_windows(p, t, m, summary, base):
    """kernels --windows: one file per profiler window (BASE-N.perfetto-trace)."""
    pid = m["pid"]
    k_in, k_spin = m["names"]["in"], m["names"]["spin"]
    st = process_status(summary, pid)
    p.check(st is not None and st.startswith("measured"),
            "pid %d's GPU activity was not measured; the summary says: %s" % (pid, st))
    rows = {int(n): int(ops) for n, ops, _ in WINDOW_ROW.findall(summary)}
    p.check(len(rows) == len(m["windows"]), "the summary's Capture windows table has %d rows "
            "for %d windows" % (len(rows), len(m["windows"])))
    p.check("LOST" not in summary, lambda: "the summary says GPU operations were lost: %s" %
            [x.strip() for x in summary.splitlines() if "LOST" in x])
    bad = re.search(r"GPU batches: .*", summary)
    if bad:
        p.notes.append(bad.group(0))
    got = []
    for i, w in enumerate(m["windows"], 1):
        path = "%s-%d.perfetto-trace" % (base, i)
        try:
            t = ptrace.load(path)
        except (OSError, ptrace.TraceFormatError) as e:
            p.add("window %d: cannot read %s: %s" % (i, path, e))
            continue
        p.check(not t.errors, "window %d: the decoder found %d errors: %s" %
                (i, len(t.errors), "; ".join(t.errors[:3])))
        g = Gpu(t, pid)
        names = Counter(s.name for s in g.kernels)
        want = Counter({k_in: w["in"], k_spin: w["spin"]})
        p.check(+names == +want, "window %d: kernels %s, want %s" % (i, dict(names), dict(+want)))
        spins = [s for s in g.kernels if s.name == k_spin]
        for s in spins:
            p.check(s.end - s.ts >= 0.9 * m["spin_ns"], "window %d: k_spin lasted %d ns, it "
                    "spins %d ns" % (i, s.end - s.ts, m["spin_ns"]))
        for s in g.kernels:
            src, why = g.source(s)
            if not p.check(src is not None, "window %d: %s at %d: %s" % (i, s.name, s.ts, why)):
                continue
            p.check(w["from_ns"] <= src.ts <= w["until_ns"], "window %d: %s launched by %s at "
                    "%d, outside the window [%d, %d]" % (i, s.name, src.name, src.ts,
                                                         w["from_ns"], w["until_ns"]))
        syncs = [s for s in t.slices if s.pid == pid and s.track_uuid in t.tracks and
                 (t.tracks[s.track_uuid].name or "").startswith("CUDA synchronization")]
        p.check(rows.get(i) == len(g.ops) + len(syncs), "window %d: the summary's GPU ops "
                "column says %r, the file has %d GPU operations and %d synchronizations" %
                (i, rows.get(i), len(g.ops), len(syncs)))
        got.append("%d %s, %s" % (names[k_in], k_in, "%s %.1f ms" % (
            k_spin, (spins[0].end - spins[0].ts) / 1e6) if spins else "no " + k_spin))
    return "%d windows: %s" % (len(m["windows"]), "; ".join(got))


CHECKS = {"kernels": check_kernels, "gpu_mix": check_kernels, "torch_step": check_torch,
          "windows": check_windows}


def check_run(name, folder):
    """(ok, one line)."""
    p = Problems()
    base = os.path.join(folder, name)
    try:
        with open(base + ".manifest.json") as f:
            m = json.load(f)
        with open(base + ".summary", errors="replace") as f:
            summary = f.read()
        # A windows run has one file per window, which its check reads.
        t = ptrace.load(base + ".perfetto-trace") if m.get("program") != "windows" else None
    except (OSError, ValueError, ptrace.TraceFormatError) as e:
        return False, "FAIL %s: cannot read the run: %s" % (name, e)
    fn = CHECKS.get(m.get("program"))
    if fn is None:
        return False, "FAIL %s: unknown program %r in the manifest" % (name, m.get("program"))
    if t is not None:
        p.check(not t.errors, "the decoder found %d errors in the trace: %s" %
                (len(t.errors), "; ".join(t.errors[:3])))
        what = fn(p, t, m, summary)
    else:
        what = fn(p, t, m, summary, base)
    notes = "".join("\n  note: " + x for x in p.notes)
    if p.items:
        return False, "FAIL %s (%s, pid %d): %s\n%s%s" % (
            name, m["program"], m["pid"], what,
            "\n".join("  - " + x for x in p.items), notes)
    return True, "ok %s (%s, pid %d, %s): %s%s" % (name, m["program"], m["pid"],
                                                   m.get("device", "?"), what, notes)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="run.sh's output folder or its cgbpf-gpu.tar.gz")
    ap.add_argument("--only", action="append", help="check only this run (repeatable)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cgbpf-gpu-check-") as tmp:
        try:
            runs = runs_in(a.path, tmp)
        except (OSError, tarfile.TarError) as e:
            print("check.py: cannot read %s: %s" % (a.path, e), file=sys.stderr)
            return 2
        if a.only:
            runs = [r for r in runs if r[0] in a.only]
        if not runs:
            print("check.py: no NAME.manifest.json in %s (run tests/gpu/run.sh first)" % a.path,
                  file=sys.stderr)
            return 2
        failed = 0
        for name, folder in runs:
            ok, line = check_run(name, folder)
            print(line)
            failed += not ok
        print("%d passed, %d failed" % (len(runs) - failed, failed))
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
