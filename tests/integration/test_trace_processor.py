# SPDX-License-Identifier: MIT
"""Every kind of trace cgbpf writes, read by Perfetto's own trace processor
(v58.2, the engine behind ui.perfetto.dev; ../shared/perfetto, skipped with
a line saying so where it is absent) and by the project's decoder: no
import errors or data loss, the same slices, arguments, counters, samples,
backtraces, scheduler slices and thread states, one process per pid with
API slices and thread states on the same thread, the names cgbpf gave
(tests/lib/tpcheck.py). Also: a command run with `record -- CMD` is one
process, named after the program it execs, for both readers."""
import os
import shutil
import signal
import socket
import subprocess
import threading

import harness
import ptrace
import tpcheck
from harness import (CGBPF, Bg, Skip, check, clean_trace, env_with, eq, kill_quiet, record, start,
                     tmpdir, touch, wait_for, wl)

FAST = ["--sample-hz", "499", "--backtrace-threshold", "20us"]


def need_tp():
    if tpcheck.shell_path() is None:
        raise Skip(tpcheck.skip_reason())


def agree(path, allow=(), trace=None):
    """trace processor and the decoder read the same things from path."""
    need_tp()
    t = trace or ptrace.load(path)
    clean_trace(t)
    eq(ptrace.sched(t).errors, [], "scheduler decoding errors")
    problems, facts = tpcheck.compare(path, t, allow)
    check(not problems, "trace processor %s and the decoder disagree on %s:\n    %s"
          % (tpcheck.VERSION, path, "\n    ".join(problems)))
    return t, facts


def rec(name, args, cmd, env=None, rc=0):
    r = record(args, cmd=cmd, env=env)
    eq(r.rc, rc, "%s: cgbpf exit (stderr %r)" % (name, r.stderr[-500:]))
    return r


def test_driver_api_sched_syscalls_stacks():
    """The CUDA driver API, every CPU's scheduler, syscalls nested in API
    calls, CPU samples and backtraces of slow calls, GPU memory counters."""
    need_tp()
    r = rec("train", FAST, [wl("train"), "--iters", "300"])
    t, _ = agree(r.trace_path)
    check(t.slices and t.syscall_slices and t.counters, "API and syscall slices, counters")
    check(any(s.callstack for s in t.slices), "backtraces on slow calls")
    check(ptrace.sched(t).compact_bundles, "compact scheduler bundles")


def test_runtime_api():
    need_tp()
    exe = wl("crt_app")
    if not os.path.exists(exe):
        raise Skip("%s not built" % exe)
    r = rec("cudart", ["--sample-hz", "0"], [exe, "--iters", "3"])
    t, _ = agree(r.trace_path)
    check(any(s.name.startswith("cuda") for s in t.slices), "runtime API slices")


def test_nccl_comm_tracks():
    need_tp()
    exe = wl("nccl_ranks")
    if not os.path.exists(exe):
        raise Skip("%s not built (no CUDA toolkit: it needs nccl.h)" % exe)
    r = rec("nccl", ["--sample-hz", "0"], [exe, "--ranks", "2", "--iters", "5"])
    t, _ = agree(r.trace_path)
    check(any((tr.display_name or "").startswith("NCCL comm") for tr in t.tracks.values()),
          "NCCL communicator tracks")


def test_nvtx_v3_and_v2():
    need_tp()
    flags = ["--sample-hz", "0"]
    ran = 0
    v3 = wl("nvtx_ranges")
    if os.path.exists(v3) and os.path.exists(os.path.join(os.path.dirname(CGBPF), "inject",
                                                          "libcgbpf-inject.so")):
        env = env_with()
        env.pop("NVTX_INJECTION64_PATH", None)
        r = rec("nvtx3", flags, [v3], env=env)
        t, _ = agree(r.trace_path)
        check(any(s.name == "outer" for s in t.slices), "NVTX v3 ranges")
        ran += 1
    v2 = wl("nvtx_v2")
    if os.path.exists(v2):
        r = rec("nvtx2", flags, [v2])
        t, _ = agree(r.trace_path)
        check(t.slices, "NVTX v2 ranges")
        ran += 1
    if not ran:
        raise Skip("neither nvtx_ranges nor nvtx_v2 built")


