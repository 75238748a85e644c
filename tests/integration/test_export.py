# SPDX-License-Identifier: MIT
"""cgbpf export --format kineto-json: workloads recorded with cgbpf
(GPU activity through the fake CUPTI, CUDA graphs, NVTX, NCCL ranks as
processes and as threads, hostile names), exported, and the JSON checked
with Python's json module, field by field, for what Holistic Trace
Analysis's loader reads (docs/export.md, facts H1-H5 and K1-K4): the
layout of every event, HTA's CPU / GPU split (numeric stream and
correlation), each GPU operation's correlation equal to exactly one
launch call's, the ac2g flow pairs, the metadata before traceEvents,
distributedInfo as HTA's rank regular expression finds it; counts,
names, times and arguments against the trace decoded by
tests/lib/ptrace.py and the workloads' manifests; the JSON loaded in
Perfetto's trace processor when present. Bad inputs exit 2."""
import collections
import json
import os
import re
import subprocess
import sys

import harness
from harness import (CGBPF, Skip, check, clean_trace, env_with, eq, expected_calls, record,
                     tmpdir, wl)
import ptrace

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_CUPTI = os.path.join(harness.OUT, "fake", "libcupti.so.13")
QUEUEING = ("cuLaunch", "cuMemcpy", "cuMemset", "cuGraphLaunch", "cudaLaunch", "cudaMemcpy",
            "cudaMemset", "cudaGraphLaunch", "__cudaLaunch")
