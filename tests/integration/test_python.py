# SPDX-License-Identifier: MIT
"""Python call sites (issue 12): `record` of the Python workloads
(tests/workloads/py/launches.py, which call the fake driver through ctypes
from known places and write what each call's frames were) on every
installed CPython 3.8-3.13 and Debian's static 3.11: every API call's
slice names the exact file, line and function of its innermost Python
frame ("py") and, when that is not the user's own code, of the innermost
user frame ("py.user"); threads; attach with -p mid-run; mixed stacks on
slow calls; --python off / stack; a version cgbpf has no offsets for;
Debian's python3-torch on real torch frames."""
import glob
import os
import re
import shutil
import subprocess
import time

import ptrace
from harness import (CGBPF, OUT, REPO, Skip, check, clean_trace, env_with, eq, kill_quiet,
                     pid_reuse_driver, record, tmpdir, touch, traced_funcs, wait_for)

PY = os.path.join(REPO, "tests", "workloads", "py")
LAUNCHES = os.path.join(PY, "launches.py")
PYENV = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
TP = os.path.join(REPO, "..", "shared", "perfetto", "trace_processor_shell")

# launches.py runs under this wrapper, which keeps the process and the
# program's code objects alive a moment after the program ends: cgbpf
# reads each code object from the process when it takes the record, at
# most a poll (50 ms) after the call, and a code object freed by then (a
# program that has exited, a module body that has run) cannot be read
# (docs/python.md, "Limits"). The wrapper's own frame is outermost and not
# user code ("<string>").
WRAP = ("import sys, time\n"
        "sys.path.insert(0, %r)\n"
        "sys.argv = [%r] + sys.argv[1:]\n"
        "code = compile(open(sys.argv[0]).read(), sys.argv[0], 'exec')\n"
        "try:\n"
        "    exec(code, {'__name__': '__main__', '__file__': sys.argv[0]})\n"
        "finally:\n"
        "    time.sleep(1.5)\n") % (PY, LAUNCHES)


TOP_SITES = 15  # rows of each call-site table (user/sources/python/pysrc.c)


def pyenv_python(minor):
    found = sorted(glob.glob(os.path.join(PYENV, "versions", "3.%d.*" % minor)),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", os.path.basename(p))])
    found = [d for d in found if re.fullmatch(r"3\.\d+\.\d+", os.path.basename(d))]
    exe = found and os.path.join(found[-1], "bin", "python3.%d" % minor)
    if not exe or not os.path.exists(exe):
        raise Skip("no pyenv CPython 3.%d in %s/versions (pyenv install 3.%d)" %
                   (minor, PYENV, minor))
    return exe


def debian_python():
    exe = "/usr/bin/python3.11"
    if not os.path.exists(exe):
        raise Skip("no Debian /usr/bin/python3.11 (apt-get install python3.11)")
    return exe


def site(frame):
    """The "py" text of a manifest frame."""
    return "%s:%d %s" % (frame["file"], frame["line"], frame["func"])


def py_slices(trace, pid):
    """{tid: [slice, ...]} of the driver calls of pid, in order."""
    out = {}
    for s in sorted(trace.slices, key=lambda s: s.ts):
        if s.pid == pid and s.name and s.name.startswith("cu"):
            out.setdefault(s.tid, []).append(s)
    return out


def pairs(trace, m, attached=False):
    """[(slice, manifest record)] of every traced call of the manifest, per
    thread in order; attached (-p mid-run): the trace has the last calls
    of each thread only."""
    pid = m["pid"]
    got = py_slices(trace, pid)
    want, traced = {}, traced_funcs()
    for rec in m["records"]:
        if rec["call"] in traced:
            want.setdefault(rec["tid"], []).append(rec)
    out = []
    for tid, recs in want.items():
        sl = got.get(tid, [])
        if attached and len(sl) < len(recs):
            recs = recs[len(recs) - len(sl):]
        eq([s.name for s in sl], [r["call"] for r in recs], "calls of thread %d" % tid)
        out += list(zip(sl, recs))
    return out


def check_sites(trace, m, skip_setup=False, attached=False):
    """Every traced call of the manifest has its slice with the manifest's
    leaf site and user site. Returns the number of launches checked."""
    launches = 0
    for s, rec in pairs(trace, m, attached):
        if skip_setup and rec["scenario"] in ("setup", "teardown"):
            continue
        what = "%s #%d (%s, thread %d)" % (rec["call"], rec["seq"], rec["scenario"], rec["tid"])
        eq(s.args.get("py"), site(rec["leaf"]), "py of " + what)
        if rec["leaf"]["user"]:
            check("py.user" not in s.args, "%s: no py.user when the leaf is user code "
                  "(got %r)" % (what, s.args.get("py.user")))
        else:
            check(rec["user"] is not None, "%s has a user frame in the manifest" % what)
            eq(s.args.get("py.user"), site(rec["user"]), "py.user of " + what)
        launches += rec["call"] == "cuLaunchKernel"
    return launches


def record_py(args, cmd, tmp, env=None, timeout=300, ready="reading Python frames"):
    """cgbpf record -v ARGS -- CMD, with the workload's start gate
    (CGBPF_WAIT_FILE) opened once cgbpf says it reads the workload's Python
    frames: the program's first calls can otherwise come before cgbpf has
    found its interpreter (docs/python.md, "Limits"). A Result."""
    import harness
    trace_path = os.path.join(tmp, "out.perfetto-trace")
    gate = os.path.join(tmp, "gate")
    env = dict(env or env_with(), CGBPF_WAIT_FILE=gate)
    log = os.path.join(tmp, "cgbpf.stderr")
    argv = [CGBPF, "record", "-v", "-o", trace_path] + list(args) + ["--"] + list(cmd)
    with open(log, "w") as lf:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=lf, text=True, env=env)
    try:
        def found():
            with open(log) as f:
                return ready in f.read() or p.poll() is not None
        wait_for(found, 60, "cgbpf to find the workload's interpreter")
        touch(gate)
        out, _ = p.communicate(timeout=timeout)
    finally:
        kill_quiet(p)
    with open(log) as f:
        err = "".join(ln for ln in f if "libbpf:" not in ln)
    return harness.Result(p.returncode, out, err, trace_path, tmp)


