#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks what test_gpu wrote: each capture's trace, decoded with
tests/lib/ptrace.py (the independent decoder: stock protobuf against the
project's subset of Perfetto's schema), and its summary text, against
NAME.expect.jsonl (what the test fed: every GPU operation with the call
that queued it, every queueing call, every estimate span).

Usage: /usr/bin/python3 tests/unit/check_gpu.py DIR
Prints "ok N - ..." / "not ok N - ..." lines and "P passed, F failed";
exits 1 on any failure.
"""
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ptrace  # noqa: E402
import tpcheck  # noqa: E402

n_pass = n_fail = 0


def check(cond, what, diag=()):
    global n_pass, n_fail
    if cond:
        n_pass += 1
        print("ok %d - %s" % (n_pass + n_fail, what))
    else:
        n_fail += 1
        print("not ok %d - %s" % (n_pass + n_fail, what))
        for line in list(diag)[:12]:
            print("#   %s" % (line,))
    return cond


def load(d, name):
    items = [json.loads(x) for x in open(os.path.join(d, name + ".expect.jsonl")) if x.strip()]
    summary = open(os.path.join(d, name + ".summary.txt")).read()
    path = os.path.join(d, name + ".perfetto-trace")
    t = ptrace.load(path) if os.path.exists(path) else None
    return items, summary, t


def of(items, *kinds):
    return [x for x in items if x["kind"] in kinds]


# ---------------------------------------------------------------- the summary

def table(summary, key, ncols=9):
    """The rows of the summary table whose heading names key: [fields],
    the last one the name (which has spaces)."""
    m = re.search(r"\(%s\):\n\n(.*?)(?:\n\n|\Z)" % re.escape(key), summary, re.S)
    if not m:
        return None
    lines = m.group(1).split("\n")
    if lines and lines[0].lstrip().startswith("no GPU"):
        return []
    rows = []
    for line in lines[1:]:
        f = line.split(None, ncols - 1)
        if len(f) == ncols:
            rows.append(f)
    return rows


def check_time_table(summary, key, groups, label):
    """groups: name -> [durations]. Every row: total, count, avg, median,
    min, max, share; no other rows."""
    rows = table(summary, key)
    if not check(rows is not None, "%s: %s table present" % (label, key)):
        return
    by = {r[8]: r for r in rows}
    check(set(by) == set(groups), "%s: %s names exactly what was fed" % (label, key),
          ["table: %s" % sorted(by), "fed: %s" % sorted(groups)])
    grand = sum(sum(v) for v in groups.values())
    for name, durs in groups.items():
        r = by.get(name)
        if r is None:
            continue
        want = [sum(durs), len(durs), statistics.mean(durs), int(statistics.median(durs)),
                min(durs), max(durs)]
        got = [int(r[1]), int(r[2]), float(r[3]), int(r[4]), int(r[5]), int(r[6])]
        share = float(r[0])
        sd = statistics.stdev(durs) if len(durs) > 1 else 0.0
        check(got[:2] == want[:2] and abs(got[2] - want[2]) < 0.06 and got[3:] == want[3:] and
              abs(share - 100.0 * want[0] / grand) < 0.051 and abs(float(r[7]) - sd) < 0.06,
              "%s: %s row %r: total %d ns over %d, avg, med, min, max, stddev, share" %
              (label, key, name, want[0], want[1]), ["got %s %.1f%%" % (got, share),
                                                      "want %s" % want])


def check_size_table(summary, groups, label):
    rows = table(summary, "cuda_gpu_mem_size_sum", 8)
    if not check(rows is not None, "%s: cuda_gpu_mem_size_sum present" % label):
        return
    by = {r[7]: r for r in rows}
    check(set(by) == set(groups), "%s: cuda_gpu_mem_size_sum names what was fed" % label,
          [sorted(by), sorted(groups)])
    for name, sizes in groups.items():
        r = by.get(name)
        if r is None:
            continue
        want = ["%.3f" % (sum(sizes) / 1e6), str(len(sizes)), "%.3f" % (min(sizes) / 1e6),
                "%.3f" % (max(sizes) / 1e6)]
        got = [r[0], r[1], r[4], r[5]]
        check(got == want, "%s: mem_size_sum %r: %s MB in %s, min, max (10^6 bytes)" %
              (label, name, want[0], want[1]), ["got %s" % got])


def union(iv):
    """Total length of the union of [s, e) intervals."""
    tot, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def check_tables(items, summary, label):
    ops = of(items, "kernel", "copy", "memset")
    kern = {}
    for k in of(items, "kernel"):
        kern.setdefault(k["name"], []).append(k["dur"])
    check_time_table(summary, "cuda_gpu_kern_sum", kern, label)
    mem = {}
    size = {}
    for x in of(items, "copy", "memset"):
        mem.setdefault(x["op"], []).append(x["dur"])
        size.setdefault(x["op"], []).append(x["bytes"])
    if mem:
        check_time_table(summary, "cuda_gpu_mem_time_sum", mem, label)
        check_size_table(summary, size, label)
    return ops


# ---------------------------------------------------------------- the trace

def ancestors(t, tr):
    out = []
    while tr is not None and tr.parent_uuid is not None:
        tr = t.tracks.get(tr.parent_uuid)
        if tr is not None:
            out.append(tr)
    return out


def gpu_tracks(t, pid):
    """Stream tracks: children of a "GPU N..." track under pid's process."""
    out = {}
    for tr in t.tracks.values():
        par = t.tracks.get(tr.parent_uuid) if tr.parent_uuid is not None else None
        if par is not None and par.name and re.match(r"GPU \d+(:|$)", par.name) and \
                par.pid == pid and tr.name and tr.name.startswith(("stream ", "other streams")):
            out[tr.uuid] = tr
    return out


