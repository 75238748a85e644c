# SPDX-License-Identifier: MIT
"""Files cgbpf writes for the user, as a new user meets them: the monitor's
default dump directory on a fresh host (a private, empty /var/lib in a
mount namespace: the real default path, not a test hook), and who owns
traces, summaries, merges and dumps when cgbpf runs under sudo (SUDO_UID
and SUDO_GID of a real unprivileged user, nobody's 65534) and without it.
Links and other users' files at the output path are never written into."""
import os
import shutil
import signal
import socket
import stat
import subprocess
import threading

from harness import CGBPF, check, env_with, eq, ptrace, record, tmpdir, wait_for, wl

NOBODY = 65534
FLAGS = ["--sample-hz", "0", "--syscall-threshold", "off", "--sched", "targets"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def env_as(sudo):
    """The environment of cgbpf run by root (sudo False) or by sudo for
    nobody; SUDO_* of the shell running the tests removed either way."""
    env = env_with()
    env.pop("SUDO_UID", None)
    env.pop("SUDO_GID", None)
    if sudo:
        env["SUDO_UID"] = str(NOBODY)
        env["SUDO_GID"] = str(NOBODY)
    return env


def owner_mode(path):
    st = os.lstat(path)
    return (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))


def need_unshare():
    from harness import Skip
    if not shutil.which("unshare"):
        raise Skip("unshare (util-linux) not installed: cannot give cgbpf a fresh /var/lib")


class FreshHostMonitor:
    """`cgbpf monitor ARGS` with an empty directory mounted on /var/lib in
    its own mount namespace: a host where /var/lib/cgbpf never existed.
    What it creates there shows in varlib from outside."""

    def __init__(self, args, sudo):
        need_unshare()
        self.d = tmpdir()
        self.varlib = os.path.join(self.d, "varlib")
        os.mkdir(self.varlib)
        self.listen = "127.0.0.1:%d" % free_port()
        # Only processes named like this: other GPU processes on the host
        # must not trigger dumps of their own.
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount --bind "$0" /var/lib && exec "$@"', self.varlib,
                CGBPF, "monitor", "--listen", self.listen, "--comm", "cgbpf-no-such"] + args
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env_as(sudo), umask=0o022)
        self.lines = []
        self.t = threading.Thread(target=lambda: self.lines.extend(self.p.stderr), daemon=True)
        self.t.start()
        wait_for(lambda: "monitoring; metrics at" in self.stderr() or self.p.poll() is not None,
                 60, "the monitor to start")
        check(self.p.poll() is None, "monitor running (stderr %r)" % self.stderr())

    def stderr(self):
        return "".join(self.lines)

    def dump(self):
        """Asks for a dump; returns its path as seen from outside."""
        r = subprocess.run([CGBPF, "dump", "--listen", self.listen], capture_output=True,
                           text=True, timeout=30)
        eq(r.returncode, 0, "cgbpf dump (stderr %r)" % r.stderr)
        path = r.stdout.split("dump requested: ", 1)[-1].strip()
        check(path.startswith("/var/lib/cgbpf/cgbpf-dump-"),
              "the dump goes to the default directory: %r" % r.stdout)
        wait_for(lambda: ("wrote %s" % path) in self.stderr() or self.p.poll() is not None, 30,
                 "the dump to be written")
        check(("wrote %s" % path) in self.stderr(), "dump written (stderr %r)" % self.stderr())
        return os.path.join(self.varlib, path[len("/var/lib/"):])

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(60)
        self.t.join(5)
        eq(rc, 0, "monitor stops cleanly (stderr %r)" % self.stderr()[-400:])


def test_monitor_flight_recorder_on_a_fresh_host():
    """The README's `sudo cgbpf monitor --flight-recorder 30s` with no
    /var/lib/cgbpf: created 0700, dumps 0600 in it; root's without sudo."""
    m = FreshHostMonitor(["--flight-recorder", "30s"], sudo=False)
    try:
        d = os.path.join(m.varlib, "cgbpf")
        check(os.path.isdir(d), "the default dump directory was created")
        eq(owner_mode(d), (0, 0, 0o700), "uid, gid, mode of the directory")
        dump = m.dump()
        eq(owner_mode(dump), (0, 0, 0o600), "uid, gid, mode of the dump")
        eq(ptrace.load(dump).errors, [], "the dump decodes")
        eq(sorted(os.listdir(d)), [os.path.basename(dump)], "no .partial left behind")
    finally:
        m.stop()