HOST_CATS = {"cuda_runtime", "cuda_driver", "cpu_op", "user_annotation"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
SYNC_CAT = "cuda_sync"
# Kineto's names of CUPTI's synchronization types (cupti_strings.cpp
# syncTypeString) by cgbpf's slice names (user/sources/gpu/gpupf.c).
SYNC_KINDS = {"Event synchronize": "Event Sync", "Stream wait event": "Stream Wait Event",
              "Stream synchronize": "Stream Sync", "Context synchronize": "Context Sync",
              "CUDA synchronization": "Unknown Sync"}
# Kineto's row offset of "Stream Sync" events (output_json.h), for every
# synchronization here (docs/export.md).
SYNC_TID_OFFSET = 1000000
NVTX_TID_BASE = 1 << 30
# hta/common/trace_file.py
RANK_RE = re.compile(r'"rank":\s+(\d+)')
NCCL_COLL = {"ncclAllReduce", "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather",
             "ncclReduceScatter", "ncclAlltoAll", "ncclSend", "ncclRecv"}


def export(trace, *args):
    """cgbpf export --format kineto-json ARGS TRACE -> CompletedProcess."""
    return subprocess.run([CGBPF, "export", "--format", "kineto-json"] + list(args) + [trace],
                          capture_output=True, text=True, timeout=300)


def load_json(path):
    """(document, text): the file must be UTF-8 (decoded strictly, as
    HTA's open() of it does) and JSON."""
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")
    return json.loads(text), text


def text_of(s):
    """A name as the trace holds it: protobuf hands invalid UTF-8 over
    as bytes."""
    return s.decode("utf-8", "replace") if isinstance(s, bytes) else s


def to_ns(us):
    return round(us * 1000)


class Doc:
    """One exported file, checked for the layout HTA's loader reads."""

    def __init__(self, path):
        self.path = path
        self.doc, self.text = load_json(path)
        d = self.doc
        check(isinstance(d, dict) and isinstance(d.get("traceEvents"), list),
              "%s: an object with a traceEvents list" % path)
        eq(d.get("schemaVersion"), 1, "schemaVersion (K1)")
        check(isinstance(d.get("baseTimeNanoseconds"), int) and d["baseTimeNanoseconds"] > 0,
              "baseTimeNanoseconds, an integer (K1)")
        check(isinstance(d.get("deviceProperties"), list), "deviceProperties, a list (K1)")
        # H1: HTA's ijson metadata reader stops at traceEvents.
        ti = self.text.index('"traceEvents"')
        for k in d:
            if k not in ("traceEvents", "traceName"):
                check(self.text.index('"%s":' % k) < ti, "%s comes before traceEvents" % k)
        # No raw control character anywhere (escaped in strings; a line
        # feed between events), no raw U+2028.
        check(not re.search(r"[\x00-\x09\x0b-\x1f\u2028\u2029]", self.text),
              "control characters escaped")
        self.x, self.flows, self.meta = [], [], []
        for e in d["traceEvents"]:
            ph = e.get("ph")
            check(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int),
                  "integer pid and tid: %r" % e)
            if ph == "X":
                check({"cat", "name", "pid", "tid", "ts", "dur", "args"} <= set(e),
                      "an X event has cat, name, pid, tid, ts, dur, args: %r" % e)
                check(isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and
                      isinstance(e["dur"], (int, float)) and e["dur"] >= 0,
                      "ts and dur, non-negative microseconds: %r" % e)
                check(e["cat"] in HOST_CATS | GPU_CATS | {SYNC_CAT},
                      "a Kineto category: %r" % e["cat"])
                check(isinstance(e["name"], str) and isinstance(e["args"], dict),
                      "name and args: %r" % e)
                self.x.append(e)
            elif ph in ("s", "f"):
                eq((e.get("cat"), e.get("name")), ("ac2g", "ac2g"), "flow category (K1)")
                check(isinstance(e.get("id"), int) and e["id"] > 0, "flow id: %r" % e)
                eq(e.get("bp"), "e" if ph == "f" else None, "binding point of %s" % ph)
                check("dur" not in e, "flows have no dur (HTA drops them, H1)")
                self.flows.append(e)
            elif ph == "M":
                check(e.get("name") in ("process_name", "process_labels", "process_sort_index",
                                        "thread_name", "thread_sort_index"),
                      "metadata event name: %r" % e)
                check("cat" not in e and "dur" not in e, "metadata has no cat or dur")
                check(isinstance(e.get("args"), dict) and len(e["args"]) == 1,
                      "metadata args: %r" % e)
                self.meta.append(e)
            else:
                check(False, "unexpected event %r" % e)
        # H3: HTA's CPU / GPU split.
        for e in self.x:
            a = e["args"]
            if e["cat"] in GPU_CATS:
                for k in ("device", "context", "stream", "correlation"):
                    check(isinstance(a.get(k), int) and a[k] >= 0, "%s: int %s: %r" % (e["name"], k, a))
                eq((e["pid"], e["tid"]), (a["device"], a["stream"]),
                   "GPU event on pid = device, tid = stream (K2)")
            elif e["cat"] == SYNC_CAT:
                # K3: CudaSyncActivity's args and row.
                eq(list(a)[:5], ["cuda_sync_kind", "stream", "correlation", "device", "context"],
                   "cuda_sync args in Kineto's order: %r" % a)
                eq(a["cuda_sync_kind"], e["name"], "cuda_sync_kind = the name")
                check(e["name"] in SYNC_KINDS.values(), "a Kineto sync name: %r" % e["name"])
                check(isinstance(a["stream"], int) and a["stream"] >= -1,
                      "sync stream, -1 without one: %r" % a)
                eq(a["correlation"], 0, "sync correlation 0 (no call linked; >= 0: GPU work, H3)")
                eq(e["pid"], a["device"], "sync on its GPU's row")
                eq(e["tid"], a["stream"] + SYNC_TID_OFFSET,
                   "sync row: its stream's sync row (-1 + offset without a stream)")
            else:
                check(not isinstance(a.get("stream"), (int, float)),
                      "no numeric stream on a host event: %r" % e)
                check("rank" not in a, "no 'rank' arg (H2's regular expression): %r" % e)
        self.base_boot = d["cgbpf"]["boottime_ns_at_ts_zero"]

    def boot(self, e):
        """An event's BOOTTIME ns, as in the trace."""
        return self.base_boot + to_ns(e["ts"])

    def cat(self, *cats):
        return [e for e in self.x if e["cat"] in cats]

    def meta_of(self, name, pid, tid=None):
        return [e["args"] for e in self.meta if e["name"] == name and e["pid"] == pid and
                (tid is None or e["tid"] == tid)]

    def rank(self):
        """The rank HTA finds (trace_file.py), or None."""
        for line in self.text.splitlines():
            m = RANK_RE.search(line)
            if m:
                return int(m.group(1))
        return None

    def load_in_trace_processor(self):
        """Perfetto's trace processor reads the JSON too: the same X
        events per category and one flow per GPU event with a launch."""
        import tpcheck
        if tpcheck.shell_path() is None:
            print("# skipped trace processor check: %s" % tpcheck.skip_reason())
            return
        rows, flows, bad = tpcheck.query(
            self.path,
            "select category, count(*) as n from slice group by category",
            "select count(*) as n from flow",
            "select name, value from stats where value > 0 and severity in ('error', 'data_loss')")
        got = {r["category"]: int(r["n"]) for r in rows}
        want = collections.Counter(e["cat"] for e in self.x)
        eq(got, dict(want), "trace processor: X events per category")
        eq(int(flows[0]["n"]), sum(1 for e in self.flows if e["ph"] == "f"),
           "trace processor: one flow per ac2g pair")
        eq(bad, [], "trace processor: no error or data-loss stats")


def exported(trace, *args):
    r = export(trace, *args)
    eq(r.returncode, 0, "export exit (stderr %r)" % r.stderr[-800:])
    return r


def need_cupti():
    import test_gpu
    test_gpu.need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    return test_gpu


def gpu_slices(t, pid):
    """{track uuid: (device, stream)} of pid's stream tracks, and the
    slices on them, from the decoder."""
    lanes = {}
    for u, tr in t.tracks.items():
        par = t.tracks.get(tr.parent_uuid)
        if tr.pid != pid or not par or not (par.name or "").startswith("GPU "):
            continue
        m = re.match(r"CUPTI stream (\d+) of context (\d+)", tr.description or "")
        if m:
            lanes[u] = (int(re.match(r"GPU (\d+)", par.name).group(1)), int(m.group(1)),
                        int(m.group(2)))
    return lanes, [s for s in t.slices if s.track_uuid in lanes]


