# SPDX-License-Identifier: MIT
"""The profiling recipes of docs/recipes.md that run without a GPU, with
the commands the page gives (scaled down: fewer steps and ranks), against
the fake libcuda and cgbpf's NVTX injection library. Ranks are
tests/workloads/rank_steps processes: an NVTX "step" range around a known
number of launches per iteration, each launch's grid naming its step."""
import os
import signal
import socket
import subprocess

from harness import (CGBPF, OUT, Bg, Skip, check, clean_trace, eq, env_with, kill_quiet,
                     ptrace, start, tmpdir, wl)

NVTX_LIB = os.path.join(OUT, "inject", "libcgbpf-nvtx.so")
STEP_KERNEL = "rank_step(float*, int)"


def need_rank_steps():
    if not os.path.exists(wl("rank_steps")):
        raise Skip("rank_steps not built (no CUDA toolkit: it needs the NVTX v3 headers)")


def launches_by_step(t, pid):
    """{step: launches} of pid's cuLaunchKernel slices (grid x = step + 1)."""
    out = {}
    for s in t.slices_on(pid=pid, name="cuLaunchKernel"):
        eq(s.args.get("kernel"), STEP_KERNEL, "kernel name")
        grid = int(s.args["launch"].split("<<<(")[1].split(",")[0])
        out[grid - 1] = out.get(grid - 1, 0) + 1
    return out


def ranks_script(d, ranks, steps, launches):
    """sh -c text starting the ranks with RANK set, as torchrun does."""
    return " & ".join("RANK=%d CGBPF_MANIFEST=%s/m%d.json %s --steps %d --launches %d" %
                      (r, d, r, wl("rank_steps"), steps, launches)
                      for r in range(ranks)) + " & wait"


