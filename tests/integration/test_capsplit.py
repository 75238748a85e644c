# SPDX-License-Identifier: MIT
"""Capture windows per process (--split-per-process with --capture-range
and --schedule): every target counts its own steps and gets its own window
files, named by -o with its %p, %q{RANK} and its own %n. Workloads:
tests/workloads/cap_overlap (two processes whose profiler windows overlap
in a forced order: one's stop comes inside the other's window) and
tests/workloads/rank_steps (NVTX "step" ranges whose launches name their
step by their grid). Every file is decoded and must hold exactly its
process's launches of its own windows; trace processor loads each one
where present."""
import os
import re
import socket
import subprocess
import tempfile
import threading

import harness
from harness import (CGBPF, Result, check, clean_trace, env_with, eq, kill_quiet, open_gate,
                     record, tmpdir, touch, tp_clean, wait_for, wl)
import ptrace
from test_capture import check_launch_flows, gpu_ops_in

FLAGS = ["--sample-hz", "0", "--sched", "off", "--syscall-threshold", "off"]


def need(name):
    path = wl(name)
    if not os.path.exists(path):
        raise harness.Skip("%s not built (it needs the CUDA toolkit's headers)" % path)
    return path


def load_checked(path, pid):
    check(os.path.exists(path), "%s written (have %r)" % (path, os.listdir(os.path.dirname(path))))
    t = ptrace.load(path)
    clean_trace(t)
    tp_clean(path, t)
    eq(sorted(t.processes), [pid], "%s: only pid %d's process" % (path, pid))
    return t


def windows_table(out):
    """Rows of the summary's per-process "Capture windows" table:
    (pid, steps, first step, calls, launches, path)."""
    check("** Capture windows:" in out, "summary has a Capture windows section")
    sec = out.split("** Capture windows:")[1].split("\n** ")[0]
    check("steps counted per process" in sec, "the section says steps are per process")
    rows = []
    for line in sec.splitlines():
        m = re.match(r"^\s+\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s+(\d+)\s+(\d+)\s+\d+\s+(\S+)$", line)
        if m:
            rows.append(tuple(int(m.group(i)) for i in range(1, 6)) + (m.group(6),))
    return rows


def trace_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace"))


def overlap(d, **env):
    """record -- sh -c 'cap_overlap a & cap_overlap b & wait' with
    --split-per-process --capture-range cudaProfilerApi --capture-range-end
    repeat, files D/w.PID-N.perfetto-trace; env: the workloads' variables.
    Returns (result, a's manifest, b's manifest, {path: (pid, n, k_in)})."""
    wl_path = need("cap_overlap")
    sync = os.path.join(d, "sync")
    os.mkdir(sync)
    pre = "".join("%s=%s " % kv for kv in sorted(env.items()))
    script = " & ".join("%sCGBPF_MANIFEST=%s/m%s.json %s %s %s" % (pre, d, role, wl_path, role,
                                                                 sync)
                        for role in ("a", "b")) + " & wait"
    pattern = os.path.join(d, "w.%p.perfetto-trace")
    r = record(FLAGS + ["--split-per-process", "--capture-range", "cudaProfilerApi",
                        "--capture-range-end", "repeat", "-o", pattern],
               cmd=["/bin/sh", "-c", script], tmp=d, child_gate=True)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    ma, mb = r.manifest("ma.json"), r.manifest("mb.json")
    eq(ma["windows"], [4], "a's window")
    eq(mb["windows"], [2, 3], "b's windows")
    want = {}
    for m in (ma, mb):
        for i, n in enumerate(m["windows"]):
            want[os.path.join(d, "w.%d-%d.perfetto-trace" % (m["pid"], i + 1))] = (m["pid"], i + 1,
                                                                                   n)
    return r, ma, mb, want


