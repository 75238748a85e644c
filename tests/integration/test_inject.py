# SPDX-License-Identifier: MIT
"""record -p PID --inject (issue 26): the injection library loaded into a
process started without any injection variable, on the fake driver and
the fake CUPTI (chosen by CGBPF_CUPTI_PATH in the workload's own
environment, as a user's would be). GPU slices only after the injection;
the workload's exit status and work unchanged; a plain record -p loads
nothing; cgbpf killed with SIGKILL at every step of the sequence leaves
the workload untraced, not stopped, finishing its loop; refusals say
why."""
import os
import re
import signal
import subprocess
import time

import harness
import ptrace
from harness import CGBPF, Skip, check, clean_trace, eq, env_with, kill_quiet, tmpdir, wl

LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
FAKE_CUPTI = os.path.join(harness.OUT, "fake", "libcupti.so.13")
STEPS = ["stub", "seized", "stopped", "checked", "frame", "regs", "detached"]


def need_inject():
    if not os.path.exists(LIB):
        raise Skip("%s not built" % LIB)
    r = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True)
    if " InitializeInjection\n" not in r.stdout:
        raise Skip("%s has no GPU part (no CUPTI headers at build time)" % LIB)
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)


def start_train(iters, tmp):
    """train started plainly: no CUDA_INJECTION64_PATH, its CUPTI named in
    its own environment. 0.2 ms kernels: ~1 ms per iteration."""
    env = env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="200000",
                   CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"))
    env.pop("CUDA_INJECTION64_PATH", None)
    env.pop("NVTX_INJECTION64_PATH", None)
    p = subprocess.Popen([wl("train"), "--iters", str(iters)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Until it maps libcuda.
    t = time.time() + 10
    while time.time() < t and "libcuda" not in maps(p.pid):
        time.sleep(0.01)
    return p


def maps(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return f.read()
    except OSError:
        return ""


def status(pid, key):
    """KEY of /proc/PID/status; pid may be "PID/task/TID"."""
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def injected(pid):
    return "libcgbpf-inject.so" in maps(pid)


def finish(p, what):
    out, err = p.communicate(timeout=120)
    eq(p.returncode, 0, "%s: the workload's own exit status (stderr %r)" % (what, err[-400:]))
    return out


def test_inject_mid_loop():
    """A plain record -p loads nothing; record -p --inject mid-loop loads
    the library once, measures GPU slices (each linked to its launch),
    none before the injection; a second --inject injects nothing; the
    workload finishes as it would have."""
    need_inject()
    tmp = tmpdir()
    p = start_train(14000, tmp)
    try:
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "-d", "500ms", "--sample-hz", "0",
                            "--summary-only"], capture_output=True, text=True, timeout=120)
        eq(r.returncode, 0, "plain record -p (stderr %r)" % r.stderr[-500:])
        check(not injected(p.pid), "a plain record -p loads nothing")
        check("--inject" in r.stdout, "the estimate line names --inject:\n" + r.stdout[-1500:])
        trace = os.path.join(tmp, "out.perfetto-trace")
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "1500ms",
                            "--sample-hz", "0", "-o", trace], capture_output=True, text=True,
                           timeout=120)
        eq(r.returncode, 0, "record --inject (stderr %r)" % r.stderr[-800:])
        check("injected now: thread" in r.stdout, "the summary says injected:\n" +
              r.stdout[-2000:])
        check("measured (CUPTI %s)" % FAKE_CUPTI in r.stdout, "measured:\n" + r.stdout[-2000:])
        check("the library was loaded into the running process by this capture" in r.stdout,
              "the GPU section says how its data came:\n" + r.stdout[-2000:])
        files = set(l.split()[-1] for l in maps(p.pid).splitlines()
                    if "libcgbpf-inject" in l)
        eq(len(files), 1, "one library file mapped")
        t = ptrace.load(trace)
        clean_trace(t)
        streams = {u for u, x in t.tracks.items()
                   if (x.name or "").startswith("stream ") and x.pid == p.pid and
                   not x.name.endswith("(estimate)")}
        gpu = [s for s in t.slices if s.track_uuid in streams]
        check(len(gpu) > 100, "GPU slices measured after the injection: %d" % len(gpu))
        marks = [i for i in t.instants
                 if i.name.startswith("cgbpf: injection library loaded (--inject)")]
        eq(len(marks), 1, "one injection instant in the trace")
        early = [s for s in gpu if s.ts < marks[0].ts]
        eq(early, [], "no GPU slice before the injection")
        linked = [s for s in gpu if s.flow_in or s.flow_end]
        check(len(linked) >= len(gpu) - 2, "GPU slices linked to their launch: %d of %d" %
              (len(linked), len(gpu)))
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "300ms",
                            "--sample-hz", "0", "--summary-only"], capture_output=True,
                           text=True, timeout=120)
        eq(r.returncode, 0, "second --inject")
        check("already loaded" in r.stdout, "a second --inject injects nothing:\n" +
              r.stdout[-1500:])
        check("library loaded before this capture (an earlier --inject" in r.stdout,
              "the GPU section says how its data came:\n" + r.stdout[-1500:])
        check(p.poll() is None, "the workload still runs")
        eq(status(p.pid, "TracerPid"), "0", "untraced after")
        finish(p, "after --inject")
    finally:
        kill_quiet(p)


