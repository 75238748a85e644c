# SPDX-License-Identifier: MIT
"""GPU activity through cgbpf's injection library (inject/gpu.c): what the
user is told when CUPTI cannot measure (NVIDIA's real libcupti on this
GPU-less host, no CUPTI at all), that the application is never harmed,
that the library loads nothing while no cgbpf watches, and the estimate
tracks a process without measured activity gets."""
import json
import os
import re
import subprocess
import threading

import harness
from harness import (CGBPF, Skip, api_counts, check, clean_trace, env_with, eq, expected_calls,
                     kill_quiet, pid_reuse_driver, start, tmpdir, touch, wait_for, wl)
import ptrace

LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
REAL_CUPTI = "/usr/local/cuda/lib64/libcupti.so.13"


def need_gpu_part():
    if not os.path.exists(LIB):
        raise Skip("%s not built (needs <sys/sdt.h>)" % LIB)
    r = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True)
    if " InitializeInjection\n" not in r.stdout:
        raise Skip("%s has no GPU part (no CUPTI headers at build time)" % LIB)


def record_until_status(env_extra, iters=50, cmd=None):
    """record -v -- train (or cmd), paused after its setup until the
    library's first GPU_STATUS reached cgbpf (-v prints it), so a slow CUPTI
    load cannot race the program's end. Returns (rc, stdout, stderr lines,
    trace, tmp)."""
    tmp = tmpdir()
    pause = os.path.join(tmp, "pause")
    trace = os.path.join(tmp, "out.perfetto-trace")
    env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"), CGBPF_PAUSE_FILE=pause,
                   **env_extra)
    argv = [CGBPF, "record", "-v", "--sample-hz", "0", "-o", trace, "--"] + (
        cmd or [wl("train"), "--iters", str(iters)])
    out_path = os.path.join(tmp, "stdout")
    with open(out_path, "w") as out_f:
        p = subprocess.Popen(argv, stdout=out_f, stderr=subprocess.PIPE, text=True, env=env)
    lines = []

    def read_err():
        for line in p.stderr:
            if "libbpf:" in line:
                continue
            lines.append(line)
            if "GPU activity: status" in line:
                touch(pause)

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    try:
        p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    t.join(10)
    with open(out_path, errors="replace") as f:
        return p.returncode, f.read(), lines, trace, tmp


def status_events(t, pid):
    """Slices and instants on the process's "GPU activity (CUPTI)" track."""
    tr = [u for u, x in t.tracks.items() if x.name == "GPU activity (CUPTI)" and x.pid == pid]
    return ([s for s in t.slices if s.track_uuid in tr] +
            [i for i in t.instants if i.track_uuid in tr])


def check_app_unharmed(tmp, t, pid):
    with open(os.path.join(tmp, "manifest.json")) as f:
        m = json.load(f)
    eq(m["pid"], pid, "manifest of the traced program")
    eq(api_counts(t, pid), expected_calls(m["calls"]), "every call made and traced")


def test_real_cupti_fails_cleanly_without_a_gpu():
    """NVIDIA's libcupti.so.13 on the fake driver: CUPTI fails, the program
    runs to its end, the summary and the trace say why."""
    need_gpu_part()
    if not os.path.exists(REAL_CUPTI):
        raise Skip("%s not installed" % REAL_CUPTI)
    rc, out, err, trace, tmp = record_until_status({"CGBPF_CUPTI_PATH": REAL_CUPTI})
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    check_app_unharmed(tmp, t, pid)
    check("pid %d (train): not measured: a CUPTI call failed" % pid in out,
          "summary says CUPTI failed:\n%s" % out[out.find("GPU activity per"):][:600])
    check("libcupti.so.13" in out, "summary names the CUPTI library it loaded")
    ev = status_events(t, pid)
    check(any("CUPTI call failed" in (e.name or "") for e in ev),
          "trace: the process's GPU activity track says CUPTI failed (%r)" %
          [(e.name, e.args) for e in ev])
    check(any((tr.name or "").endswith("(estimate)") for tr in t.tracks.values()
              if tr.pid == pid), "estimate tracks instead")


def test_no_cupti_found():
    """CGBPF_CUPTI_PATH naming nothing: the library says where it looked."""
    need_gpu_part()
    rc, out, err, trace, tmp = record_until_status({"CGBPF_CUPTI_PATH": "/nonexistent/libcupti.so"})
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    check_app_unharmed(tmp, t, pid)
    check("no CUPTI library found" in out and "CGBPF_CUPTI_PATH=/nonexistent/libcupti.so" in out,
          "summary says which CUPTI was asked for:\n%s" % out[out.find("GPU activity per"):][:600])


