# SPDX-License-Identifier: MIT
"""No gaps, and never a silent one (issue 27): a driver loaded by an
absolute path no search names (ctypes), its mapping read after the
process exited (a zombie: cgbpf is its parent), forked children that live
shorter than their probes take to come. Each call is either traced or
its loss is said: on stderr, in the summary, and on the process's track."""
import os
import re
import shutil
import subprocess
import sys

import harness
from harness import (FAKE, Skip, api_counts, check, clean_trace, env_with, eq, expected_calls,
                     record, tmpdir, wl)

HERE = os.path.dirname(os.path.abspath(__file__))
CTYPES_ABS = os.path.join(HERE, "..", "workloads", "py", "ctypes_abs.py")
LATE = "cgbpf: probes came after this point (calls may be missing)"
N = 200


def private_copy(d):
    """A copy of the fake driver no loader search finds."""
    sub = os.path.join(d, "private")
    os.makedirs(sub, exist_ok=True)
    shutil.copy(os.path.join(FAKE, "libcuda.so.1"), sub)
    return os.path.join(sub, "libcuda.so.1")


def python(minor):
    if minor == 11:
        exe = "/usr/bin/python3.11"
        if not os.path.exists(exe):
            raise Skip("no Debian /usr/bin/python3.11")
        return exe
    sys.path.insert(0, HERE)
    from test_python import pyenv_python
    return pyenv_python(minor)


def tp_agrees(r):
    """Perfetto's trace processor reads what the decoder reads (the window
    instants, the cuInit wait), where ../shared/perfetto has it."""
    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    problems, _ = tpcheck.compare(r.trace_path, r.trace)
    eq(problems, [], "trace processor and the decoder")


def fork_window_said(r, pid):
    """A forked child's window, on stderr or as a summary row."""
    return (re.search(r"pid %d: (exited [\d.]+ ms after its fork(, before its probes| with no "
                      r"call traced, but it entered a probed function)|a forked child calling "
                      r"the API)" % pid, r.stderr) or
            re.search(r"^\s*%d\s+.*\(its fork" % pid, r.stdout, re.M))


def traced_or_said(r, m):
    """Each forked child of the fork workload (manifest m) is traced whole
    or its window is said (checked): (children traced whole, {pid: its
    traced calls} of those said)."""
    traced, said = 0, {}
    for pid in m["children"]:
        want = expected_calls(m["processes"][str(pid)]["calls"])
        got = api_counts(r.trace, pid)
        if got == want:
            traced += 1
            continue
        check(fork_window_said(r, pid), "child %d: %r of %r calls traced and nothing said:\n%s" %
              (pid, got, want, r.stderr[-1500:] + r.stdout[-1500:]))
        said[pid] = got
    return traced, said


def forked_by(r, parent):
    """The children cgbpf saw parent fork (-v)."""
    return sorted({int(c) for p, c in re.findall(r"pid (\d+) forked (\d+)", r.stderr)
                   if int(p) == parent})


def check_ranks(r, pids, init, allreduces=None):
    """Each rank process has its communicator's creation (a name in init)
    first and ncclCommDestroy last on its thread (each collective is drawn
    on its communicator's track too), with allreduces all-reduces when
    given; or its window is said. (traced whole, said)."""
    whole = said = 0
    for pid in pids:
        names = [s.name for s in sorted(r.trace.slices, key=lambda s: s.ts)
                 if s.pid == pid and s.tid == pid and s.name and s.name.startswith("nccl")]
        if names[:1] and names[0] in init and names[-1] == "ncclCommDestroy":
            if allreduces is not None:
                eq(names.count("ncclAllReduce"), allreduces,
                   "rank process %d's all-reduces" % pid)
            whole += 1
            continue
        check(fork_window_said(r, pid), "rank process %d: NCCL calls %r and no window said:\n%s"
              % (pid, names[:4], r.stdout[-1500:]))
        said += 1
    return whole, said


def launches(trace, pid):
    return sum(1 for s in trace.slices if s.pid == pid and s.name == "cuLaunchKernel")


def pid_of(r):
    m = re.search(r"tracing \S+ \(pid (\d+)\)", r.stderr)
    check(m, "the command's pid in %r" % r.stderr[-600:])
    return int(m.group(1))


