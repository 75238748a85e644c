# SPDX-License-Identifier: MIT
"""NVTX in cgbpf record: the nvtx_ranges workload (the toolkit's real
header-only NVTX v3) run under `record -- CMD`, which loads cgbpf's
injection library into it, and started before cgbpf attaches (attach
later); every range, nesting, domain, color, category, payload, mark and
thread name checked in the decoded trace, and the nvtx_sum rows."""
import json
import os
import re
import subprocess

import harness
from harness import Bg, check, clean_trace, env_with, eq, record, tmpdir

LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
WORKLOAD = harness.wl("nvtx_ranges")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
FLAGS = ["--sample-hz", "0", "--syscall-threshold", "off", "--sched", "off"]


def need():
    if not os.path.exists(os.path.join(CUDA_HOME, "include", "nvtx3", "nvToolsExt.h")):
        raise harness.Skip("no CUDA toolkit at %s: nvtx_ranges needs its NVTX v3 headers"
                           % CUDA_HOME)
    for p in (LIB, WORKLOAD):
        if not os.path.exists(p):
            raise harness.Skip("%s not built (make; <sys/sdt.h> from systemtap-sdt-dev)" % p)


def facts_of(stdout):
    lines = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith('{"pid"')]
    eq(len(lines), 1, "the workload's closing JSON line")
    return lines[0]


def check_trace(t, f):
    """Everything nvtx_ranges does after its (optional) first mark."""
    clean_trace(t)
    pid, main, worker = f["pid"], f["main_tid"], f["worker_tid"]
    sl = {s.name: s for s in t.slices if s.pid == pid}
    thread = {n: s for n, s in sl.items() if s.tid is not None}
    # Push/pop ranges: on their thread, nested, with domain and attributes.
    for name, tid in (("outer", main), ("inner", main), ("wide-\u00e9\u4e2d", main),
                      ("attr-push", main), ("registered-msg", main), ("worker-range", worker)):
        check(name in thread and thread[name].tid == tid, "push/pop %r on thread %d" % (name, tid))
        check(thread[name].dur is not None, "%r ended" % name)
    o, i = thread["outer"], thread["inner"]
    check(o.ts < i.ts and i.end < o.end and i.depth == o.depth + 1, "inner nests in outer")
    eq(o.categories, ["NVTX"], "default domain as the category")
    eq(thread["registered-msg"].categories, ["cgbpf-test"], "domain as the category")
    eq(thread["attr-push"].args, {"color": "#00ff00", "category": "io", "payload": 42},
       "pushEx attributes: color, named category, u64 payload")
    eq(thread["registered-msg"].args, {"color": "#ff0000", "category": 3},
       "registered string message, its color and category (named only later)")
    # Start/end ranges: async tracks of the process, the cross-thread one too.
    asyn = {n: s for n, s in sl.items() if s.tid is None}
    eq(sorted(asyn), sorted(["cross", "dom-range", "wide-range", "ex-range"]), "start/end ranges")
    for s in asyn.values():
        tr = t.tracks[s.track_uuid]
        eq(tr.parent_uuid, t.processes[pid].uuid, "%r: an async track of the process" % s.name)
        check(s.dur is not None, "%r ended" % s.name)
    eq(asyn["dom-range"].categories, ["cgbpf-test"], "domain range category")
    eq(asyn["dom-range"].args, {"payload": 9}, "u32 payload")
    eq(asyn["ex-range"].args, {"color": "#0000ff", "category": "io"}, "startEx attributes")
    w = thread["worker-range"]
    check(asyn["cross"].ts < w.ts and asyn["cross"].end > w.ts,
          "cross started on main, ended on the worker during its range")
    # Marks: instants on the thread, typed payloads.
    marks = {i.name: i for i in t.instants if i.pid == pid}
    eq(sorted(marks), sorted(["mark-a", "attr-mark", "wide-mark", "float-mark", "dom-mark"]),
       "marks")
    eq(marks["attr-mark"].args["payload"], "2.5", "double payload")
    eq(marks["wide-mark"].args["payload"], -3, "i32 payload")
    eq(marks["float-mark"].args["payload"], "1.5", "float payload")
    eq(marks["float-mark"].args["color"], "#123456", "mark color")
    eq(marks["dom-mark"].args["payload"], -5, "i64 payload")
    eq(marks["dom-mark"].args["domain"], "cgbpf-test", "mark domain")
    check(o.ts < marks["mark-a"].ts < i.end, "mark inside its ranges")
    # Thread names from nvtxNameOsThread, kept after the threads exit.
    eq(t.threads[main].thread_name, "nvtx-main", "main thread named by NVTX")
    eq(t.threads[worker].thread_name, "nvtx-worker", "worker named by NVTX")


def check_summary(out):
    check("** NVTX Range Summary (nvtx_sum):" in out, "nvtx_sum section")
    rows = {}
    for line in out.split("** NVTX Range Summary")[1].split("\n** ")[0].splitlines():
        m = re.match(r"^\s+[\d.]+\s+(\d+)\s+(\d+)\s+[\d.]+\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+"
                     r"(PushPop|StartEnd)\s+(.+)$", line)
        if m:
            rows[(m.group(3), m.group(4))] = int(m.group(2))
    eq(rows, {("PushPop", "outer"): 1, ("PushPop", "inner"): 1,
              ("PushPop", "wide-\u00e9\u4e2d"): 1, ("PushPop", "attr-push"): 1,
              ("PushPop", "cgbpf-test:registered-msg"): 1, ("PushPop", "worker-range"): 1,
              ("StartEnd", "cross"): 1, ("StartEnd", "cgbpf-test:dom-range"): 1,
              ("StartEnd", "wide-range"): 1, ("StartEnd", "ex-range"): 1},
       "nvtx_sum rows (Style, Range) -> Instances")


