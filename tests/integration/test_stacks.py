# SPDX-License-Identifier: MIT
"""CPU samples and backtraces of slow API calls on a known call chain
(tests/stacks/api_chain.c: main -> level_a -> level_b -> level_c), in every
build flavour (built into build/apichain/): each expected frame symbolized,
in order."""
import os
import re
import subprocess

import ptrace
from harness import OUT, REPO, Skip, check, clean_trace, eq, no_drops, record

ST = os.path.join(OUT, "apichain")
CHAIN = ["main", "level_a", "level_b", "level_c"]   # outermost first
SPIN_MS, SYNC_MS = 400, 60


def temporary_symbolizer():
    """The stacks branch carries a frame-pointer-only stand-in for the
    libdwfl symbolizer (user/lib/elf/symbolize.c), marked TEMPORARY in its header."""
    with open(os.path.join(REPO, "user", "lib", "elf", "symbolize.c")) as f:
        return "TEMPORARY" in f.read(2000)


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def run_chain(flavour, extra=(), spin=SPIN_MS, sync=SYNC_MS):
    exe = os.path.join(ST, flavour)
    check(os.access(exe, os.X_OK), "%s is built (make stack-bins)" % exe)
    r = record(["--sample-hz", "499", "--backtrace-threshold", "5ms"] + list(extra),
               cmd=[exe, str(spin), str(sync)])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    return r


def chain_pid(r):
    pids = {s.pid for s in r.trace.slices if s.name == "cuInit"}
    eq(len(pids), 1, "one process called cuInit")
    return pids.pop()


def check_samples(r, pid, exe, lib=None):
    """Most samples of the spinning thread show the whole chain, innermost
    user frame level_c, each frame in the right file."""
    samples = r.trace.perf_samples
    eq({s.pid for s in samples}, {pid}, "only the target is sampled")
    user = [s for s in samples if s.cpu_mode == 2]
    # 400 ms of CPU at 499 Hz is ~200 samples; the machine is shared.
    check(len(user) >= 20, "user-mode samples: %d" % len(user))
    full = [s for s in user if _user_chain(s)[-4:] == CHAIN]
    check(len(full) >= 0.7 * len(user),
          "%d of %d samples end in %s; e.g. %s" %
          (len(full), len(user), CHAIN, [_user_chain(s) for s in user[:3]]))
    for s in full[:20]:
        frames = {f.function: f for f in s.frames}
        eq(os.path.realpath(frames["main"].mapping), os.path.realpath(exe), "main's mapping")
        want = os.path.realpath(lib or exe)
        for fn in CHAIN[1:]:
            eq(os.path.realpath(frames[fn].mapping), want, "%s's mapping" % fn)
            check(frames[fn].rel_pc is not None, "%s has a rel_pc" % fn)
        eq(frames["level_c"].build_id, build_id(lib or exe), "build id of level_c's file")
    return full


def _user_chain(s):
    """Function names of the user frames, outermost first."""
    return [f.function for f in s.frames if f.mapping != "/kernel"]


def check_backtraces(r, pid):
    syncs = [s for s in r.trace.slices_on(pid=pid, name="cuStreamSynchronize")]
    eq(len(syncs), 1, "one cuStreamSynchronize")
    s = syncs[0]
    check(s.dur >= SYNC_MS * 1e6 * 0.8, "synchronize lasted the kernel (%d ns)" % s.dur)
    check(s.callstack is not None, "the slow call has a backtrace")
    # At the return probe the innermost frame is the call site in level_c.
    eq(s.callstack[-4:], CHAIN, "backtrace of cuStreamSynchronize (%s)" % s.callstack)
    fast = r.trace.slices_on(pid=pid, name="cuModuleLoadData")
    eq([x.callstack for x in fast], [None], "a fast call has no backtrace")
    m = re.search(r"backtraces: (\d+) API calls >= 5\.000 ms", r.stdout)
    check(m and int(m.group(1)) >= 1, "summary counts backtraces: %r" % r.stdout[-800:])


def check_summary(r, nsamples):
    check("** CPU samples:" in r.stdout, "summary has a CPU samples section")
    m = re.search(r"(\d+) samples at 499 Hz", r.stdout)
    check(m is not None, "summary gives the sample count")
    check(int(m.group(1)) >= nsamples, "summary counts %s >= %d decoded" % (m.group(1), nsamples))
    top = re.search(r"Self\s+%\s+Function\n\s+\d+\s+[\d.]+%\s+(\S+)", r.stdout)
    check(top and top.group(1) == "level_c", "top function by self samples is level_c: %r" %
          (top.group(1) if top else r.stdout[-600:]))


def _flavour_test(flavour, lib=None, extra=()):
    exe = os.path.join(ST, flavour)
    r = run_chain(flavour, extra)
    pid = chain_pid(r)
    check_samples(r, pid, exe, lib and os.path.join(ST, lib))
    check_backtraces(r, pid)
    check_summary(r, len(r.trace.perf_samples))
    no_drops(r)