def check_loss_said(r, pid, file, what):
    """pid's loss of calls through file: on stderr, as a summary row, and
    as an instant on its track (decoded by the project's own reader)."""
    said = re.search(r"pid %d: (%s probed [\d.]+ ms after it was mapped|had exited when cgbpf "
                     r"read that it mapped %s)" % (pid, re.escape(file), re.escape(file)),
                     r.stderr)
    check(said, "%s: the window said on stderr: %r" % (what, r.stderr[-1500:]))
    rows = [ln for ln in r.stdout.splitlines()
            if re.match(r"\s*%d\s+\S+\s+%s" % (pid, re.escape(file)), ln)]
    check(rows, "%s: a summary row for pid %d and %s:\n%s" % (what, pid, file, r.stdout[-1500:]))
    marks = [i for i in r.trace.instants if i.name == LATE and i.pid == pid]
    check(marks, "%s: an instant on pid %d's track" % (what, pid))
    check(any((i.args.get("library") or "").startswith(file) for i in marks),
          "%s: the instant names %s: %r" % (what, file, [i.args for i in marks]))
    return said.group(1)


def kernel_mmap_lock_watch():
    """Whether this kernel's mmap_lock_released has the (mm, write)
    prototype cgbpf's cheap mmap watch needs, read from its BTF by bpftool
    rather than by cgbpf."""
    try:
        out = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux",
                              "format", "raw"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    types = {}
    for m in re.finditer(r"^\[(\d+)\] (\S+) '([^']*)'(.*)\n((?:\t.*\n)*)", out, re.M):
        types[m.group(1)] = (m.group(2), m.group(3), m.group(4), m.group(5))

    def ref(t):
        return re.search(r"type_id=(\d+)", t[2]).group(1)
    td = [t for t in types.values() if t[0] == "TYPEDEF" and t[1] == "btf_trace_mmap_lock_released"]
    if not td:
        return False
    proto = types.get(ref(types[ref(td[0])]))
    if not proto or proto[0] != "FUNC_PROTO":
        return False
    params = re.findall(r"type_id=(\d+)", proto[3])
    if len(params) != 3:
        return False
    t = types[params[2]]
    while t[0] in ("TYPEDEF", "CONST", "VOLATILE"):
        t = types[ref(t)]
    return t[0] == "INT" and "encoding=BOOL" in t[2]


def _ctypes_every_call(minor, watch=None):
    def test():
        """The driver loaded by ctypes from an absolute path, with the
        injection library: cuInit holds until the file is probed, and every
        launch after it is traced. By default the mapping is seen by the
        mmap_lock watch where the kernel has it; watch="sys_exit" forces
        the syscall tracepoint watch (CGBPF_MMAP_WATCH_SYSCALL)."""
        exe = python(minor)
        d = tmpdir()
        lib = private_copy(d)
        env = env_with(CGBPF_MMAP_WATCH_SYSCALL="1") if watch == "sys_exit" else None
        r = record(["--sample-hz", "0", "-v"], cmd=[exe, CTYPES_ABS, lib, str(N)], env=env,
                   tmp=d)
        eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
        check("launched %d" % N in r.stdout, "the program ran: %r" % r.stdout[-300:])
        used = re.search(r"mmap watch on \((\w+);", r.stderr)
        want = watch or ("mmap_lock_released" if kernel_mmap_lock_watch() else "sys_exit")
        check(used and used.group(1) == want, "the mmap watch: %s, not %r"
              % (want, used and used.group(1)))
        clean_trace(r.trace)
        pid = pid_of(r)
        held = re.search(r"cuInit held ([\d.]+) ms until (\S+) was probed", r.stdout)
        print("# %s watch; %s" % (want, held.group(0) if held else
                                  "cuInit not held (the file was probed)"))
        got = launches(r.trace, pid)
        check(got == N, "launches traced: %d of %d\nsummary: %s\nstderr: %s"
              % (got, N, r.stdout[-1500:], r.stderr[-1500:]))
        check("then let go" not in r.stdout, "cuInit was not let go unprobed:\n" +
              r.stdout[-1500:])
        if held:
            eq(held.group(2), lib, "the file cuInit waited for")
        tp_agrees(r)
    test.__name__ = "test_ctypes_absolute_path_every_call_3_%d%s" % (
        minor, "_%s_watch" % watch if watch else "")
    return test


for _m, _w in ((11, None), (12, None), (12, "sys_exit")):
    _t = _ctypes_every_call(_m, _w)
    globals()[_t.__name__] = _t


