# SPDX-License-Identifier: MIT
"""libcgbpf-inject.so (inject/): the NVTX v3 injection library, checked on
its own before cgbpf reads it. The nvtx_ranges workload (the toolkit's real
NVTX headers) runs with NVTX_INJECTION64_PATH set, under the test-only
checker build/tests/nvtx_usdt that attaches a BPF program to every USDT
probe and prints each hit; the probes and their arguments must be exactly
what the workload did (see tests/workloads/nvtx_ranges.c)."""
import json
import os
import re
import struct
import subprocess

import harness
from harness import check, eq

LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
CHECKER = os.path.join(harness.OUT, "tests", "nvtx_usdt")
WORKLOAD = harness.wl("nvtx_ranges")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
PROBES = ["push", "pop", "start", "end", "mark", "name_thread", "name_category",
          "domain_create", "domain_destroy", "register_string"]
# Index of each probe's string argument, and of its domain argument.
STR_ARG = {"push": 2, "start": 3, "mark": 2, "name_thread": 1, "name_category": 2,
           "domain_create": 1, "register_string": 2}
DOM_ARG = {p: 0 for p in PROBES if p != "name_thread"}
U64 = (1 << 64) - 1


def need():
    if not os.path.exists(os.path.join(CUDA_HOME, "include", "nvtx3", "nvToolsExt.h")):
        raise harness.Skip("no CUDA toolkit at %s: nvtx_ranges needs its NVTX v3 headers" % CUDA_HOME)
    for p in (LIB, CHECKER, WORKLOAD):
        if not os.path.exists(p):
            raise harness.Skip("%s not built (make; <sys/sdt.h> from systemtap-sdt-dev)" % p)


def env():
    e = dict(os.environ)
    e["NVTX_INJECTION64_PATH"] = os.path.abspath(LIB)
    return e