def test_window_end_cuts_running_kernels():
    """Kernels of 300 ms, back to back: when an injected capture ends, one
    is running and more are queued. CUPTI's forced flush gives their
    records no times: the summary and the "stopped" or "flushed" instant
    say how many,
    and no slice is drawn for them (none invented)."""
    need_inject()
    env = env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="300000000")
    env.pop("CUDA_INJECTION64_PATH", None)
    p = subprocess.Popen([wl("train"), "--iters", "12"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        t = time.time() + 10
        while time.time() < t and "libcuda" not in maps(p.pid):
            time.sleep(0.01)
        trace = os.path.join(tmpdir(), "cut.perfetto-trace")
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "1500ms",
                            "--sample-hz", "0", "-o", trace], capture_output=True, text=True,
                           timeout=120)
        eq(r.returncode, 0, "record --inject (stderr %r)" % r.stderr[-800:])
        m = re.search(r"(\d+) GPU operations were still running when collection stopped: "
                      r"cut by the window's end, not drawn", r.stdout)
        check(m and int(m.group(1)) >= 1, "the cut operations in the summary:\n" +
              r.stdout[r.stdout.find("GPU activity per"):][:1200])
        tr = ptrace.load(trace)
        clean_trace(tr)
        stops = [i for i in tr.instants if i.pid == p.pid and
                 i.name in ("GPU activity: stopped", "GPU activity: flushed")]
        check(stops, "a stopped or flushed instant: %r" % sorted({i.name for i in tr.instants}))
        said = " ".join(str(v) for i in stops for v in i.args.values())
        check("%s operations still running then, not drawn" % m.group(1) in said,
              "the stopped instant says how many were cut: %r" % said)
        for s in tr.slices:
            check(s.dur is None or s.dur >= 0, "no slice with a negative duration")
        finish(p, "after the cut window")
    finally:
        kill_quiet(p)


def test_killed_at_every_step():
    """cgbpf killed with SIGKILL at each step of the sequence
    (CGBPF_INJECT_DIE_AT): the workload is never left traced or stopped,
    and finishes its loop with its own exit status; from the SETREGS on,
    the stub completes by itself and the library loads."""
    need_inject()
    for st in STEPS:
        tmp = tmpdir()
        p = start_train(2500, tmp)
        try:
            env = env_with(CGBPF_INJECT_DIE_AT=st)
            r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "1s",
                                "--sample-hz", "0", "--summary-only"], env=env,
                               capture_output=True, text=True, timeout=120)
            eq(r.returncode, -signal.SIGKILL, "%s: cgbpf killed (stderr %r)" %
               (st, r.stderr[-300:]))
            time.sleep(0.2)
            eq(status(p.pid, "TracerPid"), "0", "%s: untraced" % st)
            state = status(p.pid, "State") or ""
            check(not state.startswith(("T", "t")), "%s: not stopped (%s)" % (st, state))
            if st in ("regs", "detached"):
                t = time.time() + 5
                while time.time() < t and not injected(p.pid):
                    time.sleep(0.01)
                check(injected(p.pid), "%s: the stub loaded the library by itself" % st)
            finish(p, st)
        finally:
            kill_quiet(p)


