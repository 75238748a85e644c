# SPDX-License-Identifier: MIT
"""Attaching to running processes: before their first call, after their
modules were loaded (unnamed kernels), before they dlopen libcuda."""
import os

from harness import (Bg, api_counts, check, clean_trace, env_with, eq, expected_calls, kill_quiet,
                     no_drops, proc_stopped, start, tmpdir, touch, wait_flushed, wait_for,
                     wait_running, wl)


def test_attach_before_first_call():
    d = tmpdir()
    gate = os.path.join(d, "go")
    w = start([wl("train"), "--iters", "100"],
              env=env_with(CGBPF_WAIT_FILE=gate, CGBPF_MANIFEST=os.path.join(d, "manifest.json")))
    try:
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("probing 74 CUDA driver functions")
        bg.wait_msg("Ctrl-C stops")
        touch(gate)
        eq(w.wait(30), 0, "workload exit")
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    no_drops(r)
    m = r.manifest()
    eq(api_counts(r.trace, w.pid), expected_calls(m["calls"]), "calls per function")


def test_attach_after_module_load_shows_unnamed_launches():
    d = tmpdir()
    pause = os.path.join(d, "pause")
    w = start([wl("train"), "--iters", "50"],
              env=env_with(CGBPF_PAUSE_FILE=pause,
                           CGBPF_MANIFEST=os.path.join(d, "manifest.json")))
    try:
        wait_for(lambda: os.path.exists(pause + ".ready"), 20, "setup done")
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        touch(pause)
        eq(w.wait(30), 0, "workload exit")
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit")
    clean_trace(r.trace)
    m = r.manifest()
    launches = [s for s in r.trace.slices_on(pid=w.pid) if s.name.startswith("cuLaunch")]
    eq(len(launches), sum(c["count"] for c in m["launch_configs"]), "launches after attach")
    handles = {int(v, 16) for v in m["handles"]["functions"].values()}
    for s in launches:
        k = s.args["kernel"]
        check(k.startswith("unnamed 0x"), "unnamed kernel shows the handle: %r" % k)
        check(int(k.split()[1], 16) in handles, "%s is a real function handle" % k)
    eq(r.trace.slices_on(pid=w.pid, name="cuModuleGetFunction"), [], "lookups were before attach")
    check("%d unnamed" % len(launches) in r.stdout, "summary counts unnamed launches")


def test_attach_before_late_dlopen_misses_nothing():
    """libcuda is dlopen'ed after cgbpf attached and called at once: cgbpf
    found the file the target's loader would load (LD_LIBRARY_PATH from its
    environment) and probed it before the mapping, so the kernel installs
    the breakpoints at the mapping; nothing is paused and nothing missed."""
    d = tmpdir()
    gate = os.path.join(d, "go")
    w = start([wl("dl_late"), "--after-dlopen-ms", "0", "--iters", "30"],
              env=env_with(CGBPF_WAIT_FILE=gate, CGBPF_MANIFEST=os.path.join(d, "manifest.json")))
    try:
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("probing 74 CUDA driver functions")
        bg.wait_msg("Ctrl-C stops")
        touch(gate)
        eq(w.wait(30), 0, "workload exit")
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    no_drops(r)
    m = r.manifest()
    eq(api_counts(r.trace, w.pid), expected_calls(m["calls"]), "every call, the first included")
    check(r.trace.processes[w.pid].cmdline, "process named with its command line")
    check("after it was mapped" not in r.stderr, "no late attach: %r" % r.stderr[-400:])


def test_sigint_finishes_trace_target_keeps_running():
    d = tmpdir()
    w = start([wl("train"), "--iters", "100000000"], env=env_with())
    try:
        # Attach to a process already in its loop.
        wait_for(lambda: "libcuda.so.1" in open("/proc/%d/maps" % w.pid).read(), 20,
                 "the target to map libcuda")
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        # Ctrl-C once calls were recorded: the test is about what follows.
        seen = wait_flushed(bg.trace_path, w.pid, 100)
        bg.p.send_signal(2)
        r = bg.finish()
        eq(r.rc, 0, "cgbpf exit after one Ctrl-C")
        check(w.poll() is None, "target still running")
        check(not proc_stopped(w.pid), "target not left stopped")
        clean_trace(r.trace)
        check(len(r.trace.slices_on(pid=w.pid)) >= seen, "calls recorded until Ctrl-C")
        no_drops(r)
        wait_running(w.pid)
    finally:
        kill_quiet(w)


def test_sigkill_leaves_a_decodable_trace():
    """SIGKILL at any time: what cgbpf flushed decodes. A kill inside a
    write() ends the file where the kernel stopped copying, always at a
    page boundary (it checks for fatal signals between pages): that one
    packet may be cut, and readers drop it (trace processor silently)."""
    d = tmpdir()
    w = start([wl("train"), "--iters", "100000000"], env=env_with())
    try:
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        seen = wait_flushed(bg.trace_path, w.pid, 100)
        bg.p.kill()
        bg.finish()
        import ptrace
        size = os.path.getsize(bg.trace_path)
        t = ptrace.load(bg.trace_path, allow_truncated_tail=True)
        check(t.truncated_bytes == 0 or size % 4096 == 0,
              "whole packets, or a packet cut at a page boundary by the kill (%d bytes, "
              "the last %d not a whole packet)" % (size, t.truncated_bytes))
        eq(t.errors, [], "decoder errors")
        check(len(t.slices_on(pid=w.pid)) >= seen,
              "every call flushed before the kill is there (%d >= %d)"
              % (len(t.slices_on(pid=w.pid)), seen))
        check(not proc_stopped(w.pid), "target not stopped")
        wait_running(w.pid)
    finally:
        kill_quiet(w)


def test_second_sigint_exits_at_once():
    d = tmpdir()
    w = start([wl("train"), "--iters", "100000000"], env=env_with())
    try:
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        # Signals while cgbpf is writing calls.
        wait_flushed(bg.trace_path, w.pid, 0)
        bg.p.send_signal(2)
        bg.p.send_signal(2)
        r = bg.finish()
        check(r.rc in (0, 130), "exit code %d (0 if the first finished first, 130 otherwise)"
              % r.rc)
        import ptrace
        # cgbpf is one thread: a handler runs between write()s, never in one.
        t = ptrace.load(bg.trace_path)
        eq(t.truncated_bytes, 0, "whole packets only")
        check(w.poll() is None and not proc_stopped(w.pid), "target runs on")
        wait_running(w.pid)
    finally:
        kill_quiet(w)