def stream_track_ok(tr, stream, lane):
    base = re.match(r"stream (\d+)( \(priority -?\d+\))?( \(overlapping\))?$", tr.name or "")
    return bool(base) and int(base.group(1)) == stream and bool(base.group(3)) == (lane > 0) and \
        tr.description == "CUPTI stream %d of context 1, lane %d" % (stream, lane)


def check_ops_on_tracks(t, pid, items, label):
    """Every operation once, on its stream's track (lane), with its times
    and args; nothing else on the stream tracks. Returns op -> slice."""
    tracks = gpu_tracks(t, pid)
    on = [s for s in t.slices if s.track_uuid in tracks]
    ops = of(items, "kernel", "copy", "memset")
    found = {}
    used = set()
    bad = []
    for i, x in enumerate(ops):
        clamp = x.get("clamped", 0)
        name = x["name"] if x["kind"] == "kernel" else x["op"]
        m = [s for s in on if s.ts == x["start"] + clamp and s.dur == x["dur"] - clamp and
             s.name == name and s.args.get("correlation") == (x["corr"] or None)]
        if len(m) != 1:
            bad.append("%s %s at %d: %d slices match" % (x["kind"], name, x["start"], len(m)))
            continue
        s = m[0]
        if not stream_track_ok(tracks[s.track_uuid], x["stream"], x.get("lane", 0)):
            bad.append("%s at %d on %r (%r), want stream %d lane %d" %
                       (name, x["start"], tracks[s.track_uuid].name,
                        tracks[s.track_uuid].description, x["stream"], x.get("lane", 0)))
        found[i] = s
        used.add(id(s))
    check(not bad, "%s: every operation once, on its stream's track and lane, with its start "
          "and duration (%d)" % (label, len(ops)), bad)
    extra = [s for s in on if id(s) not in used]
    check(not extra and len(on) == len(ops), "%s: nothing else on the stream tracks (%d slices)"
          % (label, len(on)), ["%s at %d" % (s.name, s.ts) for s in extra])
    # Args.
    bad = []
    for i, s in found.items():
        x = ops[i]
        a = s.args
        if x["kind"] == "kernel":
            want = {"config": "grid (4,2,1) block (256,1,1) regs 32 smem 1024+4096"}
            if x["corr"]:
                want["correlation"] = x["corr"]
            if x["graph"]:
                want["graph"] = x["graph"]
            if x.get("clamped"):
                want["clamped_by_ns"] = x["clamped"]
        elif x["kind"] == "copy":
            want = {"bytes": x["bytes"], "kind": x["copy_kind"]}
            if x["corr"]:
                want["correlation"] = x["corr"]
            gbps = a.get("GBps")
            if not isinstance(gbps, float) or abs(gbps - x["bytes"] / x["dur"]) > 1e-9 * gbps:
                bad.append("%s at %d: GBps %r, want %r" % (s.name, s.ts, gbps,
                                                           x["bytes"] / x["dur"]))
            for k in ("GBps", "src", "dst", "peer", "async"):
                if k in a:
                    want[k] = a[k]
        else:
            want = {"bytes": x["bytes"], "value": 7, "memory": "device",
                    "correlation": x["corr"]}
        if a != want:
            bad.append("%s at %d: args %r, want %r" % (s.name, s.ts, a, want))
    check(not bad, "%s: kernels carry their configuration (grid, block, registers, shared "
          "memory), correlation, graph; copies bytes, kind, GB/s; memsets bytes, value, memory" % label, bad)
    # Every stream track hangs under its process's GPU track.
    for tr in tracks.values():
        anc = ancestors(t, tr)
        if not (len(anc) == 2 and anc[1].kind == "process" and anc[1].pid == pid):
            check(False, "%s: %r under GPU, under process %d" % (label, tr.name, pid))
            break
    return found


