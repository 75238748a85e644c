# SPDX-License-Identifier: MIT
"""Output names (issue 13): -o patterns (%p %h %n %q{VAR} %%), files not
overwritten without --force, and --split-per-process (one self-contained
trace per traced process). Every trace is decoded by tests/lib/ptrace.py
and, when present, loaded by Perfetto's trace processor."""
import glob
import os
import socket
import subprocess

from harness import (CGBPF, FAKE, api_counts, check, clean_trace, eq, env_with, expected_calls,
                     ptrace, record, tmpdir, wl)

# Scheduler data and CPU samples are off with --split-per-process; the
# same options keep the single-file runs here small.
FLAGS = ["--sample-hz", "0", "--sched", "off"]
CGBPF_NS = 4   # UUID_CGBPF's namespace (user/out/tracks.h): cgbpf's own tracks


def tp_check(path, pid):
    """Trace processor reads the file without errors and sees the one
    process it is for (and no other with a name)."""
    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    problems, facts = tpcheck.compare(path, None, (), sched=False)
    # Not this feature's: trace processor files an instant on a process
    # track under a track of no name where the decoder uses the process's
    # name (single-file traces of forked children show it too).
    problems = [p for p in problems if "cgbpf: probes came after this point" not in p]
    check(not problems, "%s: trace processor and the decoder disagree:\n    %s" %
          (path, "\n    ".join(problems)))
    pids = {p for (_, p) in facts["processes"] if p}
    eq(pids, {pid}, "%s: processes trace processor sees" % path)


def only_process(t, pid, path):
    """Every track of t is pid's or cgbpf's own."""
    clean_trace(t)
    eq(set(t.processes), {pid}, "%s: the one process track" % path)
    for tr in t.tracks.values():
        if tr.pid is None:
            eq(tr.uuid >> 56, CGBPF_NS, "%s: a track of no process is cgbpf's (%r)" % (path, tr))
        else:
            eq(tr.pid, pid, "%s: track %r belongs to pid %d" % (path, tr, pid))
    for s in t.slices:
        eq(s.pid, pid, "%s: slice %s of pid %d" % (path, s.name, pid))
    ends = [i for i in t.instants if (i.name or "").startswith("cgbpf: capture ended")]
    eq(len(ends), 1, "%s: one capture-ended instant" % path)


def test_split_fork_one_file_each():
    """fork: a parent and 3 children, each its own file named with %n and
    the .%p cgbpf adds before the extension when -o has no %p; each file
    holds its process's tracks and every call it made (manifest)."""
    d = tmpdir()
    pattern = os.path.join(d, "f-%n.perfetto-trace")
    r = record(["--split-per-process", "-o", pattern],
               cmd=[wl("fork"), "--children", "3", "--iters", "20"], child_gate=True, tmp=d)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-500:])
    m = r.manifest()
    pids = [m["pid"]] + m["children"]
    files = sorted(glob.glob(os.path.join(d, "f-*.perfetto-trace")))
    eq(len(files), 4, "one file per process: %r" % files)
    by_pid, seqs = {}, set()
    for f in files:
        base = os.path.basename(f)
        parts = base.split(".")          # f-N, PID, perfetto-trace
        eq(len(parts), 3, "name %s: f-%%n.%%p.perfetto-trace" % base)
        seqs.add(int(parts[0][2:]))
        by_pid[int(parts[1])] = f
        check("wrote %s (pid %s)" % (f, parts[1]) in r.stderr, "says it wrote %s" % f)
    eq(seqs, {1, 2, 3, 4}, "%n numbers the files 1..4")
    eq(sorted(by_pid), sorted(pids), "the files' pids are the parent's and the children's")
    eq(by_pid[m["pid"]], os.path.join(d, "f-1.%d.perfetto-trace" % m["pid"]),
       "the parent, described first, is file 1")
    for pid, info in m["processes"].items():
        pid = int(pid)
        f = by_pid[pid]
        t = ptrace.load(f)
        only_process(t, pid, f)
        eq(api_counts(t, pid), expected_calls(info["calls"]), "%s: every call of pid %d" % (f, pid))
        launches = [s for s in t.slices if s.name == "cuLaunchKernel"]
        eq(len(launches), sum(info["kernels"].values()), "%s: every launch" % f)
        # Its GPU tracks came along: measured (the parent: the injection
        # library collects from its cuInit; a forked child's does not) or
        # estimated.
        gpu = [s for s in t.slices if s.name == "GPU work queued (estimate)" or
               (t.tracks[s.track_uuid].name or "").startswith("stream ")]
        check(gpu and all(t.tracks[s.track_uuid].pid == pid for s in gpu),
              "%s: the process's GPU slices, measured or estimated (%d)" % (f, len(gpu)))
        tp_check(f, pid)
    check(not os.path.exists(os.path.join(d, "out.perfetto-trace")), "no single trace")


