# SPDX-License-Identifier: MIT
"""Syscall slices (--syscall-threshold): names, counts, arguments, return
values, ioctl fd targets, futex ops, nesting inside API calls, the
threshold, off, non-targets, and the osrt_sum-like summary table."""
import os
import re
import subprocess

from harness import (FAKE, check, clean_trace, env_with, eq, no_drops, record, start, tmpdir,
                     touch, wl, kill_quiet)
import ptrace

SLEEPS = 3
GETPIDS = 1000
MS = 1000000
_res = {}


def res(threshold="0"):
    """One recording of sys_mix per threshold, shared by the tests."""
    if threshold not in _res:
        args = [] if threshold is None else ["--syscall-threshold", threshold]
        r = record(args, cmd=[wl("sys_mix"), "--sleeps", str(SLEEPS), "--getpids", str(GETPIDS)])
        eq(r.rc, 0, "cgbpf exit (stderr: %r)" % r.stderr[-500:])
        _res[threshold] = r
    return _res[threshold]


def sys_on(r, tid=None, name=None, pid=None):
    return ptrace.syscall_slices_on(r.trace, tid=tid, pid=pid, name=name)


def test_names_counts_and_results():
    r = res()
    clean_trace(r.trace)
    no_drops(r)
    m = r.manifest()
    s = m["sys"]
    main = s["main_tid"]
    check(all(x.categories == ["syscall"] for x in r.trace.syscall_slices), "category syscall")
    check(all(x.dur is not None for x in r.trace.syscall_slices), "every syscall slice ended")
    # Raw nanosleep: the main thread's sleeps, 20 ms each.
    sl = sys_on(r, tid=main, name="nanosleep")
    eq(len(sl), SLEEPS, "nanosleep slices on the main thread")
    for x in sl:
        check(15 * MS <= x.dur <= 500 * MS, "nanosleep of 20 ms lasted %d ns" % x.dur)
        eq(x.args.get("ret"), 0, "nanosleep ret")
    # clock_nanosleep: the workload's own, outside any API call.
    sl = [x for x in sys_on(r, tid=main, name="clock_nanosleep")
          if ptrace.syscall_parent(r.trace, x) is None]
    eq(len(sl), SLEEPS, "clock_nanosleep slices outside API calls")
    check(all(8 * MS <= x.dur <= 500 * MS for x in sl), "10 ms clock_nanosleep durations")
    # File I/O on the file's fd (fd numbers are reused later: match the size too).
    fd = s["file_fd"]
    w = [x for x in sys_on(r, tid=main, name="write")
         if x.args.get("fd") == fd and x.args.get("ret") == s["io_bytes"]]
    eq(len(w), s["writes"], "write(2) of %d bytes on fd %d" % (s["io_bytes"], fd))
    rd = [x for x in sys_on(r, tid=main, name="read")
          if x.args.get("fd") == fd and x.args.get("ret") == s["io_bytes"]]
    eq(len(rd), s["reads"], "read(2) of %d bytes on fd %d" % (s["io_bytes"], fd))
    eq(len(sys_on(r, tid=main, name="fsync")), 1, "one fsync")
    # poll with a 50 ms timeout on an empty pipe.
    p = sys_on(r, tid=main, name="poll")
    eq(len(p), 1, "one poll")
    eq(p[0].args.get("ret"), 0, "poll timed out")
    check(40 * MS <= p[0].dur <= 500 * MS, "poll lasted %d ns" % p[0].dur)
    # getpid: short, but all there at threshold 0.
    check(len(sys_on(r, tid=main, name="getpid")) >= GETPIDS, "getpid slices at threshold 0")
    # The uretprobe trampoline's syscall (one per traced API return) is
    # cgbpf's own work: never a slice, though every CUDA call made one.
    check(r.trace.slices_on(tid=main), "API calls traced on the main thread")
    eq(sys_on(r, name="uretprobe"), [], "uretprobe syscall slices")
    # Errno names on failures.
    errs = [x for x in r.trace.syscall_slices if x.args.get("ret", 0) < 0]
    check(errs and all(x.args.get("errno", "").startswith("E") for x in errs),
          "failed syscalls carry an errno name")