def test_sched_targets():
    """--sched targets writes full switch events of the targets only:
    trace processor finds a prev that is not the CPU's last next and
    counts mismatched_sched_switch_tids (docs/perfetto-compat.md); nothing
    else."""
    need_tp()
    r = rec("sched_targets", ["--sched", "targets", "--sample-hz", "0"], [wl("sched_mix")])
    t, facts = agree(r.trace_path, allow=("mismatched_sched_switch_tids",))
    check(not ptrace.sched(t).compact_bundles, "no compact bundles in targets scope")


def gated_workload(d, name):
    """train under a name of its own (its comm: other GPU processes on the
    host stay out of --comm), started and holding libcuda before the
    capture starts, waiting for the file the caller creates to run."""
    exe = os.path.join(d, name)
    shutil.copy(wl("train"), exe)
    gate = os.path.join(d, "go")
    w = start([exe, "--iters", "200"], env=env_with(CGBPF_WAIT_FILE=gate))
    wait_for(lambda: w.poll() is not None or
             "libcuda.so.1" in open("/proc/%d/maps" % w.pid).read(), 30,
             "the workload to map libcuda")
    check(w.poll() is None, "workload running")
    return w, gate


def test_system_wide():
    """-a, filtered by comm."""
    need_tp()
    d = tmpdir()
    name = "tp%d" % os.getpid()
    w, gate = gated_workload(d, name)
    try:
        bg = Bg(["-a", "--comm", name] + FAST, tmp=d)
        try:
            bg.wait_msg("system-wide capture running", 60)
            touch(gate)
            eq(w.wait(120), 0, "workload exit")
        finally:
            bg.p.send_signal(signal.SIGINT)
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf -a exit (stderr %r)" % r.stderr[-500:])
    t, facts = agree(r.trace_path)
    check(any(s.pid == w.pid for s in t.slices), "the workload's API slices")
    eq(len(facts["processes"].get((0, w.pid), [])), 1, "one process for the workload")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_monitor_dump():
    need_tp()
    d = tmpdir()
    dumps = os.path.join(d, "dumps")
    os.makedirs(dumps)
    listen = "127.0.0.1:%d" % free_port()
    name = "tpm%d" % os.getpid()
    w, gate = gated_workload(d, name)
    p = subprocess.Popen([CGBPF, "monitor", "--listen", listen, "--dump-dir", dumps,
                          "--flight-recorder", "60s", "--trigger-slow", "off", "--interval", "1h",
                          "--comm", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env_with())
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
    reader.start()
    try:
        # Said once the probes are in place.
        wait_for(lambda: p.poll() is not None or "monitoring; metrics at" in "".join(lines), 60,
                 "the monitor to start")
        check(p.poll() is None, "monitor running (stderr %r)" % "".join(lines))
        touch(gate)
        eq(w.wait(120), 0, "workload exit")
        q = subprocess.run([CGBPF, "dump", "--listen", listen], capture_output=True, text=True,
                           timeout=60)
        eq(q.returncode, 0, "cgbpf dump exit (stderr %r)" % q.stderr)
        # Renamed from .partial when complete.
        wait_for(lambda: any(f.endswith(".perfetto-trace") for f in os.listdir(dumps)), 60,
                 "the dump")
        path = [os.path.join(dumps, f) for f in os.listdir(dumps)
                if f.endswith(".perfetto-trace")][0]
    finally:
        kill_quiet(w)
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    t, _ = agree(path)
    check(any(s.pid == w.pid for s in t.slices), "the workload's calls in the dump")


def test_merge_output():
    """Two traces merged: each its own machine in trace processor."""
    need_tp()
    d = tmpdir()
    ins = []
    for i in range(2):
        r = record(FAST, cmd=[wl("mt")])
        eq(r.rc, 0, "record %d (stderr %r)" % (i, r.stderr[-300:]))
        ins.append(r.trace_path)
    out = os.path.join(d, "merged.perfetto-trace")
    p = subprocess.run([CGBPF, "merge"] + ins + ["-o", out], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "merge exit (stderr %r)" % p.stderr[-300:])
    t, facts = agree(out)
    eq(sorted({tr.machine for tr in t.tracks.values()}), [0, 1], "two machines")


def test_flow_encodings():
    """The writer's flows as trace processor links them (tests/unit/
    test_perfetto's trace a): ids below 2^56 as varints (flow_ids_old,
    terminating_flow_ids_old), larger ones as fixed64; an end that closes
    the flow (a kernel launch's one kernel) and a second end of the same
    id that then links nothing; ends that leave it open (a graph launch's
    kernels). The decoder links the same slices."""
    need_tp()
    exe = os.path.join(harness.OUT, "unit", "test_perfetto")
    if not os.access(exe, os.X_OK):
        raise Skip("%s not built (make unit-bins)" % exe)
    d = tmpdir()
    p = subprocess.run([exe, d], capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, "test_perfetto (stdout %r)" % p.stdout[-500:])
    path = os.path.join(d, "a.perfetto-trace")
    rows = tpcheck.query(path, "select so.name as a, si.name as b from flow f "
                         "join slice so on so.id = f.slice_out join slice si on si.id = f.slice_in")
    want = sorted([("launch", "kernel"), ("graph launch", "graph kernel 1"),
                   ("graph launch", "graph kernel 2"), ("launch 2", "kernel 2")])
    eq(sorted((r["a"], r["b"]) for r in rows[0]), want, "trace processor's flows")
    eq(sorted((a.name, b.name) for a, b in ptrace.load(path).flows()), want, "the decoder's")


def test_record_command_is_one_process_after_exec():
    """`record -- CMD`: cgbpf forks CMD, which runs cgbpf's own code until
    it execs. The process is one process named after the program it
    execs, with its API slices and its scheduler states on the same thread:
    no descriptor or ProcessTree entry names the pid before its fork (the
    decoder's rule for what trace processor would split), and, where trace
    processor is present, it shows one process and one thread."""
    r = record(["--sample-hz", "0"], cmd=[wl("train"), "--iters", "50"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-500:])
    t = r.trace
    clean_trace(t)
    pid = r.manifest()["pid"]
    sd = ptrace.sched(t)
    eq(sd.errors, [], "scheduler decoding errors (descriptors before the fork among them)")
    check(any(n[2] == pid for n in sd.newtasks), "the fork of the command is in the trace")
    proc = t.processes.get(pid)
    check(proc is not None, "a process track for pid %d" % pid)
    eq(proc.process_name, "train", "process named after the program it execs")
    eq(t.threads[pid].display_name, "train", "its main thread too")
    eq(sd.tree_procs[pid]["cmdline"][0].split(" ")[0], wl("train"),
       "the process tree's last command line is the program's")
    # Slices on thread tracks (the process's own tracks hold the GPU ones).
    api = [s for s in t.slices_on(pid=pid) if s.tid is not None]
    check(api and all(s.tid == pid for s in api), "API slices on its main thread")
    eq(sd.tree_threads.get(pid), pid, "the scheduler's thread is in the same process")
    if tpcheck.shell_path() is None:
        print("# " + tpcheck.skip_reason())
        return
    _, facts = agree(r.trace_path, trace=t)
    procs = facts["processes"].get((0, pid), [])
    eq(len(procs), 1, "one process for pid %d in trace processor: %r" % (pid, procs))
    check(procs[0]["name"] in ("train", wl("train")), "named %r" % procs[0]["name"])
    threads = facts["threads"][(0, pid)]
    eq(len(threads), 1, "one thread with the slices and the states: %r" % threads)
    check(int(threads[0]["slices"]) > 0 and int(threads[0]["states"]) > 0,
          "API slices and thread states on it: %r" % threads[0])
    eq(threads[0]["name"], "train", "thread name")
    eq(threads[0]["upid"], procs[0]["upid"], "the thread is in that process")