def test_library_idle_loads_nothing():
    """With the library loaded and no cgbpf, CUPTI is not even loaded and
    the probe sites are untouched nops; cgbpf attaching later (-p) makes
    the library start, and its status reaches the trace."""
    need_gpu_part()
    tmp = tmpdir()
    pause = os.path.join(tmp, "pause")
    env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"), CGBPF_PAUSE_FILE=pause,
                   CUDA_INJECTION64_PATH=LIB, CGBPF_CUPTI_PATH="/nonexistent/libcupti.so")
    p = start([wl("train"), "--iters", "20"], env=env)
    try:
        wait_for(lambda: os.path.exists(pause + ".ready"), 30, "the workload's setup")
        with open("/proc/%d/maps" % p.pid) as f:
            maps = f.read()
        check("libcgbpf-inject.so" in maps, "the driver loaded the injection library")
        check("libcupti" not in maps, "no CUPTI loaded while nobody traces")
        tasks = os.listdir("/proc/%d/task" % p.pid)
        names = []
        for tid in tasks:
            with open("/proc/%d/task/%s/comm" % (p.pid, tid)) as f:
                names.append(f.read().strip())
        check("cgbpf-inject" in names, "the watcher thread runs (%r)" % names)
        trace = os.path.join(tmp, "out.perfetto-trace")
        out_path = os.path.join(tmp, "stdout")
        # stderr has one reader, this thread: the line it waits for must
        # not go to another.
        with open(out_path, "w") as out_f:
            rec = subprocess.Popen([CGBPF, "record", "-v", "--sample-hz", "0", "-o", trace,
                                    "-p", str(p.pid)], stdout=out_f, stderr=subprocess.PIPE,
                                   text=True)
        lines = []

        def read_err():
            for line in rec.stderr:
                lines.append(line)
                if "GPU activity: status" in line:
                    touch(pause)
        th = threading.Thread(target=read_err, daemon=True)
        th.start()
        rec.wait(120)
        th.join(10)
        with open(out_path, errors="replace") as f:
            out = f.read()
        eq(rec.returncode, 0, "cgbpf exit (%r)" % "".join(lines)[-500:])
        rc = p.wait(30)
        eq(rc, 0, "the workload's exit (its stderr: %r; cgbpf's: %r)" %
           (p.stderr.read()[-400:], "".join(lines)[-600:]))
        check("no CUPTI library found" in out, "the library's status reached the summary")
    finally:
        kill_quiet(p)


def test_estimate_without_the_library():
    """A process started without the library (no CUDA_INJECTION64_PATH):
    estimate tracks under a group of their own, each span from a call that
    queued work to a synchronization, never overlapping on one stream."""
    r = harness.record(["--sample-hz", "0"], cmd=[wl("train"), "--iters", "100"],
                       env=env_with(CUDA_INJECTION64_PATH="/nonexistent/libother.so",
                                    CGBPF_MANIFEST=os.path.join(tmpdir(), "m.json")))
    eq(r.rc, 0, "cgbpf exit (%r)" % r.stderr[-500:])
    check("another tool's" in r.stderr, "cgbpf says it keeps another tool's injection path")
    t = r.trace
    clean_trace(t)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    groups = [u for u, x in t.tracks.items()
              if x.name == "GPU (estimate from API calls)" and x.pid == pid]
    eq(len(groups), 1, "one estimate group under the process")
    est = {u: x for u, x in t.tracks.items() if x.parent_uuid == groups[0]}
    check(est and all(x.name.endswith("(estimate)") for x in est.values()),
          "estimate tracks named so (%r)" % [x.name for x in est.values()])
    api = sorted([s for s in t.slices if s.pid == pid and s.tid is not None],
                 key=lambda s: s.ts)
    begins = {s.ts: s for s in api}
    queueing = ("cuLaunch", "cuMemcpy", "cuMemset", "cuGraphLaunch")
    for u in est:
        spans = sorted([s for s in t.slices if s.track_uuid == u], key=lambda s: s.ts)
        check(spans, "spans on %s" % est[u].name)
        for a, b in zip(spans, spans[1:]):
            check(a.end <= b.ts, "%s: spans do not overlap" % est[u].name)
        for s in spans:
            c = begins.get(s.ts)
            check(c is not None and c.name.startswith(queueing),
                  "%s: a span starts at a call that queued work (%r at %d)" %
                  (est[u].name, c and c.name, s.ts))
            by = s.args.get("ended_by")
            ends = [x for x in api if x.name == by and x.ts <= s.end <= x.end]
            check(ends, "%s: the span ends inside the %s that waited for it" %
                  (est[u].name, by))
    check("estimated from API calls" in r.stdout, "the summary names the estimate")


FAKE_CUPTI = os.path.join(harness.OUT, "fake", "libcupti.so.13")
QUEUEING = ("cuLaunch", "cuMemcpy", "cuMemset", "cuGraphLaunch")


def kern_sum(out):
    """{kernel name: instances} from the summary's cuda_gpu_kern_sum."""
    sec = out[out.index("(cuda_gpu_kern_sum)"):]
    sec = sec[:sec.index("\n**")]
    rows = {}
    for line in sec.splitlines()[3:]:
        f = line.split(None, 8)
        if len(f) == 9:
            rows[f[8]] = int(f[2])
    return rows


CONFIG = re.compile(r"^grid \(\d+,\d+,\d+\) block \(\d+,\d+,\d+\) regs \d+( smem \d+\+\d+)?$")


def tp_gpu_slices(trace):
    """Trace processor's view of the GPU slices under "GPU N: ..." track
    groups: (name, ts, dur, stream track, config, correlation, flows in,
    the calls the flows come from)."""
    import tpcheck
    rows = tpcheck.query(
        trace,
        "select s.id, s.name, s.ts, s.dur, t.name as track, "
        "extract_arg(s.arg_set_id, 'debug.config') as config, "
        "extract_arg(s.arg_set_id, 'debug.correlation') as corr, "
        "(select count(*) from flow f where f.slice_in = s.id) as nin, "
        "(select group_concat(so.name, '|') from flow f join slice so on so.id = f.slice_out "
        " join thread_track tt on tt.id = so.track_id where f.slice_in = s.id) as srcs "
        "from slice s join track t on t.id = s.track_id join track g on g.id = t.parent_id "
        "where g.name glob 'GPU [0-9]*:*' and t.name glob 'stream *'")[0]
    return rows


