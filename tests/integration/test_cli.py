# SPDX-License-Identifier: MIT
"""Command line and error paths: clear messages, the right exit codes,
nothing half-written claiming success."""
import os
import subprocess

from harness import CGBPF, Skip, check, eq, ptrace, record, start, tmpdir, wl


def run(args, **kw):
    return subprocess.run([CGBPF] + args, capture_output=True, text=True, timeout=60, **kw)


def test_help_and_version():
    p = run(["--help"])
    eq(p.returncode, 0, "--help exit")
    check("record" in p.stdout and "check" in p.stdout, "--help lists commands")
    p = run(["record", "--help"])
    eq(p.returncode, 0, "record --help exit")
    for opt in ["--pid", "--output", "--duration", "--summary-only", "--ring-size", "Examples"]:
        check(opt in p.stdout, "record --help mentions %s" % opt)
    p = run(["--version"])
    eq(p.returncode, 0, "--version exit")
    check(p.stdout.startswith("cgbpf "), "version line")


def test_usage_errors_exit_2():
    cases = [
        ["record"],
        ["record", "-p", "abc"],
        ["record", "-p", "12,,x"],
        ["record", "-p", "0"],
        ["record", "-p", "1", "--duration", "10parsecs"],
        ["record", "-p", "1", "--duration", "-5s"],
        ["record", "-p", "1", "--ring-size", "3"],
        ["record", "-p", "1", "--summary-only", "--no-summary"],
        ["record", "-p", "1", "--summary-only", "-o", "x.perfetto-trace"],
        ["record", "-p", "1", "--", "true"],
        ["record", "--bogus"],
        ["frobnicate"],
    ]
    for args in cases:
        p = run(args)
        eq(p.returncode, 2, "exit code of %s" % args)
        check(p.stderr.strip(), "a message for %s" % args)


def test_no_such_pid():
    d = tmpdir()
    out = os.path.join(d, "t.perfetto-trace")
    p = run(["record", "-p", "4000000", "-o", out])
    eq(p.returncode, 1, "exit code")
    check("no process with pid 4000000" in p.stderr, "message: %r" % p.stderr)
    check(not os.path.exists(out), "no trace written for a bad pid")


def test_output_not_writable():
    p = run(["record", "-o", "/nonexistent-dir/x.perfetto-trace", "--", "true"])
    eq(p.returncode, 1, "exit code")
    check("cannot write /nonexistent-dir/x.perfetto-trace" in p.stderr, "message: %r" % p.stderr)


def test_not_root_names_capabilities():
    if not os.path.exists("/usr/bin/setpriv"):
        raise Skip("setpriv (util-linux) not installed")
    p = subprocess.run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", CGBPF, "record", "-o", "/tmp/x", "--", "true"],
                       capture_output=True, text=True, timeout=30)
    eq(p.returncode, 1, "exit code as nobody")
    check("CAP_BPF" in p.stderr and "CAP_PERFMON" in p.stderr, "names capabilities: %r" % p.stderr)


def test_command_not_found():
    r = record([], cmd=["/nonexistent/binary"])
    eq(r.rc, 127, "exit code is the command's (127: not found)")
    check("cannot run /nonexistent/binary" in r.stderr, "message: %r" % r.stderr)
    t = r.trace
    eq(t.errors, [], "trace still valid")


def test_pid_exits_before_libcuda():
    """A target that never loads libcuda: exit 0, an empty but valid trace,
    and a message saying so."""
    p = start(["sleep", "0.5"])
    try:
        r = record(["-p", str(p.pid)])
    finally:
        p.wait()
    eq(r.rc, 0, "exit code")
    check("all traced processes exited" in r.stderr, "says targets exited: %r" % r.stderr)
    check("no traced process loaded a traced library" in r.stderr, "says nothing to trace")
    t = r.trace
    eq(t.errors, [], "decoder errors")
    eq(len(t.slices), 0, "no API slices")
    eq(len(t.clock_snapshots) >= 2, True, "clock snapshots at start and end")
    snap = t.clock_snapshots[0]
    for clock in (1, 3, 6):
        check(clock in snap, "snapshot has clock %d" % clock)


def test_duration_bounds_capture():
    """--duration ends the capture, not the target's exit: a target that
    never exits is still there when cgbpf returns, and the trace spans at
    least the duration, from its first event to the capture's end."""
    p = start(["sleep", "infinity"])
    try:
        r = record(["-p", str(p.pid), "--duration", "700ms"])
        alive = p.poll() is None
    finally:
        p.kill()
        p.wait()
    eq(r.rc, 0, "exit code (stderr %r)" % r.stderr[-300:])
    check(alive, "the target outlived the capture")
    check("all traced processes exited" not in r.stderr, "ended by --duration: %r" % r.stderr)
    eq(r.trace.errors, [], "decoder errors")
    from harness import capture_end
    first = r.trace.counter_values("cgbpf lost records")[0][0]
    span = capture_end(r.trace).ts - first
    check(span >= 700000000, "the capture lasted the duration (%d ns)" % span)