def check_gpu_export(t, d, pid, manifest_calls=None, flow_base=0):
    """The host and GPU events of pid in the exported document d against
    the decoded trace t (flow_base: what cgbpf merge added to t's flow
    ids)."""
    host = [e for e in d.cat("cuda_driver", "cuda_runtime") if e["pid"] == pid]
    api = collections.Counter(s.name for s in t.slices if s.pid == pid and s.tid is not None and
                              s.name.startswith(("cu", "__cuda")) and not s.categories)
    eq(collections.Counter(e["name"] for e in host), api,
       "cuda_driver and cuda_runtime events = the trace's API slices")
    if manifest_calls is not None:
        want = expected_calls(manifest_calls)
        eq({k: v for k, v in collections.Counter(e["name"] for e in host).items() if k in want},
           want, "API events = the calls the workload made (its manifest)")
    for e in host:
        eq(e["cat"], "cuda_runtime" if e["name"].startswith(("cuda", "__cuda")) else
           "cuda_driver", "category of %s" % e["name"])
    by_ts = collections.defaultdict(list)
    for s in t.slices:
        if s.pid == pid and s.tid is not None:
            by_ts[(s.tid, s.ts)].append(s)
    for e in host:
        m = [s for s in by_ts[(e["tid"], d.boot(e))] if s.name == e["name"]]
        eq(len(m), 1, "one trace slice for %s at %r" % (e["name"], e["ts"]))
        eq(to_ns(e["dur"]), m[0].dur, "%s: dur" % e["name"])
        if m[0].flow_out:
            eq(e["args"].get("correlation"), flow_base + m[0].flow_out[0],
               "%s: correlation = the trace's flow id" % e["name"])

    lanes, gs = gpu_slices(t, pid)
    check(gs, "GPU slices in the trace")
    kinds = {"kernel": [s for s in gs if "config" in s.args],
             "gpu_memset": [s for s in gs if "memory" in s.args],
             "gpu_memcpy": [s for s in gs if "kind" in s.args and "memory" not in s.args]}
    for cat, ss in kinds.items():
        ev = [e for e in d.cat(cat)]
        eq(len(ev), len(ss), "%s events = the trace's %s slices" % (cat, cat))
        want = sorted((s.ts, s.dur, lanes[s.track_uuid][:2]) for s in ss)
        got = sorted((d.boot(e), to_ns(e["dur"]), (e["pid"], e["tid"])) for e in ev)
        eq(got, want, "%s: times, device and stream = the trace's" % cat)
    trace_k = {(s.ts, lanes[s.track_uuid][1]): s for s in kinds["kernel"]}
    for e in d.cat("kernel"):
        s = trace_k[(d.boot(e), e["tid"])]
        eq(e["name"], text_of(s.name), "kernel name")
        m = re.match(r"grid \((\d+),(\d+),(\d+)\) block \((\d+),(\d+),(\d+)\) regs (\d+)"
                     r"(?: smem (\d+)\+(\d+))?$", s.args["config"])
        g = [int(v) for v in m.groups(default="0")]
        eq((e["args"]["grid"], e["args"]["block"], e["args"]["registers per thread"],
            e["args"]["shared memory"]), (g[0:3], g[3:6], g[6], g[7] + g[8]),
           "kernel launch configuration (K2's args)")
        eq(e["args"]["context"], lanes[s.track_uuid][2], "kernel context")
    for e in d.cat("gpu_memcpy"):
        check(re.match(r"^Memcpy (HtoD|DtoH|DtoD|HtoH|PtoP|HtoA|AtoH|AtoA|AtoD|DtoA) "
                       r"\((Pageable|Pinned|Device|Array|Managed|Unknown) -> "
                       r"(Pageable|Pinned|Device|Array|Managed|Unknown)\)$", e["name"]),
              "memcpy named as Kineto names it (and HTA's ^Memcpy): %r" % e["name"])
        check(isinstance(e["args"].get("bytes"), int) and e["args"]["bytes"] > 0, "memcpy bytes")
    for e in d.cat("gpu_memset"):
        check(re.match(r"^Memset \((Device|Pinned|Pageable|Managed|Unknown)\)$", e["name"]),
              "memset named as Kineto names it: %r" % e["name"])

    # Correlation: each GPU event's equals exactly one launch call's, the
    # call came first, and the ac2g pair sits on both.
    corr = collections.defaultdict(list)
    for e in host:
        if "correlation" in e["args"]:
            corr[e["args"]["correlation"]].append(e)
            eq(e["args"]["External id"], e["args"]["correlation"], "External id = correlation")
    eq([c for c, v in corr.items() if len(v) > 1], [], "correlation ids unique among calls")
    starts = {f["id"]: f for f in d.flows if f["ph"] == "s"}
    ends = collections.defaultdict(list)
    for f in d.flows:
        if f["ph"] == "f":
            ends[f["id"]].append(f)
    linked = 0
    for e in d.cat(*GPU_CATS):
        c = e["args"]["correlation"]
        if c == 0:
            continue
        linked += 1
        eq(e["args"]["External id"], c, "External id = correlation on the GPU")
        eq(len(corr.get(c, [])), 1, "%s: correlation %d is exactly one call's" % (e["name"], c))
        call = corr[c][0]
        check(call["name"].startswith(QUEUEING), "%s launched by %s" % (e["name"], call["name"]))
        check(d.boot(call) <= d.boot(e), "%s starts after its call" % e["name"])
        s = starts.get(c)
        check(s and (s["pid"], s["tid"], s["ts"]) == (call["pid"], call["tid"], call["ts"]),
              "ac2g start at the call of correlation %d" % c)
        check(any((f["pid"], f["tid"], f["ts"]) == (e["pid"], e["tid"], e["ts"])
                  for f in ends[c]), "ac2g end at the GPU event of correlation %d" % c)
    eq(sum(len(v) for v in ends.values()), linked, "one ac2g end per linked GPU event")
    unlinked = sum(1 for s in gs if not (s.flow_in or s.flow_end or s.flow_out))
    eq(len(d.cat(*GPU_CATS)) - linked, unlinked,
       "GPU events with correlation 0 = the trace's GPU slices without a flow")
    # Metadata: the process, its threads, its GPU and streams.
    eq(d.meta_of("process_labels", 0), [{"labels": "GPU 0"}], "GPU 0's row label")
    eq(d.meta_of("process_labels", pid), [{"labels": "CPU"}], "the process's row label")
    for dev, stream, _ in set(lanes.values()):
        eq(d.meta_of("thread_name", dev, stream), [{"name": "stream %d" % stream}],
           "stream %d's row name" % stream)
    for tid in {e["tid"] for e in host}:
        tn = d.meta_of("thread_name", pid, tid)
        eq(len(tn), 1, "thread %d named once" % tid)
        eq(tn[0]["name"], "thread %d (%s)" % (tid, text_of(t.threads[tid].thread_name)),
           "thread %d's row name (Kineto's 'thread TID (NAME)')" % tid)
    props = d.doc["deviceProperties"]
    eq([(p["id"], p["name"], p.get("numSms"), p.get("computeMajor")) for p in props],
       [(0, "Fake GPU (cgbpf tests)", 132, 9)], "deviceProperties of the GPU the process used")
    # totalGlobalMem (K4): the fake CUPTI's device has 80 GiB, and the
    # trace's description says so in bytes.
    dev = [tr for tr in t.tracks.values() if tr.pid == pid and tr.name == "GPU 0: " + props[0]["name"]]
    m = re.search(r", 80\.0 GiB \((\d+) bytes\)$", dev[0].description if dev else "")
    check(m and int(m.group(1)) == 80 << 30, "the trace's device description has its memory in "
          "bytes: %r" % [tr.description for tr in dev])
    eq(list(props[0])[:3], ["id", "name", "totalGlobalMem"], "Kineto's order of the first keys")
    eq(props[0]["totalGlobalMem"], 80 << 30, "totalGlobalMem, exact bytes (K4)")
    check_syncs(t, d, pid, lanes)