def test_refusals():
    """A process without libcuda, and one under ptrace already: refused,
    with the reason, and nothing changed."""
    need_inject()
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "300ms",
                            "--summary-only"], capture_output=True, text=True, timeout=60)
        eq(r.returncode, 0, "cgbpf exit (stderr %r)" % r.stderr[-500:])
        check("not injected: no libcuda mapped" in r.stderr, "refused: %r" % r.stderr[-500:])
        check("refused: no libcuda mapped" in r.stdout, "summary: %r" % r.stdout[-1000:])
    finally:
        kill_quiet(p)
    tmp = tmpdir()
    p = start_train(3000, tmp)
    tracer = None
    try:
        # A tracer of our own (strace, if installed).
        if subprocess.run(["which", "strace"], capture_output=True).returncode == 0:
            tracer = subprocess.Popen(["strace", "-o", "/dev/null", "-p", str(p.pid)],
                                      stderr=subprocess.DEVNULL)
            t = time.time() + 5
            while time.time() < t and status(p.pid, "TracerPid") in (None, "0"):
                time.sleep(0.01)
            r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "300ms",
                                "--summary-only"], capture_output=True, text=True, timeout=60)
            check("it is traced already" in r.stderr, "refused under strace: %r" %
                  r.stderr[-500:])
            check(not injected(p.pid), "nothing injected under strace")
            tracer.terminate()
            tracer.wait(timeout=10)
            tracer = None
        finish(p, "refusals")
    finally:
        if tracer:
            tracer.kill()
        kill_quiet(p)


def tgkill(pid, tid, sig):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(234, pid, tid, sig)


