# SPDX-License-Identifier: MIT
"""make portable's folder (build/portable: what tests/gpu/README.md copies
to a GPU host): cgbpf and the injection library need nothing beyond libc,
and the copy records a workload here, handing the command its own copy of
the injection library."""
import os
import re
import subprocess

import harness
from harness import (Skip, api_counts, check, clean_trace, env_with, eq, expected_calls, record,
                     tmpdir, wl)

PORTABLE = os.path.join(harness.OUT, "portable")
ALLOWED = re.compile(r"^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|"
                     r"/lib64/ld-linux-x86-64\.so\.2|/lib/ld-linux-aarch64\.so\.1)$")


def libs():
    d = os.path.join(PORTABLE, "inject")
    found = [os.path.join(d, n) for n in ("libcgbpf-inject.so", "libcgbpf-nvtx.so")
             if os.path.exists(os.path.join(d, n))]
    check(found, "no injection library in %s (make portable)" % d)
    return found


def ldd(path):
    p = subprocess.run(["ldd", path], capture_output=True, text=True)
    text = p.stdout + p.stderr
    if "not a dynamic executable" in text or "statically linked" in text:
        return []
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def test_portable_needs_only_libc():
    if not os.path.exists(os.path.join(PORTABLE, "cgbpf")):
        raise Skip("%s not built (make portable)" % PORTABLE)
    eq(ldd(os.path.join(PORTABLE, "cgbpf")), [], "cgbpf's shared libraries (static)")
    for lib in libs():
        extra = [n for n in ldd(lib) if not ALLOWED.match(n)]
        eq(extra, [], "%s needs only libc and the loader" % lib)
    with open(os.path.join(PORTABLE, "BUILD-INFO")) as f:
        info = f.read()
    check("cgbpf: static" in info and "glibc >= " in info, "BUILD-INFO says how it links:\n" + info)


def test_portable_records_a_workload():
    """The copy runs record -- train and gives the command the injection
    library beside it, not the build tree's."""
    cgbpf = os.path.join(PORTABLE, "cgbpf")
    if not os.path.exists(cgbpf):
        raise Skip("%s not built (make portable)" % PORTABLE)
    tmp = tmpdir()
    env_file = os.path.join(tmp, "env")
    script = ('printf "%%s\\n%%s\\n" "$NVTX_INJECTION64_PATH" "${CUDA_INJECTION64_PATH:-}" > %s; '
              'exec %s --iters 30' % (env_file, wl("train")))
    old = harness.CGBPF
    harness.CGBPF = cgbpf
    try:
        r = record(["--sample-hz", "0"], cmd=["/bin/sh", "-c", script],
                   env=env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json")), tmp=tmp)
    finally:
        harness.CGBPF = old
    eq(r.rc, 0, "portable cgbpf record (stderr %r)" % r.stderr[-500:])
    clean_trace(r.trace)
    m = r.manifest()
    eq(api_counts(r.trace, m["pid"]), expected_calls(m["calls"]), "calls per function")
    with open(env_file) as f:
        nvtx, cuda = (f.read().splitlines() + ["", ""])[:2]
    inject = os.path.realpath(os.path.join(PORTABLE, "inject"))
    eq(os.path.dirname(nvtx), inject, "NVTX_INJECTION64_PATH given to the command")
    if cuda:
        eq(os.path.dirname(cuda), inject, "CUDA_INJECTION64_PATH given to the command")