def check_syncs(t, d, pid, lanes):
    """The cuda_sync events of pid = the trace's CUPTI synchronization
    slices; returns their Kineto names."""
    st = {u for u, tr in t.tracks.items()
          if tr.pid == pid and (tr.name or "").startswith("CUDA synchronization")}
    ss = [s for s in t.slices if s.track_uuid in st]
    ev = d.cat(SYNC_CAT)
    ctx_dev = {c: dev for dev, _, c in lanes.values()}
    want = sorted((s.ts, s.dur, SYNC_KINDS[s.name], s.args.get("stream", -1), s.args["context"],
                   ctx_dev.get(s.args["context"], 0), s.args.get("correlation")) for s in ss)
    got = sorted((d.boot(e), to_ns(e["dur"]), e["name"], e["args"]["stream"],
                  e["args"]["context"], e["args"]["device"], e["args"].get("cupti correlation"))
                 for e in ev)
    eq(got, want, "cuda_sync events = the trace's synchronization slices (time, kind, stream, "
       "context, its GPU from its context's streams, CUPTI's correlation)")
    for e in ev:
        s = e["args"]["stream"]
        eq(d.meta_of("thread_name", e["pid"], e["tid"]),
           [{"name": "stream %d (sync)" % s if s >= 0 else "synchronization (no stream)"}],
           "a sync row named once, as Kineto names a stream's")
        eq(d.meta_of("thread_sort_index", e["pid"], e["tid"]), [{"sort_index": s}],
           "a sync row sorted next to its stream")
    return collections.Counter(e["name"] for e in ev)


def test_gpu_workload():
    """train on the fake CUPTI: every API call, kernel, copy and memset of
    the trace in Kineto's layout, linked by correlation and ac2g."""
    tg = need_cupti()
    rc, out, err, trace, tmp = tg.record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"}, iters=60)
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    with open(os.path.join(tmp, "manifest.json")) as f:
        m = json.load(f)
    pid = m["pid"]
    r = exported(trace)
    path = trace[:-len(".perfetto-trace")] + ".json"
    check(os.path.exists(path), "default output next to the trace: %s" % path)
    check("wrote %s: pid %d (train)" % (path, pid) in r.stderr, "export says what it wrote: %r"
          % r.stderr)
    d = Doc(path)
    check("distributedInfo" not in d.doc and d.rank() is None, "no rank without NCCL")
    check_gpu_export(t, d, pid, m["calls"])
    kinds = collections.Counter(e["name"] for e in d.cat(SYNC_CAT))
    check(kinds["Stream Sync"] and kinds["Context Sync"],
          "train's stream and context synchronizations exported: %r" % kinds)
    eq({e["pid"] for e in d.x}, {pid, 0}, "events of the process and of its GPU only")
    d.load_in_trace_processor()


