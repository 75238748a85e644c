# SPDX-License-Identifier: MIT
"""What cgbpf must never do to the processes on the host: a process that
is not a target has no breakpoint in its memory; no target is stopped or
signalled to attach; a library file seen only when it is mapped is probed
at once and the window is reported, in the summary and in the trace."""
import os
import re
import shutil
import subprocess

from harness import (FAKE, Bg, api_counts, check, clean_trace, env_with, eq, expected_calls,
                     kill_quiet, start, tmpdir, touch, wait_for, wl)


def load_segments(path):
    """[(vaddr, offset, filesz)] of the PT_LOAD segments, by binutils."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))
    return segs


def func_bytes(pid, lib, sym, n=5):
    """The first n bytes of sym (a function of the library named lib) as
    the process has them in memory, and as the file has them."""
    path = base = None
    with open("/proc/%d/maps" % pid) as f:
        maps = [ln.split() for ln in f]
    for m in maps:
        if len(m) >= 6 and os.path.basename(m[5]) == lib:
            path = m[5]
            break
    check(path, "pid %d maps %s" % (pid, lib))
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    vaddr = [int(ln.split()[0], 16) for ln in out.splitlines() if ln.split()[-1] == sym]
    check(vaddr, "%s exports %s" % (path, sym))
    vaddr = vaddr[0]
    off = [o + vaddr - v for v, o, sz in load_segments(path) if v <= vaddr < v + sz]
    check(off, "%s: %s in a LOAD segment" % (path, sym))
    off = off[0]
    # The load base: the mapping of file offset 0.
    for m in maps:
        if len(m) >= 6 and m[5] == path and int(m[2], 16) == 0:
            base = int(m[0].split("-")[0], 16)
    check(base is not None, "load base of %s" % path)
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(base + vaddr)
        mem = f.read(n)
    with open(path, "rb") as f:
        f.seek(off)
        disk = f.read(n)
    return mem, disk


def test_non_target_has_no_breakpoint():
    """record -p T: another process mapping the same libcuda.so.1 keeps
    its code as the file has it (no int3, no optimized-probe call), and
    none of its calls is recorded."""
    d = tmpdir()
    gate, pause = os.path.join(d, "go"), os.path.join(d, "pause")
    t = start([wl("train"), "--iters", "20"],
              env=env_with(CGBPF_WAIT_FILE=gate, CGBPF_MANIFEST=os.path.join(d, "t.json")))
    o = start([wl("train"), "--iters", "20"],
              env=env_with(CGBPF_PAUSE_FILE=pause, CGBPF_MANIFEST=os.path.join(d, "o.json")))
    bg = None
    try:
        wait_for(lambda: os.path.exists(pause + ".ready"), 20, "the other process's setup")
        bg = Bg(["-p", str(t.pid)], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        for sym in ("cuLaunchKernel", "cuMemcpyHtoD_v2", "cuStreamSynchronize"):
            mem, disk = func_bytes(t.pid, "libcuda.so.1", sym)
            check(mem != disk, "target: %s is probed (%s vs file %s)" % (sym, mem.hex(),
                                                                        disk.hex()))
            mem, disk = func_bytes(o.pid, "libcuda.so.1", sym)
            eq(mem.hex(), disk.hex(), "other process: %s as in the file" % sym)
        touch(gate)
        touch(pause)
        eq(t.wait(30), 0, "target exit")
        eq(o.wait(30), 0, "other exit")
        bg.p.send_signal(2)
        r = bg.finish()
    finally:
        kill_quiet(t)
        kill_quiet(o)
        if bg:
            kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    m = r.manifest("t.json")
    eq(api_counts(r.trace, t.pid), expected_calls(m["calls"]), "every call of the target")
    eq(api_counts(r.trace, o.pid), {}, "no call of the other process")


def fresh_copy(d):
    """A copy of the fake driver no loader search finds: probed only when
    a process maps it."""
    sub = os.path.join(d, "private")
    os.mkdir(sub)
    shutil.copy(os.path.join(FAKE, "libcuda.so.1"), sub)
    return os.path.join(sub, "libcuda.so.1")


def test_late_file_probed_at_once_and_reported():
    """-p T, T dlopens a library file by a path no search names: probed
    the moment it is mapped, T neither stopped nor signalled, the window
    reported per process in the summary and on the process's track."""
    d = tmpdir()
    gate, leave = os.path.join(d, "go"), os.path.join(d, "leave")
    lib = fresh_copy(d)
    w = start([wl("dl_late"), "--lib", lib, "--after-dlopen-ms", "0", "--iters", "20",
               "--exit-file", leave],
              env=env_with(CGBPF_WAIT_FILE=gate, CGBPF_MANIFEST=os.path.join(d, "m.json")))
    bg = None
    try:
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        check(lib not in bg.stderr(), "the private copy is not probed before it is mapped")
        touch(gate)
        bg.wait_msg("after it was mapped")
        touch(leave)
        eq(w.wait(30), 0, "workload exit")
        r = bg.finish()
    finally:
        kill_quiet(w)
        if bg:
            kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    m = r.manifest("m.json")
    eq(m["sigcont"], 0, "the target got no SIGCONT (it was never stopped)")
    line = re.search(r"pid %d: libcuda\.so\.1 probed (\d+\.\d+) ms after it was mapped" % w.pid,
                     r.stderr)
    check(line, "the window is said on stderr: %r" % r.stderr[-600:])
    check(re.search(r"window\(s\) before probes \(a library mapped, or a child forked", r.stdout),
          "the summary has the late table: %r" % r.stdout[-800:])
    row = [ln for ln in r.stdout.splitlines()
           if re.match(r"\s*%d\s+dl_late\s+libcuda\.so\.1\s+\d+\.\d+ ms" % w.pid, ln)]
    eq(len(row), 1, "one summary row for the process")
    late = [i for i in r.trace.instants
            if i.name == "cgbpf: probes came after this point (calls may be missing)"]
    eq(len(late), 1, "one late-probes instant")
    eq(late[0].args.get("library"), "libcuda.so.1", "its library")
    check(late[0].args.get("probed_after_us", -1) >= 0, "its window")
    eq(late[0].pid, w.pid, "on the process's track")
    got, want = api_counts(r.trace, w.pid), expected_calls(m["calls"])
    for fn, n in got.items():
        check(n <= want.get(fn, 0), "%s: %d seen, %d made" % (fn, n, want.get(fn, 0)))