def test_disk_full_keeps_valid_trace():
    """ENOSPC mid-capture: cgbpf stops, says so, exits non-zero, and what
    it wrote decodes."""
    if not os.path.exists(wl("train")):
        raise Skip("workload train not built")
    d = tmpdir()
    mnt = os.path.join(d, "small")
    os.mkdir(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt]).returncode:
        raise Skip("cannot mount a tmpfs here")
    try:
        out = os.path.join(mnt, "t.perfetto-trace")
        r = record(["-o", out], cmd=[wl("train"), "--iters", "20000"], timeout=300)
        eq(r.rc, 1, "exit code on ENOSPC")
        check("No space left on device" in r.stderr, "message: %r" % r.stderr[-400:])
        t = ptrace.load(out)
        eq(t.truncated_bytes, 0, "no partial packet at the end")
        check(len(t.slices) > 100, "kept what was written (%d slices)" % len(t.slices))
    finally:
        subprocess.run(["umount", "-l", mnt])


def test_man_page_matches_help():
    """Every long option of record --help is documented in the man page."""
    import re
    from harness import REPO
    p = run(["record", "--help"])
    opts = set(re.findall(r"(--[a-z][a-z-]+)", p.stdout))
    with open(os.path.join(REPO, "docs", "cgbpf-record.1")) as f:
        man = f.read().replace("\\-", "-")
    missing = sorted(o for o in opts if o not in man)
    eq(missing, [], "options missing from docs/cgbpf-record.1")


def command_pid(text, exe):
    """The pid of COMMAND from cgbpf's "tracing COMMAND (pid N)" line."""
    import re
    m = re.search(r"tracing %s \(pid (\d+)\)" % re.escape(exe), text)
    check(m, "cgbpf names the command's pid: %r" % text[-300:])
    return int(m.group(1))


def start_time(pid):
    """Start time of a process (proc(5) field 22): tells it from a later
    process given the same pid."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return None


def test_command_outlives_duration_and_sigterm_is_passed_on():
    """--duration ends the capture, not the command; SIGTERM to cgbpf
    reaches the command it started."""
    import signal
    from harness import env_with, proc_stopped, wait_for, wait_running
    d = tmpdir()
    # Files, not pipes: the command inherits them and outlives cgbpf.
    out = open(os.path.join(d, "stdout"), "w")
    errpath = os.path.join(d, "stderr")
    train = wl("train")
    with open(errpath, "w") as err:
        p = subprocess.Popen([CGBPF, "record", "--summary-only", "-d", "500ms", "--",
                              train, "--iters", "100000000"], stdout=out, stderr=err,
                             env=env_with())
        rc = p.wait(60)
    msg = open(errpath).read()
    eq(rc, 0, "exit code after --duration")
    check("keeps running" in msg, "says the command keeps running: %r" % msg[-300:])
    # This command, by the pid cgbpf gave: other tests on the host may run
    # the same command line.
    pid = command_pid(msg, train)
    try:
        check(not proc_stopped(pid), "command not stopped")
        wait_running(pid)
    finally:
        os.kill(pid, signal.SIGKILL)

    with open(errpath, "w") as err:
        p = subprocess.Popen([CGBPF, "record", "--summary-only", "--", train, "--iters",
                              "100000000"], stdout=out, stderr=err, env=env_with())
        try:
            wait_for(lambda: "Ctrl-C stops" in open(errpath).read() or p.poll() is not None,
                     60, "cgbpf to start the command")
            check(p.poll() is None, "cgbpf runs (exit status %r, stderr %r)"
                  % (p.poll(), open(errpath).read()[-300:]))
            pid = command_pid(open(errpath).read(), train)
            born = start_time(pid)
            p.send_signal(signal.SIGTERM)
            rc = p.wait(60)
        finally:
            if p.poll() is None:
                p.kill()
    eq(rc, 128 + signal.SIGTERM, "exit code is the command's (killed by SIGTERM)")
    # cgbpf reaped it: the pid is gone (or another process's by now).
    check(born is not None and start_time(pid) != born, "the command is gone")


def test_trace_selects_sources():
    """--trace: an unknown source is a usage error naming the known ones;
    'none' probes no library, so a CUDA workload leaves no API slice (but
    its scheduler events stay); 'cuda' probes the driver."""
    p = run(["record", "--trace", "cuda,opengl", "--", "true"])
    eq(p.returncode, 2, "exit code for an unknown source")
    check("unknown source 'opengl'" in p.stderr and "cudart" in p.stderr,
          "names the culprit and the known sources: %r" % p.stderr)
    r = record(["--trace", "none", "--sample-hz", "0"], cmd=[wl("mt")])
    eq(r.rc, 0, "exit (stderr %r)" % r.stderr[-300:])
    check("no traced process loaded a traced library (--trace none)" in r.stderr,
          "says the API sources are off: %r" % r.stderr[-300:])
    eq(r.trace.errors, [], "decoder errors")
    eq(len(r.trace.slices), 0, "no API slice with --trace none")
    r = record(["--trace", "cuda", "--sample-hz", "0"], cmd=[wl("mt")])
    eq(r.rc, 0, "exit")
    check("probing 74 CUDA driver functions" in r.stderr, "driver probed: %r" % r.stderr[-300:])
    check(any(s.name == "cuLaunchKernel" for s in r.trace.slices), "launches traced")