def test_runtime_workload():
    """crt_app through the fake libcudart: runtime calls as cuda_runtime
    with the driver calls they make inside them as cuda_driver; the flow,
    so the correlation, is on the runtime call (the outermost), as
    Kineto's runtime events carry it."""
    tg = need_cupti()
    if not os.path.exists(os.path.join(harness.FAKE, "libcudart.so.13")):
        raise Skip("fake libcudart.so.13 not built (no CUDA toolkit)")
    rc, out, err, trace, tmp = tg.record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"},
        cmd=[wl("crt_app"), "--iters", "5"])
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    pid = [p for p in t.processes if t.processes[p].process_name == "crt_app"][0]
    path = os.path.join(tmp, "crt.json")
    exported(trace, "-o", path)
    d = Doc(path)
    check_gpu_export(t, d, pid)
    rt = d.cat("cuda_runtime")
    check(any(e["name"] == "cudaLaunchKernel" for e in rt), "runtime launches")
    by_corr = {e["args"]["correlation"]: e for e in d.cat("cuda_runtime", "cuda_driver")
               if "correlation" in e["args"]}
    k = [e for e in d.cat("kernel") if e["args"]["correlation"]]
    check(k, "kernels linked to a call")
    for e in k:
        eq(by_corr[e["args"]["correlation"]]["cat"], "cuda_runtime",
           "%s: launched by a runtime call" % e["name"])
    drv = [e for e in d.cat("cuda_driver") if e["name"].startswith("cuLaunchKernel")]
    check(drv and all("correlation" not in e["args"] for e in drv),
          "the driver launches inside carry no correlation of their own")
    d.load_in_trace_processor()


def test_graph_launches():
    """The graph workload: every node a graph launch ran carries that
    launch's correlation, so one cuGraphLaunch has several GPU events."""
    tg = need_cupti()
    rc, out, err, trace, tmp = tg.record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"},
        cmd=[wl("graph"), "--launches", "3"])
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    with open(os.path.join(tmp, "manifest.json")) as f:
        m = json.load(f)
    pid = m["pid"]
    out_path = os.path.join(tmp, "graph.json")
    exported(trace, "-o", out_path)
    d = Doc(out_path)
    check_gpu_export(t, d, pid, m["calls"])
    launches = [e for e in d.cat("cuda_driver") if e["name"].startswith("cuGraphLaunch") and
                "correlation" in e["args"]]
    check(len(launches) >= 6, "graph launches with a correlation (%d)" % len(launches))
    per = collections.Counter(e["args"]["correlation"] for e in d.cat(*GPU_CATS))
    _, gs = gpu_slices(t, pid)
    for e in launches:
        c = e["args"]["correlation"]
        want = sum(1 for s in gs if c in s.flow_in + s.flow_end)
        check(want >= 2, "the trace has several operations for graph launch %d" % c)
        eq(per[c], want, "GPU events of graph launch %d = the operations it ran" % c)