def test_record_command_gets_the_injection_library():
    need()
    env = env_with()
    env.pop("NVTX_INJECTION64_PATH", None)
    r = record(FLAGS, cmd=[WORKLOAD], env=env)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-400:])
    check("probing 10 NVTX probes in" in r.stderr, "USDT probes attached: %r" % r.stderr[-400:])
    check_trace(r.trace, facts_of(r.stdout))
    check_summary(r.stdout)


def test_shared_injection_library_is_no_window():
    """The injection library's NVTX sites are probed for every process
    before the command runs: a consumer that reads the mapping only after
    the command exited (CGBPF_TEST_MMAP_LAG_MS) must not call it a window
    (a CI flake until attach__live_since knew sets for every process)."""
    need()
    env = env_with(CGBPF_TEST_MMAP_LAG_MS="400")
    env.pop("NVTX_INJECTION64_PATH", None)
    r = record(FLAGS, cmd=[WORKLOAD], env=env)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-400:])
    check("had exited when" not in r.stderr and "after it was mapped" not in r.stderr,
          "no window said: %r" % r.stderr[-600:])
    check_trace(r.trace, facts_of(r.stdout))


def test_attach_later():
    """Started with NVTX_INJECTION64_PATH before cgbpf runs: cgbpf -p finds
    the loaded injection library and turns its probes on."""
    need()
    d = tmpdir()
    env = env_with(NVTX_INJECTION64_PATH=os.path.abspath(LIB))
    w = subprocess.Popen([WORKLOAD, "--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env)
    try:
        ready = json.loads(w.stdout.readline())
        eq(ready["ready"], w.pid, "the workload is ready")
        bg = Bg(["-p", str(w.pid)] + FLAGS, tmp=d)
        bg.wait_msg("probing 10 NVTX probes in")
        bg.wait_msg("Ctrl-C stops")
        w.stdin.write("go\n")
        w.stdin.flush()
        out = w.stdout.read()
        eq(w.wait(30), 0, "workload exit")
        r = bg.finish()
    finally:
        harness.kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-300:])
    check_trace(r.trace, facts_of(out))
    check(not [i for i in r.trace.instants if i.name == "before-attach"],
          "the mark made before attach is not in the trace")


def test_trace_without_nvtx_leaves_nothing():
    need()
    env = env_with()
    env.pop("NVTX_INJECTION64_PATH", None)
    r = record(FLAGS + ["--trace", "cuda"], cmd=[WORKLOAD], env=env)
    eq(r.rc, 0, "exit")
    clean_trace(r.trace)
    eq([s.name for s in r.trace.slices], [], "no NVTX slice with --trace cuda")
    check("NVTX probes" not in r.stderr, "the injection library not probed")
    check("NVTX Range Summary" not in r.stdout, "no nvtx_sum")


def test_legacy_nvtx_v2_library():
    """A legacy NVTX v2 program linked against libnvToolsExt.so.1 (a fake:
    CUDA 13 no longer ships it): uprobes on its exported functions give the
    same slices, async ranges, marks and names as the injection library."""
    exe = harness.wl("nvtx_v2")
    if not os.path.exists(exe):
        raise harness.Skip("%s not built" % exe)
    r = record(FLAGS, cmd=[exe])
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-300:])
    check(re.search(r"probing \d+ NVTX probes in \S+/libnvToolsExt.so.1", r.stderr),
          "libnvToolsExt probed: %r" % r.stderr[-300:])
    f = facts_of(r.stdout)
    t = r.trace
    clean_trace(t)
    pid, main = f["pid"], f["main_tid"]
    sl = {s.name: s for s in t.slices if s.pid == pid}
    for name in ("v2-outer", "v2-wide-\u00e9", "v2-attr", "v2-dom-push"):
        check(name in sl and sl[name].tid == main and sl[name].dur is not None,
              "push/pop %r on the main thread" % name)
    o, w = sl["v2-outer"], sl["v2-wide-\u00e9"]
    check(o.ts < w.ts and w.end < o.end and w.depth == o.depth + 1, "wide push nests in outer")
    eq(sl["v2-attr"].args, {"color": "#00ff00", "category": 5, "payload": -7}, "pushEx attrs")
    eq(sl["v2-dom-push"].categories, ["v2-dom"], "domain (opaque handle) named at creation")
    for name in ("v2-range", "v2-wide-range", "v2-dom-range"):
        check(name in sl and sl[name].tid is None and sl[name].dur is not None,
              "start/end %r on an async track, ended (id from the return value)" % name)
    eq(sl["v2-wide-range"].args, {"payload": 11}, "startEx with a wide message")
    marks = {i.name: i for i in t.instants if i.pid == pid}
    eq(marks["v2-mark"].args["domain"], "NVTX", "mark")
    eq(marks["v2-dom-mark"].args["domain"], "v2-dom", "domain mark")
    eq(t.threads[main].thread_name, "v2-main", "nvtxNameOsThreadA")