def test_split_windows_hold_their_gpu_activity():
    """Per process, each window's file holds the kernels its launches
    queued (CUPTI delivers them after the window, through each process's
    own injection library), none launched outside its windows or by the
    other process, each with the flow from its launch; the summary's GPU
    ops column per file equals the file's GPU operations, and nothing was
    lost. The processes pause after their setup and windows (CAP_GAP_MS),
    so the library collects before the first window and answers before
    the process exits."""
    d = tmpdir()
    r, ma, mb, want = overlap(d, CAP_GAP_MS=300)
    sec = r.stdout.split("** Capture windows:")[1].split("\n** ")[0]
    check("LOST" not in sec, "no window's GPU operation came after its file closed:\n%s" % sec)
    ops = {m.group(2): int(m.group(1)) for m in
           re.finditer(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+\d+\s+(\d+)\s+(\S+)$", sec,
                       re.M)}
    for path, (pid, _, n) in sorted(want.items()):
        t = load_checked(path, pid)
        kernels, nops = gpu_ops_in(t, pid)
        eq([k.name for k in kernels], ["k_in"] * n, "%s: the window's kernels" % path)
        eq(ops.get(path), nops, "%s: the summary's GPU ops are the file's" % path)
        check_launch_flows(t, kernels, path)


def test_split_profiler_windows_per_process():
    """Two processes under one cgbpf (-- sh -c 'a & b & wait'),
    --capture-range cudaProfilerApi --capture-range-end repeat: b's
    cuProfilerStop comes while a's window is open, and a's 4 launches after
    it are all in a's file (the BPF gate counts processes, a stop closes
    its own process's window only); b's two windows are b's files 1 and 2
    (its own %n), a repeated start inside a window opens none; no k_out
    launch (outside every window) in any file; sh, which makes no call,
    gets no file."""
    d = tmpdir()
    r, ma, mb, want = overlap(d)
    eq(trace_files(d), sorted(os.path.basename(p) for p in want),
       "one file per window per process, numbered per process; none for sh")
    rows = windows_table(r.stdout)
    eq(sorted((pid, steps, first, ln, path) for pid, steps, first, _, ln, path in rows),
       sorted((pid, 1, i, n, p) for p, (pid, i, n) in want.items()),
       "summary rows (pid, steps, first step: the process's own count from 1, launches, "
       "path)")
    for path, (pid, _, n) in sorted(want.items()):
        t = load_checked(path, pid)
        ks = [s.args.get("kernel") for s in t.slices_on(pid=pid, name="cuLaunchKernel")]
        eq(ks, ["k_in"] * n, "%s: exactly the window's launches, kernel names learned "
           "before any window" % path)
        names = [s.name for s in t.slices if s.tid is not None]
        eq(names.count("cuProfilerStop"), 1, "%s: the stop that closed it" % path)
        check("cuModuleGetFunction" not in names, "%s: calls outside every window left out"
              % path)
        row = [x for x in rows if x[5] == path]
        eq(row[0][3], len(names), "%s: the summary's API calls = the file's slices" % path)
    eq([s.name for s in ptrace.load(os.path.join(d, "w.%d-2.perfetto-trace" % mb["pid"]))
        .slices if s.name == "cuProfilerStart"], ["cuProfilerStart"] * 2,
       "b's second window holds both of its starts")