def test_merged_trace():
    """Two GPU captures merged (two machines): the default names say the
    machine and the pid; each file is its input's process, checked against
    its input trace, with the flow ids merge moved for the second machine;
    one time zero for both, on REALTIME; --pid picks one."""
    tg = need_cupti()
    ins, pids = [], []
    for _ in range(2):
        rc, _, err, path, tmp = tg.record_until_status(
            {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"}, iters=20)
        eq(rc, 0, "record (stderr %r)" % "".join(err)[-500:])
        ins.append(path)
        with open(os.path.join(tmp, "manifest.json")) as f:
            pids.append(json.load(f)["pid"])
    d = tmpdir()
    merged = os.path.join(d, "job.perfetto-trace")
    p = subprocess.run([CGBPF, "merge"] + ins + ["-o", merged], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "merge exit (stderr %r)" % p.stderr[-300:])
    exported(merged)
    names = ["job.%d.%d.json" % (m, pids[m]) for m in (0, 1)]
    eq(sorted(f for f in os.listdir(d) if f.endswith(".json")), sorted(names),
       "default names: TRACE.MACHINE.PID.json")
    docs = [Doc(os.path.join(d, n)) for n in names]
    for m in (0, 1):
        t = ptrace.load(ins[m])
        with open(os.path.join(os.path.dirname(ins[m]), "manifest.json")) as f:
            calls = json.load(f)["calls"]
        eq((docs[m].doc["cgbpf"]["machine"], docs[m].doc["cgbpf"]["pid"]), (m, pids[m]),
           "file %d: its machine and pid" % m)
        check_gpu_export(t, docs[m], pids[m], calls, flow_base=m << 48)
        boot, real = None, None
        for snap in t.clock_snapshots:
            if 6 in snap and 1 in snap:
                boot, real = snap[6], snap[1]
                break
        e = docs[m].cat("kernel")[0]
        eq(to_ns(e["ts"]) + docs[m].doc["baseTimeNanoseconds"],
           docs[m].boot(e) - boot + real, "file %d: ts + base = the event's REALTIME" % m)
    eq(docs[0].doc["baseTimeNanoseconds"], docs[1].doc["baseTimeNanoseconds"],
       "one time zero for the files of one export")
    c = [{e["args"]["correlation"] for e in x.cat(*GPU_CATS)} - {0} for x in docs]
    check(c[0] and c[1] and not c[0] & c[1], "correlation ids of the machines disjoint")
    one = os.path.join(d, "one.json")
    exported(merged, "--pid", str(pids[1]), "-o", one)
    eq(Doc(one).doc["cgbpf"]["pid"], pids[1], "--pid picks the process")
    docs[0].load_in_trace_processor()


def nvtx_need():
    import test_nvtx
    test_nvtx.need()
    return test_nvtx


def test_nvtx_ranges():
    """nvtx_ranges: push/pop ranges as user_annotation on their thread,
    start/end ranges on a row of their own per async track, the domain
    as an arg; the same ranges, times and nesting as the trace."""
    tn = nvtx_need()
    env = env_with()
    env.pop("NVTX_INJECTION64_PATH", None)
    r = record(tn.FLAGS, cmd=[tn.WORKLOAD], env=env)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-400:])
    f = tn.facts_of(r.stdout)
    t = r.trace
    clean_trace(t)
    pid = f["pid"]
    out_path = os.path.join(r.tmp, "nvtx-%p.json")
    exported(r.trace_path, "-o", out_path)
    d = Doc(out_path.replace("%p", str(pid)))
    nv = [s for s in t.slices if s.pid == pid and (
        (s.tid is not None and s.categories and s.categories[0] not in ("syscall", "nccl")) or
        (s.tid is None and (t.tracks[s.track_uuid].name or "").startswith("NVTX ranges")))]
    check(len(nv) >= 9, "NVTX ranges in the trace (%d)" % len(nv))
    ua = d.cat("user_annotation")
    eq(sorted((e["name"], d.boot(e), to_ns(e["dur"])) for e in ua),
       sorted((text_of(s.name), s.ts, s.dur) for s in nv),
       "user_annotation events = the trace's NVTX ranges (name, start, duration)")
    by = {e["name"]: e for e in ua}
    for s in nv:
        e = by[text_of(s.name)]
        eq(e["args"]["domain"], s.categories[0] if s.categories else
           e["args"]["domain"], "%s: domain" % s.name)
        if s.tid is not None:
            eq((e["pid"], e["tid"]), (pid, s.tid), "%s on its thread" % s.name)
        else:
            n = int(t.tracks[s.track_uuid].name.split()[-1])
            eq((e["pid"], e["tid"]), (pid, NVTX_TID_BASE + n), "%s on its async row" % s.name)
            eq(d.meta_of("thread_name", pid, e["tid"]), [{"name": "NVTX ranges %d" % n}],
               "the async row's name")
    o, i = by["outer"], by["inner"]
    check(o["tid"] == i["tid"] == f["main_tid"] and o["ts"] <= i["ts"] and
          i["ts"] + i["dur"] <= o["ts"] + o["dur"], "inner nests in outer on the main thread")
    eq(by["attr-push"]["args"].get("color"), "#00ff00", "pushEx color kept")
    eq(by["attr-push"]["args"].get("payload"), 42, "pushEx payload kept")
    eq(by["worker-range"]["tid"], f["worker_tid"], "the worker's range on the worker thread")
    eq(by["dom-range"]["args"]["domain"], "cgbpf-test", "a domain's start/end range")
    eq(d.meta_of("thread_name", pid, f["main_tid"]), [{"name": "thread %d (nvtx-main)" %
                                                     f["main_tid"]}],
       "nvtxNameOsThread's name on the thread's row")
    d.load_in_trace_processor()


def nccl_need():
    import test_nccl
    test_nccl.need_workload()
    return test_nccl