def test_ctypes_absolute_path_loss_said():
    """The same program with a driver that loads no injection library
    (FAKECUDA_NO_INJECTION): what was missed is said, with the pid and the
    file, whether the process was still alive when its mapping was read or
    not."""
    exe = python(11)
    d = tmpdir()
    lib = private_copy(d)
    env = env_with(FAKECUDA_NO_INJECTION="1")
    r = record(["--sample-hz", "0"], cmd=[exe, CTYPES_ABS, lib, str(N)], env=env, tmp=d)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    pid = pid_of(r)
    check_loss_said(r, pid, "libcuda.so.1", "no injection library")
    check(launches(r.trace, pid) <= N, "no launch invented")


def test_mapping_read_after_exit_said():
    """The consumer acts on the mapping only 400 ms later (test hook
    CGBPF_TEST_MMAP_LAG_MS), when the short program has exited but is not
    reaped (cgbpf is its parent): "had exited" is said, with pid and file,
    in all three places."""
    d = tmpdir()
    lib = private_copy(d)
    env = env_with(FAKECUDA_NO_INJECTION="1", CGBPF_TEST_MMAP_LAG_MS="400",
                   CGBPF_MANIFEST=os.path.join(d, "manifest.json"))
    r = record(["--sample-hz", "0"], cmd=[wl("dl_late"), "--lib", lib, "--after-dlopen-ms", "0",
                                          "--iters", "20"], env=env, tmp=d)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    pid = r.manifest()["pid"]
    how = check_loss_said(r, pid, "libcuda.so.1", "read after exit")
    check(how.startswith("had exited"), "said as exited: %r" % how)
    eq(api_counts(r.trace, pid).get("cuLaunchKernel", 0), 0, "nothing invented")


def test_cuinit_let_go_is_said():
    """cgbpf attached, the driver file not probed within CGBPF_MAP_WAIT_MS
    (1 ms here; the consumer lags 400 ms): the library lets cuInit go and
    the summary says for how long it held it and that calls may be
    missing."""
    exe = python(11)
    d = tmpdir()
    lib = private_copy(d)
    env = env_with(CGBPF_MAP_WAIT_MS="1", CGBPF_TEST_MMAP_LAG_MS="400")
    r = record(["--sample-hz", "0"], cmd=[exe, CTYPES_ABS, lib, "20"], env=env, tmp=d)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    held = re.search(r"cuInit held ([\d.]+) ms, then let go: (\S+) was not probed", r.stdout)
    check(held, "the summary says cuInit was let go:\n" + r.stdout[-2000:])
    eq(held.group(2), lib, "the file")
    check(float(held.group(1)) >= 1.0, "held at least the 1 ms asked: %s" % held.group(1))
    check_loss_said(r, pid_of(r), "libcuda.so.1", "let go")
    waited = [i for i in r.trace.instants if i.name == "cuInit held until the driver was probed"]
    eq(len(waited), 1, "one instant of the wait in the trace")
    tp_agrees(r)


