# SPDX-License-Identifier: MIT
"""tests/gpu/check.py (the checker of the real-GPU recordings) on the fake
driver and the fake CUPTI: gpu_mix, kernels.cu's twin, recorded with
record -- and with record -p the way tests/gpu/run.sh records on a GPU
host, passes; manifests, summaries and traces that disagree fail with the
message that names the difference."""
import json
import os
import re
import shutil
import subprocess
import threading

import harness
from harness import CGBPF, Skip, check, env_with, eq, kill_quiet, start, tmpdir, touch, wait_for, wl

LIB = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
FAKE_CUPTI = os.path.join(harness.OUT, "fake", "libcupti.so.13")
CHECK = os.path.join(harness.REPO, "tests", "gpu", "check.py")


def need():
    if not os.path.exists(LIB):
        raise Skip("%s not built (the injection library's CUPTI part)" % LIB)
    with open(LIB, "rb") as f:
        if b"\0InitializeInjection\0" not in f.read():
            raise Skip("%s has no CUPTI part" % LIB)
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)


def cgbpf_released(argv, pause, name, tmp, env=None):
    """Runs cgbpf -v (argv), touching the workload's pause file once cgbpf
    reports the library's GPU status, as run.sh does; returns its exit."""
    with open(os.path.join(tmp, name + ".stdout"), "w") as out_f:
        p = subprocess.Popen(argv, stdout=out_f, stderr=subprocess.PIPE, text=True, env=env)
    lines = []

    def read_err():
        for line in p.stderr:
            if "libbpf:" in line:
                continue
            lines.append(line)
            if "GPU activity: status" in line:
                touch(pause)
    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    try:
        p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    t.join(10)
    return p.returncode, "".join(lines)


def files(tmp, name):
    base = os.path.join(tmp, name)
    return (["-o", base + ".perfetto-trace", "--summary-file", base + ".summary"],
            base + ".manifest.json", base + ".pause")


def fake_env(**kw):
    return env_with(CGBPF_CUPTI_PATH=FAKE_CUPTI, FAKECUDA_KERNEL_NS="20000", **kw)


def record_run(tmp, name="gpu_mix"):
    out, manifest, pause = files(tmp, name)
    env = fake_env(CGBPF_MANIFEST=manifest, CGBPF_PAUSE_FILE=pause)
    rc, err = cgbpf_released([CGBPF, "record", "-v", "--sample-hz", "0"] + out +
                             ["--", wl("gpu_mix")], pause, name, tmp, env)
    eq(rc, 0, "cgbpf record -- gpu_mix (stderr %r)" % err[-800:])


def record_attached(tmp, name="gpu_mix_p"):
    out, manifest, pause = files(tmp, name)
    app = start([wl("gpu_mix")], env=fake_env(CGBPF_MANIFEST=manifest, CGBPF_PAUSE_FILE=pause,
                                              CUDA_INJECTION64_PATH=LIB))
    try:
        wait_for(lambda: os.path.exists(pause + ".ready"), 30, "gpu_mix's setup")
        rc, err = cgbpf_released([CGBPF, "record", "-v", "--sample-hz", "0", "-p",
                                  str(app.pid)] + out, pause, name, tmp)
        eq(app.wait(30), 0, "gpu_mix exit (%r)" % app.stderr.read()[-300:])
        eq(rc, 0, "cgbpf record -p (stderr %r)" % err[-800:])
    finally:
        kill_quiet(app)


def run_check(path, *more):
    p = subprocess.run(["/usr/bin/python3", CHECK, path] + list(more), capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


_runs = None


def runs():
    """One folder with both recordings, shared by the tests of this file."""
    global _runs
    if _runs is None:
        need()
        tmp = tmpdir()
        record_run(tmp)
        record_attached(tmp)
        _runs = tmp
    return _runs


def test_check_passes_on_the_fake_gpu():
    """Both recordings pass every check, also from a run.sh-style tarball."""
    tmp = runs()
    rc, out = run_check(tmp)
    eq(rc, 0, "check.py on the fake recordings:\n%s" % out)
    check(re.search(r"^ok gpu_mix \(gpu_mix, pid \d+.*\): 23 kernels, 8 copies/memsets on 3 "
                    r"stream tracks", out, re.M), "check.py's line for gpu_mix:\n%s" % out)
    check(re.search(r"^ok gpu_mix_p ", out, re.M), "check.py's line for the -p run:\n%s" % out)
    eq(out.strip().splitlines()[-1], "2 passed, 0 failed", "check.py's closing line")
    tgz = os.path.join(tmpdir(), "cgbpf-gpu.tar.gz")
    subprocess.run(["tar", "-czf", tgz, "-C", tmp, "."], check=True)
    rc, out = run_check(tgz, "--only", "gpu_mix")
    eq((rc, out.strip().splitlines()[-1]), (0, "1 passed, 0 failed"), "check.py on a tarball")


def tampered(edit_manifest=None, edit_summary=None):
    """check.py's exit and output on a copy of the gpu_mix run, edited."""
    src = runs()
    tmp = tmpdir()
    for ext in (".perfetto-trace", ".summary", ".manifest.json"):
        shutil.copy(os.path.join(src, "gpu_mix" + ext), tmp)
    if edit_manifest:
        path = os.path.join(tmp, "gpu_mix.manifest.json")
        with open(path) as f:
            m = json.load(f)
        edit_manifest(m)
        with open(path, "w") as f:
            json.dump(m, f)
    if edit_summary:
        path = os.path.join(tmp, "gpu_mix.summary")
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
    check(re.search(r"the program's streams share stream tracks", out) or
          re.search(r"k_s1_axpy|k_s2_reduce", out), "stream message:\n%s" % out)
    check(re.search(r"copies \(kind, bytes, stream track\): trace .*'HtoD', 262144.*program "
                    r".*'HtoD', 262148", out), "copy bytes message:\n%s" % out)


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