def test_nccl_ranks_as_processes():
    """nccl_ranks --procs: one file per process with %p; each rank's file
    has distributedInfo with its rank (as HTA's regular expression finds
    it) and the world size; NCCL calls as cpu_op with Kineto's collective
    args; the launcher's file has no rank. Without %p the export refuses
    (exit 2) and writes nothing."""
    tn = nccl_need()
    r = tn.res("procs")
    t = r.trace
    clean_trace(t)
    n = r.cfg["ranks"]
    nccl = collections.defaultdict(list)
    for s in t.slices:
        # NCCL calls, and the "NCCL group" slices around groups.
        if s.tid is not None and (s.name.startswith("nccl") and not s.categories or
                                  s.categories == ["nccl"]):
            nccl[s.pid].append(s)
    rank_of = {}
    for pid, ss in nccl.items():
        for s in ss:
            if s.name in ("ncclCommInitRank", "ncclCommInitRankConfig") and "result" not in s.args:
                rank_of[pid] = s.args["rank"]
    eq(sorted(rank_of.values()), list(range(n)), "the trace has one init per rank")
    tmp = tmpdir()
    bad = export(r.trace_path, "-o", os.path.join(tmp, "one.json"))
    eq(bad.returncode, 2, "several processes without %%p: exit 2 (%r)" % bad.stderr)
    check("put %p in -o" in bad.stderr, "says to use %%p: %r" % bad.stderr)
    eq(os.listdir(tmp), [], "nothing written")
    res = exported(r.trace_path, "-o", os.path.join(tmp, "rank_%p.json"))
    files = sorted(os.listdir(tmp))
    eq(files, sorted("rank_%d.json" % p for p in nccl), "one file per process with NCCL calls")
    for pid, ss in nccl.items():
        d = Doc(os.path.join(tmp, "rank_%d.json" % pid))
        cpu = [e for e in d.cat("cpu_op")]
        eq(collections.Counter(e["name"] for e in cpu), collections.Counter(s.name for s in ss),
           "pid %d: cpu_op events = the trace's NCCL slices" % pid)
        for e in cpu:
            check(e["pid"] == pid and e["tid"] in {s.tid for s in ss}, "on the calling thread")
        if pid not in rank_of:
            check("distributedInfo" not in d.doc and d.rank() is None,
                  "pid %d (no communicator): no rank" % pid)
            continue
        rank = rank_of[pid]
        eq(d.doc["distributedInfo"], {"backend": "nccl", "rank": rank, "world_size": n},
           "pid %d: distributedInfo" % pid)
        eq(d.rank(), rank, "pid %d: the rank HTA's trace_file.py finds" % pid)
        check("NCCL rank %d of %d" % (rank, n) in res.stderr, "export names the rank")
        world = "rank %d/%d" % (rank, n)
        ar = [e for e in cpu if e["name"] == "ncclAllReduce" and
              e["args"].get("comm", "").endswith(world)]
        check(len(ar) >= r.cfg["iters"], "all-reduces on the world communicator")
        for e in ar:
            a = e["args"]
            eq((a["Collective name"], a["Group size"], a["Rank"], a["In msg nelems"],
                a["Out msg nelems"], a["dtype"]),
               ("allreduce", n, rank, a["count"], a["count"], a["datatype"]),
               "Kineto's collective args of an all-reduce")
        ag = [e for e in cpu if e["name"] == "ncclAllGather" and
              e["args"].get("comm", "").endswith(world)]
        check(ag, "an all-gather")
        for e in ag:
            eq(e["args"]["Out msg nelems"], e["args"]["count"] * n, "all-gather's out elements")
    d.load_in_trace_processor()


def test_nccl_ranks_as_threads():
    """nccl_ranks with ranks as threads of one process: distributedInfo
    says the world size but no rank (no single one), and HTA's regular
    expression finds none."""
    tn = nccl_need()
    r = tn.res("threads")
    pid = r.wl["pid"]
    tmp = tmpdir()
    res = exported(r.trace_path, "--pid", str(pid), "-o", os.path.join(tmp, "t.json"))
    d = Doc(os.path.join(tmp, "t.json"))
    eq(d.doc["distributedInfo"], {"backend": "nccl", "world_size": r.cfg["ranks"]},
       "distributedInfo without a rank")
    eq(d.rank(), None, "no rank for HTA to find")
    check("no single rank" in d.doc["cgbpf"].get("note", ""), "the file says why")
    check("no single rank" in res.stderr, "and so does export: %r" % res.stderr)


def test_hostile_names():
    """Quotes, backslashes, control characters, U+2028 and bytes that are
    not UTF-8 in a kernel name (driver -> CUPTI -> GPU slice), an NVTX
    range and a thread name: the file is strict UTF-8 JSON and each name
    reads back as the bytes decoded with U+FFFD for what is not UTF-8."""
    tg = need_cupti()
    if not os.path.exists(os.path.join(harness.FAKE, "libnvToolsExt.so.1")):
        raise Skip("fake libnvToolsExt.so.1 not built")
    sys.path.insert(0, HERE)
    rc, out, err, trace, tmp = tg.record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"},
        cmd=["/usr/bin/python3", os.path.join(HERE, "export_names.py")])
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    facts = json.loads([ln for ln in out.splitlines() if ln.startswith('{"pid"')][0])
    import export_names
    name = export_names.NAME.decode("utf-8", "replace")
    thread = export_names.THREAD.decode("utf-8", "replace")
    check("\ufffd" in name and '"' in name and "\x01" in name and "\u2028" in name,
          "the name has every kind of trouble")
    path = os.path.join(tmp, "names.json")
    exported(trace, "-o", path)
    d = Doc(path)
    pid = facts["pid"]
    k = d.cat("kernel")
    eq(len(k), facts["launches"], "the kernels")
    check(all(e["name"] == name for e in k), "kernel name: %r" % k[0]["name"])
    launches = [e for e in d.cat("cuda_driver") if e["name"] == "cuLaunchKernel"]
    eq(len(launches), facts["launches"], "the launches")
    check(all(e["args"]["kernel"] == name for e in launches), "launch's kernel arg")
    ua = d.cat("user_annotation")
    eq([e["name"] for e in ua], [name], "the NVTX range")
    eq(d.meta_of("thread_name", pid, facts["tid"]),
       [{"name": "thread %d (%s)" % (facts["tid"], thread)}], "the thread's name")
    t = ptrace.load(trace)
    tk = [s for s in t.slices if "config" in s.args]
    eq([text_of(s.name) for s in tk], [name] * facts["launches"],
       "the trace holds the same names (so the export is checked against the trace)")
    d.load_in_trace_processor()