def check_flows(t, pid, items, found, label):
    ops = of(items, "kernel", "copy", "memset")
    calls = of(items, "call")
    flows = t.flows()
    api = {}
    bad = []
    for c in calls:
        m = [s for s in t.slices_on(tid=c["tid"], name=c["name"])
             if s.ts == c["ts"] and s.dur == c["dur"]]
        if len(m) != 1:
            bad.append("call %s at %d: %d slices" % (c["name"], c["ts"], len(m)))
            continue
        api[(c["tid"], c["ts"])] = m[0]
    check(not bad and len(api) == len(calls), "%s: every queueing call is a slice on its "
          "thread's track (%d)" % (label, len(calls)), bad)
    # Every launch: exactly its operations, one flow each.
    bad = []
    for c in calls:
        s = api.get((c["tid"], c["ts"]))
        if s is None:
            continue
        dst = [d for (f, d) in flows if f is s]
        want = [found.get(i) for i, x in enumerate(ops)
                if x["call_ts"] == c["ts"] and x["call_tid"] == c["tid"]]
        if len(dst) != c["ops"] or sorted(map(id, dst)) != sorted(map(id, want)) or \
                len(s.flow_out) != (1 if c["ops"] else 0):
            bad.append("%s at %d: flows to %s, want %d to %s" %
                       (c["name"], c["ts"], [(d.name, d.ts) for d in dst], c["ops"],
                        [(d.name, d.ts) for d in want if d]))
    check(not bad, "%s: every queueing call has one flow to each GPU operation it queued "
          "(a graph launch to each kernel), calls before collection none" % label, bad)
    # Every operation: one flow in, from its call, or none.
    bad = []
    for i, x in enumerate(ops):
        s = found.get(i)
        if s is None:
            continue
        src = [f for (f, d) in flows if d is s]
        want = api.get((x["call_tid"], x["call_ts"])) if x["call_ts"] else None
        if (want is None and src) or (want is not None and (len(src) != 1 or src[0] is not want)):
            bad.append("%s at %d: flows from %s" % (s.name, s.ts, [(f.name, f.ts) for f in src]))
    check(not bad, "%s: every GPU operation has exactly one flow in, from the call that queued "
          "it; the others none" % label, bad)
    late = [(f.name, f.ts, d.name, d.ts) for (f, d) in flows if d.ts < f.ts]
    check(not late and flows, "%s: no GPU slice starts before its launch call (%d flows)" %
          (label, len(flows)), late)
    ids = [i for s in api.values() for i in s.flow_out]
    check(len(ids) == len(set(ids)), "%s: flow ids unique" % label)