def test_ioctl_targets():
    r = res()
    s = r.manifest()["sys"]
    io = sys_on(r, tid=s["main_tid"], name="ioctl")
    null = [x for x in io if x.args.get("target") == "/dev/null"]
    eq(len(null), s["null_ioctls"], "ioctls on /dev/null")
    for x in null:
        eq(x.args.get("fd"), s["null_fd"], "fd of the /dev/null ioctl")
        eq(x.args.get("ret"), -25, "ENOTTY as the return value")
        eq(x.args.get("errno"), "ENOTTY", "errno name")
        eq(x.args.get("request"), "0x541b", "FIONREAD request")
    pipe = [x for x in io if str(x.args.get("target", "")).startswith("pipe:[")]
    eq(len(pipe), s["pipe_ioctls"], "ioctls on the pipe")
    check(all(x.args.get("ret") == 0 and x.args.get("fd") == s["pipe_fd"] for x in pipe),
          "FIONREAD on the pipe succeeded on its fd")
    # A regular file four components deep: the last three, marked as cut.
    f = [x for x in io if x.args.get("fd") == s["file_fd"] and x.args.get("ret") == 0 and
         not str(x.args.get("target", "")).startswith("pipe:[")]
    want = ".../" + "/".join(s["file_path"].split("/")[-3:])
    eq([x.args.get("target") for x in f], [want], "ioctl on the file: its path")
    targets = {x.args["target"] for x in pipe}
    eq(len(targets), 1, "one pipe")
    check(targets.pop()[len("pipe:["):-1].isdigit(), "pipe:[inode]")


def test_futex_ops_between_threads():
    r = res()
    s = r.manifest()["sys"]
    waits = [x for x in sys_on(r, tid=s["waiter_tid"], name="futex")
             if x.args.get("op") == "FUTEX_WAIT_PRIVATE"]
    # The holder keeps the mutex 30 ms each round; the waiter blocks on it.
    long_waits = [x for x in waits if x.dur >= 10 * MS]
    check(len(long_waits) >= s["rounds"],
          "waiter blocked in FUTEX_WAIT_PRIVATE >= %d times (got %d of %d)" %
          (s["rounds"], len(long_waits), len(waits)))
    wakes = [x for x in sys_on(r, tid=s["holder_tid"], name="futex")
             if x.args.get("op") == "FUTEX_WAKE_PRIVATE"]
    check(len(wakes) >= s["rounds"], "holder woke the waiter (%d FUTEX_WAKE_PRIVATE)" % len(wakes))
    check(all(isinstance(x.args.get("uaddr"), int) and x.args["uaddr"] for x in waits),
          "futex uaddr annotated")
    eq(len(sys_on(r, tid=s["holder_tid"], name="nanosleep")), s["rounds"], "holder's sleeps")
    th = r.trace.threads.get(s["waiter_tid"])
    check(th is not None and th.thread_name == "waiter", "waiter thread track named")


def test_nested_inside_api_call():
    r = res()
    s = r.manifest()["sys"]
    sync = r.trace.slices_on(tid=s["main_tid"], name="cuStreamSynchronize")
    eq(len(sync), 1, "one cuStreamSynchronize")
    inner = [x for x in sys_on(r, tid=s["main_tid"])
             if ptrace.syscall_parent(r.trace, x) is sync[0]]
    check(inner, "syscalls inside cuStreamSynchronize")
    check(any(x.name == "clock_nanosleep" and x.dur >= 5 * MS for x in inner),
          "the fake driver's wait is a clock_nanosleep inside the synchronize: %r" %
          [(x.name, x.dur) for x in inner])
    for x in inner:
        eq(x.depth, sync[0].depth + 1, "depth of %s inside the API slice" % x.name)
        check(sync[0].ts <= x.ts and x.end <= sync[0].end, "%s within the slice" % x.name)
    # API slices keep their counts: syscalls are not API calls.
    eq(len(r.trace.slices_on(tid=s["main_tid"], name="cuLaunchKernel")), 1, "one launch")