def run_ranks(args, d, steps, name_of, timeout=180):
    """cgbpf record -v ARGS -- sh -c 'RANK=0 rank_steps --steps S0 & ...'
    with steps[r] steps for rank r: the ranks wait at their start until
    cgbpf has their probes in place, and at their end until name_of(rank,
    pid) exists (or 60 s), so that cgbpf reads RANK from their environment
    while they live however late it handles their records. A Result."""
    gate = tempfile.mkdtemp(prefix="child-gate-", dir=d)
    linger = os.path.join(d, "linger")
    env = env_with(CGBPF_CHILD_GATE=gate, RANK_STEPS_LINGER=linger)
    script = " & ".join("RANK=%d CGBPF_MANIFEST=%s/m%d.json %s --steps %d --launches 2" %
                        (r, d, r, wl("rank_steps"), n) for r, n in enumerate(steps)) + " & wait"
    p = subprocess.Popen([CGBPF, "record", "-v"] + args + ["--", "/bin/sh", "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []

    def read_err():
        for line in p.stderr:
            if "libbpf:" not in line:
                open_gate(gate, line)
                lines.append(line)

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    try:
        def named():
            for r in range(len(steps)):
                m = os.path.join(d, "m%d.json" % r)
                if not os.path.exists(m):
                    return False
                import json
                with open(m) as f:
                    pid = json.load(f)["pid"]
                if not os.path.exists(name_of(r, pid)):
                    return False
            return True
        try:
            wait_for(lambda: named() or p.poll() is not None, 120, "every rank's first file")
        except AssertionError:
            pass   # the test's own checks say what is missing
        touch(linger)
        out = p.stdout.read()
        p.wait(timeout)
        t.join(5)
    finally:
        touch(linger)
        kill_quiet(p)
    return Result(p.returncode, out, "".join(lines), None, d)


def test_split_schedule_per_rank():
    """Three ranks (rank_steps with RANK=0,1,2) of 10, 7 and 4 NVTX "step"
    ranges under one cgbpf, --schedule wait=1,warmup=1,active=2,repeat=2:
    each rank counts its own steps, so each rank's cycle 1 is its steps 2-3
    and cycle 2 its steps 6-7; rank 1 exits after its step 6 (its second
    file holds that step, closed at its exit) and rank 2 after step 3 (one
    file). Files are named r%q{RANK}.%h.%p.s%n: the rank's own variable,
    pid and file number; each holds exactly the launches of its steps
    (told by their grid) and their NVTX step ranges."""
    need("rank_steps")
    d = tmpdir()
    host = socket.gethostname()
    steps = [10, 7, 4]
    pattern = os.path.join(d, "r%q{RANK}.%h.%p.s%n.perfetto-trace")

    def name_of(rank, pid, n=1):
        return os.path.join(d, "r%d.%s.%d.s%d.perfetto-trace" % (rank, host, pid, n))
    r = run_ranks(FLAGS + ["--split-per-process", "--capture-range", "nvtx", "--nvtx-capture",
                           "step", "--schedule", "wait=1,warmup=1,active=2,repeat=2",
                           "-o", pattern], d, steps, name_of)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    want = {}
    for rank, n in enumerate(steps):
        m = r.manifest("m%d.json" % rank)
        eq(m["rank"], rank, "the workload saw RANK")
        cycles = [[s for s in (2, 3) if s < n], [s for s in (6, 7) if s < n]]
        for i, cyc in enumerate(c for c in cycles if c):
            want[name_of(rank, m["pid"], i + 1)] = (m["pid"], cyc)
    eq(trace_files(d), sorted(os.path.basename(p) for p in want),
       "rank 0: 2 files, rank 1: 2 (the second with step 6 only), rank 2: 1")
    rows = {row[5]: row for row in windows_table(r.stdout)}
    for path, (pid, cyc) in sorted(want.items()):
        t = load_checked(path, pid)
        from test_recipes import launches_by_step
        eq(launches_by_step(t, pid), {s: 2 for s in cyc},
           "%s: the launches of the rank's own steps %r" % (path, cyc))
        eq(len(t.slices_on(pid=pid, name="step")), len(cyc), "%s: its NVTX step ranges" % path)
        eq(rows[path][:3], (pid, len(cyc), cyc[0] + 1),
           "%s: summary (pid, steps, first step counted from 1)" % path)
        eq(rows[path][4], 2 * len(cyc), "%s: summary launches" % path)


def test_split_nvtx_repeat_n():
    """--capture-range nvtx --capture-range-end repeat:2 per process: each
    of two ranks (5 and 3 steps) writes its own first two steps, one file
    each (numbered per process, -N before .perfetto-trace; %p added as
    --split-per-process does when -o has none)."""
    need("rank_steps")
    d = tmpdir()
    steps = [5, 3]
    pattern = os.path.join(d, "rank%q{RANK}.perfetto-trace")

    def name_of(rank, pid, n=1):
        return os.path.join(d, "rank%d.%d-%d.perfetto-trace" % (rank, pid, n))
    r = run_ranks(FLAGS + ["--split-per-process", "--capture-range", "nvtx", "--nvtx-capture",
                           "step", "--capture-range-end", "repeat:2", "-o", pattern],
                  d, steps, name_of)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    from test_recipes import launches_by_step
    names = []
    for rank in range(2):
        pid = r.manifest("m%d.json" % rank)["pid"]
        for n in (1, 2):
            path = name_of(rank, pid, n)
            names.append(os.path.basename(path))
            t = load_checked(path, pid)
            eq(launches_by_step(t, pid), {n - 1: 2}, "%s: step %d's launches" % (path, n - 1))
    eq(trace_files(d), sorted(names), "two files per rank")


def test_split_windows_with_pids_existing_file():
    """-p PID,PID (two running processes, each with ROLE in its own
    environment): per-process profiler windows named w.%q{ROLE}.%p; a
    window file that exists is not overwritten without --force: that
    process's window is not written (exit 1, said), the other's is."""
    from harness import Bg, start
    wl_path = need("cap_overlap")
    d = tmpdir()
    sync = os.path.join(d, "sync")
    os.mkdir(sync)
    go = os.path.join(d, "go")
    procs = [start([wl_path, role, sync],
                   env=env_with(ROLE=role, CGBPF_WAIT_FILE=go,
                                CGBPF_MANIFEST=os.path.join(d, "m%s.json" % role)))
             for role in ("a", "b")]
    kept = os.path.join(d, "w.a.%d.perfetto-trace" % procs[0].pid)
    with open(kept, "w") as f:
        f.write("keep me")
    bg = None
    try:
        bg = Bg(FLAGS + ["--split-per-process", "--capture-range", "cudaProfilerApi",
                         "-p", "%d,%d" % (procs[0].pid, procs[1].pid),
                         "-o", os.path.join(d, "w.%q{ROLE}.%p.perfetto-trace")], tmp=d)
        bg.wait_msg("tracing 2 process")
        touch(go)
        for p in procs:
            eq(p.wait(90), 0, "workload exit")
        r = bg.finish()
    finally:
        for p in procs:
            kill_quiet(p)
        if bg:
            kill_quiet(bg.p)
    eq(r.rc, 1, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    check("exists" in r.stderr, "says the file exists: %r" % r.stderr[-400:])
    with open(kept) as f:
        eq(f.read(), "keep me", "the existing file is untouched")
    path = os.path.join(d, "w.b.%d.perfetto-trace" % procs[1].pid)
    t = load_checked(path, procs[1].pid)
    eq(len(t.slices_on(pid=procs[1].pid, name="cuLaunchKernel")), 2, "b's first window")
    eq(trace_files(d), sorted([os.path.basename(kept), os.path.basename(path)]),
       "no other file")


def test_nvtx_v2_start_end_range_opens_the_gate():
    """--capture-range nvtx --nvtx-capture cap with NVTX v2 (libnvToolsExt)
    nvtxRangeStartA("cap") .. nvtxRangeEnd(id) ranges
    (tests/workloads/nvtx_v2cap): the start opens the BPF gate at its entry
    and the end closes it by the id the start returned, so each window's
    file holds exactly its launches and its mark (both gated in BPF: with
    the gate shut they would never reach user space); the k_out launches
    in the "other" ranges and before them are in no file."""
    wl_path = need("nvtx_v2cap")
    d = tmpdir()
    out = os.path.join(d, "v2.perfetto-trace")
    r = record(FLAGS + ["--capture-range", "nvtx", "--nvtx-capture", "cap",
                        "--capture-range-end", "repeat", "-o", out], cmd=[wl_path, "3"], tmp=d)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    m = r.manifest()
    eq(m["windows"], [2, 3, 4], "the workload's windows")
    eq(trace_files(d), ["v2-%d.perfetto-trace" % i for i in (1, 2, 3)], "one file per range")
    for i, n in enumerate(m["windows"]):
        path = os.path.join(d, "v2-%d.perfetto-trace" % (i + 1))
        t = load_checked(path, m["pid"])
        ks = [s.args.get("kernel") for s in t.slices_on(pid=m["pid"], name="cuLaunchKernel")]
        eq(ks, ["k_in"] * n, "%s: exactly the window's launches" % path)
        # The injection library's own status instants ("GPU activity:
        # flushed" when a window ends, sent at its next poll) fall where
        # they happen, which may be inside the next window: not marks.
        eq([i.name for i in t.instants if i.pid == m["pid"] and
            not i.name.startswith("GPU activity")], ["in"],
           "%s: the mark inside the range, only" % path)
        eq([s.name for s in t.slices if s.pid == m["pid"] and s.name in ("cap", "other")],
           ["cap"], "%s: the capture range itself, no other range" % path)