def test_split_rank_env_and_host():
    """Two ranks started by a shell with RANK=0 and RANK=1 in their
    environments (tests/workloads/rank_steps): rank%q{RANK}-%h-%p names
    each file; the shell makes no event of its own and gets no file."""
    from test_recipes import need_rank_steps, run_ranks
    need_rank_steps()
    d = tmpdir()
    host = socket.gethostname()
    pattern = os.path.join(d, "rank%q{RANK}-%h-%p.perfetto-trace")

    def name_of(rank, pid):
        return os.path.join(d, "rank%d-%s-%d.perfetto-trace" % (rank, host, pid))
    r = run_ranks(["--split-per-process", "--syscall-threshold", "off", "-o", pattern], d, 2,
                  4, 2, name_of)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-500:])
    want = []
    for rank in (0, 1):
        m = r.manifest("m%d.json" % rank)
        f = name_of(rank, m["pid"])
        want.append(os.path.basename(f))
        check(os.path.exists(f), "rank %d's file %s (have %r)" % (rank, f, os.listdir(d)))
        t = ptrace.load(f)
        only_process(t, m["pid"], f)
        eq(api_counts(t, m["pid"]), dict(expected_calls(m["calls"]), step=m["steps"]),
           "%s: every call and NVTX step range" % f)
        tp_check(f, m["pid"])
    eq(sorted(f for f in os.listdir(d) if f.endswith(".perfetto-trace")), sorted(want),
       "the ranks' files only")


def test_split_with_pid():
    """--split-per-process with -p: the running process's file is named
    from its own /proc/PID/environ (RANK=4), with every call it made once
    released."""
    from test_recipes import NVTX_LIB, need_rank_steps
    from harness import Bg, kill_quiet, start, touch
    need_rank_steps()
    d = tmpdir()
    gate = os.path.join(d, "go")
    m_path = os.path.join(d, "m.json")
    # -p: NVTX's injection library must be in its environment from the start.
    w = start([wl("rank_steps"), "--steps", "5", "--launches", "2"],
              env=env_with(RANK=4, CGBPF_WAIT_FILE=gate, CGBPF_MANIFEST=m_path,
                           NVTX_INJECTION64_PATH=NVTX_LIB))
    bg = None
    try:
        bg = Bg(["--split-per-process", "--syscall-threshold", "off", "-p", str(w.pid), "-o",
                 os.path.join(d, "p%q{RANK}.perfetto-trace")], tmp=d)
        bg.wait_msg("tracing 1 process")
        touch(gate)
        eq(w.wait(60), 0, "workload exit")
        r = bg.finish()
    finally:
        kill_quiet(w)
        if bg:
            kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-500:])
    import json
    with open(m_path) as f:
        m = json.load(f)
    path = os.path.join(d, "p4.%d.perfetto-trace" % w.pid)
    check(os.path.exists(path), "%s (have %r)" % (path, os.listdir(d)))
    t = ptrace.load(path)
    only_process(t, w.pid, path)
    eq(api_counts(t, w.pid), dict(expected_calls(m["calls"]), step=5), "every call")


def test_single_file_patterns():
    """Without --split-per-process: -- CMD's %p is the command's pid (the
    trace is renamed to it before the command runs), %q{VAR} the
    environment it inherits, %% a percent sign, %n 1."""
    d = tmpdir()
    env = env_with(CGBPF_MANIFEST=os.path.join(d, "manifest.json"), JOB="j7")
    pattern = os.path.join(d, "run-%p-%q{JOB}-%n-100%%.perfetto-trace")
    r = record(FLAGS + ["-o", pattern], cmd=[wl("mt"), "--threads", "1", "--iters", "10"],
               env=env, tmp=d)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-500:])
    m = r.manifest()
    f = os.path.join(d, "run-%d-j7-1-100%%.perfetto-trace" % m["pid"])
    eq(sorted(os.listdir(d)), sorted(["manifest.json", os.path.basename(f)]),
       "the trace under its name, no temporary file left")
    check("wrote %s" % f in r.stderr, "says where: %r" % r.stderr[-300:])
    t = ptrace.load(f)
    clean_trace(t)
    eq(api_counts(t, m["pid"]), expected_calls(m["calls"]), "the command's calls")