def check_measured(d):
    items, summary, t = load(d, "measured")
    meta = of(items, "meta")[0]
    pid = meta["pid"]
    L = "measured"
    check(t.errors == [], "%s: the decoder finds no errors" % L, t.errors)
    dev = t.tracks_named("GPU 0: Fake GPU A100")
    check(len(dev) == 1 and dev[0].parent_uuid == t.processes[pid].uuid and
          dev[0].description.startswith("GPU-10111213-1415-1617-1819-1a1b1c1d1e1f, 108 SMs, "
                                        "compute capability 8.0, 40.0 GiB "
                                        "(42949672960 bytes)"),
          "%s: one track group per GPU under the process, named, with its UUID" % L,
          [dev and (dev[0], dev[0].description)])
    check(len(t.tracks_named("stream 7 (priority -1)")) == 1 and
          len(t.tracks_named("stream 13")) == 1,
          "%s: stream tracks named with their id, and priority when sent" % L)
    found = check_ops_on_tracks(t, pid, items, L)
    check_flows(t, pid, items, found, L)
    sy = of(items, "sync")[0]
    st = t.tracks_named("CUDA synchronization")
    ss = [s for s in t.slices if st and s.track_uuid == st[0].uuid]
    check(len(ss) == 1 and ss[0].ts == sy["start"] and ss[0].dur == sy["dur"] and
          ss[0].name == sy["name"] and ss[0].args == {"stream": 7, "correlation": 21, "context": 1} and
          st[0].parent_uuid == t.processes[pid].uuid,
          "%s: the synchronization on the process's CUDA synchronization track" % L,
          [(s.name, s.ts, s.dur, s.args) for s in ss])
    info = [i for i in t.instants if i.pid == pid]
    check([(i.name, i.args.get("detail")) for i in info] ==
          [("GPU activity: collecting", "/usr/local/cuda/lib64/libcupti.so.13"),
           ("GPU activity: flushed", None)],
          "%s: what the library said, on its GPU activity track" % L,
          [(i.name, i.args) for i in info])
    check([v for _, v in t.counter_values("GPU records lost (injection library)")] ==
          [meta["lost"]], "%s: the records the library lost, as a counter" % L)
    est = [tr for tr in t.tracks.values() if tr.name and "estimate" in tr.name]
    check(not est, "%s: no estimate tracks for a measured process" % L, est)

    check_tables(items, summary, L)
    # Summary equals sums over the trace too.
    tracks = gpu_tracks(t, pid)
    tr_kern = {}
    for s in t.slices:
        if s.track_uuid in tracks and not s.name.startswith("[CUDA "):
            tr_kern.setdefault(s.name, []).append(s.dur)
    rows = {r[8]: (int(r[1]), int(r[2])) for r in table(summary, "cuda_gpu_kern_sum") or []}
    check(rows == {k: (sum(v), len(v)) for k, v in tr_kern.items()},
          "%s: cuda_gpu_kern_sum equals the sums over the trace's kernel slices" % L,
          [rows, {k: (sum(v), len(v)) for k, v in tr_kern.items()}])
    kern = of(items, "kernel")
    ops = of(items, "kernel", "copy", "memset")
    first = min(x["start"] for x in ops)
    last = max(x["start"] + x["dur"] for x in ops)
    busy = union([(x["start"], x["start"] + x["dur"]) for x in ops])
    want = ("pid %d GPU 0 (Fake GPU A100): busy %.1f%% of %.6f s (its first to its last "
            "operation), %d operations" % (pid, 100.0 * busy / (last - first),
                                           (last - first) / 1e9, len(ops)))
    check(want in summary, "%s: utilization line: the union of the device's operations over "
          "its span" % L, [want])
    comm = [(k["start"], k["start"] + k["dur"]) for k in kern if k["name"].startswith("nccl")]
    comp = [(k["start"], k["start"] + k["dur"]) for k in kern if not k["name"].startswith("nccl")]
    ov = union(comm) + union(comp) - union(comm + comp)
    want = ("communication (nccl* kernels) %.6f s, overlapped with computation %.6f s (%.1f%%)"
            % (union(comm) / 1e9, ov / 1e9, 100.0 * ov / union(comm)))
    check(want in summary, "%s: communication overlap" % L, [want])
    short = [k for k in kern if k["dur"] < 10000]
    want = "kernels shorter than 10 us: %d of %d (%.1f%%), %.1f%% of kernel time" % (
        len(short), len(kern), 100.0 * len(short) / len(kern),
        100.0 * sum(k["dur"] for k in short) / sum(k["dur"] for k in kern))
    check(want in summary, "%s: short kernels" % L, [want])
    # One delay per launch call: its first operation's, when a kernel (the
    # later kernels of a graph launch waited for the earlier ones).
    firsts = {}
    for x in sorted(ops, key=lambda x: x["start"]):
        if x.get("call_ts") and x["corr"]:
            firsts.setdefault((x["pid"], x["corr"]), x)
    delays = [k["start"] - k["call_ts"] for k in firsts.values() if k["kind"] == "kernel"]
    check(len(delays) < len([k for k in kern if k["call_ts"]]),
          "%s: the fixture has a graph launch whose later kernels the delay leaves out" % L)
    want = "kernel launch delay (kernel start - launch call start), %d kernels:" % len(delays)
    m = re.search(r"max (\d+) ns, mean ([0-9.]+) ns", summary)
    check(want in summary and m and int(m.group(1)) == max(delays) and
          abs(float(m.group(2)) - statistics.mean(delays)) < 0.06,
          "%s: launch delay over the %d kernels with a known launch" % (L, len(delays)),
          [want, m and m.group(0)])
    want = ("measured (CUPTI /usr/local/cuda/lib64/libcupti.so.13): %d kernels, %d copies, "
            "%d memsets, 1 synchronizations" % (len(kern), len(of(items, "copy")),
                                                len(of(items, "memset"))))
    check(want in summary and "LOST %d GPU activity records" % meta["lost"] in summary and
          "2 GPU operations without their launch call" in summary,
          "%s: the process line says measured, what it counted, what was lost" % L, [want])