def bits_double(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def bits_float(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def parse(stdout):
    """(facts, events): the workload's closing JSON line and the probe hits."""
    facts, events = None, []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if "probe" in d:
            events.append(d)
        elif "main_tid" in d:
            facts = d
    check(facts is not None, "no facts line from the workload: %r" % stdout[-2000:])
    return facts, events


def norm(ev, facts):
    """A probe hit with string pointers replaced by the strings BPF read
    through them and the domain handle by "D" (the workload's domain)."""
    args = list(ev["args"])
    p = ev["probe"]
    if p in STR_ARG and args[STR_ARG[p]]:
        args[STR_ARG[p]] = ev["str"]
    if p in DOM_ARG and args[DOM_ARG[p]]:
        names = {facts["domain"]: ("D", "cgbpf-test"), facts["domain2"]: ("D2", "dom-wide-\u00e9")}
        check(args[DOM_ARG[p]] in names, "%s: unknown domain handle %#x" % (p, args[DOM_ARG[p]]))
        label, name = names[args[DOM_ARG[p]]]
        eq(ev["domain"], name, "domain name read through the handle")
        args[DOM_ARG[p]] = label
    return (p, tuple(args))


def expected_main(f):
    x, cr, dr, wr, er = (f["main_tid"], f["cross_id"], f["dom_range_id"], f["wide_range_id"],
                         f["ex_range_id"])
    return [
        ("name_thread", (x, "nvtx-main")),
        ("name_category", (0, 7, "io")),
        ("push", (0, 1, "outer", 0, 0, 0, 0, 0)),
        ("push", (0, 1, "inner", 0, 0, 0, 0, 0)),
        ("mark", (0, 1, "mark-a", 0, 0, 0, 0, 0)),
        ("pop", (0,)),
        ("pop", (0,)),
        ("push", (0, 2, "wide-\u00e9\u4e2d", 0, 0, 0, 0, 0)),
        ("pop", (0,)),
        ("push", (0, 1, "attr-push", 1, 0xff00ff00, 7, 1, 42)),
        ("pop", (0,)),
        ("mark", (0, 1, "attr-mark", 0, 0, 0, 3, bits_double(2.5))),
        ("mark", (0, 2, "wide-mark", 0, 0, 0, 5, (-3) & 0xffffffff)),
        ("mark", (0, 1, "float-mark", 1, 0x80123456, 0, 6, bits_float(1.5))),
        ("domain_create", ("D", "cgbpf-test")),
        ("register_string", ("D", f["registered"], "registered-msg")),
        ("push", ("D", 3, "registered-msg", 1, 0xffff0000, 3, 0, 0)),
        ("pop", ("D",)),
        ("name_category", ("D", 3, "dom-cat")),
        ("mark", ("D", 1, "dom-mark", 0, 0, 0, 2, (-5) & U64)),
        ("start", ("D", dr, 1, "dom-range", 0, 0, 0, 4, 9)),
        ("end", ("D", dr)),
        ("start", (0, cr, 1, "cross", 0, 0, 0, 0, 0)),
        ("start", (0, wr, 2, "wide-range", 0, 0, 0, 0, 0)),
        ("end", (0, wr)),
        ("start", (0, er, 1, "ex-range", 1, 0xff0000ff, 7, 0, 0)),
        ("end", (0, er)),
        ("name_category", (0, 8, "wide-cat")),
        ("domain_create", ("D2", "dom-wide-\u00e9")),
        ("register_string", ("D2", f["registered2"], "reg-wide")),
        ("name_category", ("D2", 1, "cat-wide")),
        ("domain_destroy", ("D2",)),
        ("domain_destroy", ("D",)),
    ]


def expected_worker(f):
    return [
        ("name_thread", (f["worker_tid"], "nvtx-worker")),
        ("push", (0, 1, "worker-range", 0, 0, 0, 0, 0)),
        ("end", (0, f["cross_id"])),
        ("pop", (0,)),
    ]


def check_events(facts, events, skip_main=0):
    by_tid = {}
    for ev in events:
        by_tid.setdefault(ev["tid"], []).append(ev)
    eq(sorted(by_tid), sorted([facts["main_tid"], facts["worker_tid"]]), "threads that fired probes")
    got_main = [norm(e, facts) for e in by_tid[facts["main_tid"]]]
    eq(got_main, expected_main(facts)[skip_main:], "main thread probes")
    got_worker = [norm(e, facts) for e in by_tid[facts["worker_tid"]]]
    eq(got_worker, expected_worker(facts), "worker thread probes")
    # Registered message: the push's msg is the handle nvtxDomainRegisterStringA returned.
    reg_push = [e for e in events if e["probe"] == "push" and e["args"][1] == 3]
    eq([e["args"][2] for e in reg_push], [facts["registered"]], "registered string handle in push")
    ids = [facts["cross_id"], facts["dom_range_id"], facts["wide_range_id"], facts["ex_range_id"]]
    eq(len(set(ids)), 4, "range ids unique")
    check(0 not in ids, "range id 0 returned: %r" % ids)


def test_nvtx_probes_fire_with_args():
    need()
    p = subprocess.run([CHECKER, LIB, "--", WORKLOAD], capture_output=True, text=True,
                       timeout=60, env=env())
    eq(p.returncode, 0, "checker exit status (stderr: %s)" % p.stderr[-500:])
    check("attached" in p.stderr, "checker did not attach: %s" % p.stderr)
    check("lost" not in p.stderr, "the checker's ring buffer overflowed: %s" % p.stderr)
    facts, events = parse(p.stdout)
    check_events(facts, events)
    eq(facts["push_levels"], [0, 1, 0, 0, 0], "nvtxRangePush return values (nesting level)")
    eq(facts["pop_levels"], [1, 0, 0, 0, 0], "nvtxRangePop return values")


def test_nvtx_attach_to_running_process():
    """The workload loads the library (first NVTX call) before the tracer
    attaches: the kernel raises the semaphores in the running process."""
    need()
    w = subprocess.Popen([WORKLOAD, "--wait"], env=env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    c = None
    try:
        ready = json.loads(w.stdout.readline())
        eq(ready["ready"], w.pid, "workload ready line")
        c = subprocess.Popen([CHECKER, LIB, "--pid", str(w.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = c.stderr.readline()
        eq(line.strip(), "attached", "checker attach line")
        w.stdin.write("go\n")
        w.stdin.flush()
        wout = w.stdout.read()
        eq(w.wait(timeout=30), 0, "workload exit status")
        cout, cerr = c.communicate(timeout=30)
        eq(c.returncode, 0, "checker exit status (%s)" % cerr[-300:])
    finally:
        harness.kill_quiet(w)
        if c:
            harness.kill_quiet(c)
    facts, _ = parse(wout)
    _, events = parse(wout.splitlines()[-1] + "\n" + cout)
    check(not any(e["str"] == "before-attach" for e in events), "a mark from before attach was seen")
    check_events(facts, events)


def test_nvtx_no_tracer_same_results():
    """Semaphores at 0: no probe work, but every NVTX return value the
    application sees is the same (levels, unique non-zero range ids)."""
    need()
    p = subprocess.run([WORKLOAD], capture_output=True, text=True, timeout=30, env=env())
    eq(p.returncode, 0, "workload exit status")
    facts = json.loads(p.stdout.strip().splitlines()[-1])
    eq(facts["push_levels"], [0, 1, 0, 0, 0], "push levels")
    eq(facts["pop_levels"], [1, 0, 0, 0, 0], "pop levels")
    ids = [facts["cross_id"], facts["dom_range_id"], facts["wide_range_id"], facts["ex_range_id"]]
    eq(len(set(ids)), 4, "range ids unique")
    check(0 not in ids and facts["domain"] and facts["registered"] and facts["domain2"]
          and facts["registered2"], "handles: %r" % facts)


def test_nvtx_library_notes_and_exports():
    need()
    notes = subprocess.run(["readelf", "-n", LIB], capture_output=True, text=True, check=True).stdout
    found = {}
    for m in re.finditer(r"Provider: (\S+)\s+Name: (\S+)\s+Location: (0x[0-9a-f]+), "
                         r"Base: (0x[0-9a-f]+), Semaphore: (0x[0-9a-f]+)", notes):
        eq(m.group(1), "cgbpf_nvtx", "provider")
        check(int(m.group(5), 16) != 0, "probe %s has no semaphore" % m.group(2))
        found.setdefault(m.group(2), []).append(int(m.group(5), 16))
    eq(sorted(found), sorted(PROBES), "probes in .note.stapsdt")
    for name, semas in found.items():
        eq(len(set(semas)), 1, "one semaphore per probe (%s)" % name)
    eq(len({s[0] for s in found.values()}), len(PROBES), "distinct semaphores")
    dyn = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True,
                         check=True).stdout.split()
    # The GPU part (inject/gpu.c, and NCCL's profiler plugin in
    # inject/ncclprof.c) is built where the CUPTI headers are.
    gpu = ["InitializeInjection", "cgbpf_gpu_batch", "cgbpf_gpu_flush", "cgbpf_gpu_window",
           "ncclProfiler_v4", "ncclProfiler_v5"]
    got = [s for s in dyn if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)]
    want = ["InitializeInjectionNvtx2"]
    if os.path.exists(os.path.join(harness.OUT, "inject", "gpu_cbids.h")):
        want = sorted(want + gpu)
    eq(sorted(got), want, "exported symbols")


def test_nvtx_abi_matches_toolkit_headers():
    need()
    src = os.path.join(harness.REPO, "inject", "nvtx_abi_check.c")
    p = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                        "-I" + os.path.join(CUDA_HOME, "include"),
                        "-I" + os.path.join(harness.REPO, "inject"), src],
                       capture_output=True, text=True)
    eq(p.returncode, 0, "inject/nvtx_abi.h against the toolkit's NVTX (%s)" % p.stderr[-800:])


def test_nvtx_threads_stress():
    """4 threads start/push/pop/end at once: every range id is distinct,
    every end on a thread matches a start of that thread, pushes and pops
    balance per thread, no probe hit lost or duplicated."""
    need()
    threads, n = 4, 2000
    p = subprocess.run([CHECKER, LIB, "--", WORKLOAD, "--stress", str(threads), str(n)],
                       capture_output=True, text=True, timeout=120, env=env())
    eq(p.returncode, 0, "checker exit status (stderr: %s)" % p.stderr[-500:])
    check("lost" not in p.stderr, "the checker's ring buffer overflowed: %s" % p.stderr)
    facts, events = None, []
    for line in p.stdout.splitlines():
        d = json.loads(line)
        if "probe" in d:
            events.append(d)
        else:
            facts = d
    check(facts and facts["ids_unique"], "workload saw duplicate or zero ids: %r" % facts)
    tids = sorted(facts["stress_tids"])
    by = {t: {"start": [], "end": [], "push": 0, "pop": 0} for t in tids}
    for e in events:
        check(e["tid"] in by, "probe from unexpected thread %d" % e["tid"])
        if e["probe"] == "start":
            eq(e["str"], "s", "start message")
            by[e["tid"]]["start"].append(e["args"][1])
        elif e["probe"] == "end":
            by[e["tid"]]["end"].append(e["args"][1])
        elif e["probe"] in ("push", "pop"):
            by[e["tid"]][e["probe"]] += 1
    all_ids = []
    for t in tids:
        b = by[t]
        eq((len(b["start"]), len(b["end"]), b["push"], b["pop"]), (n, n, n, n),
           "thread %d start/end/push/pop hits" % t)
        eq(b["end"], b["start"], "thread %d ends the ids it started, in order" % t)
        all_ids += b["start"]
    eq(len(set(all_ids)), threads * n, "distinct range ids across threads")