def test_bad_inputs():
    """Usage errors and inputs that are not cgbpf traces: a message that
    says what is wrong, exit 2, nothing written."""
    tmp = tmpdir()
    txt = os.path.join(tmp, "notes.txt")
    with open(txt, "w") as f:
        f.write("this is not a trace\n" * 10)
    empty = os.path.join(tmp, "empty.perfetto-trace")
    open(empty, "w").close()
    foreign = os.path.join(tmp, "foreign.perfetto-trace")
    with open(foreign, "wb") as f:
        f.write(b"\x0a\x02\x40\x01")    # one TracePacket {timestamp: 1}, no cgbpf attributes
    some = os.path.join(tmp, "some.json")
    cases = [
        ([CGBPF, "export", "--format", "chrome", txt], "unknown format 'chrome'"),
        ([CGBPF, "export", txt], "needs --format"),
        ([CGBPF, "export", "--format", "kineto-json"], "needs the trace"),
        ([CGBPF, "export", "--format", "kineto-json", txt, empty], "one trace at a time"),
        ([CGBPF, "export", "--format", "kineto-json", txt], "not a readable cgbpf trace"),
        ([CGBPF, "export", "--format", "kineto-json", empty], "no trace packets"),
        ([CGBPF, "export", "--format", "kineto-json", foreign], "no cgbpf attributes"),
        ([CGBPF, "export", "--format", "kineto-json", os.path.join(tmp, "missing")],
         "No such file"),
        ([CGBPF, "export", "--format", "kineto-json", tmp], "not a regular file"),
        ([CGBPF, "export", "--format", "kineto-json", "-"], "standard input"),
        ([CGBPF, "export", "--format", "kineto-json", "-o", os.path.join(tmp, "x%q.json"), txt],
         "only %-codes"),
        ([CGBPF, "export", "--format", "kineto-json", "--pid", "abc", txt], "invalid --pid"),
        ([CGBPF, "export", "--format", "kineto-json", "--pid", "0", txt], "invalid --pid"),
        ([CGBPF, "export", "--format", "kineto-json", "--pid", "1,,2", txt], "invalid --pid"),
        ([CGBPF, "export", "--format", "kineto-json", "--bogus", txt], "Try 'cgbpf export"),
    ]
    for argv, msg in cases:
        if "-o" not in argv:
            argv = argv[:2] + ["-o", some] + argv[2:]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        eq(p.returncode, 2, "%s: exit (stderr %r)" % (" ".join(argv[2:]), p.stderr))
        check(msg in p.stderr, "%s: says %r: %r" % (" ".join(argv[2:]), msg, p.stderr))
    eq(sorted(os.listdir(tmp)), ["empty.perfetto-trace", "foreign.perfetto-trace", "notes.txt"],
       "nothing written")
    h = subprocess.run([CGBPF, "export", "--help"], capture_output=True, text=True)
    eq(h.returncode, 0, "--help exit")
    check("kineto-json" in h.stdout and "%p" in h.stdout, "--help names the format and %p")
    # A real trace, a process it does not have.
    r = record(["--sample-hz", "0", "--sched", "off"], cmd=[wl("demo"), "--steps", "3"])
    eq(r.rc, 0, "record exit (%r)" % r.stderr[-400:])
    out = os.path.join(r.tmp, "d.json")
    p = export(r.trace_path, "--pid", "1", "-o", out)
    eq(p.returncode, 2, "--pid of no exported process: exit (%r)" % p.stderr)
    check("none of the processes given with --pid" in p.stderr, "says so: %r" % p.stderr)
    check(not os.path.exists(out), "nothing written")
    size = os.path.getsize(r.trace_path)
    for o in (r.trace_path, os.path.join(r.tmp, ".", os.path.basename(r.trace_path))):
        pid = next(s.pid for s in r.trace.slices if s.tid is not None and
                   s.name.startswith("cu"))
        p = export(r.trace_path, "--pid", str(pid), "-o", o)
        eq(p.returncode, 2, "output %s = the input: exit (%r)" % (o, p.stderr))
        check("is the input" in p.stderr, "says so: %r" % p.stderr)
        eq(os.path.getsize(r.trace_path), size, "the trace untouched")
    exported(r.trace_path, "-o", os.path.join(r.tmp, "d-%p.json"))
    files = [f for f in os.listdir(r.tmp) if f.startswith("d-")]
    eq(len(files), 2, "demo's two processes, a file each (%r)" % files)
    for f in files:
        Doc(os.path.join(r.tmp, f))
    # A full disk: exit 1, the message, no file left half written.
    biggest = max(os.path.getsize(os.path.join(r.tmp, f)) for f in files)
    mnt = os.path.join(r.tmp, "small")
    os.mkdir(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", mnt]).returncode:
        print("# skipped the full-disk case: cannot mount a tmpfs here")
        return
    try:
        check(biggest > 8192, "an export bigger than the file system (%d bytes)" % biggest)
        p = export(r.trace_path, "-o", os.path.join(mnt, "d-%p.json"))
        eq(p.returncode, 1, "exit on ENOSPC (%r)" % p.stderr)
        check("No space left on device" in p.stderr, "says why: %r" % p.stderr)
        eq(os.listdir(mnt), [], "no file left half written")
    finally:
        subprocess.run(["umount", "-l", mnt])
