# SPDX-License-Identifier: MIT
"""GPU activity through cgbpf's injection library (inject/gpu.c): what the
user is told when CUPTI cannot measure (NVIDIA's real libcupti on this
GPU-less host, no CUPTI at all), that the application is never harmed,
that the library loads nothing while no cgbpf watches, and the estimate
tracks a process without measured activity gets."""
import json
import os
import subprocess
import threading

import harness
from harness import (CGBPF, Skip, api_counts, check, clean_trace, env_with, eq, expected_calls,
                     kill_quiet, start, tmpdir, touch, wait_for, wl)
import ptrace

LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
REAL_CUPTI = "/usr/local/cuda/lib64/libcupti.so.13"


def need_gpu_part():
    if not os.path.exists(LIB):
        raise Skip("%s not built (needs <sys/sdt.h>)" % LIB)
    r = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True)
    if " InitializeInjection\n" not in r.stdout:
        raise Skip("%s has no GPU part (no CUPTI headers at build time)" % LIB)


def record_until_status(env_extra, iters=50):
    """record -v -- train, paused after its setup until the library's first
    GPU_STATUS reached cgbpf (-v prints it), so a slow CUPTI load cannot
    race the program's end. Returns (rc, stdout, stderr lines, trace, tmp)."""
    tmp = tmpdir()
    pause = os.path.join(tmp, "pause")
    trace = os.path.join(tmp, "out.perfetto-trace")
    env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"), CGBPF_PAUSE_FILE=pause,
                   **env_extra)
    argv = [CGBPF, "record", "-v", "--sample-hz", "0", "-o", trace, "--",
            wl("train"), "--iters", str(iters)]
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