def check_validation(d):
    items, summary, t = load(d, "validation")
    meta = of(items, "meta")[0]
    pid = meta["pid"]
    L = "validation"
    check(t.errors == [], "%s: the decoder finds no errors" % L, t.errors)
    check_ops_on_tracks(t, pid, items, L)
    dev = t.tracks_named("GPU 0")
    check(len(dev) == 1 and dev[0].description ==
          "device 0 (not described by the injection library)",
          "%s: a device never described still gets its group" % L)
    sy = of(items, "sync")[0]
    st = t.tracks_named("CUDA synchronization")
    ss = [s for s in t.slices if st and s.track_uuid == st[0].uuid]
    check(len(ss) == 1 and ss[0].name == sy["name"] and ss[0].args == {"context": 1},
          "%s: an unknown synchronization type is named generically" % L,
          [(s.name, s.args) for s in ss])
    check(not t.flows(), "%s: no flows (nothing was launched through the model)" % L)
    check_tables(items, summary, L)
    want = ("GPU batches: %d rejected as malformed, %d bad entries skipped, %d entries of "
            "unknown kinds, 0 kernel names over the bound" %
            (meta["bad_batches"], meta["bad_entries"], meta["unknown_kinds"]))
    check(want in summary, "%s: the summary counts what was rejected" % L, [want])
    check("2 operations overlapped more than 4 others on their stream: drawn clamped" in summary
          and "1 operations came after later ones" in summary,
          "%s: clamped and late operations said in the summary" % L)


