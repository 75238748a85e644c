# SPDX-License-Identifier: MIT
"""Every string argument is read, or the user is told: kernel names and
NVTX messages on pages the process never touched before the call (a fresh
file mapping, a large .rodata), a process that exits right after the call,
and strings no one can read, which must show as "(unreadable at 0x...)"
and be counted in the summary, never as a blank name (the cold_names
workload checks through /proc/self/pagemap that each page really was
absent from its page table)."""
import json
import os
import re
import signal
import subprocess

import harness
from harness import Bg, check, clean_trace, env_with, eq, tmpdir

WORKLOAD = harness.wl("cold_names")
INJECT = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
FLAGS = ["--sample-hz", "0", "--syscall-threshold", "off", "--sched", "off"]
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")


def run(nvtx):
    """cold_names under `record -p`; with nvtx, it holds until cgbpf has
    stopped (so its memory can still be read), else it exits right after
    its last call. Returns (Result, facts)."""
    d = tmpdir()
    args = [WORKLOAD] + (["--nvtx", "--hold"] if nvtx else []) + [d]
    env = env_with(NVTX_INJECTION64_PATH=os.path.abspath(INJECT)) if nvtx else env_with()
    w = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    bg = None
    try:
        ready = json.loads(w.stdout.readline())
        eq(ready["ready"], w.pid, "the workload is ready")
        bg = Bg(["-p", str(w.pid)] + FLAGS, tmp=d)
        bg.wait_msg("Ctrl-C stops")
        w.stdin.write("go\n")
        w.stdin.flush()
        facts = json.loads(w.stdout.readline())
        if nvtx:
            # The workload lives on: stop cgbpf, then let the workload go.
            bg.p.send_signal(signal.SIGINT)
            r = bg.finish()
            w.stdin.close()
        else:
            r = bg.finish()
        eq(w.wait(30), 0, "workload exit")
    finally:
        harness.kill_quiet(w)
        if bg:
            harness.kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    eq(facts["present"], [0, 0, 0], "the names' pages were not in the page table before "
       "the calls (file mapping, .rodata, .rodata before exit)")
    return r, facts


def no_blank_names(t, pid):
    for s in t.slices:
        if s.pid != pid:
            continue
        check(s.name, "a slice without a name at %d" % s.ts)
        for k in ("kernel", "name", "path"):
            if k in s.args:
                check(s.args[k] != "", "%s slice with an empty %s" % (s.name, k))


def test_driver_names_on_untouched_pages():
    r, f = run(nvtx=False)
    t = r.trace
    clean_trace(t)
    pid = f["pid"]
    no_blank_names(t, pid)
    gets = [s for s in t.slices if s.pid == pid and s.name == "cuModuleGetFunction"]
    eq([s.args.get("name") for s in gets],
       ["cold_file_kernel", "cold_rodata_kernel", "cold_exit_kernel"],
       "cuModuleGetFunction names (file mapping, .rodata, .rodata right before exit)")
    launches = [s for s in t.slices if s.pid == pid and s.name == "cuLaunchKernel"]
    eq([s.args.get("kernel") for s in launches],
       ["cold_file_kernel", "cold_rodata_kernel", "cold_exit_kernel"],
       "launch kernel names")
    loads = [s for s in t.slices if s.pid == pid and s.name == "cuModuleLoad"]
    eq(len(loads), 1, "one cuModuleLoad")
    eq(loads[0].args.get("path"), "(unreadable at %s)" % f["unreadable"],
       "a path no one can read says so, with its address")
    check("CUDA_ERROR_FILE_NOT_FOUND" in str(loads[0].args.get("result")),
          "cuModuleLoad failed as the driver does: %r" % loads[0].args)
    check(re.search(r"^\s*1 string arguments could not be read \(shown as "
                    r"\"\(unreadable at 0x\.\.\.\)\"\)$", r.stdout, re.M),
          "summary counts the unreadable string:\n" + r.stdout[-1500:])
    # The three names and the path: none could be read at the entry.
    check(re.search(r"^\s*4 string arguments read after their call's entry", r.stdout, re.M),
          "summary counts the strings read late:\n" + r.stdout[-1500:])
    rows = re.findall(r"^\s+1\s+\S+\s+\d+\.\d\s+(cold_\w+)$", r.stdout, re.M)
    eq(sorted(rows), ["cold_exit_kernel", "cold_file_kernel", "cold_rodata_kernel"],
       "top kernels by launches")


def test_nvtx_messages_on_untouched_pages():
    if not os.path.exists(os.path.join(CUDA_HOME, "include", "nvtx3", "nvToolsExt.h")):
        raise harness.Skip("no CUDA toolkit at %s: cold_names --nvtx needs its NVTX v3 headers"
                           % CUDA_HOME)
    if not os.path.exists(INJECT):
        raise harness.Skip("%s not built (<sys/sdt.h> from systemtap-sdt-dev)" % INJECT)
    r, f = run(nvtx=True)
    t = r.trace
    clean_trace(t)
    pid = f["pid"]
    no_blank_names(t, pid)
    ranges = [s for s in t.slices if s.pid == pid and "NVTX" in (s.categories or [])]
    eq([s.name for s in ranges], ["cold-nvtx-range"], "the range's message, read from the "
       "process")
    marks = [i.name for i in t.instants if i.pid == pid and i.tid is not None]
    eq(marks, ["(unreadable at %s)" % f["nvtx_unreadable"]],
       "a mark whose message no one can read says so")
    check(re.search(r"^\s*2 string arguments could not be read", r.stdout, re.M),
          "summary counts the driver's and NVTX's unreadable strings:\n" + r.stdout[-1500:])
    gets = [s.args.get("kernel") for s in t.slices if s.pid == pid and s.name == "cuLaunchKernel"]
    eq(gets, ["cold_file_kernel", "cold_rodata_kernel"], "launch kernel names")