def test_pid_pattern_with_p():
    """-p PID: %p is that pid and %q{VAR} its own environment, read from
    /proc/PID/environ (not cgbpf's)."""
    d = tmpdir()
    env = env_with(RANK="5")
    p = subprocess.Popen(["/bin/sleep", "30"], env=env)
    try:
        pattern = os.path.join(d, "r%q{RANK}-%p.perfetto-trace")
        out = subprocess.run([CGBPF, "record"] + FLAGS + ["-d", "300ms", "-p", str(p.pid),
                              "-o", pattern], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, RANK="9"))
        eq(out.returncode, 0, "cgbpf exit (stderr %r)" % out.stderr[-500:])
        f = os.path.join(d, "r5-%d.perfetto-trace" % p.pid)
        check(os.path.exists(f), "%s (have %r)" % (f, os.listdir(d)))
        clean_trace(ptrace.load(f))
        # A variable the target lacks is an error before any tracing.
        out = subprocess.run([CGBPF, "record"] + FLAGS + ["-d", "300ms", "-p", str(p.pid),
                              "-o", os.path.join(d, "x%q{NO_SUCH_VAR_X}")],
                             capture_output=True, text=True, timeout=60)
        eq(out.returncode, 2, "missing variable (stderr %r)" % out.stderr)
        check("process %d has no NO_SUCH_VAR_X" % p.pid in out.stderr, "message %r" % out.stderr)
        check("tracing" not in out.stderr, "before any tracing: %r" % out.stderr)
    finally:
        p.kill()
        p.wait()


def test_no_overwrite_without_force():
    """An existing trace or summary file is refused (exit 2, named) and
    left as it was; --force replaces it; split files likewise."""
    d = tmpdir()
    trace = os.path.join(d, "t.perfetto-trace")
    with open(trace, "w") as f:
        f.write("keep")
    p = subprocess.run([CGBPF, "record"] + FLAGS + ["-o", trace, "--", "true"],
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 2, "exit for an existing trace (stderr %r)" % p.stderr)
    check("%s exists" % trace in p.stderr and "--force" in p.stderr, "message %r" % p.stderr)
    check("tracing" not in p.stderr, "before any tracing: %r" % p.stderr)
    eq(open(trace).read(), "keep", "left as it was")
    summary = os.path.join(d, "s.txt")
    with open(summary, "w") as f:
        f.write("keep")
    fresh = os.path.join(d, "fresh.perfetto-trace")
    p = subprocess.run([CGBPF, "record"] + FLAGS + ["-o", fresh, "--summary-file", summary,
                        "--", "true"], capture_output=True, text=True, timeout=60)
    eq(p.returncode, 2, "exit for an existing summary file (stderr %r)" % p.stderr)
    check("%s exists" % summary in p.stderr, "message %r" % p.stderr)
    check(not os.path.exists(fresh), "no trace left behind")
    p = subprocess.run([CGBPF, "record"] + FLAGS + ["--force", "-o", trace, "--summary-file",
                        summary, "--", "true"], capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, "--force (stderr %r)" % p.stderr[-300:])
    clean_trace(ptrace.load(trace))
    check("cgbpf summary" in open(summary).read().lower() or os.path.getsize(summary) > 4,
          "the summary replaced")
    # -- CMD with %p: the name is known once the command is forked.
    pat = os.path.join(d, "c-%p.perfetto-trace")
    p = subprocess.run([CGBPF, "record"] + FLAGS + ["-o", pat, "--", "true"],
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, "first run (stderr %r)" % p.stderr[-300:])
    # The default name (a timestamp) still works in an empty directory.
    e = tmpdir()
    p = subprocess.run([CGBPF, "record"] + FLAGS + ["--", "true"], capture_output=True,
                       text=True, timeout=60, cwd=e)
    eq(p.returncode, 0, "default name (stderr %r)" % p.stderr[-300:])
    made = os.listdir(e)
    eq(len(made), 1, "one default-named trace: %r" % made)
    check(made[0].startswith("cgbpf-") and made[0].endswith(".perfetto-trace"), made[0])
    # Split: an existing file of one process is not replaced.
    s = tmpdir()
    r = record(["--split-per-process", "-o", os.path.join(s, "p.%p.perfetto-trace")],
               cmd=[wl("fork"), "--children", "1", "--iters", "5"], child_gate=True, tmp=s)
    eq(r.rc, 0, "split run (stderr %r)" % r.stderr[-300:])
    first = sorted(glob.glob(os.path.join(s, "p.*.perfetto-trace")))
    eq(len(first), 2, "two files: %r" % first)