def run_threads(kind, env_extra=None, during=None):
    """inject_threads with record --inject holding the thread KIND; returns
    (cgbpf's result, the workload's output lines)."""
    need_inject()
    w = subprocess.Popen([wl("inject_threads"), "--seconds", "5"],
                         env=env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        tids = {}
        for line in w.stdout:
            f = line.split()
            if f[:1] == ["tid"]:
                tids[f[1]] = int(f[2])
            if f[:1] == ["ready"]:
                break
        check(kind in tids, "the workload named its %s thread: %r" % (kind, tids))
        env = env_with(CGBPF_INJECT_TID=str(tids[kind]), **(env_extra or {}))
        # Not -v while during() runs: a full stderr pipe would stop cgbpf.
        cg = subprocess.Popen([CGBPF, "record"] + ([] if during else ["-v"]) +
                              ["-p", str(w.pid), "--inject", "-d", "500ms", "--sample-hz", "0",
                               "--summary-only"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if during:
            during(w.pid, tids[kind], cg)
        out, err = cg.communicate(timeout=120)
        eq(cg.returncode, 0, "%s: cgbpf exit (stderr %r)" % (kind, err[-800:]))
        rest, werr = w.communicate(timeout=60)
        lines = rest.splitlines()
        eq(w.returncode, 0, "%s: the workload saw what it would have: %r %r" %
           (kind, lines, werr[-300:]))
        return out, err, lines
    finally:
        kill_quiet(w)


def _thread_state_test(kind):
    def test():
        """The thread held for the injection KIND: it resumes as if nothing
        happened (its result line, the workload's exit status), and the
        library is loaded (or, for a thread inside malloc, refused)."""
        out, err, lines = run_threads(kind)
        if kind == "malloc" and "refused" in out:
            check("inside malloc" in out, "why a malloc thread was refused: %r" % out[-800:])
        else:
            check("injected now: thread" in out, "%s: injected:\n%s\n%s" %
                  (kind, out[-1200:], err[-1500:]))
        res = [l for l in lines if l.startswith("result %s " % kind)]
        check(res and " ok " in res[0], "%s: %r" % (kind, res))
        if kind == "epoll":
            # signal(7): epoll_wait returns EINTR after a ptrace stop.
            check("EINTR" in out or "errno=4" not in res[0], "epoll's EINTR said: %r" % out)
    test.__name__ = "test_thread_%s" % kind
    return test


for _k in ("read", "cond", "sleep", "epoll", "spin", "malloc"):
    _t = _thread_state_test(_k)
    globals()[_t.__name__] = _t


def test_signal_during_the_hold():
    """A SIGUSR1 sent to the held thread while cgbpf holds it (a 300 ms
    pause at the stop, CGBPF_INJECT_PAUSE_AT) is delivered once."""
    def send(pid, tid, cg):
        t = time.time() + 10
        while time.time() < t and status("%d/task/%d" % (pid, tid), "TracerPid") in (None, "0"):
            time.sleep(0.005)
        check(status("%d/task/%d" % (pid, tid), "TracerPid") not in (None, "0"),
              "the thread is held")
        tgkill(pid, tid, signal.SIGUSR1)
    out, err, lines = run_threads("cond", {"CGBPF_INJECT_PAUSE_AT": "stopped"}, send)
    check("injected now: thread" in out, "injected: %r" % out[-800:])
    check("sigusr1 1" in lines, "delivered once: %r" % lines)


def test_all_with_comm():
    """-a --inject --comm: two workloads of the named kinds, one started
    after the capture began, both injected and measured; a third with
    another name gets nothing."""
    need_inject()
    tmp = tmpdir()
    names = ["injalpha", "injbeta", "injgamma"]
    for n in names:
        os.symlink(wl("train"), os.path.join(tmp, n))
    env = env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="200000")
    env.pop("CUDA_INJECTION64_PATH", None)
    procs = []

    def launch(name, iters):
        p = subprocess.Popen([os.path.join(tmp, name), "--iters", str(iters)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        return p

    try:
        a = launch("injalpha", 9000)
        t = time.time() + 10
        while time.time() < t and "libcuda" not in maps(a.pid):
            time.sleep(0.01)
        trace = os.path.join(tmp, "out.perfetto-trace")
        cg = subprocess.Popen([CGBPF, "record", "-a", "--inject", "--comm", "injalpha,injbeta",
                               "-d", "5s", "--sample-hz", "0", "-o", trace],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        b = launch("injbeta", 2000)
        c = launch("injgamma", 2000)
        out, err = cg.communicate(timeout=120)
        eq(cg.returncode, 0, "cgbpf exit (stderr %r)" % err[-800:])
        for p, name in ((a, "injalpha"), (b, "injbeta")):
            check("pid %d: injected now" % p.pid in out, "%s injected:\n%s" %
                  (name, out[out.find("GPU activity"):][:2500]))
            check(("pid %d (%s): measured" % (p.pid, name)) in out, "%s measured" % name)
        check("pid %d:" % c.pid not in out[out.find("injection (--inject)"):],
              "injgamma not in the injection list")
        check(not injected(c.pid) or c.poll() is not None, "nothing injected into injgamma")
        for p in procs:
            finish(p, "all")
    finally:
        for p in procs:
            kill_quiet(p)


def start_threads(args, env=None):
    w = subprocess.Popen([wl("inject_threads"), "--seconds", "4"] + args,
                         env=env or env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in w.stdout:
        if line.startswith("ready"):
            break
    return w


def test_seccomp_filters():
    """Seccomp filters are read (PTRACE_SECCOMP_GET_FILTER) and asked
    about every call the injection makes: one that allows everything
    lets the injection through; one that kills the process on an mmap
    with PROT_EXEC (what dlopen does) gets it refused, naming the action
    and the call, and the process untouched."""
    need_inject()
    for args, want in ((["--seccomp"], "injected now"),
                       (["--seccomp-kill-exec"], "not injected: its seccomp filter would answer "
                        "KILL_PROCESS to mmap")):
        w = start_threads(args)
        try:
            r = subprocess.run([CGBPF, "record", "-p", str(w.pid), "--inject", "-d", "300ms",
                                "--summary-only"], capture_output=True, text=True, timeout=60)
            eq(r.returncode, 0, "%s: cgbpf exit (stderr %r)" % (args, r.stderr[-500:]))
            check(want in r.stdout + r.stderr, "%s: %r" % (args, (r.stdout + r.stderr)[-900:]))
            if "not" in want:
                check(not injected(w.pid), "%s: nothing injected" % args)
            out, err = w.communicate(timeout=60)
            eq(w.returncode, 0, "%s: the workload's exit status (%r)" % (args, out[-500:]))
        finally:
            kill_quiet(w)


def test_refused_without_cap_sys_ptrace():
    """cgbpf without CAP_SYS_PTRACE (capsh --drop) against a non-dumpable
    target: refused with the reason, the target untouched."""
    need_inject()
    if subprocess.run(["which", "capsh"], capture_output=True).returncode:
        raise Skip("no capsh (libcap2-bin)")
    w = start_threads(["--nodump"])
    try:
        cmd = "%s record -p %d --inject -d 300ms --summary-only" % (CGBPF, w.pid)
        r = subprocess.run(["capsh", "--drop=cap_sys_ptrace", "--", "-c", cmd],
                           capture_output=True, text=True, timeout=60)
        text = r.stdout + r.stderr
        check(("not injected" in text and ("PTRACE" in text or "Permission denied" in text))
              or r.returncode != 0, "refused with a reason (rc %d): %r" %
              (r.returncode, text[-800:]))
        check("injected now" not in text, "not injected")
        check(not injected(w.pid), "nothing injected")
        out, err = w.communicate(timeout=60)
        eq(w.returncode, 0, "the workload's exit status (%r)" % out[-500:])
    finally:
        kill_quiet(w)


def test_refused_32_bit():
    """A 32-bit process (gcc -m32): refused as such."""
    need_inject()
    tmp = tmpdir()
    src, exe = os.path.join(tmp, "s.c"), os.path.join(tmp, "sleeper32")
    with open(src, "w") as f:
        f.write("#include <unistd.h>\nint main(void) { sleep(20); return 0; }\n")
    if subprocess.run(["gcc", "-m32", src, "-o", exe], capture_output=True).returncode:
        raise Skip("gcc -m32 does not link here (gcc-multilib)")
    p = subprocess.Popen([exe])
    try:
        time.sleep(0.1)
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "300ms",
                            "--summary-only"], capture_output=True, text=True, timeout=60)
        check("not injected: a 32-bit process" in r.stderr, "refused: %r" % r.stderr[-600:])
        check(p.poll() is None, "the process runs on")
    finally:
        kill_quiet(p)


def test_own_mount_namespace():
    """A target in its own mount namespace where the build directory's
    inject/ is hidden (a tmpfs over it): the library is copied into its
    /dev/shm, loaded, and its GPU activity measured."""
    need_inject()
    hide = os.path.dirname(LIB)
    tmp = tmpdir()
    script = "mount -t tmpfs none %s && exec %s --iters 6000" % (hide, wl("train"))
    env = env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="200000")
    env.pop("CUDA_INJECTION64_PATH", None)
    p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    copies = []
    try:
        t = time.time() + 10
        while time.time() < t and "libcuda" not in maps(p.pid):
            time.sleep(0.01)
        check(not os.path.exists(os.path.join("/proc/%d/root" % p.pid, LIB.lstrip("/"))),
              "the library is hidden in the target's namespace")
        r = subprocess.run([CGBPF, "record", "-p", str(p.pid), "--inject", "-d", "1500ms",
                            "--sample-hz", "0", "--summary-only"], capture_output=True,
                           text=True, timeout=120)
        eq(r.returncode, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
        check("injected now" in r.stdout, "injected:\n%s" % r.stdout[-1500:])
        check("measured (CUPTI" in r.stdout, "measured:\n%s" % r.stdout[-1500:])
        copies = [l.split()[-1] for l in maps(p.pid).splitlines() if "cgbpf-inject" in l]
        check(copies and copies[0].startswith("/dev/shm/cgbpf-inject-"), "the copy in /dev/shm: %r" % copies)
        out, err = p.communicate(timeout=60)
        eq(p.returncode, 0, "the workload's exit status (%r)" % err[-300:])
    finally:
        kill_quiet(p)
        for c in set(copies):
            try:
                os.unlink(c)
                os.rmdir(os.path.dirname(c))
            except OSError:
                pass


def test_interactive_shell_job():
    """The workload as the foreground job of an interactive shell on a
    terminal: injected, the shell never reports it Stopped, and its exit
    status is its own."""
    need_inject()
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"],
                   env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="200000",
                            PS1="$ "))
    out = b""

    def read_for(seconds, until=None):
        nonlocal out
        end = time.time() + seconds
        while time.time() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    out += os.read(fd, 4096)
                except OSError as e:
                    out += ("[read: %s]" % e).encode()
                    return
            if until and until in out:
                return

    try:
        read_for(1)
        os.write(fd, ("%s --iters 5000; echo \"R\"C=$?\n" % wl("train")).encode())
        w = None
        t = time.time() + 10
        while time.time() < t and not w:
            r = subprocess.run(["pgrep", "-P", str(pid), "-f", "train"], capture_output=True,
                               text=True)
            w = r.stdout.split()[0] if r.stdout.split() else None
            time.sleep(0.05)
        check(w, "the foreground job started")
        time.sleep(0.5)
        r = subprocess.run([CGBPF, "record", "-p", w, "--inject", "-d", "1s", "--sample-hz", "0",
                            "--summary-only"], capture_output=True, text=True, timeout=120)
        check("injected now" in r.stdout, "injected:\n%s" % r.stdout[-1200:])
        read_for(60, b"RC=")
        text = out.decode(errors="replace")
        check("RC=0" in text, "the job's own exit status: %r" % text[-600:])
        check("Stopped" not in text, "the shell never said Stopped: %r" % text[-600:])
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        os.close(fd)


def test_attach_detach_cycles():
    """Injected once, then attached and detached again and again: one
    library mapping, no growth of its descriptors or memory, no crash.
    6 cycles by default; CGBPF_INJECT_CYCLES=100 for the long run."""
    need_inject()
    tmp = tmpdir()
    cycles = int(os.environ.get("CGBPF_INJECT_CYCLES", "6"))
    p = start_train(4000 * cycles + 10000, tmp)
    try:
        def fds():
            return len(os.listdir("/proc/%d/fd" % p.pid))

        def rss():
            return int(status(p.pid, "VmRSS").split()[0])

        seen = []
        for i in range(cycles):
            r = subprocess.run([CGBPF, "record", "-p", str(p.pid)] + (["--inject"] if i < 2 else [])
                               + ["-d", "300ms", "--sample-hz", "0", "--summary-only"],
                               capture_output=True, text=True, timeout=120)
            eq(r.returncode, 0, "cycle %d: cgbpf exit (%r)" % (i, r.stderr[-500:]))
            check(p.poll() is None, "cycle %d: the process runs on" % i)
            time.sleep(0.3)
            seen.append((fds(), rss()))
        files = set(l.split()[-1] for l in maps(p.pid).splitlines() if "libcgbpf-inject" in l)
        eq(len(files), 1, "one library file mapped")
        eq(seen[-1][0], seen[1][0], "descriptors after cycle 2 and after the last: %r" % seen)
        check(seen[-1][1] - seen[1][1] < 16 << 10, "RSS grew by less than 16 MiB: %r" % seen)
        eq(status(p.pid, "TracerPid"), "0", "untraced")
    finally:
        kill_quiet(p)