def run_launches(python, extra=(), args=(), tmp=None, ready="reading Python frames"):
    tmp = tmp or tmpdir()
    man = os.path.join(tmp, "manifest.json")
    r = record_py(["--summary-file", os.path.join(tmp, "summary.txt")] + list(extra),
                  [python, "-c", WRAP] + list(args), tmp, env=env_with(CGBPF_MANIFEST=man),
                  ready=ready)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    with open(os.path.join(tmp, "summary.txt")) as f:
        r.summary = f.read()
    return r, r.manifest()


def summary_section(text):
    # The interpreters' section and the tables' (python_sites) after it.
    m = re.search(r"\*\* Python call sites.*?(?=\n\*\* (?!Python call sites)|\Z)", text, re.S)
    check(m, "a Python call sites section in the summary")
    return m.group(0)


def check_summary(r, m, python_version):
    sec = summary_section(r.summary)
    check(re.search(r"pid %d: Python %s \(" % (m["pid"], re.escape(python_version)), sec),
          "the summary names the interpreter: %r" % sec[:400])
    # The threads scenario: T threads x N launches from one line.
    body = [rec for rec in m["records"]
            if rec["scenario"] == "threads" and rec["call"] == "cuLaunchKernel"]
    if body:
        line = site(body[0]["leaf"])
        row = [ln for ln in sec.splitlines() if ln.endswith("  " + line)]
        check(row, "a row for %s in %r" % (line, sec))
        cols = row[0].split()
        eq(int(cols[3]), len(body), "launches of %s" % line)
        eq(int(cols[2]), len(body), "calls of %s" % line)


def trace_processor_args(path, pid):
    """(name, py) of pid's launch slices as trace processor reads them, or
    None without it."""
    if not os.access(TP, os.X_OK):
        return None
    q = ("select s.name as name, extract_arg(s.arg_set_id, 'debug.py') as py "
         "from slice s join thread_track tt on s.track_id = tt.id join thread using(utid) "
         "where thread.upid = (select upid from process where pid = %d) "
         "and s.name = 'cuLaunchKernel' order by s.ts" % pid)
    p = subprocess.run([TP, "-q", "/dev/stdin", path], input=q, capture_output=True,
                       text=True, timeout=120)
    eq(p.returncode, 0, "trace_processor_shell (stderr %r)" % p.stderr[-400:])
    rows = [ln.split(",", 1) for ln in p.stdout.splitlines()[1:] if ln.strip()]
    return [(a.strip('"'), b.strip('"')) for a, b in rows]


def check_reuse(m, log):
    """The reuse scenario's code objects really took each other's address
    (else its launches prove nothing about it), and cgbpf watched the
    interpreter's frees (a python found at its exec has its libpython mapped
    but maybe not yet relocated: PyCode_Type.tp_dealloc is read again)."""
    check("freed are not watched" not in log, "code_dealloc probed: %r" % log[-1500:])
    ids = m.get("reuse_ids") or []
    if "reuse" in m.get("scenarios", []):
        check(len(ids) >= 2 and len(set(ids)) < len(ids),
              "the reuse scenario's code objects shared an address: %r" % ids)


def versions_test(python, version):
    r, m = run_launches(python)
    clean_trace(r.trace)
    eq(m["python"], version, "the workload's own version")
    try:
        n = check_sites(r.trace, m)
    except AssertionError as e:
        raise AssertionError("%s\n(cgbpf said: %r)" % (e, r.stderr[-1500:]))
    eq(n, sum(1 for rec in m["records"] if rec["call"] == "cuLaunchKernel"),
       "launches checked")
    check(n >= 30, "launches in the manifest: %d" % n)
    check_reuse(m, r.stderr)
    check_summary(r, m, version)
    tp = trace_processor_args(r.trace_path, m["pid"])
    if tp is not None:
        want = [("cuLaunchKernel", site(rec["leaf"])) for rec in
                sorted((x for x in m["records"] if x["call"] == "cuLaunchKernel"),
                       key=lambda x: x["seq"])]
        eq(sorted(tp), sorted(want), "launch call sites as trace processor reads them")


def _pyenv_test(minor):
    def test():
        exe = pyenv_python(minor)
        versions_test(exe, os.path.basename(os.path.dirname(os.path.dirname(exe))))
    test.__name__ = "test_sites_pyenv_3_%d" % minor
    return test


for _minor in range(8, 14):
    _t = _pyenv_test(_minor)
    globals()[_t.__name__] = _t