def check_estimate(d):
    items, summary, t = load(d, "estimate")
    L = "estimate"
    check(t.errors == [], "%s: the decoder finds no errors" % L, t.errors)
    for pid in of(items, "meta")[0]["pids"]:
        spans = [x for x in of(items, "span") if x["pid"] == pid]
        grp = [tr for tr in t.tracks.values() if tr.name == "GPU (estimate from API calls)" and
               tr.pid == pid]
        check(len(grp) == 1 and grp[0].parent_uuid == t.processes[pid].uuid,
              "%s: pid %d: an estimate group under the process" % (L, pid))
        if not grp:
            continue
        tracks = {tr.uuid: tr for tr in t.tracks.values() if tr.parent_uuid == grp[0].uuid}
        on = [s for s in t.slices if s.track_uuid in tracks]
        bad = []
        for x in spans:
            m = [s for s in on if s.ts == x["start"] and s.dur == x["dur"] and
                 s.name == "GPU work queued (estimate)" and
                 tracks[s.track_uuid].name == x["stream"] + " (estimate)" and
                 s.args == {"launches": x["launches"], "ended_by": x["ended_by"],
                            "end": x["end"]}]
            if len(m) != 1:
                bad.append("span %s at %d +%d: %d match" % (x["stream"], x["start"], x["dur"],
                                                           len(m)))
        check(not bad and len(on) == len(spans),
              "%s: pid %d: every span on its stream's estimate track, with its start, end, "
              "launches and what ended it (%d)" % (L, pid, len(spans)),
              bad + ["%s %d %d %s" % (tracks[s.track_uuid].name, s.ts, s.dur, s.args)
                     for s in on])
        check(not gpu_tracks(t, pid), "%s: pid %d: no measured GPU tracks" % (L, pid))
        want = ("pid %d: estimated from API calls: %d spans of queued GPU work on 3 stream(s), "
                "%.6f s in all, %d launches" % (pid, len(spans), sum(x["dur"] for x in spans) /
                                                1e9, sum(x["launches"] for x in spans)))
        check(want in summary, "%s: pid %d: the summary's estimate line" % (L, pid), [want])
    check(not t.flows(), "%s: no flows without measured activity" % L)
    pe, pn = of(items, "meta")[0]["pids"]
    ie = [i.name for i in t.instants if i.pid == pe]
    inn = [(i.name, i.args.get("detail")) for i in t.instants if i.pid == pn]
    check(ie == ["GPU activity not measured: no injection library"] and
          inn == [("GPU activity not measured: no CUPTI library found",
                   "CGBPF_CUPTI_PATH (unset), libcupti.so.13, /usr/local/cuda/lib64")],
          "%s: the trace says why each process's activity is not measured" % L, [ie, inn])
    check("pid %d (pid %d): no injection library (GPU activity not measured; --inject loads "
          "it into a running process)" % (pe, pe)
          in summary and "pid %d (pid %d): not measured: no CUPTI library found (looked in "
          "CGBPF_CUPTI_PATH (unset), libcupti.so.13, /usr/local/cuda/lib64)" % (pn, pn)
          in summary, "%s: the summary says which processes are only estimated, and why" % L)
    check(table(summary, "cuda_gpu_kern_sum") == [],
          "%s: no kernel rows from estimates" % L)


