# SPDX-License-Identifier: MIT
"""Helpers for cgbpf integration tests: run cgbpf on real workloads,
decode the trace with the independent decoder (tests/lib/ptrace.py)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, os.environ.get("OUT", "build"))
# CGBPF_BIN: another build of cgbpf to test (make asan's build/san/cgbpf);
# the workloads and fakes still come from OUT.
CGBPF = os.path.abspath(os.environ.get("CGBPF_BIN") or os.path.join(OUT, "cgbpf"))
FAKE = os.path.join(OUT, "fake")
WL = os.path.join(OUT, "workloads")
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import ptrace  # noqa: E402


class Skip(Exception):
    """Raised by a test that cannot run here; the message says why."""


class Result:
    def __init__(self, rc, stdout, stderr, trace_path, tmp):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.trace_path = trace_path
        self.tmp = tmp
        self._trace = None

    @property
    def trace(self):
        if self._trace is None:
            self._trace = ptrace.load(self.trace_path)
        return self._trace

    def manifest(self, name="manifest.json"):
        with open(os.path.join(self.tmp, name)) as f:
            return json.load(f)


# Folders made by tmpdir() since run.py last cleared the list: run.py
# deletes them once every test of their file has passed, and keeps them
# (saying where) when one failed.
made_dirs = []


def tmpdir():
    d = tempfile.mkdtemp(prefix="cgbpf-test-")
    made_dirs.append(d)
    return d


def wl(name):
    return os.path.join(WL, name)


NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"

# For the pid-reuse tests' drivers (Python run by the workload, not by the
# harness): fork_at(pid, child) forks until the kernel gives pid again
# (NS_LAST_PID set to pid - 1 before each fork), runs child() in that
# process (child must exec or exit), and returns its wait status; None
# when pid did not come back in 500 forks. Other forks exit at once.
FORK_AT = r'''
import os


def fork_at(pid, child):
    for _ in range(500):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        c = os.fork()
        if c == 0:
            if os.getpid() != pid:
                os._exit(0)
            child()
            os._exit(127)
        _, st = os.waitpid(c, 0)
        if c == pid:
            return st
    return None
'''


def pid_reuse_driver(text):
    """A tmpdir holding driver.py (text, after FORK_AT) for a test that
    needs a pid given twice: (tmp, driver's path). Skip without a writable
    NS_LAST_PID."""
    if not os.access(NS_LAST_PID, os.W_OK):
        raise Skip("cannot write %s (root in the initial pid namespace)" % NS_LAST_PID)
    tmp = tmpdir()
    drv = os.path.join(tmp, "driver.py")
    with open(drv, "w") as f:
        f.write(FORK_AT + text)
    return tmp, drv


def env_with(**kw):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = FAKE
    for k, v in kw.items():
        env[k] = str(v)
    return env


def record(args, cmd=None, env=None, timeout=120, tmp=None, trace=True, child_gate=False):
    """cgbpf record ARGS [-- CMD]; returns a Result. The manifest of a
    workload goes to TMP/manifest.json (CGBPF_MANIFEST). child_gate: forked
    children of CMD wait (tests/workloads/child_gate.h) until cgbpf says
    their probes are in place, so none of their calls can be missed."""
    tmp = tmp or tmpdir()
    trace_path = os.path.join(tmp, "out.perfetto-trace")
    argv = [CGBPF, "record"] + list(args)
    if trace and "-o" not in args and "--summary-only" not in args:
        argv += ["-o", trace_path]
    if env is None:
        env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"))
    if child_gate:
        argv.append("-v")
        gate = tempfile.mkdtemp(prefix="child-gate-", dir=tmp)
        env = dict(env, CGBPF_CHILD_GATE=gate)
    if cmd:
        argv += ["--"] + list(cmd)
    if not child_gate:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        return Result(p.returncode, p.stdout, p.stderr, trace_path, tmp)
    return _record_gated(argv, env, timeout, gate, trace_path, tmp)


def open_gate(gate, line):
    """Lets the process a cgbpf -v line says is probed start its work."""
    import re
    m = re.search(r"pid (\d+): probes in place", line)
    if m:
        touch(os.path.join(gate, m.group(1)))


def _record_gated(argv, env, timeout, gate, trace_path, tmp):
    import threading
    out_path = os.path.join(tmp, "cgbpf.stdout")
    with open(out_path, "w") as out_f:
        p = subprocess.Popen(argv, stdout=out_f, stderr=subprocess.PIPE, text=True, env=env)
    lines = []

    def read_err():
        for line in p.stderr:
            if "libbpf:" in line:
                continue  # -v's libbpf debug output
            lines.append(line)
            open_gate(gate, line)

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    t.join(10)
    with open(out_path) as f:
        out = f.read()
    return Result(p.returncode, out, "".join(lines), trace_path, tmp)


def start(cmd, env=None, **kw):
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def need_nccl_ranks():
    """Skips a test that runs nccl_ranks where it and the fake NCCL were
    not built (no CUDA toolkit: they need nccl.h)."""
    if not os.path.exists(wl("nccl_ranks")) or not os.path.exists(
            os.path.join(FAKE, "libnccl.so.2")):
        raise Skip("nccl_ranks / fake libnccl.so.2 not built (no CUDA toolkit: they need nccl.h)")


def wait_for(pred, timeout=10.0, what="condition"):
    t = time.time() + timeout
    while time.time() < t:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


def flushed_slices(path, pid, limit=256 << 10):
    """Slices of pid in the first limit bytes cgbpf has written to path (a
    prefix: the file only grows, and decoding all of it would take longer
    than writing more). A packet cut by the prefix's end or by a write in
    progress is not counted."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
    except FileNotFoundError:
        return 0
    if not data:
        return 0
    return len(ptrace.loads(data, allow_truncated_tail=True).slices_on(pid=pid))


def wait_flushed(path, pid, n, timeout=60):
    """Waits until more than n calls of pid are in the trace file (cgbpf
    flushed them); returns how many there were."""
    got = [0]

    def more():
        got[0] = flushed_slices(path, pid)
        return got[0] > n

    wait_for(more, timeout, "more than %d calls of pid %d written to %s" % (n, pid, path))
    return got[0]


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (proc(5))."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, D, T, Z...), None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def wait_running(pid, timeout=30):
    """Waits until a process that computes without end has used more CPU:
    it runs (not stopped, not stuck, not dead)."""
    t0 = cpu_ticks(pid)
    try:
        wait_for(lambda: proc_state(pid) in (None, "Z") or cpu_ticks(pid) > t0, timeout)
    except AssertionError:
        pass
    check(cpu_ticks(pid) > t0 if proc_state(pid) not in (None, "Z") else False,
          "pid %d runs on (state %s)" % (pid, proc_state(pid)))


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


def api_counts(trace, pid):
    """{function name: slices} of one process's threads (not its GPU or
    estimate tracks, which hang off the process)."""
    out = {}
    for s in trace.slices:
        if s.pid == pid and s.tid is not None:
            out[s.name] = out.get(s.name, 0) + 1
    return out


def clean_trace(trace):
    """Decoder found no semantic problem."""
    check(trace.errors == [], "decoder errors: %s" % trace.errors[:5])


def tp_clean(path, trace):
    """Trace processor reads path as the decoder read trace (skipped, with a
    message, where ../shared/perfetto is absent)."""
    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    problems, _ = tpcheck.compare(path, trace, (), sched=False)
    check(not problems, "%s: trace processor and the decoder disagree:\n    %s"
          % (path, "\n    ".join(problems)))


def capture_end(trace):
    ends = [i for i in trace.instants if (i.name or "").startswith("cgbpf: capture ended")]
    check(len(ends) == 1, "one capture-ended instant, got %d" % len(ends))
    return ends[0]


def no_drops(res):
    end = capture_end(res.trace)
    eq(end.args.get("lost_records"), 0, "lost records in trace")
    check("no records lost" in res.stdout, "summary says no records lost")


def proc_stopped(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def kill_quiet(p):
    if p and p.poll() is None:
        p.send_signal(signal.SIGKILL)
        p.wait()


def traced_funcs():
    """Names of the driver functions cgbpf probes, read from the table."""
    import re
    with open(os.path.join(REPO, "bpf", "cuda_funcs.h")) as f:
        return set(re.findall(r"^\s*X\((cu\w+),", f.read(), re.M))


def demangle(names):
    """Demangled names by binutils' c++filt (independent of cgbpf)."""
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                       text=True, check=True)
    return dict(zip(names, p.stdout.splitlines()))


def expected_calls(manifest_calls):
    """The manifest's per-function counts, limited to traced functions."""
    want = traced_funcs()
    return {k: v for k, v in manifest_calls.items() if k in want and v}


_bgs = []


def kill_leftovers():
    """Kills every Bg capture still running."""
    while _bgs:
        kill_quiet(_bgs.pop().p)


class Bg:
    """cgbpf running in the background; stderr is collected by a thread so
    a test can wait for a message."""

    def __init__(self, args, tmp=None, env=None, gate=False):
        """gate: run with -v and open the child gate (child_gate.h) of each
        process cgbpf says has its probes in place; workloads get
        CGBPF_CHILD_GATE=self.gate in their environment."""
        import threading
        self.tmp = tmp or tmpdir()
        self.trace_path = os.path.join(self.tmp, "out.perfetto-trace")
        argv = [CGBPF, "record"] + list(args)
        if "-o" not in args and "--summary-only" not in args:
            argv += ["-o", self.trace_path]
        self.gate = None
        if gate:
            self.gate = tempfile.mkdtemp(prefix="child-gate-", dir=self.tmp)
            argv.insert(2, "-v")
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env or env_with())
        _bgs.append(self)
        self.err_lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stderr:
            if self.gate:
                if "libbpf:" in line:
                    continue  # -v's libbpf debug output
                open_gate(self.gate, line)
            self.err_lines.append(line)

    def stderr(self):
        return "".join(self.err_lines)

    def wait_msg(self, text, timeout=20):
        wait_for(lambda: text in self.stderr() or self.p.poll() is not None, timeout,
                 "cgbpf to say %r" % text)
        check(text in self.stderr(), "cgbpf said %r (it said %r)" % (text, self.stderr()))

    def finish(self, timeout=60):
        out = self.p.stdout.read()
        self.p.wait(timeout)
        self.t.join(5)
        return Result(self.p.returncode, out, self.stderr(), self.trace_path, self.tmp)


def touch(path):
    with open(path, "w"):
        pass