def run_ranks(args, d, ranks, steps, launches, name_of, timeout=180):
    """cgbpf record ARGS -- sh -c 'RANK=0 rank_steps ... & RANK=1 ... &
    wait' (torchrun's workers, started by a shell): the ranks wait at
    their start until cgbpf says their probes are in place (child gate),
    and at their end until cgbpf has created the file name_of(rank, pid)
    names for each (or 60 s), so that it reads their environment while
    they live however late it handles their records. A Result."""
    import tempfile
    import threading
    from harness import Result, open_gate, touch, wait_for
    gate = tempfile.mkdtemp(prefix="child-gate-", dir=d)
    linger = os.path.join(d, "linger")
    env = env_with(CGBPF_CHILD_GATE=gate, RANK_STEPS_LINGER=linger)
    argv = [CGBPF, "record", "-v"] + args + ["--", "/bin/sh", "-c",
                                             ranks_script(d, ranks, steps, launches)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
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
            for r in range(ranks):
                m = os.path.join(d, "m%d.json" % r)
                if not os.path.exists(m):
                    return False
                if not os.path.exists(name_of(r, r_manifest(d, r)["pid"])):
                    return False
            return True
        try:
            wait_for(lambda: named() or p.poll() is not None, 120, "every rank's trace file")
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


def test_torchrun_ranks():
    """Recipe 1: per-rank traces of a window of steps (here steps 5-7 of
    12), one cgbpf per worker as torchrun --no-python starts them: each
    `cgbpf record -o ddp.rank%q{RANK}.%h.%p... --capture-range nvtx
    --nvtx-capture step --schedule ... -- rank_steps` with RANK in its
    environment (cgbpf's own, which the command inherits). Each rank's
    file holds its own process only and exactly the launches and NVTX step
    ranges of its active steps (steps counted per rank: one target each)."""
    import json
    need_rank_steps()
    d = tmpdir()
    host = socket.gethostname()
    wait, active, launches, steps = 5, 3, 3, 12
    pattern = os.path.join(d, "ddp.rank%q{RANK}.%h.%p.perfetto-trace")
    procs = []
    for rank in (0, 1):
        env = env_with(RANK=str(rank), CGBPF_MANIFEST=os.path.join(d, "m%d.json" % rank))
        argv = [CGBPF, "record", "-o", pattern, "--capture-range", "nvtx", "--nvtx-capture",
                "step", "--schedule", "wait=%d,warmup=0,active=%d,repeat=1" % (wait, active),
                "--", wl("rank_steps"), "--steps", str(steps), "--launches", str(launches)]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            outs.append((p.returncode, err))
    finally:
        for p in procs:
            kill_quiet(p)
    for rank in (0, 1):
        rc, err = outs[rank]
        eq(rc, 0, "rank %d's cgbpf exit (stderr %r)" % (rank, err[-600:]))
        with open(os.path.join(d, "m%d.json" % rank)) as f:
            m = json.load(f)
        eq(m["rank"], rank, "the workload saw RANK")
        f = os.path.join(d, "ddp.rank%d.%s.%d.perfetto-trace" % (rank, host, m["pid"]))
        check(os.path.exists(f), "rank %d's trace %s (have %r)" % (rank, f, os.listdir(d)))
        t = ptrace.load(f)
        clean_trace(t)
        eq(set(t.processes), {m["pid"]}, "%s: only rank %d's process" % (f, rank))
        eq(launches_by_step(t, m["pid"]), {s: launches for s in range(wait, wait + active)},
           "%s: the launches of steps %d-%d" % (f, wait, wait + active - 1))
        eq(len(t.slices_on(pid=m["pid"], name="step")), active, "%s: the NVTX step ranges" % f)


def test_torchrun_ranks_one_cgbpf():
    """Recipe 1 with one cgbpf for every rank: `cgbpf record
    --split-per-process -o ddp.rank%q{RANK}.%h.%p.perfetto-trace
    --capture-range nvtx --nvtx-capture step --schedule
    wait=5,warmup=0,active=3,repeat=1 -- torchrun ...` (here a shell
    starting two ranks of 12 steps): each rank counts its own steps and
    gets one file with exactly the launches and NVTX step ranges of its
    steps 5-7; the shell gets none."""
    need_rank_steps()
    d = tmpdir()
    host = socket.gethostname()
    wait, active, launches, steps = 5, 3, 3, 12

    def name_of(rank, pid):
        return os.path.join(d, "ddp.rank%d.%s.%d.perfetto-trace" % (rank, host, pid))
    r = run_ranks(["--split-per-process", "--syscall-threshold", "off", "-o",
                   os.path.join(d, "ddp.rank%q{RANK}.%h.%p.perfetto-trace"),
                   "--capture-range", "nvtx", "--nvtx-capture", "step", "--schedule",
                   "wait=%d,warmup=0,active=%d,repeat=1" % (wait, active)],
                  d, 2, steps, launches, name_of)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    want = []
    for rank in (0, 1):
        m = r.manifest("m%d.json" % rank)
        f = name_of(rank, m["pid"])
        want.append(os.path.basename(f))
        check(os.path.exists(f), "rank %d's trace %s (have %r)" % (rank, f, os.listdir(d)))
        t = ptrace.load(f)
        clean_trace(t)
        eq(set(t.processes), {m["pid"]}, "%s: only rank %d's process" % (f, rank))
        eq(launches_by_step(t, m["pid"]), {s: launches for s in range(wait, wait + active)},
           "%s: the launches of steps %d-%d" % (f, wait, wait + active - 1))
        eq(len(t.slices_on(pid=m["pid"], name="step")), active, "%s: the NVTX step ranges" % f)
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")), sorted(want),
       "one file per rank, none for the shell")