def check_nccl_plugin(d):
    """NCCL's profiler plugin's entries: a group per communicator under the
    process, a track per channel with each operation's GPU span, a proxy
    track, and the GPU-side table in the summary."""
    items, summary, t = load(d, "nccl_plugin")
    L = "nccl_plugin"
    pid = of(items, "meta")[0]["pid"]
    check(t.errors == [], "%s: the decoder finds no errors" % L, t.errors)
    grp = t.tracks_named("NCCL abcd rank 1/4: GPU (NCCL profiler)")
    check(len(grp) == 1 and grp[0].pid == pid and "abcd123456789ef0" in (grp[0].description or "")
          and "world" in grp[0].description,
          "%s: one group for the communicator under its process, commHash and name said" % L,
          [(x.name, x.pid, x.description) for x in grp])
    if not grp:
        return
    kids = {x.name: x for x in t.tracks.values() if x.parent_uuid == grp[0].uuid}
    check(set(kids) == {"channel 0", "channel 0 (2)", "channel 1", "channel 1 (2)", "channel 2",
                        "channel 2 (2)", "channel 2 (3)", "channel 2 (4)",
                        "proxy channel 1 send"},
          "%s: a track per channel and lane, and one per proxy channel and direction" % L,
          sorted(kids))
    for ch in (0, 1, 2):
        # The writer's rule: the first lane free at the span's start; none
        # of the 4: the last, from where its previous span ended.
        ends = [0, 0, 0, 0]
        exp = []
        for x in [x for x in of(items, "nccl_ch") if x["channel"] == ch]:
            ts, end = x["ts"], x["ts"] + x["dur"]
            lane = next((i for i in range(3) if ends[i] <= ts), 3)
            if ts < ends[lane]:
                ts, end = ends[lane], max(end, ends[lane])
            ends[lane] = end
            exp.append((lane, ts, end - ts, x["seq"]))
        got = []
        for name, tr in kids.items():
            if name == "channel %d" % ch or name.startswith("channel %d (" % ch):
                lane = int(name.split("(")[1].rstrip(")")) - 1 if "(" in name else 0
                got += [(lane, x.ts, x.dur, x.args.get("seq"))
                        for x in t.slices_on(track_uuid=tr.uuid)]
        check(sorted(got) == sorted(exp),
              "%s: channel %d's slices are the GPU spans fed, on lanes where they overlap" %
              (L, ch), sorted(got) + ["want"] + sorted(exp))
    got = [x for x in t.slices_on(track_uuid=kids["channel 0"].uuid)]
    check(got and all(x.name == "AllReduce" for x in got), "%s: named after NCCL's function" % L)
    first = min(got, key=lambda x: x.ts) if got else None
    check(first is not None and first.args.get("algo") == "RING" and
          first.args.get("proto") == "SIMPLE" and first.args.get("bytes") == 1 << 20 and
          first.args.get("seen_late_ns") == 1500,
          "%s: algorithm, protocol, bytes and delay from the task" % L,
          first.args if first else None)
    cl = [x for x in t.slices if "clamped_ns" in x.args]
    check(len(cl) == 1 and cl[0].args["clamped_ns"] == 600000,
          "%s: the clamped span says by how much" % L, [x.args for x in cl])
    px = t.slices_on(track_uuid=kids["proxy channel 1 send"].uuid)
    check(len(px) == 1 and px[0].name == "AllReduce to 2" and px[0].dur == 100000 and
          px[0].args.get("bytes") == 65536 and px[0].args.get("steps") == 4,
          "%s: the proxy operation with its bytes and steps" % L,
          [(x.name, x.dur, x.args) for x in px])
    rows = [ln.split() for ln in summary.splitlines() if ln.strip().startswith(str(pid))]
    # The table times each operation by its span on channel 0 as drawn
    # (every lane of it), as nccl_sum does.
    ch0 = [x for name, tr in kids.items() if name == "channel 0" or name.startswith("channel 0 (")
           for x in t.slices_on(track_uuid=tr.uuid)]
    n, nbytes = len(ch0), sum(x.args.get("bytes", 0) for x in ch0)
    mean = "%.3f" % (sum(x.dur for x in ch0) / 1e3 / n) if n else None
    # (The second batch adds one more span of seq 2 on channel 0: counted.)
    check(n == 4 and nbytes == 4 << 20, "%s: channel 0 has 4 spans" % L,
          [(x.ts, x.dur, x.args) for x in ch0])
    check(any(r[1:6] == ["abcd", "1/4", "AllReduce", str(n), str(nbytes)] and r[7] == mean
              for r in rows), "%s: the GPU-side table times them by channel 0 (mean %s us)" %
          (L, mean), rows)


def check_summary_only(d):
    items, summary, t = load(d, "summary_only")
    check(t is None, "summary_only: no trace")
    check_tables(items, summary, "summary_only")


def check_tp(d):
    """Perfetto's trace processor, when present, reads the same."""
    if tpcheck.shell_path() is None:
        print("# " + tpcheck.skip_reason())
        return
    for name in ("measured", "validation", "estimate", "nccl_plugin"):
        path = os.path.join(d, name + ".perfetto-trace")
        problems, _ = tpcheck.compare(path, sched=False)
        check(not problems, "%s: trace processor reads what ptrace.py reads (slices, args, "
              "counters, flows)" % name, problems)
    path = os.path.join(d, "measured.perfetto-trace")
    items = [json.loads(x) for x in open(os.path.join(d, "measured.expect.jsonl")) if x.strip()]
    want = sum(1 for x in of(items, "kernel", "copy", "memset") if x["call_ts"])
    rows = tpcheck.query(path, "select count(*) as n from flow")[0]
    check(int(rows[0]["n"]) == want, "measured: trace processor's flow table has one row per "
          "linked GPU operation (%s, want %d)" % (rows[0]["n"], want))


def main(d):
    for f in (check_measured, check_validation, check_estimate, check_nccl_plugin,
              check_summary_only, check_tp):
        try:
            f(d)
        except Exception as e:  # a crash is a failure, with what it was
            import traceback
            check(False, "%s ran to its end" % f.__name__, traceback.format_exc().split("\n"))
    print("%d passed, %d failed" % (n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