def test_measured_with_fake_cupti():
    """The fake CUPTI, fed by the fake driver: every kernel, copy and
    memset the process queued once cgbpf attached appears once on its
    stream's track, linked by exactly one flow to the call that queued it,
    never starting before that call; copies carry their bytes; the
    summary's kernel table counts what the trace holds; trace processor
    reads the same flows."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    rc, out, err, trace, tmp = record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"}, iters=100)
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    check_app_unharmed(tmp, t, pid)
    groups = [u for u, x in t.tracks.items() if (x.name or "").startswith("GPU 0: Fake GPU")
              and x.pid == pid]
    eq(len(groups), 1, "one track group for the GPU under the process")
    streams = {u for u, x in t.tracks.items()
               if x.parent_uuid == groups[0] and (x.name or "").startswith("stream ")}
    check(len(streams) >= 2, "a track per stream (%r)" % [t.tracks[u].name for u in streams])
    gpu = [s for s in t.slices if s.track_uuid in streams]
    check(any(s.name == "relu_kernel" for s in gpu), "kernels named")
    for u in streams:
        ss = sorted([s for s in gpu if s.track_uuid == u], key=lambda s: s.ts)
        for a, b in zip(ss, ss[1:]):
            check(a.end <= b.ts, "%s: %s and %s overlap" % (t.tracks[u].name, a.name, b.name))
    flows = t.flows()
    into = {}
    outof = {}
    for a, b in flows:
        into.setdefault(id(b), []).append(a)
        outof.setdefault(id(a), []).append(b)
    for s in gpu:
        src = into.get(id(s), [])
        eq(len(src), 1, "one flow into %s at %d" % (s.name, s.ts))
        c = src[0]
        check(c.pid == pid and c.tid is not None and c.name.startswith(QUEUEING),
              "%s comes from a call that queued it (%s)" % (s.name, c.name))
        check(c.ts <= s.ts, "%s starts at %d, not before its %s at %d" %
              (s.name, s.ts, c.name, c.ts))
        if s.name.startswith("[CUDA memcpy"):
            eq(s.args.get("bytes"), c.args.get("bytes"), "copy bytes on the GPU and the call")
    first = min(into[id(s)][0].ts for s in gpu)
    calls = [s for s in t.slices if s.pid == pid and s.tid is not None and s.ts >= first and
             s.name.startswith(("cuLaunchKernel", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
                                "cuMemsetD32Async"))]
    check(calls, "queueing calls after collection began")
    for c in calls:
        eq(len(outof.get(id(c), [])), 1, "one flow out of %s at %d" % (c.name, c.ts))
    kernels = {}
    for s in gpu:
        if not s.name.startswith("[CUDA"):
            kernels[s.name] = kernels.get(s.name, 0) + 1
    eq(kern_sum(out), kernels, "cuda_gpu_kern_sum instances = kernel slices in the trace")
    check("measured (CUPTI %s)" % FAKE_CUPTI in out, "summary: measured, by which CUPTI")
    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    problems, _ = tpcheck.compare(trace, t, ())
    check(not problems, "trace processor and the decoder disagree:\n    %s" %
          "\n    ".join(problems))
    # What the UI shows: the same GPU slices on the same stream tracks,
    # each kernel with its launch configuration and correlation id in its
    # args, each GPU slice with exactly one flow, from its launch call.
    rows = tp_gpu_slices(trace)
    eq(sorted((r["name"], int(r["ts"]), int(r["dur"]), r["track"]) for r in rows),
       sorted((s.name, s.ts, s.dur, t.tracks[s.track_uuid].name) for s in gpu),
       "trace processor's GPU slices (name, ts, dur, stream track) = the decoder's")
    bad = [r for r in rows if not r["name"].startswith("[CUDA") and
           not (r["config"] and CONFIG.match(r["config"]) and r["corr"] and int(r["corr"]) > 0)]
    check(not bad, "trace processor: every kernel's args hold its configuration and "
          "correlation: %r" % bad[:3])
    bad = [r for r in rows if r["nin"] != "1" or not (r["srcs"] or "").startswith(QUEUEING)]
    check(not bad, "trace processor: one flow into each GPU slice, from a call that "
          "queued it: %r" % bad[:3])


def fake_gpu_slices(t, pid):
    """The slices on the stream tracks of pid's "GPU 0: Fake GPU" group."""
    groups = {u for u, x in t.tracks.items()
              if (x.name or "").startswith("GPU 0: Fake GPU") and x.pid == pid}
    streams = {u for u, x in t.tracks.items()
               if x.parent_uuid in groups and (x.name or "").startswith("stream ")}
    return [s for s in t.slices if s.track_uuid in streams]


def flows_into(t):
    """id(slice) -> the slices whose flows end at it."""
    into = {}
    for a, b in t.flows():
        into.setdefault(id(b), []).append(a)
    return into


