# SPDX-License-Identifier: MIT
"""subinterp: cuLaunchKernel from a subinterpreter (issue 12 tests).

Usage: python subinterp.py [--iters N]

After pywl.gate() and the driver's setup (pywl.Gpu, main interpreter),
pywl.pause() (CGBPF_PAUSE_FILE: a test can attach or look at the process
with its subinterpreter alive), then, in order:
  main-before  (grid 1) N launches from main_launch(), main interpreter
  sub          (grid 9) N launches from sub_launch() in subinterp_body.py,
               run by the main thread inside a subinterpreter created with
               _interpreters (3.13) or _xxsubinterpreters (3.8-3.12)
  main-after   (grid 1) N launches from main_launch() again
The subinterpreter lives until the end, so that the process has two
interpreters while it launches; with CGBPF_HOLD_FILE the subinterpreter's
code waits (<= 30 s) for that file after its launches, in body(), while
the main interpreter's thread state of the same thread is in run_in().

Manifest (CGBPF_MANIFEST): pywl's fields (the main interpreter's calls),
plus "sub_records": the subinterpreter's launches as pywl records them
there ({"seq", "call", "tid", "scenario": "sub", "leaf", "user",
"stack"}), "iters", and "interpreters": 2.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pywl  # noqa: E402
from pywl import check, here  # noqa: E402

try:
    import _interpreters as interpreters  # 3.13
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.8-3.12

BODY = os.path.join(HERE, "subinterp_body.py")


def main_launch(gpu, n):
    for _ in range(n):
        check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=1))))


def run_in(interp, code):
    """Runs code in interp; raises on an error there."""
    err = interpreters.run_string(interp, code)
    # 3.13's run_string returns the exception's info instead of raising.
    if err is not None:
        raise RuntimeError("subinterpreter: %r" % (err,))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=3)
    a = ap.parse_args()
    pywl.gate()
    gpu = pywl.Gpu()
    try:
        # 3.12: a legacy (not isolated) subinterpreter, which may load
        # _ctypes (single-phase init).
        interp = interpreters.create(isolated=False)
    except TypeError:
        interp = interpreters.create()
    pywl.pause()
    pywl.set_scenario("main-before")
    main_launch(gpu, a.iters)
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "subinterp-%d.json" % os.getpid())
    if os.environ.get("CGBPF_MANIFEST"):
        out = os.environ["CGBPF_MANIFEST"] + ".sub"
    # The subinterpreter has its own modules: it loads the driver and
    # pywl again, and runs subinterp_body.py under its own file name.
    code = ("import sys\n"
            "sys.path.insert(0, %r)\n"
            "sys.argv = [%r, %r, %r, %r]\n"
            "exec(compile(open(%r).read(), %r, 'exec'), {'__name__': '__main__'})\n"
            % (HERE, BODY, str(a.iters), str(gpu.ctx.value), out, BODY, BODY))
    run_in(interp, code)
    pywl.set_scenario("main-after")
    main_launch(gpu, a.iters)
    with open(out) as f:
        sub = json.load(f)
    os.unlink(out)
    gpu.close()
    pywl.write_manifest(sub_records=sub, iters=a.iters, interpreters=2)
    interpreters.destroy(interp)


if __name__ == "__main__":
    main()