def test_bad_patterns_exit_2():
    """Unknown %-codes, an unterminated %q{, and --split-per-process with
    what it cannot split yet: exit 2 with a clear message, before any
    tracing."""
    cases = [
        (["-o", "x%y"], "unknown code %y"),
        (["-o", "x%q{RANK"], "not closed"),
        (["-o", "x%q"], "in braces"),
        (["-o", "x%"], "lone %"),
        (["-o", "x%q{1A}"], "cannot be part of a variable name"),
        (["--split-per-process", "--sched", "all"], "--sched off"),
        (["--split-per-process", "--sample-hz", "99"], "--sample-hz 0"),
        (["--split-per-process", "--summary-only"], "drop --summary-only"),
    ]
    d = tmpdir()
    for args, why in cases:
        p = subprocess.run([CGBPF, "record"] + args + ["--", "true"], capture_output=True,
                           text=True, timeout=60, cwd=d)
        eq(p.returncode, 2, "exit for %s (stderr %r)" % (args, p.stderr))
        check(why in p.stderr, "message for %s: %r" % (args, p.stderr))
        check("tracing" not in p.stderr, "before any tracing: %r" % p.stderr)
    eq(os.listdir(d), [], "no file written")


REUSE_DRIVER = r'''
import ctypes, os, subprocess, sys, threading
train, libcuda = sys.argv[1], sys.argv[2]
subprocess.run([train, "--iters", "1"], stdout=subprocess.DEVNULL)
pid_a = int(open(os.environ["CGBPF_MANIFEST"]).read().split('"pid": ')[1].split(",")[0])
if os.fork() == 0:
    # Another process whose thread takes pid_a as its tid: the pid is
    # chosen just before the thread is created.
    cu = ctypes.CDLL(libcuda)
    t = threading.Thread(target=lambda: cu.cuInit(0))
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid_a - 1))
    t.start()
    t.join()
    os._exit(0)
os.wait()
print("REUSE pid_a=%d" % pid_a)
'''


def test_thread_id_reused_by_another_process():
    """A tid that another process's thread takes later (pids wrap after
    pid_max: 32768 on many hosts; /proc/sys/kernel/ns_last_pid makes it
    happen here): each thread keeps its own track under its own process,
    and trace processor reports no conflicting track descriptor."""
    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        from harness import Skip
        raise Skip("/proc/sys/kernel/ns_last_pid not writable here")
    d = tmpdir()
    script = os.path.join(d, "driver.py")
    with open(script, "w") as f:
        f.write(REUSE_DRIVER)
    for attempt in range(3):
        r = record(FLAGS, cmd=["/usr/bin/python3", script, wl("train"),
                               os.path.join(FAKE, "libcuda.so.1")])
        eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
        import re
        m = re.search(r"^REUSE pid_a=(\d+)$", r.stdout, re.M)
        check(m, "the driver's line:\n%s" % r.stdout[-1500:])
        pid_a = int(m.group(1))
        t = r.trace
        threads = [(tr.pid, tr.tid) for tr in t.tracks.values() if tr.kind == "thread"]
        reused = [p for (p, tid) in threads if tid == pid_a and p != pid_a]
        if reused:
            break
        print("# attempt %d: pid %d not reused as another process's thread (%r)" %
              (attempt, pid_a, threads))
    else:
        from harness import Skip
        raise Skip("the system took the pid first three times")
    clean_trace(t)
    check((pid_a, pid_a) in threads, "the first process's thread (%d) is there" % pid_a)
    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    rows = tpcheck.query(r.trace_path, "select name, value from stats where value > 0 and "
                         "severity in ('error', 'data_loss')")[0]
    eq([x for x in rows if x["name"] == "track_descriptor_conflicting_reservation"], [],
       "no conflicting track descriptors: %r" % rows)
    rows = tpcheck.query(r.trace_path, "select t.tid, p.pid from thread t join process p "
                         "using (upid) where t.tid = %d" % pid_a)[0]
    eq(sorted(int(x["pid"]) for x in rows), sorted({pid_a, reused[0]}),
       "trace processor: tid %d in both processes" % pid_a)