def test_monitor_under_sudo_gives_dumps_to_the_user():
    """Under sudo the new directory and the dumps are the user's, still
    0700 and 0600: they hold other users' command lines."""
    m = FreshHostMonitor(["--flight-recorder", "30s"], sudo=True)
    try:
        d = os.path.join(m.varlib, "cgbpf")
        eq(owner_mode(d), (NOBODY, NOBODY, 0o700), "uid, gid, mode of the directory")
        dump = m.dump()
        eq(owner_mode(dump), (NOBODY, NOBODY, 0o600), "uid, gid, mode of the dump")
    finally:
        m.stop()


def test_monitor_without_flight_recorder_creates_nothing():
    """`sudo cgbpf monitor` (aggregates only) needs no dump directory: it
    starts on a fresh host and leaves /var/lib as it was."""
    m = FreshHostMonitor([], sudo=False)
    try:
        eq(os.listdir(m.varlib), [], "nothing created in /var/lib")
    finally:
        m.stop()


def test_monitor_given_dump_dir_must_exist():
    """A --dump-dir the user names is never created: the message says how."""
    d = tmpdir()
    missing = os.path.join(d, "dumps")
    r = subprocess.run([CGBPF, "monitor", "--listen", "127.0.0.1:%d" % free_port(),
                        "--flight-recorder", "30s", "--dump-dir", missing],
                       capture_output=True, text=True, timeout=60)
    eq(r.returncode, 1, "exit status (stderr %r)" % r.stderr)
    check("mkdir -m 0700 %s" % missing in r.stderr and "/var/lib/cgbpf" in r.stderr,
          "says how to create it or use the default: %r" % r.stderr)
    check(not os.path.exists(missing), "not created")


def record_files(sudo, d):
    trace = os.path.join(d, "run.perfetto-trace")
    summary = os.path.join(d, "summary.txt")
    p = subprocess.run([CGBPF, "record"] + FLAGS + ["-o", trace, "--summary-file", summary,
                                                    "--", wl("mt")],
                       capture_output=True, text=True, timeout=120, env=env_as(sudo),
                       umask=0o022)
    eq(p.returncode, 0, "record (stderr %r)" % p.stderr[-400:])
    return trace, summary, p


def test_record_outputs_belong_to_the_sudo_user():
    d = tmpdir()
    trace, summary, p = record_files(True, d)
    eq(owner_mode(trace), (NOBODY, NOBODY, 0o640), "uid, gid, mode of the trace")
    eq(owner_mode(summary), (NOBODY, NOBODY, 0o640), "uid, gid, mode of the summary file")
    check(open(summary).read() == p.stdout and "CUDA API Summary" in p.stdout,
          "the summary file holds the printed summary")
    check(len(ptrace.load(trace).slices) > 0, "the trace holds the calls")

    # merge under sudo: its output is the user's too.
    out = os.path.join(d, "merged.perfetto-trace")
    r = subprocess.run([CGBPF, "merge", trace, trace, "-o", out], capture_output=True,
                       text=True, timeout=60, env=env_as(True), umask=0o022)
    eq(r.returncode, 0, "merge (stderr %r)" % r.stderr)
    eq(owner_mode(out), (NOBODY, NOBODY, 0o640), "uid, gid, mode of the merged trace")
    eq([f for f in os.listdir(d) if f.startswith("merged.perfetto-trace.")], [],
       "no temporary file left")


def test_record_outputs_without_sudo_are_roots():
    d = tmpdir()
    trace, summary, _ = record_files(False, d)
    eq(owner_mode(trace), (0, 0, 0o640), "uid, gid, mode of the trace")
    eq(owner_mode(summary), (0, 0, 0o640), "uid, gid, mode of the summary file")
    out = os.path.join(d, "merged.perfetto-trace")
    r = subprocess.run([CGBPF, "merge", trace, trace, "-o", out], capture_output=True,
                       text=True, timeout=60, env=env_as(False), umask=0o022)
    eq(r.returncode, 0, "merge (stderr %r)" % r.stderr)
    eq(owner_mode(out), (0, 0, 0o640), "uid, gid, mode of the merged trace")