def test_short_program_measured_from_its_first_kernel():
    """record -- CMD with no pause point: a program that lives a few ms
    after cuInit. cgbpf probes the library's site for CMD's pid before its
    exec, so the library starts collecting inside InitializeInjection:
    every kernel the program launched is on the GPU timeline, each with its
    flow (a poll later, a short program used to be over before anything
    was collected, and the summary said there was no injection library)."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    tmp = tmpdir()
    trace = os.path.join(tmp, "out.perfetto-trace")
    man = os.path.join(tmp, "manifest.json")
    env = env_with(CGBPF_MANIFEST=man, CGBPF_CUPTI_PATH=FAKE_CUPTI)
    r = subprocess.run([CGBPF, "record", "--sample-hz", "0", "-o", trace, "--",
                        wl("train"), "--iters", "5"], env=env, capture_output=True, text=True,
                       timeout=120)
    eq(r.returncode, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    with open(man) as f:
        m = json.load(f)
    t = ptrace.load(trace)
    clean_trace(t)
    pid = m["pid"]
    check("pid %d (train): measured (CUPTI %s)" % (pid, FAKE_CUPTI) in r.stdout,
          "summary: measured:\n%s" % r.stdout[r.stdout.find("GPU activity per"):][:600])
    check("library at start: CUDA_INJECTION64_PATH named it" in r.stdout,
          "summary: how the data came:\n%s" % r.stdout[r.stdout.find("GPU activity per"):][:600])
    kernels = [s for s in fake_gpu_slices(t, pid) if not s.name.startswith("[CUDA")]
    eq(len(kernels), sum(m["kernels"].values()), "every kernel launched is on the timeline")
    into = flows_into(t)
    bad = [k.name for k in kernels if len(into.get(id(k), [])) != 1]
    eq(bad, [], "kernels without exactly one flow from their launch")


def test_flow_through_a_runtime_call_no_uprobe_sees():
    """cuBLASLt links its own CUDA runtime, with hidden symbols: its
    cudaLaunchKernelExC has no uprobe, and the outermost call cgbpf sees is
    the driver's cuLaunchKernelEx inside it. CUPTI's API record is the
    runtime call's, wider than that slice (on an H200, 200 of a torch
    step's 640 kernels had no flow). The fake CUPTI widens every API record
    by 300 ns on each side (CGBPF_FAKE_CUPTI_API_WIDEN), less than the gap
    between two calls of the workload, as a runtime wrapper's few hundred
    ns: every kernel still gets exactly one flow, from the call inside the
    record. Wider, a record holding two calls links neither (unit test)."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    rc, out, err, trace, tmp = record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "CGBPF_FAKE_CUPTI_API_WIDEN": "300",
         "FAKECUDA_KERNEL_NS": "20000"}, iters=30)
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    gpu = fake_gpu_slices(t, pid)
    check(len(gpu) > 50, "GPU slices measured (%d)" % len(gpu))
    into = flows_into(t)
    bad = [(s.name, s.ts) for s in gpu if len(into.get(id(s), [])) != 1]
    eq(bad[:5], [], "GPU slices without exactly one flow (of %d)" % len(gpu))


def test_flows_need_system_thread_ids():
    """CUPTI names the thread of an API record by pthread_self() unless
    told to use the kernel's thread id (cuptiSetThreadIdType; the fake
    CUPTI does the same, as NVIDIA's does on a real GPU). The library asks
    for system ids; a CUPTI that refuses gets no API records enabled: GPU
    slices, no flows, and the summary and the trace say why."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    rc, out, err, trace, tmp = record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "CGBPF_FAKE_CUPTI_NO_TID_TYPE": "1"}, iters=30)
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    check_app_unharmed(tmp, t, pid)
    why = "CUPTI cannot name threads by their system id: flows unavailable"
    check(why in out, "the summary says why there are no flows:\n%s" %
          out[out.find("GPU activity per"):][:600])
    check(any(why in str(e.args) for e in status_events(t, pid)),
          "the trace's GPU activity track says why")
    gpu = fake_gpu_slices(t, pid)
    check(any(s.name == "relu_kernel" for s in gpu), "kernels measured")
    eq(t.flows(), [], "no flows")


def test_cupti_held_by_another_tool():
    """Another tool subscribed first: its profiling is left alone, cgbpf
    keeps the API trace, and says who holds CUPTI."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    rc, out, err, trace, tmp = record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "CGBPF_FAKE_CUPTI_HOLDER": "CUPTI for Kineto (test)"})
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    pid = next(iter(p for p in t.processes if t.processes[p].process_name == "train"))
    check_app_unharmed(tmp, t, pid)
    check("another tool holds CUPTI" in out and "CUPTI for Kineto (test)" in out,
          "summary names the tool holding CUPTI:\n%s" % out[out.find("GPU activity per"):][:600])
    check(not [s for s in t.slices if (t.tracks[s.track_uuid].name or "").startswith("stream ")
               and not (t.tracks[s.track_uuid].name or "").endswith("(estimate)")],
          "no measured GPU slices")