def test_frame_pointers_pie():
    _flavour_test("chain_fp_pie")


def test_frame_pointers_no_pie():
    _flavour_test("chain_fp_nopie")


def test_chain_in_shared_library():
    _flavour_test("chain_lib", lib="libchain.so")


def test_frame_pointers_without_stack_copy():
    """--stack-copy 0: the kernel's frame-pointer walk alone."""
    _flavour_test("chain_fp_pie", extra=["--stack-copy", "0"])


def test_no_frame_pointers_dwarf():
    if temporary_symbolizer():
        raise Skip("needs DWARF CFI unwinding: the temporary frame-pointer symbolizer of "
                   "the stacks branch cannot; passes with the libdwfl one")
    _flavour_test("chain_nofp")


def test_stripped_with_debuglink():
    if temporary_symbolizer():
        raise Skip("needs .gnu_debuglink lookup: the temporary symbolizer of the stacks "
                   "branch reads only the file's own symbols; passes with the libdwfl one")
    out = subprocess.run(["readelf", "-S", os.path.join(ST, "chain_stripped")],
                         capture_output=True, text=True).stdout
    check(".symtab" not in out and ".gnu_debuglink" in out, "the binary is stripped")
    _flavour_test("chain_stripped")


def test_sampling_and_backtraces_off():
    exe = os.path.join(ST, "chain_fp_pie")
    r = record(["--sample-hz", "0", "--backtrace-threshold", "off"], cmd=[exe, "100", "20"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    eq(r.trace.perf_samples, [], "no samples with --sample-hz 0")
    eq([s.name for s in r.trace.slices if s.callstack], [], "no backtraces when off")
    check("** CPU samples:" not in r.stdout, "no CPU samples section when both are off")
    eq(r.trace.packets_by_kind.get("perf_sample", 0), 0, "no perf_sample packets")


def test_backtraces_only():
    """--sample-hz 0 with backtraces on: slices carry stacks, no samples."""
    exe = os.path.join(ST, "chain_fp_pie")
    r = record(["--sample-hz", "0", "--backtrace-threshold", "5ms"], cmd=[exe, "50", str(SYNC_MS)])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    eq(r.trace.perf_samples, [], "no samples")
    check_backtraces(r, chain_pid(r))
    check("sampling off (--sample-hz 0)" in r.stdout, "summary says sampling is off")


def test_trace_decodes_with_protoc():
    """Second opinion on the packets: protoc against Perfetto's schema."""
    r = run_chain("chain_fp_pie", spin=100, sync=20)
    proto = ptrace.proto_path()
    with open(r.trace_path, "rb") as f:
        p = subprocess.run(["protoc", "-I", os.path.dirname(proto), "--decode=perfetto.protos.Trace",
                            os.path.basename(proto)], stdin=f, capture_output=True, text=True)
    eq(p.returncode, 0, "protoc decodes the trace (%s)" % p.stderr[-300:])
    for want in ("perf_sample {", "callstack_iid:", "callstacks {", "frames {", "mappings {",
                 "function_names {", "mapping_paths {", "str: \"level_c\"",
                 "function_name: \"level_c\""):
        check(want in p.stdout, "protoc output has %r" % want)


def test_deleted_executable():
    """The program file was deleted before cgbpf attached (-p): its frames
    still resolve, through /proc/PID/map_files, named by the path the
    process saw."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="cgbpf-stacks-")
    os.makedirs(os.path.join(d, "stacks"))
    os.symlink(os.path.join(OUT, "fake"), os.path.join(d, "fake"))
    exe = os.path.join(d, "stacks", "chain_del")
    shutil.copy(os.path.join(ST, "chain_fp_pie"), exe)
    # Popen returns once the program was exec'ed: deleting it now is after.
    p = subprocess.Popen([exe, "2000", str(SYNC_MS)])
    try:
        os.unlink(exe)
        r = record(["-p", str(p.pid), "--sample-hz", "499", "--backtrace-threshold", "5ms"])
    finally:
        p.wait(timeout=60)
        shutil.rmtree(d, ignore_errors=True)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    user = [s for s in r.trace.perf_samples if s.pid == p.pid and s.cpu_mode == 2]
    full = [s for s in user if _user_chain(s)[-4:] == CHAIN]
    check(len(user) >= 20 and len(full) >= 0.7 * len(user),
          "%d of %d samples end in the chain" % (len(full), len(user)))
    check(all(f.mapping.startswith(exe) for s in full for f in s.frames
              if f.function in CHAIN), "frames name the deleted file's path: %s" %
          sorted({f.mapping for s in full for f in s.frames}))
    syncs = r.trace.slices_on(pid=p.pid, name="cuStreamSynchronize")
    eq(len(syncs), 1, "the synchronize after attach")
    eq(syncs[0].callstack[-4:], CHAIN, "its backtrace")