def test_outputs_never_written_through_links_or_into_others_files():
    """In a directory anyone can write (/tmp), another user may have put a
    link or a file of theirs where the output goes."""
    d = tmpdir()
    os.chmod(d, 0o1777)
    target = os.path.join(d, "precious")
    with open(target, "w") as f:
        f.write("keep me")
    link = os.path.join(d, "out.perfetto-trace")
    os.symlink(target, link)
    for args in (["-o", link], ["--summary-only", "--summary-file", link]):
        p = subprocess.run([CGBPF, "record"] + FLAGS + args + ["--", "true"],
                           capture_output=True, text=True, timeout=60, env=env_as(True))
        eq(p.returncode, 1, "exit status for %s" % args)
        check("cannot write %s" % link in p.stderr and "symbolic link" in p.stderr,
              "says why: %r" % p.stderr)
        eq(open(target).read(), "keep me", "the link's target is untouched")
        check(os.path.islink(link), "the link is left alone")
    trace = os.path.join(d, "t.perfetto-trace")
    r = record(FLAGS + ["-o", trace], cmd=["true"])
    eq(r.rc, 0, "record")
    r = subprocess.run([CGBPF, "merge", trace, trace, "-o", link], capture_output=True,
                       text=True, timeout=60)
    eq(r.returncode, 1, "merge onto a link (stderr %r)" % r.stderr)
    check("symbolic link" in r.stderr, "says why: %r" % r.stderr)
    check(os.path.islink(link), "merge left the link alone")

    # Another user's file, which they hold open: replaced, never written into.
    theirs = os.path.join(d, "theirs.perfetto-trace")
    with open(theirs, "w") as f:
        f.write("their bytes")
    os.chown(theirs, NOBODY, NOBODY)
    os.chmod(theirs, 0o666)
    held = open(theirs)
    ino = os.stat(theirs).st_ino
    # Without --force it is refused, untouched (test_names.py tests more).
    r = record(FLAGS + ["-o", theirs], cmd=["true"], env=env_as(False))
    eq(r.rc, 2, "record over an existing file without --force (stderr %r)" % r.stderr[-300:])
    check("%s exists" % theirs in r.stderr, "says which file: %r" % r.stderr[-300:])
    eq(os.stat(theirs).st_ino, ino, "the file is left alone")
    r = record(FLAGS + ["--force", "-o", theirs], cmd=["true"], env=env_as(False))
    eq(r.rc, 0, "record over another user's file (stderr %r)" % r.stderr[-300:])
    check(os.stat(theirs).st_ino != ino, "a new file took its place")
    eq(owner_mode(theirs), (0, 0, 0o640), "the new file is root's, 0640")
    eq(held.read(), "their bytes", "whoever held the old file open reads none of the trace")
    held.close()

    # Not a regular file: a clear message, the device untouched.
    p = subprocess.run([CGBPF, "record", "-o", "/dev/null", "--", "true"], capture_output=True,
                       text=True, timeout=60)
    eq(p.returncode, 1, "exit status for -o /dev/null")
    check("not a regular file" in p.stderr, "says why: %r" % p.stderr)
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null is still a device")


def test_summary_file_problems_fail_before_the_capture():
    """--summary-file in a missing directory fails at once, before any
    tracing, and leaves no trace behind; it conflicts with --no-summary."""
    d = tmpdir()
    trace = os.path.join(d, "t.perfetto-trace")
    bad = os.path.join(d, "no", "summary.txt")
    p = subprocess.run([CGBPF, "record", "-o", trace, "--summary-file", bad, "--", "true"],
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 1, "exit status")
    check("cannot write %s: No such file or directory" % bad in p.stderr, "message %r" % p.stderr)
    check("tracing" not in p.stderr, "no capture started: %r" % p.stderr)
    check(not os.path.exists(trace), "no trace left")
    p = subprocess.run([CGBPF, "record", "--no-summary", "--summary-file", bad, "--", "true"],
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 2, "usage error")
    check("--no-summary and --summary-file" in p.stderr, "message %r" % p.stderr)


def test_failed_start_leaves_no_empty_files():
    """A capture that fails after its outputs were opened but before it
    began (here an unknown container id) removes them: no empty trace or
    summary lies around as if it were a capture."""
    d = tmpdir()
    trace = os.path.join(d, "t.perfetto-trace")
    summary = os.path.join(d, "s.txt")
    p = subprocess.run([CGBPF, "record", "-a", "--cgroup", "ffffee0123", "-d", "1s", "-o", trace,
                        "--summary-file", summary], capture_output=True, text=True, timeout=60)
    eq(p.returncode, 1, "exit status (stderr %r)" % p.stderr)
    check("--cgroup ffffee0123" in p.stderr, "names the culprit: %r" % p.stderr)
    eq(sorted(os.listdir(d)), [], "nothing left in the directory")
    # The trace refused after the summary file was made: that goes too.
    os.mkdir(trace)
    p = subprocess.run([CGBPF, "record", "-o", trace, "--summary-file", summary, "--", "true"],
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 1, "exit status (stderr %r)" % p.stderr)
    check("is a directory" in p.stderr, "says why: %r" % p.stderr)
    eq(sorted(os.listdir(d)), [os.path.basename(trace)], "no summary file left")