def _leaf_in_call_test(minor):
    def test():
        """--python leaf's fast path (bpf/python.bpf.c py_leaf): a call
        from user code whose code object cgbpf has seen carries its frame
        in the call record; the rest take the walk. Each scenario runs
        twice with a pause after it: the second round of plain and nested
        takes the fast path, library (a library leaf) the walk. Every
        call's sites equal the manifest's, and the debug counts show calls
        whose frame came in the call record (records > sent)."""
        exe = pyenv_python(minor)
        r, m = run_launches(exe, args=["--iters", "20", "--settle", "0.3", "--only",
                                       "plain,nested,library,plain,nested,library"])
        clean_trace(r.trace)
        try:
            n = check_sites(r.trace, m)
        except AssertionError as e:
            raise AssertionError("%s\n(cgbpf said: %r)" % (e, r.stderr[-1500:]))
        eq(n, 120, "launches checked")
        c = re.search(r"python: (\d+) records, (\d+) sent", r.stderr)
        check(c, "the debug counts line in %r" % r.stderr[-1500:])
        records, sent = int(c.group(1)), int(c.group(2))
        # The second rounds of plain and nested: 40 launches at least.
        check(records - sent >= 40, "frames carried by call records: %d records, %d sent "
              "as REC_PY_FRAMES" % (records, sent))
        check(sent >= 40, "library leaves take the walk: %d sent" % sent)
        c = re.search(r"python: (\d+) frame readers read user memory", r.stderr)
        check(c and int(c.group(1)) > 0, "frame readers counted: %r" % r.stderr[-1500:])
    test.__name__ = "test_leaf_in_call_record_3_%d" % minor
    return test


for _minor in range(8, 14):
    _t = _leaf_in_call_test(_minor)
    globals()[_t.__name__] = _t


def test_no_reads_without_an_interpreter():
    """--python leaf, the default, in a C program (bench_launch through
    the fake driver): the Python source reads no user memory at all (the
    BPF counter of frame readers, PYS_READERS, stays 0), while every
    launch is traced. The per-thread cache says "no interpreter" after one
    py_procs lookup, and user space looks for one ever less often."""
    wl = os.path.join(OUT, "workloads", "bench_launch")
    if not os.path.exists(wl):
        raise Skip("%s is not built (make test-bins)" % wl)
    r = record(["-v"], cmd=[wl, "20000"])
    eq(r.rc, 0, "cgbpf's exit status (stderr: %r)" % r.stderr[-1500:])
    c = re.search(r"python: (\d+) frame readers read user memory", r.stderr)
    check(c, "the debug count of frame readers in %r" % r.stderr[-1500:])
    eq(int(c.group(1)), 0, "frame readers that read user memory in a C program")
    got = [l.split() for l in r.stdout.splitlines() if l.split()[-1:] == ["cuLaunchKernel"]]
    check(got and got[0][2] == "20000", "20000 launches in the summary: %r" % r.stdout[-1500:])