def test_fifty_forks_each_traced_or_said():
    """50 children forked in a tight loop, each making its calls at once
    and exiting (no gate): the kernel gives a child no probes of its own
    before cgbpf attaches them (docs/design.md: inherited perf-event
    uprobes do not run the program in the child, slow every fork and make
    it fail in unprivileged processes), so each child is either traced
    whole or its window is said, on stderr and in the summary."""
    r = record(["--sample-hz", "0"], cmd=[wl("fork"), "--children", "50", "--iters", "1"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    m = r.manifest()
    eq(len(m["children"]), 50, "children forked")
    traced, said = traced_or_said(r, m)
    eq(traced + len(said), 50, "every child traced or said")
    # A child reaped before /proc could name it is named by its fork
    # record, not "pid N" (whatever record of it came first).
    names = {pid: r.trace.processes[pid].process_name
             for pid in m["children"] if pid in r.trace.processes}
    eq(sorted(pid for pid, n in names.items() if n != "fork"), [],
       "children not named as their parent: %r" % names)
    tp_agrees(r)
    print("# 50 forks: %d traced whole, %d windows said" % (traced, len(said)))


def test_children_that_live_on_after_their_calls_traced_or_said():
    """Children that make their one launch at once and then live on for
    300 ms without another call (no gate): one whose calls all came
    inside its window exits well after its probes came, with no call
    traced. The kernel marks a process that entered a probed function
    (its uprobe XOL area, made at its first return probe, bpf/events.h),
    so such a child is said at its exit; before, it was the one silent
    window (docs/design.md)."""
    r = record(["--sample-hz", "0"], cmd=[wl("fork"), "--children", "6", "--iters", "1",
                                          "--linger-ms", "300"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    m = r.manifest()
    eq(len(m["children"]), 6, "children forked")
    traced, said = traced_or_said(r, m)
    for pid, got in said.items():
        if not got:
            # Nothing traced and an exit 300 ms after the window: only
            # the kernel's mark can have said it.
            check(re.search(r"pid %d: exited [\d.]+ ms after its fork with no call traced, but "
                            r"it entered a probed function before its probes" % pid, r.stderr),
                  "child %d, no call traced, said by its exit: %r" % (pid, r.stderr[-1500:]))
            check(re.search(r"^\s*%d\s+.*\(its fork; called before its probes\)" % pid, r.stdout,
                            re.M), "child %d's row in the summary: %r" % (pid, r.stdout[-2000:]))
    eq(traced + len(said), 6, "every child traced or said")
    tp_agrees(r)
    print("# 6 lingering children: %d traced whole, %d windows said" % (traced, len(said)))


def test_children_that_never_call_are_not_said():
    """Children that make no CUDA call (a DataLoader's workers): one that
    lives on past its window has none to report and nothing is said of
    it, on stderr or in the summary. One that exits inside its window is
    still said (a call to a function probed on entry alone leaves no
    mark), with the kernel's word that it entered no function probed on
    return."""
    r = record(["--sample-hz", "0"], cmd=[wl("fork"), "--children", "4", "--idle",
                                          "--linger-ms", "100"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    m = r.manifest()
    eq(len(m["children"]), 4, "children forked")
    for pid in m["children"]:
        check(not fork_window_said(r, pid), "idle child %d said: %r" %
              (pid, r.stderr[-1500:] + r.stdout[-1500:]))
    r = record(["--sample-hz", "0"], cmd=[wl("fork"), "--children", "4", "--idle"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    m = r.manifest()
    for pid in m["children"]:
        said = re.search(r"pid %d: exited [^\n]*" % pid, r.stderr)
        check(not said or said.group(0).endswith(
            "calls it made are missing (if any: it entered no function probed on return)"),
              "idle child %d exiting at once: %r" % (pid, r.stderr[-1500:]))


def test_forked_nccl_ranks_traced_or_said():
    """A traced process forks 4 ranks that create a communicator and
    all-reduce at once (nccl_ranks --procs: fork without exec, as
    multiprocessing's fork start method and forking servers do), with no
    gate: each rank either has its communicator's creation and its last
    call traced, or its window is said (stderr and summary)."""
    r = record(["-v", "--sample-hz", "0"], cmd=[wl("nccl_ranks"), "--ranks", "4", "--procs",
                                                "--iters", "200"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    clean_trace(r.trace)
    children = forked_by(r, pid_of(r))
    eq(len(children), 4, "the ranks' processes forked")
    whole, said = check_ranks(r, children, ("ncclCommInitRank", "ncclCommInitRankConfig"))
    print("# %d rank processes: %d traced whole, %d windows said" % (len(children), whole, said))


def test_multiprocessing_fork_ranks_traced_or_said():
    """Python's multiprocessing with the fork start method: 4 ranks, each
    creating an NCCL communicator through ctypes and all-reducing at once
    (tests/workloads/py/mp_nccl.py). Each rank either has its
    communicator's creation and its destroy traced, or its window is said
    (here the ranks usually make their first calls inside their windows:
    the rank loses its ncclCommInitRank, and says so)."""
    exe = python(11)
    mp = os.path.join(HERE, "..", "workloads", "py", "mp_nccl.py")
    r = record(["-v", "--sample-hz", "0", "--python", "off"], cmd=[exe, mp, "4", "100"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    check("ranks ok" in r.stdout, "the ranks ran: %r" % r.stdout[-400:])
    clean_trace(r.trace)
    children = forked_by(r, pid_of(r))
    ranks = [int(x) for x in re.findall(r"rank \d+ pid (\d+) done", r.stdout)]
    eq(sorted(ranks), sorted(set(ranks) & set(children)), "every rank's fork was seen")
    whole, said = check_ranks(r, ranks, ("ncclCommInitRank",), allreduces=100)
    print("# multiprocessing fork, 4 ranks: %d traced whole, %d windows said" % (whole, said))
