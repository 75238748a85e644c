# SPDX-License-Identifier: MIT
"""Libraries only visible inside a container's mount namespace, and lost
records made visible when the consumer cannot keep up."""
import os
import shutil
import signal
import subprocess
import time

from harness import (FAKE, Bg, Skip, api_counts, capture_end, check, clean_trace, env_with, eq,
                     expected_calls, kill_quiet, start, tmpdir, touch, wait_for, wl)


def test_library_in_private_mount_namespace():
    """The target maps libcuda from a tmpfs mounted only in its own mount
    namespace: cgbpf must reach it through /proc/PID/root."""
    if not shutil.which("unshare"):
        raise Skip("unshare (util-linux) not installed")
    d = tmpdir()
    hidden = os.path.join(d, "hidden")
    os.mkdir(hidden)
    gate = os.path.join(d, "go")
    script = ("mount -t tmpfs tmpfs {h} && cp {lib} {h}/libcuda.so.1 && "
              "LD_LIBRARY_PATH={h} exec {train} --iters 40").format(
                  h=hidden, lib=os.path.join(FAKE, "libcuda.so.1"), train=wl("train"))
    env = env_with(CGBPF_WAIT_FILE=gate, CGBPF_MANIFEST=os.path.join(d, "manifest.json"))
    env.pop("LD_LIBRARY_PATH")
    w = start(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], env=env)
    try:
        # The workload waits on the gate after ld.so mapped the library.
        def mapped():
            try:
                with open("/proc/%d/maps" % w.pid) as f:
                    return "libcuda.so.1" in f.read()
            except OSError:
                return False
        wait_for(mapped, 20, "the workload to map its private libcuda")
        check(not os.listdir(hidden), "the library is invisible from cgbpf's namespace")
        bg = Bg(["-p", str(w.pid)], tmp=d)
        bg.wait_msg("probing 74 CUDA driver functions in %s/libcuda.so.1" % hidden)
        touch(gate)
        eq(w.wait(30), 0, "workload exit")
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-300:])
    clean_trace(r.trace)
    m = r.manifest()
    eq(api_counts(r.trace, w.pid), expected_calls(m["calls"]), "every call traced")


def test_lost_records_are_reported():
    """Freeze the consumer while the workload fills a 1 MiB ring: the loss
    must show in the summary and in the trace, never silently."""
    d = tmpdir()
    gate = os.path.join(d, "go")
    w = start([wl("bench_launch"), "300000"], env=env_with(CGBPF_WAIT_FILE=gate))
    try:
        bg = Bg(["-p", str(w.pid), "--ring-size", "1"], tmp=d)
        bg.wait_msg("Ctrl-C stops")
        bg.p.send_signal(signal.SIGSTOP)
        touch(gate)
        eq(w.wait(60), 0, "workload exit")
        bg.p.send_signal(signal.SIGCONT)
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit")
    check("LOST" in r.stdout and "raise --ring-size" in r.stdout, "summary reports the loss")
    clean_trace(r.trace)
    end = capture_end(r.trace)
    lost = end.args["lost_records"]
    check(lost > 0, "trace reports lost records (%d)" % lost)
    eq(end.name, "cgbpf: capture ended, RECORDS LOST", "instant name says so")
    eq(lost, end.args["lost_call_entries"] + end.args["lost_call_returns"] +
       end.args["lost_strings"] + end.args["lost_other"], "per-type counts add up")
    kept = len(r.trace.slices_on(pid=w.pid, name="cuLaunchKernel"))
    check(kept < 300000, "fewer launches kept (%d) than made" % kept)
    counter = r.trace.counter_values("cgbpf lost records")
    eq(counter[-1][1], lost, "lost-records counter track ends at the total")