def test_summary_table():
    r = res()
    s = r.manifest()["sys"]
    out = r.stdout
    check("** OS Runtime Summary (osrt_sum)" in out, "osrt table present")
    check("only syscalls lasting >= 0 ns" in out, "threshold stated")
    lines = out.split("** OS Runtime Summary", 1)[1].split("\n** ", 1)[0].splitlines()
    hdr = [ln for ln in lines if "Num Calls" in ln]
    eq(len(hdr), 1, "one header line")
    eq(hdr[0].split(), ["Time", "(%)", "Total", "Time", "(ns)", "Num", "Calls", "Avg", "(ns)",
                        "Med", "(ns)", "Min", "(ns)", "Max", "(ns)", "StdDev", "(ns)", "Name"],
       "columns")
    rows = {ln.split()[-1]: ln.split() for ln in lines[lines.index(hdr[0]) + 1:] if ln.strip()}
    counts = {}
    for x in r.trace.syscall_slices:
        counts[x.name] = counts.get(x.name, 0) + 1
    for name in ("nanosleep", "clock_nanosleep", "ioctl", "futex", "poll", "getpid", "write"):
        check(name in rows, "row for %s" % name)
        eq(int(rows[name][2]), counts[name], "Num Calls of %s = slices in the trace" % name)
    totals = [int(v[1]) for v in rows.values()]
    eq(totals, sorted(totals, reverse=True), "rows sorted by total time")
    pct = sum(float(v[0]) for v in rows.values())
    check(99.0 <= pct <= 101.0, "Time (%%) adds up to 100 (%.1f)" % pct)
    nano = rows["nanosleep"]
    check(int(nano[5]) >= 15 * MS, "nanosleep Min >= 15 ms")
    eq(int(rows["nanosleep"][2]), SLEEPS + s["rounds"], "nanosleep: main + holder")


def test_default_threshold_drops_short_syscalls():
    r = res(None)
    clean_trace(r.trace)
    no_drops(r)
    s = r.manifest()["sys"]
    check("only syscalls lasting >= 1000 ns" in r.stdout, "default threshold 1 us stated")
    getpids = sys_on(r, tid=s["main_tid"], name="getpid")
    check(len(getpids) < GETPIDS // 10, "getpid (~0.2 us) dropped: %d recorded" % len(getpids))
    check(all(x.dur >= 1000 for x in r.trace.syscall_slices), "nothing under 1 us recorded")
    eq(len(sys_on(r, tid=s["main_tid"], name="nanosleep")), SLEEPS, "long sleeps kept")
    eq(len([x for x in sys_on(r, tid=s["main_tid"], name="ioctl")
            if x.args.get("target") == "/dev/null"]) <= s["null_ioctls"], True,
       "ioctls on /dev/null: at most all of them")


def test_threshold_off_records_no_syscalls():
    r = res("off")
    clean_trace(r.trace)
    m = r.manifest()
    eq(r.trace.syscall_slices, [], "no syscall slices with --syscall-threshold off")
    eq(len(r.trace.slices_on(pid=m["pid"], name="cuStreamSynchronize")), 1, "API calls still")
    check("syscalls were not traced (--syscall-threshold off)" in r.stdout, "summary says off")


def test_non_target_syscalls_absent():
    tmp = tmpdir()
    gate = os.path.join(tmp, "go")
    other = start([wl("sys_mix"), "--sleeps", "2", "--getpids", "10"],
                  env=env_with(CGBPF_WAIT_FILE=gate))
    try:
        r = record(["--syscall-threshold", "0"], cmd=[
            "/bin/sh", "-c", "touch %s; exec %s --sleeps 2 --getpids 10" % (gate, wl("sys_mix"))],
            tmp=tmp)
        eq(r.rc, 0, "cgbpf exit (stderr: %r)" % r.stderr[-300:])
        eq(other.wait(30), 0, "the untraced sys_mix exit")
    finally:
        kill_quiet(other)
    clean_trace(r.trace)
    m = r.manifest()
    eq(sys_on(r, pid=other.pid), [], "no syscall of the untraced process")
    eq(len(sys_on(r, pid=m["pid"], name="nanosleep")), 2 + m["sys"]["rounds"],
       "the traced one's sleeps")
    check(other.pid not in {x.pid for x in r.trace.syscall_slices},
          "the untraced pid is nowhere among the syscall slices")


def test_protoc_decodes_categories():
    """Second, independent check of the wire format: stock protoc against
    Perfetto's schema sees interned category "syscall" and category_iids."""
    r = res()
    proto = ptrace.proto_path()
    with open(r.trace_path, "rb") as f:
        p = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I",
                            os.path.dirname(proto), os.path.basename(proto)],
                           stdin=f, capture_output=True, timeout=120)
    eq(p.returncode, 0, "protoc exit (%s)" % p.stderr[-300:])
    text = p.stdout.decode("utf-8", "replace")
    cats = re.findall(r'event_categories \{\s*iid: (\d+)\s*name: "syscall"', text)
    check(cats, "interned event category \"syscall\"")
    check(re.search(r"category_iids: (%s)\b" % "|".join(cats), text),
          "track events refer to it by category_iids")
    check('name: "FUTEX_WAIT_PRIVATE"' in text or 'str: "FUTEX_WAIT_PRIVATE"' in text,
          "futex op string interned")