def test_torchrun_ranks_whole_run():
    """Recipe 1 without the capture window (what runs before issue 13's
    capture options are in): one file per rank named
    ddp.rank%q{RANK}.%h.%p with all its steps, and no file for the shell
    that stands for the torchrun launcher."""
    need_rank_steps()
    d = tmpdir()
    host = socket.gethostname()
    steps, launches = 6, 2
    pattern = os.path.join(d, "ddp.rank%q{RANK}.%h.%p.perfetto-trace")
    r = run_ranks(["--split-per-process", "--syscall-threshold", "off", "-o", pattern], d, 2,
                  steps, launches,
                  lambda rank, pid: os.path.join(d, "ddp.rank%d.%s.%d.perfetto-trace" %
                                                 (rank, host, pid)))
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    files = sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace"))
    want = []
    for rank in (0, 1):
        m = r.manifest("m%d.json" % rank)
        base = "ddp.rank%d.%s.%d.perfetto-trace" % (rank, host, m["pid"])
        want.append(base)
        f = os.path.join(d, base)
        check(os.path.exists(f), "rank %d's trace %s (have %r)" % (rank, f, files))
        t = ptrace.load(f)
        clean_trace(t)
        eq(set(t.processes), {m["pid"]}, "%s: only rank %d's process" % (f, rank))
        eq(launches_by_step(t, m["pid"]), {s: launches for s in range(steps)},
           "%s: every step's launches" % f)
        eq(len(t.slices_on(pid=m["pid"], name="step")), steps, "%s: the NVTX step ranges" % f)
    eq(files, sorted(want), "one file per rank, none for the launcher")


def test_system_wide_nodes_merged():
    """Recipe 2's commands: record -a (narrowed with --comm) on each
    "node" while ranks start, -o NAME.%h, then cgbpf merge of the node
    traces. Two captures stand for two nodes: the merged trace has both
    machines, every rank's launches and its NVTX step ranges."""
    need_rank_steps()
    if not os.path.exists(NVTX_LIB):
        raise Skip("%s not built" % NVTX_LIB)
    d = tmpdir()
    host = socket.gethostname()
    steps, launches = 4, 2
    nodes = []
    for node in (0, 1):
        out = os.path.join(d, "ray.%%h.node%d.perfetto-trace" % node)
        bg = Bg(["-a", "--comm", "rank_steps", "-o", out, "--sample-hz", "0",
                 "--syscall-threshold", "off", "--sched", "off"], tmp=d, gate=True)
        procs = []
        try:
            bg.wait_msg("system-wide capture running")
            for rank in (2 * node, 2 * node + 1):
                env = env_with(RANK=rank, CGBPF_MANIFEST=os.path.join(d, "m%d.json" % rank),
                               CGBPF_CHILD_GATE=bg.gate, NVTX_INJECTION64_PATH=NVTX_LIB)
                procs.append(start([wl("rank_steps"), "--steps", str(steps), "--launches",
                                    str(launches)], env=env))
            for p in procs:
                eq(p.wait(60), 0, "rank exit")
            bg.p.send_signal(signal.SIGINT)
            res = bg.finish()
        finally:
            for p in procs:
                kill_quiet(p)
            kill_quiet(bg.p)
        eq(res.rc, 0, "node %d capture (stderr %r)" % (node, res.stderr[-400:]))
        path = os.path.join(d, "ray.%s.node%d.perfetto-trace" % (host, node))
        check(os.path.exists(path), "%s (have %r)" % (path, os.listdir(d)))
        nodes.append(path)
    job = os.path.join(d, "ray-job.perfetto-trace")
    p = subprocess.run([CGBPF, "merge"] + nodes + ["-o", job], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "merge (stderr %r)" % p.stderr[-400:])
    t = ptrace.load(job)
    clean_trace(t)
    for rank in range(4):
        m = r_manifest(d, rank)
        machine = rank // 2
        procs = [tr for tr in t.tracks.values()
                 if tr.kind == "process" and tr.pid == m["pid"] and tr.machine == machine]
        eq(len(procs), 1, "rank %d's process on machine %d" % (rank, machine))
        got = {}
        for s in t.slices:
            if s.pid == m["pid"] and t.tracks[s.track_uuid].machine == machine:
                got[s.name] = got.get(s.name, 0) + 1
        eq(got.get("cuLaunchKernel"), steps * launches, "rank %d's launches" % rank)
        eq(got.get("step"), steps, "rank %d's NVTX step ranges" % rank)


def r_manifest(d, rank):
    import json
    with open(os.path.join(d, "m%d.json" % rank)) as f:
        return json.load(f)
