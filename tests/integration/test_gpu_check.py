# SPDX-License-Identifier: MIT
"""tests/gpu (the recordings on a real GPU host) on the fake driver and the
fake CUPTI: run.sh, with stand-ins for nvidia-smi, nvcc and torch's python3
that run gpu_mix (kernels.cu's twin), records with record -- and record -p
from build/portable; check.py passes those recordings, and fails, naming
the difference, on manifests and summaries that disagree with them."""
import json
import os
import re
import shutil
import subprocess

import harness
from harness import Skip, check, env_with, eq, tmpdir, wl

PORTABLE = os.path.join(harness.OUT, "portable")
LIB = os.path.join(PORTABLE, "inject", "libcgbpf-inject.so")
FAKE_CUPTI = os.path.join(harness.OUT, "fake", "libcupti.so.13")
CHECK = os.path.join(harness.REPO, "tests", "gpu", "check.py")
RUN_SH = os.path.join(harness.REPO, "tests", "gpu", "run.sh")


def need():
    if not os.path.exists(LIB):
        raise Skip("%s not built (make portable; the injection library's CUPTI part)" % LIB)
    with open(LIB, "rb") as f:
        if b"\0InitializeInjection\0" not in f.read():
            raise Skip("%s has no CUPTI part" % LIB)
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)


STUBS = {
    # Stand-ins for a GPU host's tools: "nvcc" builds gpu_mix (kernels.cu's
    # twin on the fake driver), "python3" runs it for torch_step.py.
    "nvidia-smi": '[ "$1" = -L ] && echo "GPU 0: Fake GPU" || echo "0, Fake GPU, GPU-0, 0, 1 MiB"',
    "nvcc": '[ "$1" = --version ] && { echo "stub nvcc"; exit 0; }\n'
            'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
            'cp "$STUB_WL" "$out"',
    "python3": '[ "$1" = -c ] && { echo "stub torch"; exit 0; }\nexec "$STUB_WL"',
}


def run_sh(tmp):
    """tests/gpu/run.sh as on a GPU host, on stubs and the fakes; its
    output folder."""
    bin_dir = os.path.join(tmp, "bin")
    os.mkdir(bin_dir)
    for name, body in STUBS.items():
        path = os.path.join(bin_dir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)
    out = os.path.join(tmp, "out")
    env = env_with(PATH=bin_dir + ":" + os.environ["PATH"], NVCC=os.path.join(bin_dir, "nvcc"),
                   PYTHON=os.path.join(bin_dir, "python3"), STUB_WL=wl("gpu_mix"),
                   CGBPF_PORTABLE=PORTABLE, CGBPF_CUPTI_PATH=FAKE_CUPTI,
                   FAKECUDA_KERNEL_NS="20000")
    env.pop("OUT", None)
    p = subprocess.run(["bash", RUN_SH, out], capture_output=True, text=True, env=env,
                       timeout=600)
    eq(p.returncode, 0, "run.sh (output %r)" % (p.stdout + p.stderr)[-1500:])
    for name in ("kernels", "kernels_p", "windows", "torch"):
        check(re.search(r"^== %s: .*\n   at the pause point: GPU activity: status 1 " % name,
                        p.stdout, re.M), "run.sh released %s once collection ran:\n%s" %
              (name, p.stdout[-1500:]))
    check("all recordings ran" in p.stdout, "run.sh's last line:\n%s" % p.stdout[-500:])
    return out


