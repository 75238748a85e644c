# SPDX-License-Identifier: MIT
"""Capture windows (--delay, --capture-range cudaProfilerApi|nvtx,
--nvtx-capture, --capture-range-end, --schedule): workloads that write
what they did inside and outside their ranges (tests/workloads/
cap_profiler.c, crt_capture.c, cap_steps.c); every file cgbpf writes is
decoded and must hold exactly the launches of its windows, with kernel
names and the GPU-memory counter learned before the window; trace
processor loads each one where present."""
import os
import re

import harness
from harness import CGBPF, check, clean_trace, env_with, eq, record, tmpdir, tp_clean
import ptrace

CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
FLAGS = ["--sample-hz", "0", "--sched", "off", "--syscall-threshold", "off"]


def need(name):
    path = harness.wl(name)
    if not os.path.exists(path):
        raise harness.Skip("%s not built (it needs the CUDA toolkit's headers at %s)"
                           % (path, CUDA_HOME))
    return path


def need_nvtx():
    if not os.path.exists(LIB):
        raise harness.Skip("%s not built (<sys/sdt.h> from systemtap-sdt-dev)" % LIB)
    return need("cap_steps")


def launches(t):
    """Kernel names of the outermost launches on the process's threads, in order."""
    return [s.args.get("kernel") for s in t.slices
            if s.tid is not None and s.name in ("cuLaunchKernel",)]


def windows_table(out):
    """Rows of the summary's "Capture windows" table: (steps, first, calls, launches, path)."""
    check("** Capture windows:" in out, "summary has a Capture windows section")
    rows = []
    for line in out.split("** Capture windows:")[1].split("\n** ")[0].splitlines():
        m = re.match(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s+(\d+)\s+(\d+)\s+\d+\s+(\S+)$", line)
        if m:
            rows.append((int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                         m.group(6)))
    return rows


def load_checked(path):
    check(os.path.exists(path), "%s written" % path)
    t = ptrace.load(path)
    clean_trace(t)
    tp_clean(path, t)
    return t


def memory(t):
    return [v for _, v in t.counter_values("GPU memory (cuMemAlloc)")]


def profiler_repeat(name, **env):
    """record -- cap_profiler 3 with --capture-range cudaProfilerApi
    --capture-range-end repeat, files D/NAME-N.perfetto-trace, env: the
    workload's variables; returns (result, manifest, D)."""
    wl = need("cap_profiler")
    d = tmpdir()
    out = os.path.join(d, name + ".perfetto-trace")
    r = record(FLAGS + ["--capture-range", "cudaProfilerApi", "--capture-range-end", "repeat",
                        "-o", out], cmd=[wl, "3"], tmp=d,
               env=env_with(CGBPF_MANIFEST=os.path.join(d, "manifest.json"), **env))
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    return r, r.manifest(), d


def test_profiler_api_repeat_one_file_per_range():
    r, m, d = profiler_repeat("win")
    eq(m["windows"], [5, 6, 7], "the workload's windows")
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")),
       ["win-1.perfetto-trace", "win-2.perfetto-trace", "win-3.perfetto-trace"],
       "one file per range, numbered; nothing at -o itself")
    rows = windows_table(r.stdout)
    eq([(st, first, ln) for st, first, _, ln, _ in rows], [(1, 1, 5), (1, 2, 6), (1, 3, 7)],
       "summary rows (steps, first step, launches)")
    for i, n in enumerate(m["windows"]):
        path = os.path.join(d, "win-%d.perfetto-trace" % (i + 1))
        eq(rows[i][4], path, "summary names the file")
        t = load_checked(path)
        eq(launches(t), ["k_in"] * n, "%s: exactly the window's launches, named by the "
           "cuModuleGetFunction made before any window" % path)
        names = [s.name for s in t.slices if s.tid is not None]
        eq(names.count("cuProfilerStart"), 1, "%s: the start that opened it" % path)
        eq(names.count("cuProfilerStop"), 1, "%s: the stop that closed it" % path)
        eq(names.count("cuStreamSynchronize"), 1, "%s: the window's synchronize" % path)
        for gone in ("cuModuleGetFunction", "cuMemAlloc_v2", "cuMemFree_v2", "cuInit"):
            check(gone not in names, "%s: %s happened outside every window" % (path, gone))
        eq(memory(t)[0], m["alloc_before"], "%s: GPU memory counter = the allocation made "
           "before the window" % path)
        eq(t.processes[m["pid"]].process_name, "cap_profiler",
           "process described again in %s" % path)
        eq(rows[i][2], len(names), "summary's API calls = the file's slices")