def test_system_wide_never_stops_a_process():
    """-a: a process that maps a library file first seen at that mapping
    runs on untouched while cgbpf probes it (no SIGSTOP / SIGCONT)."""
    d = tmpdir()
    lib = fresh_copy(d)
    bg = Bg(["-a", "--comm", "dl_late", "--sched", "off", "--sample-hz", "0",
             "--syscall-threshold", "off"], tmp=d)
    try:
        bg.wait_msg("system-wide capture running")
        leave = os.path.join(d, "leave")
        w = start([wl("dl_late"), "--lib", lib, "--after-dlopen-ms", "0", "--iters", "5",
                   "--exit-file", leave], env=env_with(CGBPF_MANIFEST=os.path.join(d, "m.json")))
        bg.wait_msg("pid %d: libcuda.so.1 probed" % w.pid)
        touch(leave)
        eq(w.wait(30), 0, "workload exit")
        bg.p.send_signal(2)
        r = bg.finish()
    finally:
        kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    eq(r.manifest("m.json")["sigcont"], 0, "no SIGCONT: never stopped")
    check(re.search(r"pid %d: libcuda\.so\.1 probed \d+\.\d+ ms after it was mapped" % w.pid,
                    r.stderr), "the window is reported: %r" % r.stderr[-600:])