def run_check(path, *more):
    p = subprocess.run(["/usr/bin/python3", CHECK, path] + list(more), capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


_runs = None


def runs():
    """run.sh's output folder, shared by the tests of this file."""
    global _runs
    if _runs is None:
        need()
        _runs = run_sh(tmpdir())
    return _runs


def test_check_passes_on_the_fake_gpu():
    """run.sh's four recordings (record --, record -p, profiler windows, and
    gpu_mix again in torch_step's place) pass every check, also from a
    run.sh tarball. The windows run: each window's file holds its kernels,
    the last of which still ran when its window ended."""
    tmp = runs()
    rc, out = run_check(tmp)
    eq(rc, 0, "check.py on the fake recordings:\n%s" % out)
    for name in ("kernels", "kernels_p", "torch"):
        check(re.search(r"^ok %s \(gpu_mix, pid \d+.*\): 32 kernels, 12 copies/memsets on 3 "
                        r"stream tracks" % name, out, re.M),
              "check.py's line for %s:\n%s" % (name, out))
    check(re.search(r"^ok windows \(windows, pid \d+.*\): 3 windows: 5 k_in, "
                    r"k_spin__ns50000000 5\d\.\d ms; 5 k_in, ", out, re.M),
          "check.py's line for windows:\n%s" % out)
    eq(out.strip().splitlines()[-1], "4 passed, 0 failed", "check.py's closing line")
    tgz = os.path.join(tmpdir(), "cgbpf-gpu.tar.gz")
    subprocess.run(["tar", "-czf", tgz, "-C", tmp, "."], check=True)
    rc, out = run_check(tgz, "--only", "kernels_p")
    eq((rc, out.strip().splitlines()[-1]), (0, "1 passed, 0 failed"), "check.py on a tarball")


def tampered(edit_manifest=None, edit_summary=None):
    """check.py's exit and output on a copy of run.sh's kernels run, edited."""
    src = runs()
    tmp = tmpdir()
    for ext in (".perfetto-trace", ".summary", ".manifest.json"):
        shutil.copy(os.path.join(src, "kernels" + ext), tmp)
    if edit_manifest:
        path = os.path.join(tmp, "kernels.manifest.json")
        with open(path) as f:
            m = json.load(f)
        edit_manifest(m)
        with open(path, "w") as f:
            json.dump(m, f)
    if edit_summary:
        path = os.path.join(tmp, "kernels.summary")
        with open(path) as f:
            s = f.read()
        s2 = edit_summary(s)
        check(s2 != s, "the summary edit changed nothing")
        with open(path, "w") as f:
            f.write(s2)
    return run_check(tmp)


def launch(m, name):
    return next(l for l in m["gpu"]["launches"] if l["name"] == name)


def test_check_fails_on_a_missing_launch():
    def more(m):
        launch(m, "k_s1_axpy")["count"] += 1
    rc, out = tampered(more)
    eq(rc, 1, "exit on a manifest with one launch more:\n%s" % out)
    check("k_s1_axpy: 8 slices in the checked span, the program launched it 9 times" in out,
          "the message names the kernel and both counts:\n%s" % out)


def test_check_fails_on_a_wrong_launch_configuration():
    def grid(m):
        launch(m, "cgbpf_gpu::scale<float>")["grid"] = [8, 4, 1]
        launch(m, "k_s1_axpy")["shared_dynamic"] = 1024
    rc, out = tampered(grid)
    eq(rc, 1, "exit on a wrong grid:\n%s" % out)
    check("cgbpf_gpu::scale<float>: grid ['(8,4,2)'] on 4 slices, launched with '(8,4,1)'" in out,
          "grid message:\n%s" % out)
    check("k_s1_axpy: shared_dynamic [3072] on 8 slices, launched with 1024" in out,
          "dynamic shared memory message:\n%s" % out)


def test_check_fails_on_wrong_streams_and_copies():
    def moved(m):
        launch(m, "k_s2_reduce")["stream"] = "s1"
        m["gpu"]["copies"][0]["bytes"] += 4
    rc, out = tampered(moved)
    eq(rc, 1, "exit:\n%s" % out)
    check(re.search(r"the program's stream s1: its kernels are on 2 stream tracks "
                    r"\['stream \d+', 'stream \d+'\]", out), "stream message:\n%s" % out)
    check(re.search(r"copies \(kind, bytes, stream track\): trace .*'HtoD', 262144.*program "
                    r".*'HtoD', 262148", out), "copy bytes message:\n%s" % out)


def test_check_fails_on_a_wrong_graph():
    """The graph launched once more, and a node it does not have: the
    graph checks name both."""
    def more(m):
        g = m["gpu"]["graphs"][0]
        g["launches"] += 1
        g["kernels"][1]["name"] = "k_graph_x"
    rc, out = tampered(more)
    eq(rc, 1, "exit on a manifest with one graph launch more:\n%s" % out)
    check("3 graph launch API slices with a flow, the program launched the graph 4 times" in out,
          "graph launch count message:\n%s" % out)
    check("k_graph_x: 0 slices in the checked span, the program launched it 4 times "
          "(by graph launches)" in out, "graph kernel message:\n%s" % out)
    check(re.search(r"cuGraphLaunch at \d+ links to \['k_graph_a', 'k_graph_b', 'k_graph_c'\], "
                    r"its graph holds \['k_graph_a', 'k_graph_c', 'k_graph_x'\]", out),
          "graph nodes message:\n%s" % out)


def test_check_fails_on_a_summary_that_disagrees():
    def fewer(s):
        return re.sub(r"^(\s+[\d.]+\s+\d+\s+)8(\s.*\sk_s1_axpy)$", r"\g<1>7\2", s, count=1,
                      flags=re.M)
    rc, out = tampered(edit_summary=fewer)
    eq(rc, 1, "exit on a summary with one instance less:\n%s" % out)
    check("summary cuda_gpu_kern_sum instances differ from the trace's kernel slices: "
          "k_s1_axpy: 7 vs 8" in out, "kern_sum message:\n%s" % out)
    check("summary cuda_gpu_kern_sum: k_s1_axpy x7, the program launched it 8 times" in out,
          "kern_sum against the manifest:\n%s" % out)


def test_check_fails_on_clocks_that_disagree():
    """The checked span moved 1 s later: every operation is outside it."""
    def later(m):
        m["gpu"]["checked_from_ns"] += 10**9
        m["gpu"]["checked_until_ns"] += 10**9
    rc, out = tampered(later)
    eq(rc, 1, "exit:\n%s" % out)
    check("k_s1_axpy: 8 slices outside the checked span" in out and
          "the GPU's clock and the host's disagree" in out, "clock message:\n%s" % out)


def test_torch_checks_on_the_fake_gpu():
    """check.py's torch_step checks on gpu_mix's recording: everything but
    the GEMM-like kernel (gpu_mix has none) holds, and the message lists
    the kernels it saw."""
    def as_torch(m):
        g = m.pop("gpu")
        m.update(program="torch_step", iters=8, checked_from_ns=g["checked_from_ns"],
                 checked_until_ns=g["checked_until_ns"])
    rc, out = tampered(as_torch)
    eq(rc, 1, "exit:\n%s" % out)
    problems = [line for line in out.splitlines() if line.startswith("  - ")]
    eq(len(problems), 1, "one problem:\n%s" % out)
    check(problems[0].startswith("  - no GEMM-like kernel (gemm, nvjet, cutlass, xmma) among "
                                 "['k_default_fill', 'k_graph_a', 'k_graph_b'"),
          "the GEMM message:\n%s" % out)
    check(re.search(r"^FAIL kernels \(torch_step, pid \d+\): 32 kernels \(7 names\), 44 of 44 "
                    r"GPU operations with a flow, in 8 iterations", out, re.M), "torch's line:\n%s" % out)


def test_stream_overlaps_note_cupti_and_fail_the_rest():
    """check.py's rule for work that overlaps on one stream, on made-up
    slices: an operation CUPTI reported as ending after work queued later
    (a higher correlation id) had started is noted, with its numbers (seen
    on an H200: the first 2 MiB device-to-device copy, 4.9 ms); an overlap
    against the queue order fails; a stream on two lanes with nothing
    overlapping fails; one lane and no overlap passes quietly."""
    import importlib.util
    from types import SimpleNamespace as NS
    spec = importlib.util.spec_from_file_location("gpucheck", CHECK)
    ck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ck)

    def op(name, ts, dur, corr, lane="stream 7", nbytes=None):
        args = {"correlation": corr}
        if nbytes:
            args["bytes"] = nbytes
        return NS(name=name, ts=ts, dur=dur, end=ts + dur, args=args, track_uuid=lane)

    def run(ops):
        lanes = {o.track_uuid for o in ops}
        g = NS(ops=ops, streams={u: NS(name=u) for u in lanes})
        g.stream_of = lambda s: s.track_uuid.replace(" (overlapping)", "")
        p = ck.Problems()
        ck.stream_overlaps(p, g)
        return p

    copy = op("[CUDA memcpy Device-to-Device]", 1000, 4900000, 153, nbytes=2097152)
    p = run([copy, op("k_default_fill", 90000, 2848, 157, "stream 7 (overlapping)"),
             op("k_default_fill", 200000, 2848, 165, "stream 7 (overlapping)")])
    eq(p.items, [], "CUPTI's own odd report is not a failure")
    eq(len(p.notes), 1, "one note for the copy")
    check("correlation 153, 2097152 bytes, 0.43 GB/s" in p.notes[0] and
          "2 operation(s) queued after it" in p.notes[0], "the note's numbers: %r" % p.notes)
    p = run([op("a", 1000, 5000, 20), op("b", 3000, 1000, 19, "stream 7 (overlapping)")])
    eq(len(p.items), 1, "an overlap against the queue order fails: %r" % p.items)
    eq(p.notes, [], "and is not noted")
    p = run([op("a", 1000, 1000, 20), op("b", 3000, 1000, 21, "stream 7 (overlapping)")])
    eq(len(p.items), 1, "two lanes with nothing overlapping fail: %r" % p.items)
    p = run([op("a", 1000, 1000, 20), op("b", 3000, 1000, 21)])
    eq((p.items, p.notes), ([], []), "one lane, in order: nothing to say")