def test_profiler_api_stop_ends_cgbpf_after_the_first_range():
    wl = need("cap_profiler")
    d = tmpdir()
    out = os.path.join(d, "first.perfetto-trace")
    r = record(FLAGS + ["--capture-range", "cudaProfilerApi", "-o", out], cmd=[wl, "3"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    check("capture windows done: stopping" in r.stderr, "cgbpf ended after the first range")
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")),
       ["first.perfetto-trace"], "one file, at -o as given")
    t = load_checked(out)
    eq(launches(t), ["k_in"] * 5, "the first window's launches only")
    eq([(st, ln) for st, _, _, ln, _ in windows_table(r.stdout)], [(1, 5)], "summary row")


def test_runtime_profiler_api_repeat_n():
    wl = need("crt_capture")
    d = tmpdir()
    out = os.path.join(d, "rt-%n.perfetto-trace")
    r = record(FLAGS + ["--capture-range", "cudaProfilerApi", "--capture-range-end",
                        "repeat:2", "-o", out], cmd=[wl, "4"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    m = r.manifest()
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")),
       ["rt-1.perfetto-trace", "rt-2.perfetto-trace"], "repeat:2: two files (%n numbered)")
    for i in (0, 1):
        t = load_checked(os.path.join(d, "rt-%d.perfetto-trace" % (i + 1)))
        eq(launches(t), ["k_in"] * m["windows"][i], "window %d's launches" % (i + 1))
        sl = {s.name: s for s in t.slices if s.tid is not None}
        for outer, inner in (("cudaProfilerStart", "cuProfilerStart"),
                             ("cudaProfilerStop", "cuProfilerStop")):
            check(outer in sl and inner in sl, "%s and the %s it enters" % (outer, inner))
            check(sl[outer].ts <= sl[inner].ts and sl[inner].end <= sl[outer].end and
                  sl[inner].depth == sl[outer].depth + 1, "%s nests in %s" % (inner, outer))


def step_launches(m, steps):
    return sum(m["steps"][s] for s in steps)


def test_nvtx_schedule_writes_the_active_steps_of_each_cycle():
    wl = need_nvtx()
    d = tmpdir()
    out = os.path.join(d, "steps.perfetto-trace")
    r = record(FLAGS + ["--capture-range", "nvtx", "--nvtx-capture", "step", "--schedule",
                        "wait=2,warmup=1,active=3,repeat=2", "-o", out], cmd=[wl, "20"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    m = r.manifest()
    eq(len(m["steps"]), 20, "20 steps")
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")),
       ["steps-1.perfetto-trace", "steps-2.perfetto-trace"], "two cycles, two files")
    # Cycle of 6: steps 0,1 wait, 2 warm-up, 3..5 active; then 6..11.
    rows = windows_table(r.stdout)
    eq([(st, first) for st, first, _, _, _ in rows], [(3, 4), (3, 10)],
       "summary: 3 steps per file, from steps 4 and 10 (1-based)")
    for i, active in enumerate(([3, 4, 5], [9, 10, 11])):
        path = os.path.join(d, "steps-%d.perfetto-trace" % (i + 1))
        t = load_checked(path)
        eq(launches(t), ["k_step"] * step_launches(m, active),
           "%s: exactly the launches of steps %s" % (path, active))
        eq(rows[i][3], step_launches(m, active), "summary launches of file %d" % (i + 1))
        steps = [s for s in t.slices if s.name == "step"]
        fwd = [s for s in t.slices if s.name == "fwd"]
        eq(len(steps), 3, "%s: three step ranges" % path)
        eq(len(fwd), 3, "%s: three fwd ranges" % path)
        for s, f in zip(steps, fwd):
            check(s.ts <= f.ts and f.end <= s.end, "fwd nests in its step")
            n = [x for x in t.slices if x.name == "cuLaunchKernel" and f.ts <= x.ts <= f.end]
            check(len(n) in [m["steps"][a] for a in active], "a step's launches inside its fwd")
        eq(memory(t)[0], m["alloc_before"], "GPU memory counter restated at the window")


def test_nvtx_schedule_skip_first_and_one_cycle():
    wl = need_nvtx()
    d = tmpdir()
    out = os.path.join(d, "skip.perfetto-trace")
    r = record(FLAGS + ["--capture-range", "nvtx", "--nvtx-capture", "step", "--schedule",
                        "wait=1,warmup=0,active=2,repeat=1,skip_first=5", "-o", out],
               cmd=[wl, "12"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    m = r.manifest()
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")),
       ["skip.perfetto-trace"], "one cycle, one file, named as -o says")
    check("capture windows done: stopping" in r.stderr, "cgbpf ended after the cycle")
    t = load_checked(os.path.join(d, "skip.perfetto-trace"))
    # Steps 0..4 skipped, 5 waits, 6 and 7 are active.
    eq(launches(t), ["k_step"] * step_launches(m, [6, 7]), "the launches of steps 6 and 7")


def test_schedule_with_every_source_on():
    """The default sources (scheduler, syscalls, CPU samples, backtraces)
    in files that start and stop: each still decodes cleanly and loads in
    trace processor without error."""
    wl = need_nvtx()
    d = tmpdir()
    out = os.path.join(d, "all.perfetto-trace")
    r = record(["--capture-range", "nvtx", "--nvtx-capture", "step", "--schedule",
                "wait=1,warmup=1,active=2,repeat=2", "-o", out], cmd=[wl, "10"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    m = r.manifest()
    for i, active in enumerate(([2, 3], [6, 7])):
        t = load_checked(os.path.join(d, "all-%d.perfetto-trace" % (i + 1)))
        eq(launches(t), ["k_step"] * step_launches(m, active), "file %d's launches" % (i + 1))


def test_nvtx_range_of_a_domain():
    wl = need_nvtx()
    d = tmpdir()
    out = os.path.join(d, "dom.perfetto-trace")
    r = record(FLAGS + ["--capture-range", "nvtx", "--nvtx-capture", "step@other",
                        "--capture-range-end", "repeat", "-o", out], cmd=[wl, "4"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")),
       ["dom-1.perfetto-trace"], "only the range of domain 'other'")
    t = load_checked(os.path.join(d, "dom-1.perfetto-trace"))
    eq(launches(t), ["k_between"], "the one launch inside step@other")
    eq([s.categories for s in t.slices if s.name == "step"], [["other"]], "its range")


def test_delay():
    wl = need("gpu_rate")
    d = tmpdir()
    out = os.path.join(d, "late.perfetto-trace")
    n = 8000	# 2 s at 4000 launches/s; the delay counts from the command's start
    r = record(FLAGS + ["--delay", "500ms", "-o", out], cmd=[wl, str(n), "4000"], tmp=d)
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    check("--delay passed" in r.stderr, "cgbpf said when it started recording")
    t = load_checked(out)
    got = launches(t)
    check(0 < len(got) < n, "some launches but not the first ones: %d of %d" % (len(got), n))
    check(all(k and not k.startswith("unnamed") for k in got),
          "launches named by the lookup made before the delay: %r" % got[:3])
    names = {s.name for s in t.slices}
    check("cuModuleGetFunction" not in names, "calls before the delay are not in the trace")


BAD = [
    (["--capture-range", "frames"], "invalid --capture-range 'frames'"),
    (["--capture-range", "nvtx"], "--capture-range nvtx needs --nvtx-capture"),
    (["--nvtx-capture", "step"], "--nvtx-capture needs --capture-range nvtx"),
    (["--capture-range", "nvtx", "--nvtx-capture", "@dom"], "invalid --nvtx-capture '@dom'"),
    (["--capture-range", "cudaProfilerApi", "--capture-range-end", "repeat:0"],
     "invalid --capture-range-end 'repeat:0'"),
    (["--capture-range", "cudaProfilerApi", "--capture-range-end", "again"],
     "invalid --capture-range-end 'again'"),
    (["--capture-range-end", "stop"], "--capture-range-end needs --capture-range"),
    (["--capture-range", "cudaProfilerApi", "--schedule", "wait=1,warmup=1,active=0"],
     "active must be at least 1"),
    (["--capture-range", "cudaProfilerApi", "--schedule", "wait=1,warmup=1"],
     "wait, warmup and active are all needed"),
    (["--capture-range", "cudaProfilerApi", "--schedule", "wait=1,warmup=x,active=2"],
     "invalid --schedule 'wait=1,warmup=x,active=2'"),
    (["--capture-range", "cudaProfilerApi", "--schedule", "wait=1,wait=2,warmup=0,active=2"],
     "invalid --schedule"),
    (["--schedule", "wait=1,warmup=1,active=1"], "--schedule counts steps of a capture range"),
    (["--capture-range", "cudaProfilerApi", "--schedule", "wait=1,warmup=1,active=1",
      "--capture-range-end", "repeat"], "--schedule ends by its own repeat=R"),
    (["--delay", "-1s"], "invalid --delay '-1s'"),
    (["--delay", "soon"], "invalid --delay 'soon'"),
]


def test_bad_values_exit_2():
    for args, msg in BAD:
        r = record(args + ["-o", os.path.join(tmpdir(), "x.perfetto-trace")],
                   cmd=["/bin/true"], trace=False)
        eq(r.rc, 2, "exit status for %s" % args)
        check(msg in r.stderr, "%s: message %r in %r" % (args, msg, r.stderr))
        check("--help" in r.stderr, "%s: points to --help" % args)


# A process that starts a profiler window and exits inside it, while
# cgbpf keeps running for another target (the shell).
EXIT_IN_WINDOW = r'''
import ctypes, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.01)
assert cu.cuInit(0) == 0
assert cu.cuProfilerStart() == 0
open(go + ".started", "w").close()
'''


def gate_value(cgbpf_pid):
    """The BPF gate word (bpf/capture.bpf.h) of the cgbpf with that pid,
    through bpftool; None where bpftool cannot say."""
    import json
    import subprocess
    # The maps that process holds: their ids from its fds' fdinfo.
    mine = set()
    fds = "/proc/%d/fdinfo" % cgbpf_pid
    for fd in os.listdir(fds):
        try:
            with open(os.path.join(fds, fd)) as f:
                m = re.search(r"^map_id:\s*(\d+)", f.read(), re.M)
        except OSError:
            continue
        if m:
            mine.add(int(m.group(1)))
    r = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True)
    if r.returncode:
        return None
    ids = [m["id"] for m in json.loads(r.stdout) if m.get("name") == "gate" and m["id"] in mine]
    if len(ids) != 1:
        return None
    r = subprocess.run(["bpftool", "-j", "map", "lookup", "id", str(ids[0]), "key", "0", "0",
                        "0", "0"], capture_output=True, text=True)
    if r.returncode:
        return None
    v = json.loads(r.stdout)
    return v["formatted"]["value"]["open"] if "formatted" in v else v["value"]["open"]


def test_exit_inside_a_profiler_window_closes_the_gate():
    """cuProfilerStart, then the process exits without a stop: the exit
    counts it out of the BPF gate (else every later call of the other
    targets would pay for a record user space drops), and its window is
    written."""
    import shutil
    import subprocess
    import time
    from harness import kill_quiet, touch, wait_for
    if not shutil.which("bpftool"):
        raise harness.Skip("no bpftool to read the gate with")
    d = tmpdir()
    script = os.path.join(d, "exit_in_window.py")
    with open(script, "w") as f:
        f.write(EXIT_IN_WINDOW)
    go = os.path.join(d, "go")
    stop = os.path.join(d, "stop")
    out = os.path.join(d, "w.perfetto-trace")
    sh = ("/usr/bin/python3 %s %s; while [ ! -e %s ]; do sleep 0.05; done" %
          (script, go, stop))
    log = os.path.join(d, "cgbpf.log")
    with open(log, "w") as lf:
        cg = subprocess.Popen([CGBPF, "record", "-v", "--capture-range", "cudaProfilerApi",
                               "--capture-range-end", "repeat", "-o", out, "--no-summary",
                               "--", "sh", "-c", sh], stdout=subprocess.DEVNULL, stderr=lf,
                              env=env_with())
    try:
        def probed():
            with open(log) as f:
                return "mapped libcuda.so.1" in f.read() or cg.poll() is not None
        wait_for(probed, 60, "cgbpf to probe the script's libcuda")
        time.sleep(0.3)
        eq(gate_value(cg.pid), 0, "the gate before the window")
        touch(go)
        wait_for(lambda: os.path.exists(go + ".started") or cg.poll() is not None, 30,
                 "the script to start its window")

        def closed():
            return gate_value(cg.pid) == 0 or cg.poll() is not None
        wait_for(closed, 10, "the gate to close after the script's exit (it reads %r)" %
                 gate_value(cg.pid))
        eq(cg.poll(), None, "cgbpf running")
        touch(stop)
        eq(cg.wait(60), 0, "cgbpf exit")
        files = sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace"))
        eq(len(files), 1, "one window written: %r" % files)
    finally:
        kill_quiet(cg)


def gpu_columns(out):
    """The "GPU ops" column of the "Capture windows" table, and the lost
    operations per file (1-based) its LOST lines name."""
    sec = out.split("** Capture windows:")[1].split("\n** ")[0]
    ops = [int(m.group(1)) for m in
           re.finditer(r"^\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+\d+\s+(\d+)\s+\S+$", sec, re.M)]
    late = {int(m.group(1)): int(m.group(2))
            for m in re.finditer(r"^\s+file (\d+): (\d+)$", sec, re.M)}
    return ops, late


def gpu_ops_in(t, pid):
    """Kernel names on pid's fake-GPU streams, in order, and the number of
    GPU operations of the file (kernels and stream synchronizations)."""
    groups = {u for u, x in t.tracks.items()
              if (x.name or "").startswith("GPU 0: Fake GPU") and x.pid == pid}
    streams = {u for u, x in t.tracks.items()
               if x.parent_uuid in groups and (x.name or "").startswith("stream ")}
    kernels = sorted((s for s in t.slices if s.track_uuid in streams), key=lambda s: s.ts)
    syncs = [s for s in t.slices if s.name == "Stream synchronize"]
    return kernels, len(kernels) + len(syncs)


def check_launch_flows(t, kernels, path):
    """Each kernel ends exactly one flow, from its cuLaunchKernel."""
    into = {}
    for a, b in t.flows():
        into.setdefault(id(b), []).append(a)
    for k in kernels:
        eq([a.name for a in into.get(id(k), [])], ["cuLaunchKernel"],
           "%s: kernel at %d has the flow from its launch" % (path, k.ts))


def test_profiler_api_windows_hold_their_gpu_activity():
    """Each window's file holds the GPU work its launches queued, which
    CUPTI delivers after the window: the file waits for the injection
    library's flush (the workload pauses between windows, as a training
    loop's steps do). Kernels launched outside every window (k_out) are in
    no file, and the summary counts no more than the files hold."""
    r, m, d = profiler_repeat("gpu", CAP_GAP_MS=400)
    ops, late = gpu_columns(r.stdout)
    eq(late, {}, "no window's GPU operation came after its file closed")
    eq(ops, [n + 1 for n in m["windows"]], "summary: GPU ops per file (its kernels and its "
       "cuStreamSynchronize)")
    for i, n in enumerate(m["windows"]):
        path = os.path.join(d, "gpu-%d.perfetto-trace" % (i + 1))
        t = load_checked(path)
        kernels, nops = gpu_ops_in(t, m["pid"])
        eq([k.name for k in kernels], ["k_in"] * n, "%s: the window's kernels, none of the "
           "k_out launched outside it" % path)
        eq(nops, ops[i], "%s: the summary's GPU ops are the file's" % path)
        check_launch_flows(t, kernels, path)
    # The summary's GPU tables count what the files hold.
    row = [l for l in r.stdout.split("cuda_gpu_kern_sum")[1].splitlines() if l.endswith(" k_in")]
    eq(len(row), 1, "k_in row in cuda_gpu_kern_sum")
    eq(int(row[0].split()[2]), sum(m["windows"]), "k_in instances = the windows' launches")
    check(" k_out" not in r.stdout.split("cuda_gpu_kern_sum")[1].split("\n** ")[0],
          "no k_out row: launched outside every window")


def test_back_to_back_windows_account_for_every_gpu_operation():
    """Windows with no pause between them: a file closes when the next
    window opens, whether or not its GPU activity came. Every GPU
    operation launched in a window is then either in its file or counted
    LOST for it in the summary, never in another window's file."""
    r, m, d = profiler_repeat("b2b")
    ops, late = gpu_columns(r.stdout)
    eq(len(ops), 3, "three files")
    for i, n in enumerate(m["windows"]):
        t = load_checked(os.path.join(d, "b2b-%d.perfetto-trace" % (i + 1)))
        kernels, nops = gpu_ops_in(t, m["pid"])
        check(all(k.name == "k_in" for k in kernels), "file %d: only k_in kernels" % (i + 1))
        check(len(kernels) <= n, "file %d: at most its window's %d kernels" % (i + 1, n))
        eq(nops, ops[i], "file %d: the summary's GPU ops are the file's" % (i + 1))
        eq(ops[i] + late.get(i + 1, 0), n + 1,
           "file %d: written + lost = the window's operations" % (i + 1))
    if late:
        check("LOST" in r.stdout, "lost operations are said")


def test_samples_and_switches_end_at_the_window_edges():
    """CPU samples and scheduler switches come through their own rings,
    read after the record that opens or closes a window: a file holds
    exactly those taken inside its window, by their timestamps, none of
    the spin just before the window (read after the window opened) and
    the spin up to its end (read after it closed)."""
    wl = need("cap_profiler")
    d = tmpdir()
    out = os.path.join(d, "edges.perfetto-trace")
    r = record(["--sample-hz", "997", "--syscall-threshold", "off", "--capture-range",
                "cudaProfilerApi", "-o", out], cmd=[wl, "1"], tmp=d,
               env=env_with(CAP_SPIN_MS="300", CGBPF_MANIFEST=os.path.join(d, "manifest.json")))
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-600:])
    m = r.manifest()
    t = load_checked(out)
    sl = {s.name: s for s in t.slices if s.tid is not None}
    t0, t1 = sl["cuProfilerStart"].ts, sl["cuProfilerStop"].end
    mine = [s.ts for s in t.perf_samples if s.pid == m["pid"]]
    check(len(mine) > 50, "samples of the spin inside the window (%d)" % len(mine))
    eq([ts for ts in mine if ts < t0 or ts > t1], [], "samples outside [start, stop]")
    check(t1 - max(mine) < 30 * 1000 * 1000,
          "the spin's samples reach the window's end: last %.1f ms before it"
          % ((t1 - max(mine)) / 1e6))
    sw = [s.ts for cpu in ptrace.sched(t).switches.values() for s in cpu]
    eq([ts for ts in sw if ts < t0 or ts > t1], [], "switches outside [start, stop]")
