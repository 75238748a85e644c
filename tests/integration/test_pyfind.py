# SPDX-License-Identifier: MIT
"""`cgbpf check --python -p PID` (issue 12): the interpreter cgbpf finds
in each installed CPython (pyenv's shared 3.8-3.13, Debian's static
/usr/bin/python3.11) and every Python thread's stack (plain calls, a
generator's body, an asyncio coroutine), read from outside,
against the stacks the parked program (tests/workloads/py/park.py) wrote
for itself; and the versions and builds it must refuse, each with one line
and no frames."""
import glob
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys

from harness import CGBPF, REPO, Skip, check, eq, kill_quiet, tmpdir, wait_for

PARK = os.path.join(REPO, "tests", "workloads", "py", "park.py")
PYENV = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")

THREAD_RE = re.compile(r"^  thread (\d+) \(pthread 0x[0-9a-f]+, interpreter (\d+)\):$")
FRAME_RE = re.compile(r"^    #(\d+) (\S+) (.+):(\d+)( \[not user code\])?$")


def pyenv_python(minor):
    """The newest pyenv CPython 3.minor (not free-threaded), or Skip."""
    found = sorted(glob.glob(os.path.join(PYENV, "versions", "3.%d.*" % minor)),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", os.path.basename(p))])
    found = [d for d in found if re.fullmatch(r"3\.\d+\.\d+", os.path.basename(d))]
    exe = found and os.path.join(found[-1], "bin", "python3.%d" % minor)
    if not exe or not os.path.exists(exe):
        raise Skip("no pyenv CPython 3.%d in %s/versions (pyenv install 3.%d)" % (minor, PYENV,
                                                                                    minor))
    return exe


def check_python(pid):
    p = subprocess.run([CGBPF, "check", "--python", "-p", str(pid)], capture_output=True,
                       text=True, timeout=60)
    return p


def parse(out):
    """The header line and {tid: [(func, file, line, user), ...]}."""
    lines = out.splitlines()
    threads, cur = {}, None
    for line in lines[1:]:
        m = THREAD_RE.match(line)
        if m:
            cur = threads.setdefault(int(m.group(1)), [])
            continue
        m = FRAME_RE.match(line)
        if m:
            check(cur is not None, "a frame line before any thread line: %r" % line)
            eq(int(m.group(1)), len(cur), "frame number in %r" % line)
            cur.append((m.group(2), m.group(3), int(m.group(4)), m.group(5) is None))
            continue
        check(line.startswith("  _PyRuntime 0x"), "unexpected line %r" % line)
    return lines[0] if lines else "", threads


# x86-64 system calls a Python sleep blocks in: clock_nanosleep (3.11 and
# later), select (before), nanosleep, pselect6, poll.
SLEEPS = {"230", "23", "35", "270", "7"}


def asleep(pid):
    """Whether thread pid is blocked in a sleep (/proc/PID/syscall: its
    number first, or "running")."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] in SLEEPS
    except (OSError, IndexError):
        return False


def park(python, tmp, env=None):
    """Starts park.py under python; returns (process, manifest)."""
    import json
    man = os.path.join(tmp, "park.json")
    e = dict(env or os.environ)
    e["CGBPF_MANIFEST"] = man
    p = subprocess.Popen([python, PARK, "--kinds"], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.exists(man + ".ready") or p.poll() is not None, 30,
                 "park.py to park")
        if p.poll() is not None:
            raise AssertionError("park.py exited %s: %s" % (p.returncode, p.stderr.read()))
        # The main thread writes the manifest before it parks: under load
        # it may still be on its way out of report().
        wait_for(lambda: asleep(p.pid), 10, "park.py's main thread to sleep in park_here")
        with open(man) as f:
            return p, json.load(f)
    except BaseException:
        kill_quiet(p)
        raise


def stacks_match(python, want_version, want_path, shared):
    tmp = tmpdir()
    p, m = park(python, tmp)
    try:
        r = check_python(p.pid)
    finally:
        kill_quiet(p)
    eq(r.returncode, 0, "check --python exit (stdout %r, stderr %r)" % (r.stdout, r.stderr))
    head, threads = parse(r.stdout)
    eq(m["python"], want_version, "the workload's own version")
    eq(head, "pid %d: Python %s (%s, %s)" % (p.pid, want_version, want_path,
                                             "shared library" if shared else "executable"),
       "header line")
    want = {t["tid"]: [(f["func"], f["file"], f["line"], f["user"]) for f in t["stack"]]
            for t in m["threads"]}
    eq(sorted(threads), sorted(want), "threads (native ids)")
    for tid, stack in want.items():
        eq(threads[tid], stack, "stack of thread %d" % tid)
    # What the test relies on, said once more in plain terms.
    main = [t for t in m["threads"] if t["main"]][0]
    eq(threads[main["tid"]][0][:1] + threads[main["tid"]][0][2:3],
       ("park_here", m["park_line"]), "main thread's innermost frame")
    eq(len(threads), 5, "main, two parked workers, one in a generator, one in a coroutine")


def _pyenv_test(minor):
    def test():
        exe = pyenv_python(minor)
        prefix = os.path.dirname(os.path.dirname(exe))
        version = os.path.basename(prefix)
        lib = os.path.join(prefix, "lib", "libpython3.%d.so.1.0" % minor)
        stacks_match(exe, version, lib, True)
    test.__name__ = "test_stacks_pyenv_3_%d" % minor
    return test


for _minor in range(8, 14):
    _t = _pyenv_test(_minor)
    globals()[_t.__name__] = _t


def test_stacks_debian_static_311():
    exe = "/usr/bin/python3.11"
    if not os.path.exists(exe):
        raise Skip("no %s (apt-get install python3.11)" % exe)
    # Debian's is one static executable that exports _PyRuntime.
    nm = subprocess.run(["nm", "-D", "--defined-only", exe], capture_output=True, text=True)
    if " _PyRuntime\n" not in nm.stdout:
        raise Skip("%s does not export _PyRuntime" % exe)
    version = subprocess.run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    stacks_match(exe, version, os.path.realpath(exe), False)


SLEEPER = ["-c", "import time; print('ready', flush=True); time.sleep(60)"]


def refused(cmd, env=None):
    """Runs cmd (an interpreter that says "ready" and sleeps, or a program
    that sleeps), returns (pid, check --python's result)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        if cmd[-len(SLEEPER):] == SLEEPER:
            line = p.stdout.readline()
            check(line == "ready\n", "interpreter started (said %r, stderr %r)" %
                  (line, p.stderr.read() if p.poll() is not None else ""))
        else:
            wait_for(lambda: os.path.exists("/proc/%d/maps" % p.pid), 10, "the process")
        return p.pid, check_python(p.pid)
    finally:
        kill_quiet(p)


def eq_refusal(r, line):
    eq(r.returncode, 1, "check --python exit for a refused interpreter")
    eq(r.stdout, line + "\n", "the one line (and no thread or frame)")


def test_refuses_python_37():
    exe = glob.glob(os.path.join(PYENV, "versions", "3.7.*", "bin", "python3.7"))
    if not exe:
        raise Skip("no pyenv CPython 3.7 (a version cgbpf has no offsets for)")
    version = os.path.basename(os.path.dirname(os.path.dirname(exe[0])))
    pid, r = refused([exe[0]] + SLEEPER)
    eq_refusal(r, "pid %d: Python %s: no offsets for this version; no Python frames" %
               (pid, version))


def test_no_python():
    pid, r = refused(["sleep", "60"])
    eq_refusal(r, "pid %d: no Python interpreter (no libpython3.X.so mapped, the executable "
               "does not define _PyRuntime)" % pid)


def test_mapped_but_not_started():
    # libpython loaded (LD_PRELOAD into sleep) but never initialized: the
    # interpreter is found and accepted (3.13's debug offsets are static
    # data, checked all the same), and there are no threads yet.
    for minor in (9, 13):
        exe = pyenv_python(minor)
        prefix = os.path.dirname(os.path.dirname(exe))
        lib = os.path.join(prefix, "lib", "libpython3.%d.so.1.0" % minor)
        p = subprocess.Popen(["sleep", "60"], env=dict(os.environ, LD_PRELOAD=lib))
        try:
            wait_for(lambda: lib in open("/proc/%d/maps" % p.pid).read(), 10, "libpython mapped")
            r = check_python(p.pid)
        finally:
            kill_quiet(p)
        lines = r.stdout.splitlines()
        eq(r.returncode, 0, "check --python exit (%r)" % r.stdout)
        eq(lines[0], "pid %d: Python %s (%s, shared library)" % (p.pid, os.path.basename(prefix),
                                                                 lib), "header")
        check(re.fullmatch(r"  _PyRuntime 0x[0-9a-f]+, PyCode_Type 0x[0-9a-f]+, offsets row "
                           r"3\.%d \(from 3\.%d\.\d+\)%s" % (
                               minor, minor, ", checked against _Py_DebugOffsets"
                               if minor >= 13 else ""), lines[1]) is not None,
              "addresses line %r" % lines[1])
        eq(lines[2:], ["  not initialized yet: no interpreter, no threads"], "no threads")


def elf_file_offset(path, symbol):
    """The file offset of symbol's value (nm -D and the PT_LOAD headers)."""
    nm = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                        check=True).stdout
    addr = [int(line.split()[0], 16) for line in nm.splitlines() if line.endswith(" " + symbol)]
    check(len(addr) == 1, "%s defines %s once" % (path, symbol))
    with open(path, "rb") as f:
        ehdr = f.read(64)
        phoff, = struct.unpack_from("<Q", ehdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", ehdr, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    for i in range(phnum):
        ptype, _, off, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", ph, i * phentsize)
        if ptype == 1 and vaddr <= addr[0] < vaddr + filesz:
            return addr[0] - vaddr + off
    raise AssertionError("%s: %s is not in the file" % (path, symbol))


def patched_313(patch):
    """A copy of pyenv's libpython3.13.so.1.0 changed by patch(bytearray,
    path) and the python3.13 that loads it (LD_LIBRARY_PATH beats its
    RUNPATH); returns (argv, env, version)."""
    exe = pyenv_python(13)
    prefix = os.path.dirname(os.path.dirname(exe))
    lib = os.path.join(prefix, "lib", "libpython3.13.so.1.0")
    d = tmpdir()
    copy = os.path.join(d, "libpython3.13.so.1.0")
    with open(lib, "rb") as f:
        data = bytearray(f.read())
    patch(data, lib)
    with open(copy, "wb") as f:
        f.write(data)
    env = dict(os.environ, LD_LIBRARY_PATH=d)
    return [exe] + SLEEPER, env, os.path.basename(prefix), copy


def u64_patch(data, off, old, new):
    eq(struct.unpack_from("<Q", data, off)[0], old, "value before patching at 0x%x" % off)
    struct.pack_into("<Q", data, off, new)


def pydbg313(name):
    """A PYDBG313_* offset from user/sources/python/pyoffsets.h (the generated table)."""
    with open(os.path.join(REPO, "user", "sources", "python", "pyoffsets.h")) as f:
        m = re.search(r"#define PYDBG313_%s (\d+)" % name, f.read())
    return int(m.group(1))


def row313(field):
    with open(os.path.join(REPO, "user", "sources", "python", "pyoffsets.h")) as f:
        text = f.read()
    row = text[text.index("/* 3.13 */"):]
    return int(re.search(r"\.%s = (\d+)," % field, row).group(1))


def test_refuses_313_whose_debug_offsets_disagree():
    # The process publishes where its thread states keep the current frame;
    # a copy that says another place than the table must get no frames.
    want = row313("ts_frame")

    def patch(data, lib):
        at = elf_file_offset(lib, "_PyRuntime") + pydbg313("RUNTIME_DEBUG_OFFSETS")
        eq(bytes(data[at:at + 8]), b"xdebugpy", "_Py_DebugOffsets cookie in the file")
        u64_patch(data, at + pydbg313("TS_FRAME"), want, want + 8)

    argv, env, version, copy = patched_313(patch)
    pid, r = refused(argv, env)
    eq_refusal(r, "pid %d: Python %s: _Py_DebugOffsets puts thread_state.current_frame at %d, "
               "cgbpf's table at %d; no Python frames" % (pid, version, want + 8, want))


def test_refuses_version_that_does_not_match_its_library():
    # Py_Version says 3.14.0 in a file named libpython3.13: trust neither.
    def patch(data, lib):
        at = elf_file_offset(lib, "Py_Version")
        old = struct.unpack_from("<Q", data, at)[0]
        check(old >> 16 == 0x030d, "Py_Version 0x%x is a 3.13" % old)
        u64_patch(data, at, old, 0x030e00f0)

    argv, env, version, copy = patched_313(patch)
    pid, r = refused(argv, env)
    eq_refusal(r, "pid %d: %s: Py_Version 0x030e00f0 does not match the file name; "
               "no Python frames" % (pid, copy))


def test_found_in_another_mount_namespace():
    # The interpreter's library exists only in the process's own mount
    # namespace (a tmpfs on /mnt there): cgbpf must read it as the process
    # sees it (/proc/PID/root, or /proc/PID/map_files), not look for the
    # path on the host.
    exe = pyenv_python(12)
    unshare = shutil.which("unshare")
    if not unshare:
        raise Skip("no unshare (util-linux)")
    prefix = os.path.dirname(os.path.dirname(exe))
    lib = os.path.join(prefix, "lib", "libpython3.12.so.1.0")
    check(not os.path.exists("/mnt/cgbpf-pyfind"), "/mnt/cgbpf-pyfind absent on the host")
    script = ("mount -t tmpfs cgbpf-pyfind /mnt && mkdir /mnt/cgbpf-pyfind && "
              "cp %s /mnt/cgbpf-pyfind/ && LD_LIBRARY_PATH=/mnt/cgbpf-pyfind exec %s %s" %
              (shlex.quote(lib), shlex.quote(exe), " ".join(shlex.quote(a) for a in SLEEPER)))
    p = subprocess.Popen([unshare, "--mount", "--propagation", "private", "sh", "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check(line == "ready\n", "interpreter started in its namespace (said %r, stderr %r)" %
              (line, p.stderr.read() if p.poll() is not None else ""))
        r = check_python(p.pid)
    finally:
        kill_quiet(p)
    eq(r.returncode, 0, "check --python exit (%r)" % r.stdout)
    head, threads = parse(r.stdout)
    eq(head, "pid %d: Python %s (/mnt/cgbpf-pyfind/libpython3.12.so.1.0, shared library)" %
       (p.pid, os.path.basename(prefix)), "header line")
    eq(list(threads.values()), [[("<module>", "<string>", 1, False)]],
       "the one thread, sleeping in -c's code")
    eq(list(threads), [p.pid], "its tid is the pid")


def test_offsets_table_matches_headers():
    # user/sources/python/pyoffsets.h is what the installed versions' own headers say.
    for minor in range(8, 14):
        pyenv_python(minor)
    if not shutil.which("cc"):
        raise Skip("no C compiler")
    p = subprocess.run([os.path.join(REPO, "scripts", "gen-pyoffsets.sh"), "--check"],
                       capture_output=True, text=True, timeout=300)
    eq(p.returncode, 0, "gen-pyoffsets.sh --check (%s%s)" % (p.stdout, p.stderr))
    check("is up to date" in p.stdout, "it says so: %r" % p.stdout)


def test_refuses_free_threaded_and_debug_builds():
    # What names a build: the soname's ABI flags ('t' free-threaded, 'd'
    # debug) or, for 3.13, the free_threaded word of its debug offsets.
    # Copies of libpython3.13 so named or so patched, loaded into sleep.
    exe = pyenv_python(13)
    prefix = os.path.dirname(os.path.dirname(exe))
    version = os.path.basename(prefix)
    lib = os.path.join(prefix, "lib", "libpython3.13.so.1.0")
    with open(lib, "rb") as f:
        orig = f.read()
    ft = bytearray(orig)
    at = elf_file_offset(lib, "_PyRuntime") + pydbg313("RUNTIME_DEBUG_OFFSETS")
    u64_patch(ft, at + pydbg313("FREE_THREADED"), 0, 1)
    d = tmpdir()
    cases = [("libpython3.13t.so.1.0", orig, "Python %s: a free-threaded build "
              "(libpython3.13t.so.1.0): not supported; no Python frames" % version),
             ("libpython3.13d.so.1.0", orig, "Python %s: a debug build (Py_DEBUG): not "
              "supported; no Python frames" % version),
             ("libpython3.13.so.1.0", bytes(ft), "Python %s: a free-threaded build: not "
              "supported; no Python frames" % version)]
    for name, data, line in cases:
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        p = subprocess.Popen(["sleep", "60"], env=dict(os.environ, LD_PRELOAD=path))
        try:
            wait_for(lambda: path in open("/proc/%d/maps" % p.pid).read(), 10, "the copy mapped")
            r = check_python(p.pid)
        finally:
            kill_quiet(p)
        eq_refusal(r, "pid %d: %s" % (p.pid, line))
        os.unlink(path)


def test_usage():
    for args in (["--python"], ["--python", "-p", "x"], ["--python", "-p", "0"],
                 ["-p", "1"], ["--python", "-p", "1", "lib.so"],
                 ["--python", "--attach", "-p", "1"]):
        p = subprocess.run([CGBPF, "check"] + args, capture_output=True, text=True, timeout=30)
        eq(p.returncode, 2, "exit code of check %s" % " ".join(args))
        check(p.stderr.startswith("cgbpf: "), "a message for check %s: %r" % (args, p.stderr))
    p = subprocess.run([CGBPF, "check", "--help"], capture_output=True, text=True, timeout=30)
    check("--python" in p.stdout, "check --help mentions --python")


if __name__ == "__main__":
    sys.exit("run through tests/integration/run.py test_pyfind")


def test_exited_process_not_reaped():
    """A Python that exited and was not reaped yet (a zombie: no memory,
    no executable): check --python says it exited, instead of that it
    runs no Python (record says the same of a Python it read too late)."""
    exe = pyenv_python(12)
    p = subprocess.Popen([exe, "-c", "pass"])
    try:
        def zombie():
            with open("/proc/%d/stat" % p.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        wait_for(zombie, 30, "the process to exit (a zombie: not reaped)")
        r = check_python(p.pid)
    finally:
        p.wait()
    eq_refusal(r, "pid %d: the process has exited (a zombie: its memory is gone)" % p.pid)