def test_sites_debian_static_311():
    exe = debian_python()
    out = subprocess.run([exe, "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True, check=True).stdout.strip()
    versions_test(exe, out)


def test_attach_mid_run():
    """-p PID while launches.py waits after its setup: the launches after
    the attach carry their sites."""
    exe = pyenv_python(12)
    tmp = tmpdir()
    man = os.path.join(tmp, "manifest.json")
    pause = os.path.join(tmp, "pause")
    env = env_with(CGBPF_MANIFEST=man, CGBPF_PAUSE_FILE=pause)
    p = subprocess.Popen([exe, "-c", WRAP], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    cg = None
    try:
        wait_for(lambda: os.path.exists(pause + ".ready") or p.poll() is not None, 30,
                 "launches.py to pause")
        eq(p.poll(), None, "launches.py still running")
        trace = os.path.join(tmp, "t.perfetto-trace")
        log = os.path.join(tmp, "cgbpf.log")
        with open(log, "w") as lf:
            cg = subprocess.Popen([CGBPF, "record", "-v", "-p", str(p.pid), "-o", trace],
                                  stdout=subprocess.DEVNULL, stderr=lf, text=True)

        def attached():
            with open(log) as f:
                return "reading Python frames" in f.read() or cg.poll() is not None
        wait_for(attached, 30, "cgbpf to find the interpreter")
        eq(cg.poll(), None, "cgbpf running")
        touch(pause)
        eq(p.wait(60), 0, "launches.py exit")
        eq(cg.wait(60), 0, "cgbpf exit")
        t = ptrace.load(trace)
        clean_trace(t)
        import json
        with open(man) as f:
            m = json.load(f)
        try:
            n = check_sites(t, m, skip_setup=True, attached=True)
        except AssertionError as e:
            with open(log) as f:
                raise AssertionError("%s\ncgbpf -v said:\n%s" % (e, f.read()[-3000:]))
        check(n >= 30, "launches checked after the attach: %d" % n)
    finally:
        kill_quiet(p)
        if cg:
            kill_quiet(cg)


def test_backtraces_mix_python_frames():
    """--backtrace-threshold 0: every call's backtrace holds the Python
    frames of its manifest stack, outermost first, each above an eval
    loop frame."""
    exe = pyenv_python(11)
    r, m = run_launches(exe, extra=["--backtrace-threshold", "0"],
                        args=["--only", "nested,library", "--threads", "1"])
    clean_trace(r.trace)
    checked = 0
    for s, rec in pairs(r.trace, m):
        if rec["call"] == "cuLaunchKernel":
            check(s.callstack, "%s #%d has a backtrace" % (rec["call"], rec["seq"]))
            want = ["%s (%s:%d)" % (f["func"], f["file"], f["line"])
                    for f in reversed(rec["stack"])]
            py = [f for f in s.callstack if f in set(want)]
            eq(py, [w for w in want if w in py], "order of the Python frames")
            user = [w for w in want if PY in w]
            eq([w for w in py if PY in w], user,
               "the workload's frames in the backtrace of #%d: %r" % (rec["seq"], s.callstack))
            # Each run of Python frames sits on an eval loop frame.
            for i, f in enumerate(s.callstack):
                if f in want and i > 0 and s.callstack[i - 1] not in want:
                    check(s.callstack[i - 1] == "_PyEval_EvalFrameDefault",
                          "Python frame %r under %r" % (f, s.callstack[i - 1]))
            checked += 1
    check(checked >= 6, "backtraces checked: %d" % checked)


def record_unrelocated(ms, only, tmp, extra=()):
    """record_py of launches.py --only ONLY on pyenv 3.12, its loader held
    ms milliseconds after it maps libpython, before relocating it (the
    LD_AUDIT library build/tests/slowreloc.so). A Result."""
    exe = pyenv_python(12)
    audit = os.path.join(OUT, "tests", "slowreloc.so")
    if not os.path.exists(audit):
        raise Skip("no %s (make test-bins)" % audit)
    man = os.path.join(tmp, "manifest.json")
    r = record_py(list(extra), [exe, LAUNCHES, "--only", only], tmp,
                  env=env_with(CGBPF_MANIFEST=man, LD_AUDIT=audit, SLOWRELOC_MS=str(ms)))
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    return r


def test_found_before_relocation():
    """A python whose loader has mapped libpython but not relocated it
    (held there for 1.5 s) is looked at again until it is (cgbpf waits up
    to 2 s), so code_dealloc is probed at its real address, and calls from
    code objects that take each other's address (reuse) are named after
    each."""
    r = record_unrelocated(1500, "plain,reuse", tmpdir())
    check("found before its loader relocated it" in r.stderr,
          "the interpreter was found before its relocation: %r" % r.stderr[-1500:])
    m = r.manifest()
    clean_trace(r.trace)
    n = check_sites(r.trace, m)
    eq(n, 6, "launches checked")
    check_reuse(m, r.stderr)


def test_gives_up_on_an_unrelocated_interpreter():
    """Held 4 s unrelocated, past the 2 s cgbpf waits from when it first
    finds the interpreter (under load that can be a second after the
    hold began): it reads the frames without the code_dealloc probe and
    says so, in stderr and in the summary; calls from code objects that
    keep their address are named."""
    tmp = tmpdir()
    summary = os.path.join(tmp, "summary.txt")
    r = record_unrelocated(4000, "plain,nested", tmp, ["--summary-file", summary])
    want = "Python code objects freed are not watched (PyCode_Type.tp_dealloc (0x"
    check(want in r.stderr, "stderr says the frees are not watched: %r" % r.stderr[-1500:])
    with open(summary) as f:
        sec = summary_section(f.read())
    check("code objects freed not watched (PyCode_Type.tp_dealloc" in sec,
          "the summary says so: %r" % sec[:800])
    m = r.manifest()
    clean_trace(r.trace)
    eq(check_sites(r.trace, m), 6, "launches checked")


def test_python_off_and_stack():
    exe = pyenv_python(13)
    r, m = run_launches(exe, extra=["--python", "off"], args=["--only", "plain"],
                        ready="probes in place")
    check(all("py" not in s.args for s in r.trace.slices), "--python off: no py args")
    check("Python call sites" not in r.summary, "--python off: no Python section")
    r, m = run_launches(exe, extra=["--python", "stack"], args=["--only", "plain,library"])
    n = check_sites(r.trace, m)
    check(n >= 6, "launches: %d" % n)
    for s, rec in pairs(r.trace, m):
        if rec["call"] == "cuLaunchKernel":
            eq(s.args.get("py.stack"),
               "\n".join(site(f) for f in rec["stack"]),
               "py.stack of #%d" % rec["seq"])


def test_unknown_version_says_why():
    """A CPython cgbpf has no offsets for (3.7) gets no frames and one
    line saying so."""
    exe = glob.glob(os.path.join(PYENV, "versions", "3.7.*", "bin", "python3.7"))
    if not exe:
        raise Skip("no pyenv CPython 3.7 (a version cgbpf has no offsets for)")
    version = os.path.basename(os.path.dirname(os.path.dirname(exe[0])))
    tmp = tmpdir()
    prog = ("import ctypes, time\n"
            "cu = ctypes.CDLL('libcuda.so.1')\n"
            "for _ in range(3):\n"
            "    cu.cuInit(0)\n"
            "time.sleep(0.2)\n")
    r = record(["--summary-file", os.path.join(tmp, "summary.txt")],
               cmd=[exe[0], "-c", prog], tmp=tmp)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    with open(os.path.join(tmp, "summary.txt")) as f:
        sec = summary_section(f.read())
    pid = [s.pid for s in r.trace.slices if s.name == "cuInit"][0]
    why = "Python %s: no offsets for this version; no Python frames" % version
    eq([ln.strip() for ln in sec.splitlines() if "pid %d" % pid in ln],
       ["pid %d: no Python frames: %s" % (pid, why)], "the summary's line")
    eq([ln for ln in r.stderr.splitlines() if "no offsets" in ln],
       ["cgbpf: pid %d: %s" % (pid, why)], "one message on stderr")
    check(all("py" not in s.args for s in r.trace.slices), "no py args")


TORCH_PROG = r'''
import ctypes, sys
import torch
from torch.utils.data import DataLoader
cu = ctypes.CDLL("libcuda.so.1")
# batch_size=None: torch's fetcher calls collate_fn(sample) itself, and
# collate_fn is the driver's cuInit: the innermost Python frame of the
# call is torch's, the user's frame is the loop below.
loader = DataLoader([0, 0, 0], batch_size=None, collate_fn=cu.cuInit)
for rc in loader:  # USER LINE
    assert rc == 0
x = torch.ones(256, 256)
import time
t = time.time()
while time.time() - t < 0.3:
    x = x @ x
    x = x / x.norm()
time.sleep(0.3)
'''


def test_torch_user_frame():
    """Debian's python3-torch (CPU): a driver call made by torch's own
    DataLoader code has torch's frame as "py" and the user's loop as
    "py.user"; CPU samples of the script show its Python frame in mixed
    stacks."""
    exe = "/usr/bin/python3"
    if subprocess.run([exe, "-c", "import torch"], capture_output=True).returncode:
        raise Skip("no torch for /usr/bin/python3 (apt-get install python3-torch)")
    tmp = tmpdir()
    prog = os.path.join(tmp, "torch_user.py")
    with open(prog, "w") as f:
        f.write(TORCH_PROG)
    user_line = [i + 1 for i, ln in enumerate(TORCH_PROG.splitlines()) if "USER LINE" in ln][0]
    r = record(["--sample-hz", "199"], cmd=[exe, prog], tmp=tmp, timeout=300)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    clean_trace(r.trace)
    inits = [s for s in r.trace.slices if s.name == "cuInit"]
    eq(len(inits), 3, "cuInit calls")
    for s in inits:
        py = s.args.get("py", "")
        check(re.match(r"/usr/lib/python3/dist-packages/torch/utils/data/_utils/fetch\.py:\d+ "
                       r"_MapDatasetFetcher\.fetch$", py), "torch's frame as py: %r" % py)
        eq(s.args.get("py.user"), "%s:%d <module>" % (prog, user_line), "py.user")
    # Samples of the matmul loop: the script's frame, mixed in.
    mine = [smp for smp in r.trace.perf_samples if smp.pid == inits[0].pid]
    with_py = [smp for smp in mine
               if any((f.function or "").startswith("<module> (%s:" % prog) for f in smp.frames)]
    check(len(with_py) >= 0.5 * len(mine) > 0,
          "samples with the script's Python frame: %d of %d" % (len(with_py), len(mine)))


# ---------------------------------------------------------------- short programs
# A user runs `cgbpf record -- python script.py`: no start gate, no pause,
# no wrapper keeping the process alive. The program has exited by the time
# the consumer takes most of its records, so its code objects can only be
# named from what BPF sent about them (REC_PY_CODE, bpf/pycode_rec.h).

TABLE_ROW = re.compile(r"^\s+([\d.]+)\s+(\d+)\s+(\d+)\s+(\d+)\s\s(\S.*)$")


def site_table(sec, title):
    """{site: (calls, launches)} of the summary table under title."""
    lines = sec.splitlines()
    at = [i for i, ln in enumerate(lines) if ln.strip() == title]
    check(at, "a %r table in %r" % (title, sec[:1500]))
    rows = {}
    for ln in lines[at[0] + 2:]:
        m = TABLE_ROW.match(ln)
        if not m:
            break
        rows[m.group(5)] = (int(m.group(3)), int(m.group(4)))
    return rows


class LateDiscovery(Exception):
    """The program's first calls came before cgbpf had found its
    interpreter (a consumer running behind on a loaded machine): not what
    this test is about (docs/python.md, Limits)."""


def short_lived_test(python, version):
    for attempt in (1, 2):
        try:
            _short_lived_test(python, version)
            return
        except LateDiscovery as e:
            if attempt == 2:
                raise AssertionError("twice: %s\n(cgbpf said: %r)" % (e, _last_log[0][-2500:]))
            print("# interpreter found late (%s): once more" % e)
        except AssertionError as e:
            raise AssertionError("%s\n(cgbpf said: %r)" % (e, _last_log[0][-2500:]))


_last_log = [""]


def _short_lived_test(python, version):
    tmp = tmpdir()
    man = os.path.join(tmp, "manifest.json")
    summary = os.path.join(tmp, "summary.txt")
    r = record(["-v", "--summary-file", summary], cmd=[python, LAUNCHES],
               env=env_with(CGBPF_MANIFEST=man), tmp=tmp, timeout=300)
    _last_log[0] = "".join(ln + "\n" for ln in r.stderr.splitlines()
                           if "libbpf" not in ln and "cudart.so" not in ln)
    eq(r.rc, 0, "cgbpf exit")
    m = r.manifest()
    eq(m["python"], version, "the workload's own version")
    clean_trace(r.trace)
    # Every launch: its leaf and user frames. The setup's first calls may
    # come before cgbpf has found the interpreter (docs/python.md, Limits);
    # should a launch, every call before it has none either.
    with open(summary) as f:
        sec = summary_section(f.read())
    calls = sorted(pairs(r.trace, m), key=lambda x: x[0].ts)
    bare = [i for i, (s, rec) in enumerate(calls) if "py" not in s.args]
    if bare and any(calls[i][1]["call"] == "cuLaunchKernel" for i in bare) and \
            bare == list(range(len(bare))) and "frames not resolved" not in sec:
        raise LateDiscovery("the first %d calls have no frames" % len(bare))
    n = 0
    for s, rec in calls:
        if rec["call"] != "cuLaunchKernel":
            continue
        what = "launch #%d (%s, thread %d)" % (rec["seq"], rec["scenario"], rec["tid"])
        eq(s.args.get("py"), site(rec["leaf"]), "py of " + what)
        eq(s.args.get("py.user"), None if rec["leaf"]["user"] else site(rec["user"]),
           "py.user of " + what)
        n += 1
    check(n >= 30, "launches checked: %d" % n)
    check_reuse(m, r.stderr)
    check("frames not resolved" not in sec, "every frame resolved: %r" % sec[-800:])
    # The summary's tables: each launch site with its exact counts.
    want = {}
    traced = traced_funcs()
    for rec in m["records"]:
        if rec["call"] in traced:
            c, l = want.get(site(rec["leaf"]), (0, 0))
            want[site(rec["leaf"])] = (c + 1, l + (rec["call"] == "cuLaunchKernel"))
    launch_sites = {k: v for k, v in want.items() if v[1]}
    check(len(launch_sites) >= 8, "launch sites in the manifest: %r" % launch_sites)
    by_time = site_table(sec, "Top call sites by API time (outermost API calls):")
    by_launches = site_table(sec, "Top call sites by launches:")
    check(len(by_launches) < TOP_SITES, "room for every launch site: %r" % by_launches)
    for text, counts in sorted(launch_sites.items()):
        # The API time table also has the setup's calls: a site of one
        # short launch (reuse) may be past its last row.
        if text in by_time or len(by_time) < TOP_SITES:
            eq(by_time.get(text), counts, "(calls, launches) of %s by API time" % text)
        eq(by_launches.get(text), counts, "(calls, launches) of %s by launches" % text)
    eq(sorted(k for k, v in by_launches.items() if v[1]), sorted(launch_sites),
       "the sites of the launches table")
    tp = trace_processor_args(r.trace_path, m["pid"])
    if tp is not None:
        want_tp = [("cuLaunchKernel", site(rec["leaf"])) for rec in m["records"]
                   if rec["call"] == "cuLaunchKernel"]
        eq(sorted(tp), sorted(want_tp), "launch call sites as trace processor reads them")


def _short_pyenv_test(minor):
    def test():
        exe = pyenv_python(minor)
        short_lived_test(exe, os.path.basename(os.path.dirname(os.path.dirname(exe))))
    test.__name__ = "test_short_lived_pyenv_3_%d" % minor
    return test


for _minor in range(8, 14):
    _t = _short_pyenv_test(_minor)
    globals()[_t.__name__] = _t


def test_short_lived_debian_static_311():
    exe = debian_python()
    out = subprocess.run([exe, "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True, check=True).stdout.strip()
    short_lived_test(exe, out)
SUBINTERP = os.path.join(PY, "subinterp.py")
BODY = os.path.join(PY, "subinterp_body.py")
# As WRAP: the program's code objects stay alive a moment after it ends.
SUBWRAP = WRAP.replace(repr(LAUNCHES), repr(SUBINTERP))


def subinterp_python(minor):
    """The pyenv 3.minor (None: Debian's static 3.11) if it can create
    subinterpreters, else Skip."""
    exe = pyenv_python(minor) if minor else debian_python()
    minor = minor or 11
    mod = "_interpreters" if minor >= 13 else "_xxsubinterpreters"
    if subprocess.run([exe, "-c", "import " + mod], capture_output=True).returncode:
        raise Skip("CPython 3.%d here has no %s module (built without it)" % (minor, mod))
    return exe


def run_subinterp(exe, tmp):
    """record -v of subinterp.py, its subinterpreter held alive until cgbpf
    reported 2 interpreters, and check --python on it meanwhile. Returns
    (trace, manifest, cgbpf's stderr, check's output, summary)."""
    import json
    man, gate, hold = (os.path.join(tmp, n) for n in ("manifest.json", "gate", "hold"))
    trace, log, summ = (os.path.join(tmp, n) for n in ("t.perfetto-trace", "cgbpf.log",
                                                       "summary.txt"))
    env = env_with(CGBPF_MANIFEST=man, CGBPF_WAIT_FILE=gate, CGBPF_HOLD_FILE=hold)
    with open(log, "w") as lf:
        cg = subprocess.Popen([CGBPF, "record", "-v", "-o", trace, "--summary-file", summ, "--",
                               exe, "-c", SUBWRAP], env=env, stdout=subprocess.DEVNULL, stderr=lf,
                              text=True)
    try:
        def said(what):
            with open(log) as f:
                return what in f.read() or cg.poll() is not None
        wait_for(lambda: said("reading Python frames"), 60, "cgbpf to find the interpreter")
        touch(gate)
        wait_for(lambda: os.path.exists(hold + ".ready") or cg.poll() is not None, 30,
                 "the subinterpreter to make its launches")
        wait_for(lambda: said("interpreters (1 subinterpreter)"), 30,
                 "cgbpf to count the subinterpreter")
        eq(cg.poll(), None, "cgbpf running")
        pid = int(re.search(r"pid (\d+): Python [\d.]+ has 2 interpreters",
                            open(log).read()).group(1))
        chk = subprocess.run([CGBPF, "check", "--python", "-p", str(pid)], capture_output=True,
                             text=True, timeout=60)
        eq(chk.returncode, 0, "check --python exit (%r)" % chk.stdout[-400:])
        touch(hold)
        eq(cg.wait(120), 0, "cgbpf exit")
    finally:
        kill_quiet(cg)
    with open(man) as f:
        m = json.load(f)
    with open(log) as f:
        err = f.read()
    with open(summ) as f:
        summary = f.read()
    return ptrace.load(trace), m, err, chk.stdout, summary


def subinterp_test(minor):
    """What cgbpf says and does with a subinterpreter (docs/python.md):
    reported as 2 interpreters in its stderr, the summary and check
    --python (which shows the thread in both); the main interpreter's
    launches before and after carry their sites; the subinterpreter's
    launches, made by the main thread whose thread state the frame reader
    found first and keeps, carry the main interpreter's frame that entered
    the subinterpreter: run_in() at its run_string line."""
    exe = subinterp_python(minor)
    tmp = tmpdir()
    t, m, err, chk, summary = run_subinterp(exe, tmp)
    clean_trace(t)
    note = "2 interpreters (1 subinterpreter): frames are read from the thread state found first"
    check(note in err, "stderr says: %r" % err[-800:])
    check(note in summary, "the summary says: %r" % summary[-1500:])
    check(note in chk, "check --python says: %r" % chk[:800])
    # The main thread, held in the subinterpreter's body(): its thread
    # state there (interpreter 0, the newest) and in the main interpreter.
    # (or, a few % of the time, in the os.path.exists it polls with:
    # genericpath.py, or "<frozen genericpath>" where the interpreter
    # froze it, as 3.13 does).
    check(re.search(r"interpreter 0\):\n    (#0 exists (\S*genericpath\.py|<frozen genericpath>)"
                    r":\d+ \[not user code\]\n    #1|#0) body %s:" % re.escape(BODY), chk),
          "check --python: the subinterpreter's thread in body(): %r" % chk)
    check(re.search(r"interpreter 1\):\n    #0 run_in %s:" % re.escape(SUBINTERP), chk),
          "check --python: the main interpreter's thread state in run_in(): %r" % chk)
    with open(SUBINTERP) as f:
        entry = next(i + 1 for i, ln in enumerate(f) if "interpreters.run_string(" in ln)
    launches = [s for s in sorted(t.slices, key=lambda s: s.ts)
                if s.pid == m["pid"] and s.name == "cuLaunchKernel"]
    main_recs = [r for r in m["records"] if r["call"] == "cuLaunchKernel"]
    sub_recs = [r for r in m["sub_records"] if r["call"] == "cuLaunchKernel"]
    n = m["iters"]
    eq(len(main_recs), 2 * n, "main-interpreter launches in the manifest")
    eq(len(sub_recs), n, "subinterpreter launches in the manifest")
    eq(len(launches), 3 * n, "launches in the trace")
    for s, rec in zip(launches[:n] + launches[2 * n:], main_recs):
        eq(s.args.get("py"), site(rec["leaf"]), "py of main-interpreter launch #%d (%s)" %
           (rec["seq"], rec["scenario"]))
    for s, rec in zip(launches[n:2 * n], sub_recs):
        eq(rec["leaf"]["func"], "sub_launch", "the subinterpreter's own frame")
        eq(s.args.get("py"), "%s:%d run_in" % (SUBINTERP, entry),
           "py of subinterpreter launch #%d: the frame that entered it" % rec["seq"])


def test_subinterpreter_38():
    subinterp_test(8)


def test_subinterpreter_39():
    subinterp_test(9)


def test_subinterpreter_310():
    subinterp_test(10)


def test_subinterpreter_311():
    subinterp_test(11)


def test_subinterpreter_debian_static_311():
    subinterp_test(None)


def test_subinterpreter_312():
    subinterp_test(12)


def test_subinterpreter_313():
    subinterp_test(13)


# Runs launches.py twice under one pid: A, then B once A has exited, with
# the kernel's next pid set to A's (root: /proc/sys/kernel/ns_last_pid; B
# is spawned, not forked, so the loop is its own, not harness.fork_at).
PID_REUSE_DRIVER = r'''
import subprocess, sys, time
py, wrap, tmp = sys.argv[1:4]


def child(tag, only):
    env = dict(os.environ, CGBPF_WAIT_FILE=os.path.join(tmp, "go." + tag),
               CGBPF_PAUSE_FILE=os.path.join(tmp, "pause." + tag),
               CGBPF_MANIFEST=os.path.join(tmp, tag + ".json"))
    return subprocess.Popen([py, "-c", wrap, "--only", only, "--threads", "1"], env=env)


a = child("a", "plain")
open(os.path.join(tmp, "pid"), "w").write(str(a.pid))
open(os.path.join(tmp, "go.a"), "w").close()
if a.wait():
    sys.exit("A failed")
# A moment, as between two processes of a long run (cgbpf may still be
# reading A's exit when B forks).
time.sleep(1)
for _ in range(500):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(a.pid - 1))
    b = child("b", "nested,method")
    if b.pid == a.pid:
        break
    b.kill()
    b.wait()
else:
    sys.exit("pid %d was not given again" % a.pid)
open(os.path.join(tmp, "pid"), "w").write(str(b.pid))
open(os.path.join(tmp, "go.b"), "w").close()
sys.exit(b.wait())
'''


def test_pid_reused_by_another_python_process():
    """A Python process exits and another one gets its pid: cgbpf finds the
    new one's interpreter too, and both processes' launches carry their
    own call sites (the state kept for the dead one must not stand in for
    the new one's)."""
    import json
    exe = pyenv_python(12)
    tmp, drv = pid_reuse_driver(PID_REUSE_DRIVER)
    trace = os.path.join(tmp, "t.perfetto-trace")
    log = os.path.join(tmp, "cgbpf.log")
    with open(log, "w") as lf:
        cg = subprocess.Popen([CGBPF, "record", "-v", "-o", trace, "--", exe, drv, exe, WRAP, tmp],
                              stdout=subprocess.DEVNULL, stderr=lf, text=True, env=env_with())
    try:
        found = re.compile(r"pid (\d+): Python \S+ \(.*\): reading Python frames")

        def finds():
            with open(log) as f:
                return [int(x) for x in found.findall(f.read())]
        pid = None
        for tag, times in (("a", 1), ("b", 2)):
            pause = os.path.join(tmp, "pause." + tag)
            wait_for(lambda: os.path.exists(pause + ".ready") or cg.poll() is not None, 60,
                     "launches.py %s to pause after its setup" % tag.upper())
            eq(cg.poll(), None, "cgbpf running")
            if pid is None:
                with open(os.path.join(tmp, "pid")) as f:
                    pid = int(f.read())
            wait_for(lambda: finds().count(pid) >= times or cg.poll() is not None, 30,
                     "cgbpf to find the interpreter of %s (found: %r)" % (tag.upper(), finds()))
            touch(pause)
        eq(cg.wait(120), 0, "cgbpf exit")
        eq(finds().count(pid), 2, "the interpreters found under pid %d, one per process" % pid)
        with open(os.path.join(tmp, "a.json")) as f:
            ma = json.load(f)
        with open(os.path.join(tmp, "b.json")) as f:
            mb = json.load(f)
        eq((ma["pid"], mb["pid"]), (pid, pid), "A and B under one pid")
        t = ptrace.load(trace)
        clean_trace(t)
        # The launches of the pid carry A's sites or B's, never another's.
        want = {}
        for tag, m in (("A", ma), ("B", mb)):
            for rec in m["records"]:
                if rec["call"] == "cuLaunchKernel":
                    want[site(rec["leaf"])] = tag
        eq(len(set(want.values())), 2, "A and B launch from different lines")
        got = {"A": 0, "B": 0}
        for sl in py_slices(t, pid).values():
            for x in sl:
                if x.name == "cuLaunchKernel":
                    check(x.args.get("py") in want, "launch with a site of A or B: %r" %
                          x.args.get("py"))
                    got[want[x.args["py"]]] += 1
        eq(got["A"], sum(r["call"] == "cuLaunchKernel" for r in ma["records"]),
           "A's launches with A's sites")
        # B's calls too: the exit record of A, read after B's fork, once
        # took B's pid out of the BPF targets map, and B's calls were lost.
        eq(got["B"], sum(r["call"] == "cuLaunchKernel" for r in mb["records"]),
           "B's launches with B's sites")
    finally:
        kill_quiet(cg)


# A: a fork of this driver (its interpreter found, as the driver's copy,
# at its first API call) that execs another Python and is held by ptrace at that exec, before its
# interpreter exists, then killed: it dies while cgbpf still looks for its
# interpreter. B: under A's pid (harness.fork_at), this driver's own
# Python again, running launches.py.
LOOKING_DRIVER = r'''
import ctypes, signal, sys, time
other, wrap, tmp = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)

a = os.fork()
if a == 0:
    # A call of the driver API: cgbpf sees the fork and finds its
    # interpreter (the driver's copy) before the exec.
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(ctypes.c_int()))
    time.sleep(0.5)
    libc.ptrace(0, 0, None, None)   # PTRACE_TRACEME: stopped at the exec
    os.execv(other, [other, "-c", "pass"])
_, st = os.waitpid(a, 0)
if not os.WIFSTOPPED(st):
    sys.exit("A was not stopped at its exec: %r" % st)
open(os.path.join(tmp, "pid"), "w").write(str(a))
# cgbpf looks for A's interpreter at the exec and then at its ticks.
time.sleep(0.5)
os.kill(a, signal.SIGKILL)
os.waitpid(a, 0)
time.sleep(0.5)


def exec_b():
    env = dict(os.environ, CGBPF_MANIFEST=os.path.join(tmp, "b.json"))
    os.execve(sys.executable, [sys.executable, "-c", wrap, "--only", "nested,method",
                               "--threads", "1"], env)


st = fork_at(a, exec_b)
if st is None:
    sys.exit("pid %d was not given again" % a)
sys.exit(os.waitstatus_to_exitcode(st))
'''


def test_pid_of_a_process_that_died_before_its_interpreter_was_found():
    """A process dies while cgbpf is still looking for its interpreter (a
    Python held by ptrace at its exec), and another process gets its pid
    running the same Python as the one the dead pid ran before that exec:
    cgbpf looks at the new process afresh and its launches carry their
    call sites (the dead pid's state, given up on, must not stand for the
    new process)."""
    import json
    other = pyenv_python(12)
    tmp, drv = pid_reuse_driver(LOOKING_DRIVER)
    trace = os.path.join(tmp, "t.perfetto-trace")
    r = subprocess.run([CGBPF, "record", "-v", "-o", trace, "--", debian_python(), drv, other,
                        WRAP, tmp], capture_output=True, text=True,
                       env=env_with(CGBPF_START_DELAY_MS="300"), timeout=120)
    log = "\n".join(l for l in r.stderr.splitlines() if "libbpf:" not in l)
    with open(os.path.join(tmp, "cgbpf.log"), "w") as f:
        f.write(log)
    eq(r.returncode, 0, "cgbpf exit (log: %s)" % log[-1500:])
    with open(os.path.join(tmp, "pid")) as f:
        pid = int(f.read())
    with open(os.path.join(tmp, "b.json")) as f:
        mb = json.load(f)
    eq(mb["pid"], pid, "B under A's pid")
    # Not vacuous: A's exec replaced the interpreter cgbpf had found in the
    # fork, and none was found for the exec'ed one before A died.
    check(re.search(r"pid %d: its interpreter changed" % pid, log),
          "cgbpf saw A's exec replace its interpreter (log: %s)" % log[-1500:])
    check(re.search(r"pid %d: no interpreter at its exec" % pid, log),
          "cgbpf found no interpreter at A's exec (log: %s)" % log[-1500:])
    t = ptrace.load(trace)
    clean_trace(t)
    want = [site(rec["leaf"]) for rec in mb["records"] if rec["call"] == "cuLaunchKernel"]
    check(want, "B launched")
    got = [x.args.get("py") or "" for sl in py_slices(t, pid).values() for x in sl
           if x.name == "cuLaunchKernel"]
    eq(sorted(got), sorted(want), "B's launches with B's sites")