def test_attach_detach_attach_while_running():
    """A long-running process started with the library: cgbpf attaches
    (-p), collects, detaches (--duration); the process runs on; a second
    cgbpf attaches and collects again."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    # 0.2 ms kernels: a loop bound by its synchronizations, not a flood.
    env = env_with(CUDA_INJECTION64_PATH=LIB, CGBPF_CUPTI_PATH=FAKE_CUPTI,
                   FAKECUDA_KERNEL_NS="200000")
    w = start([wl("train"), "--iters", "100000000"], env=env)
    try:
        kernels = []
        for rnd in range(2):
            tmp = tmpdir()
            trace = os.path.join(tmp, "out.perfetto-trace")
            r = subprocess.run([CGBPF, "record", "-p", str(w.pid), "-d", "2s", "--sample-hz",
                                "0", "-o", trace], capture_output=True, text=True, timeout=120)
            eq(r.returncode, 0, "round %d: cgbpf exit (%r)" % (rnd, r.stderr[-500:]))
            check(w.poll() is None, "round %d: the process runs on after cgbpf left" % rnd)
            t = ptrace.load(trace)
            clean_trace(t)
            streams = {u for u, x in t.tracks.items()
                       if (x.name or "").startswith("stream ") and x.pid == w.pid and
                       not x.name.endswith("(estimate)")}
            n = len([s for s in t.slices if s.track_uuid in streams])
            check(n > 0, "round %d: GPU slices measured (summary: %s)" %
                  (rnd, r.stdout[r.stdout.find("GPU activity per"):][:400]))
            check("measured (CUPTI %s)" % FAKE_CUPTI in r.stdout,
                  "round %d: the summary says measured" % rnd)
            kernels.append(n)
    finally:
        kill_quiet(w)


def test_graph_launches_link_to_each_kernel():
    """tests/workloads/graph.c: a graph built node by node (three kernels
    and a memset) and one built by stream capture (two kernels and a
    memset), each launched three times. Every node of every launch appears
    once on its graph's stream track with the graph's id; each graph launch
    API slice starts one flow that ends at each operation that launch ran
    (no other), none of which starts before the call; the calls captured
    into a graph ran nothing, so their flows end nowhere; the summary
    counts graph kernels like any kernel; trace processor's flow table has
    one row from each launch slice to each of its operations."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    rc, out, err, trace, tmp = record_until_status(
        {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"},
        cmd=[wl("graph"), "--launches", "3"])
    eq(rc, 0, "cgbpf exit (stderr %r)" % "".join(err)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    with open(os.path.join(tmp, "manifest.json")) as f:
        m = json.load(f)
    gm = m["graph"]
    pid = m["pid"]
    check_app_unharmed(tmp, t, pid)
    check("measured (CUPTI %s)" % FAKE_CUPTI in out, "summary: measured")
    groups = [u for u, x in t.tracks.items() if (x.name or "").startswith("GPU 0: ")
              and x.pid == pid]
    eq(len(groups), 1, "one track group for the GPU under the process")
    streams = {u for u, x in t.tracks.items()
               if x.parent_uuid == groups[0] and (x.name or "").startswith("stream ")}
    gpu = sorted([s for s in t.slices if s.track_uuid in streams], key=lambda s: s.ts)
    t0, t1 = gm["checked_from_ns"], gm["checked_until_ns"]
    api = [s for s in t.slices if s.pid == pid and s.tid is not None]
    ends = {}
    # An operation ends its launch's flow with bind_id (graph nodes: one
    # flow, several ends) or closes it (a plain kernel launch).
    for s in gpu:
        for i in s.flow_in + s.flow_end:
            ends.setdefault(i, []).append(s)

    # Each graph launch: one flow, ending at exactly the operations it ran.
    launches = sorted([s for s in api if s.name.startswith("cuGraphLaunch") and
                       t0 <= s.ts <= t1], key=lambda s: s.ts)
    eq(len(launches), sum(g["launches"] for g in gm["graphs"]),
       "graph launch API slices in the checked part")
    by_graph = {}
    corrs = set()
    for c in launches:
        eq(len(c.flow_out), 1, "%s at %d starts one flow" % (c.name, c.ts))
        ops = sorted(ends.get(c.flow_out[0], []), key=lambda s: s.ts)
        check(ops, "%s at %d: its flow ends at GPU operations" % (c.name, c.ts))
        ids = {s.args.get("graph") for s in ops}
        eq(len(ids), 1, "%s at %d: its operations carry one graph id (%r)" % (c.name, c.ts, ids))
        check(None not in ids and 0 not in ids, "%s at %d: graph id set" % (c.name, c.ts))
        eq(len({s.track_uuid for s in ops}), 1, "%s at %d: its operations on one stream track"
           % (c.name, c.ts))
        cs = {s.args.get("correlation") for s in ops}
        eq(len(cs), 1, "%s at %d: its operations share the launch's correlation id (%r)" %
           (c.name, c.ts, cs))
        check(not cs & corrs, "%s at %d: a correlation id of its own" % (c.name, c.ts))
        corrs |= cs
        for s in ops:
            check(c.ts <= s.ts, "%s starts at %d, not before its %s at %d" %
                  (s.name, s.ts, c.name, c.ts))
        for a, b in zip(ops, ops[1:]):
            check(a.end <= b.ts, "%s and %s of one launch do not overlap" % (a.name, b.name))
        by_graph.setdefault(ids.pop(), []).append([s.name for s in ops])
    eq(len(by_graph), len(gm["graphs"]), "graph ids: one per executable graph")
    for g in gm["graphs"]:
        runs = [v for v in by_graph.values() if v[0] == g["nodes"]]
        eq(len(runs), 1, "the %s graph's launches found by their nodes (%r)" %
           (g["name"], by_graph))
        eq(runs[0], [g["nodes"]] * g["launches"],
           "every launch of the %s graph ran its nodes in order" % g["name"])

    # Every graph operation appears once, from its graph's launch; the
    # plain kernel comes from its own launch, on the explicit graph's stream.
    span = [s for s in gpu if t0 <= s.ts <= t1]
    graph_names = {n for g in gm["graphs"] for n in g["nodes"] if not n.startswith("[")}
    track_of = {}
    for s in span:
        ins = s.flow_in + s.flow_end
        eq(len(ins), 1, "one flow into %s at %d" % (s.name, s.ts))
        src = [c for c in api if ins[0] in c.flow_out]
        eq(len(src), 1, "%s at %d: one API slice starts its flow" % (s.name, s.ts))
        if "graph" in s.args:
            check(src[0].name.startswith("cuGraphLaunch"), "%s at %d comes from %s, not a "
                  "graph launch" % (s.name, s.ts, src[0].name))
            track_of.setdefault(s.args["graph"], set()).add(s.track_uuid)
        else:
            check(s.name not in graph_names, "%s at %d has no graph id" % (s.name, s.ts))
            check(src[0].name.startswith("cuLaunchKernel"), "%s comes from %s" %
                  (s.name, src[0].name))
    for g in gm["graphs"]:
        for n in set(g["nodes"]):
            want = g["nodes"].count(n) * g["launches"]
            got = [s for s in span if s.name == n and
                   any(s.args.get("graph") == gid for gid, v in by_graph.items()
                       if v[0] == g["nodes"])]
            eq(len(got), want, "%s of the %s graph: GPU slices" % (n, g["name"]))
    eq(sorted(len(v) for v in track_of.values()), [1] * len(gm["graphs"]),
       "each graph's operations on one stream track")
    eq(len(set.union(*track_of.values())), len(gm["graphs"]),
       "the two graphs (two streams) on two tracks")
    plain = [s for s in span if s.name == gm["plain"]["name"]]
    eq(len(plain), gm["plain"]["count"], "plain kernels")
    explicit = next(gid for gid, v in by_graph.items() if v[0] == gm["graphs"][0]["nodes"])
    eq({s.track_uuid for s in plain}, track_of[explicit],
       "the plain kernel on the explicit graph's stream (s1)")

    # Captured calls: their API slices start a flow that nothing ends.
    c0, c1 = gm["capture_from_ns"], gm["capture_until_ns"]
    cap = sorted([s for s in api if c0 <= s.ts <= c1 and
                  s.name.startswith(("cuLaunch", "cuMemset"))], key=lambda s: s.ts)
    eq([s.name for s in cap], gm["captured_calls"], "the captured calls, traced")
    for s in cap:
        check(not [o for i in s.flow_out for o in ends.get(i, [])],
              "%s at %d, captured, reaches no GPU slice" % (s.name, s.ts))
    check(not [s for s in gpu if c0 <= s.ts <= c1], "nothing ran while capturing")

    # The summary counts graph kernels like any kernel.
    kernels = {}
    for s in gpu:
        if not s.name.startswith("[CUDA"):
            kernels[s.name] = kernels.get(s.name, 0) + 1
    eq(kern_sum(out), kernels, "cuda_gpu_kern_sum instances = kernel slices in the trace")
    for g in gm["graphs"]:
        for n in graph_names & set(g["nodes"]):
            eq(kernels.get(n), g["launches"], "cuda_gpu_kern_sum: %s" % n)
    # Launch delay: one per launch call (its first operation, when a
    # kernel), not the later nodes of a graph, which waited for the earlier.
    firsts = gm["plain"]["count"] + sum(g["launches"] for g in gm["graphs"]
                                        if not g["nodes"][0].startswith("["))
    check("kernel launch delay (kernel start - launch call start), %d kernels:" % firsts
          in out, "the launch delay counts %d first kernels of launches:\n%s" %
          (firsts, out[out.find("kernel launch delay"):][:300]))

    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    problems, _ = tpcheck.compare(trace, t, ())
    check(not problems, "trace processor and the decoder disagree:\n    %s" %
          "\n    ".join(problems))
    rows, = tpcheck.query(
        trace, "select so.ts as ts, si.name as name, si.ts as its from flow f "
        "join slice so on so.id = f.slice_out join slice si on si.id = f.slice_in "
        "where so.name glob 'cuGraphLaunch*'")
    tp = {}
    for r in rows:
        tp.setdefault(int(r["ts"]), []).append((int(r["its"]), r["name"]))
    for c in launches:
        want = sorted((s.ts, s.name) for s in ends[c.flow_out[0]])
        eq(sorted(tp.get(c.ts, [])), want,
           "trace processor: the flows out of %s at %d (slice_out) reach each of its "
           "operations (slice_in)" % (c.name, c.ts))


TOOL = os.path.join(harness.OUT, "fake", "libcupti_tool.so")


def test_tool_takes_cupti_mid_run():
    """A CUPTI tool (tests/fake/cupti_tool.c, doing what Kineto does)
    starts while cgbpf collects: it subscribes and registers its own
    buffer callbacks, and gets its kernel records; the injection library
    notices (a buffer of its own that CUPTI gave to the tool), says who
    took CUPTI, and stops touching it; the application finishes as usual;
    the trace keeps the GPU slices from before, the API slices of the
    whole run, and an instant saying when GPU activity stopped, who took
    CUPTI and what was measured until then; the summary says the same;
    the estimate takes over."""
    tool_mid_run(idle=False)


def test_tool_takes_cupti_while_the_process_idles():
    """The same, with the tool arriving while the process queues no GPU
    work (its loop held): the library's last buffer came back to it, so
    what it notices is that CUPTI stops asking it for buffers once the
    process works again."""
    tool_mid_run(idle=True)


def tool_mid_run(idle):
    need_gpu_part()
    for f in (FAKE_CUPTI, TOOL):
        if not os.path.exists(f):
            raise Skip("%s not built (no CUPTI headers)" % f)
    import shutil
    tmp = tmpdir()
    tool = os.path.join(tmp, "tool")
    os.mkdir(tool)
    pause = os.path.join(tmp, "pause")
    until = os.path.join(tmp, "until")
    hold = os.path.join(tmp, "hold")
    trace = os.path.join(tmp, "out.perfetto-trace")
    # 0.2 ms kernels: a loop bound by its synchronizations, not a flood.
    env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"), CGBPF_PAUSE_FILE=pause,
                   CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="200000", LD_PRELOAD=TOOL,
                   CGBPF_FAKE_TOOL_DIR=tool)
    argv = [CGBPF, "record", "-v", "--sample-hz", "0", "-o", trace, "--",
            wl("train"), "--iters", "20", "--until", until, "--hold", hold]
    out_path = os.path.join(tmp, "stdout")
    with open(out_path, "w") as out_f:
        p = subprocess.Popen(argv, stdout=out_f, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    collecting = threading.Event()
    taken = threading.Event()

    def read_err():
        for line in p.stderr:
            if "libbpf:" in line:
                continue
            lines.append(line)
            if "GPU activity: status 1 (" in line:
                collecting.set()
            if "GPU activity: status 8 (" in line:
                taken.set()

    th = threading.Thread(target=read_err, daemon=True)
    th.start()
    try:
        check(collecting.wait(60), "the library started collecting (%r)" % "".join(lines)[-600:])
        touch(pause)
        # Some periodic flushes (every 0.5 s) carry kernels to cgbpf first.
        # This waits; nothing is asserted about the time.
        import time
        time.sleep(2.5)
        if idle:
            # A periodic flush gives the library its buffer back meanwhile.
            touch(hold)
            time.sleep(1.0)
        touch(os.path.join(tool, "start"))
        wait_for(lambda: os.path.exists(os.path.join(tool, "started")), 30, "the tool's start")
        if idle:
            os.unlink(hold)
        check(taken.wait(60), "the library said another tool took CUPTI (%r)" %
              "".join(lines)[-600:])
        touch(os.path.join(tool, "stop"))
        wait_for(lambda: os.path.exists(os.path.join(tool, "result")), 30, "the tool's result")
        touch(until)
        p.wait(120)
    finally:
        touch(until)
        if os.path.exists(hold):
            os.unlink(hold)
        kill_quiet(p)
    th.join(10)
    with open(os.path.join(tool, "result")) as f:
        result = dict(line.split(None, 1) for line in f.read().splitlines())
    eq(result.get("subscribe", "").split()[0], "0",
       "the tool subscribed (cgbpf's library holds no subscriber): %r" % result)
    check(int(result["kernels"]) > 0, "the tool got its kernel records: %r" % result)
    # The library asked CUPTI for system thread ids while it collected;
    # the tool (Kineto reads pthread_self() ids) got the default back.
    eq(result.get("tid_type"), "0", "CUPTI's thread id type once the tool took CUPTI")
    with open(out_path, errors="replace") as f:
        out = f.read()
    eq(p.returncode, 0, "cgbpf exit (stderr %r)" % "".join(lines)[-800:])
    t = ptrace.load(trace)
    clean_trace(t)
    pid = next(iter(q for q in t.processes if t.processes[q].process_name == "train"))
    check_app_unharmed(tmp, t, pid)

    who = "CUPTI for Kineto (cgbpf test tool)"
    ev = status_events(t, pid)
    stops = [e for e in ev if e.name == "GPU activity stopped: %s took CUPTI" % who]
    eq(len(stops), 1, "one instant says who took CUPTI (%r)" % [(e.name, e.args) for e in ev])
    stop = stops[0]
    check(stop.args.get("tool") == who and who in stop.args.get("detail", ""),
          "the instant names the tool: %r" % stop.args)
    check(not [e for e in ev if (e.name or "").startswith("GPU activity: flushed")],
          "the library answered cgbpf's flush request with nothing (CUPTI is the tool's)")
    streams = {u for u, x in t.tracks.items() if x.pid == pid and
               (x.name or "").startswith("stream ") and not x.name.endswith("(estimate)")}
    gpu = [s for s in t.slices if s.track_uuid in streams]
    kernels = [s for s in gpu if not s.name.startswith("[CUDA")]
    copies = [s for s in gpu if s.name.startswith("[CUDA memcpy")]
    check(kernels, "GPU slices measured before the tool came")
    for s in gpu:
        check(s.end <= stop.ts, "%s at %d ends by the time activity stopped (%d)" %
              (s.name, s.ts, stop.ts))
    eq(stop.args.get("kernels"), len(kernels), "the instant counts the kernel slices")
    eq(stop.args.get("copies"), len(copies), "the instant counts the copy slices")
    launches = [s for s in t.slices if s.pid == pid and s.tid is not None and
                s.name.startswith("cuLaunchKernel")]
    check([s for s in launches if s.ts > stop.ts],
          "API slices go on after GPU activity stopped")
    check([s for s in launches if s.ts < stop.ts], "and were there before")
    est = {u for u, x in t.tracks.items() if x.pid == pid and
           (x.name or "").endswith("(estimate)")}
    spans = [s for s in t.slices if s.track_uuid in est]
    first = min(s.ts for s in gpu)
    for s in spans:
        check(s.end <= first or s.ts >= stop.ts,
              "estimate span at %d..%d only where nothing was measured (%d..%d)" %
              (s.ts, s.end, first, stop.ts))
    check([s for s in spans if s.ts >= stop.ts],
          "the estimate takes over after the tool took CUPTI")

    check("GPU activity stopped at +" in out and "%s took CUPTI" % who in out,
          "summary says when GPU activity stopped and who took CUPTI:\n%s" %
          out[out.find("GPU activity per"):][:800])
    check("measured (CUPTI %s): %d kernels, %d copies" % (FAKE_CUPTI, len(kernels), len(copies))
          in out, "summary counts what was measured until then:\n%s" %
          out[out.find("GPU activity per"):][:800])
    check("after another tool took CUPTI" in out, "summary: the estimate, and for when")
    eq(kern_sum(out), {k: len([s for s in kernels if s.name == k])
                       for k in {s.name for s in kernels}},
       "cuda_gpu_kern_sum instances = kernel slices in the trace")
    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
    else:
        problems, _ = tpcheck.compare(trace, t, ())
        check(not problems, "trace processor and the decoder disagree:\n    %s" %
              "\n    ".join(problems))
    shutil.rmtree(tmp, ignore_errors=True)


# Runs train twice under one pid: A, then B once A has exited, with the
# kernel's next pid set to A's (harness.fork_at). Each pauses after its
# setup until its pause file exists.
GPU_PID_REUSE_DRIVER = r"""
import sys, time
train, tmp = sys.argv[1:3]


def exec_train(tag):
    env = dict(os.environ, CGBPF_MANIFEST=os.path.join(tmp, tag + ".json"),
               CGBPF_PAUSE_FILE=os.path.join(tmp, "pause." + tag))
    os.execve(train, [train, "--iters", "20"], env)


a = os.fork()
if a == 0:
    exec_train("a")
_, st = os.waitpid(a, 0)
if os.waitstatus_to_exitcode(st):
    sys.exit("A failed")
# A moment, as between two processes of a long run (cgbpf may still be
# reading A's exit when B forks).
time.sleep(1)
st = fork_at(a, lambda: exec_train("b"))
if st is None:
    sys.exit("pid %d was not given again" % a)
sys.exit(os.waitstatus_to_exitcode(st))
"""


def test_pid_reused_by_another_gpu_process():
    """A process whose GPU activity cgbpf measured exits, and another one
    gets its pid and loads the injection library again: cgbpf probes the
    new process's library too (the state kept for the dead one must not
    stand in for it), so both processes' kernels are on the timeline,
    each with its flow."""
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    tmp, drv = pid_reuse_driver(GPU_PID_REUSE_DRIVER)
    trace = os.path.join(tmp, "out.perfetto-trace")
    out = os.path.join(tmp, "stdout")
    with open(out, "w") as of:
        cg = subprocess.Popen([CGBPF, "record", "-v", "--sample-hz", "0", "-o", trace, "--",
                               "/usr/bin/python3", drv, wl("train"), tmp], stdout=of,
                              stderr=subprocess.PIPE, text=True,
                              env=env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI))
    lines = []
    status = re.compile(r"pid (\d+): GPU activity: status")

    def read_err():
        # Each process goes on once its library reported to cgbpf: the
        # first's status lets A go, the second's B.
        n = 0
        for line in cg.stderr:
            lines.append(line)
            if status.search(line) and n < 2:
                touch(os.path.join(tmp, "pause." + "ab"[n]))
                n += 1

    rd = threading.Thread(target=read_err, daemon=True)
    rd.start()
    try:
        rc = cg.wait(120)
    finally:
        kill_quiet(cg)
    rd.join(10)
    log = "".join(l for l in lines if "libbpf:" not in l)
    ms = []
    for tag in ("a", "b"):
        with open(os.path.join(tmp, tag + ".json")) as f:
            ms.append(json.load(f))
    pid = ms[0]["pid"]
    eq(ms[1]["pid"], pid, "A and B under one pid")
    # (Without a status from B, B waits out its pause and fails.)
    eq(len(re.findall(r"pid %d: GPU activity: status" % pid, log)), 2,
       "a library status from each process under pid %d (log: %s)" % (pid, log[-1500:]))
    eq(rc, 0, "cgbpf exit")
    t = ptrace.load(trace)
    clean_trace(t)
    kernels = [s for s in fake_gpu_slices(t, pid) if not s.name.startswith("[CUDA")]
    eq(len(kernels), sum(sum(m["kernels"].values()) for m in ms),
       "A's and B's kernels on the timeline")
    into = flows_into(t)
    bad = [k.name for k in kernels if len(into.get(id(k), [])) != 1]
    eq(bad, [], "kernels without exactly one flow from their launch")
