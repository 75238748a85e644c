# SPDX-License-Identifier: MIT
"""record -a: every process that loads a traced library, wherever its copy
lives, started before or after the capture, in a private mount namespace,
dlopen'ing late; each library file probed once; --comm / --cgroup filters;
bad filter values."""
import json
import os
import re
import secrets
import shutil
import signal
import subprocess

from harness import (CGBPF, FAKE, Bg, Skip, api_counts, clean_trace, eq, check,
                     env_with, expected_calls, kill_quiet, start, tmpdir, touch, wait_for, wl)

FLAGS = ["--sample-hz", "0", "--syscall-threshold", "off", "--sched", "off"]


def lib_copy(d, name):
    """A copy of the fake driver in a directory of its own: another file."""
    path = os.path.join(d, name)
    os.mkdir(path)
    shutil.copy(os.path.join(FAKE, "libcuda.so.1"), path)
    return path


def env_for(libdir, manifest, **kw):
    env = env_with(CGBPF_MANIFEST=manifest, **kw)
    env["LD_LIBRARY_PATH"] = libdir
    return env


def manifest(path):
    with open(path) as f:
        return json.load(f)


def stop(bg):
    bg.p.send_signal(signal.SIGINT)
    return bg.finish()


def test_every_gpu_process_system_wide():
    if not shutil.which("unshare"):
        raise Skip("unshare (util-linux) not installed")
    d = tmpdir()
    l1, l2 = lib_copy(d, "l1"), lib_copy(d, "l2")
    hidden = os.path.join(d, "hidden")
    os.mkdir(hidden)
    gate = os.path.join(d, "go")
    m = {k: os.path.join(d, k + ".json") for k in ("before", "after", "ns", "late")}
    procs = []
    bg = None
    try:
        # Started before the capture: found by the initial /proc scan.
        before = start([wl("train"), "--iters", "20"],
                       env=env_for(l1, m["before"], CGBPF_WAIT_FILE=gate))
        procs.append(before)
        wait_for(lambda: "libcuda.so.1" in open("/proc/%d/maps" % before.pid).read(), 20,
                 "the early workload to map libcuda")
        # --comm keeps other GPU processes out of the trace (the host's
        # libraries and theirs may be probed all the same).
        bg = Bg(["-a", "--comm", "train,mt,dl_late"] + FLAGS, tmp=d, gate=True)
        bg.wait_msg("system-wide capture running")
        # (Other agents' test workloads may be running too.)
        found = re.search(r"\((\d+) already do, \d+ library file\(s\) probed\)", bg.stderr())
        check(found and int(found.group(1)) >= 1,
              "the running GPU process was found: %r" % bg.stderr()[-600:])
        touch(gate)
        # Started after: another copy of the library, found through its
        # LD_LIBRARY_PATH at its exec; it waits until then (gate).
        after = start([wl("mt")], env=env_for(l2, m["after"], CGBPF_CHILD_GATE=bg.gate))
        procs.append(after)
        # A private mount namespace: its copy is invisible from here.
        script = ("mount -t tmpfs tmpfs {h} && cp {lib} {h}/libcuda.so.1 && "
                  "LD_LIBRARY_PATH={h} exec {w} --iters 15").format(
                      h=hidden, lib=os.path.join(FAKE, "libcuda.so.1"), w=wl("train"))
        env = env_with(CGBPF_MANIFEST=m["ns"], CGBPF_CHILD_GATE=bg.gate)
        env.pop("LD_LIBRARY_PATH")
        ns = start(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                   env=env)
        procs.append(ns)
        # dlopen late, with no pause after it: l1 is probed already.
        late = start([wl("dl_late"), "--lib", os.path.join(l1, "libcuda.so.1"),
                      "--after-dlopen-ms", "0", "--iters", "10"],
                     env=env_for(l1, m["late"]))
        procs.append(late)
        # Not a GPU process: never a target.
        other = start(["sh", "-c", "for i in 1 2 3 4 5; do cat /proc/self/stat >/dev/null; done"])
        procs.append(other)
        for p in procs:
            eq(p.wait(60), 0, "workload %s exit" % p.args[0])
        r = stop(bg)
    finally:
        for p in procs:
            kill_quiet(p)
        if bg:
            kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-400:])
    clean_trace(r.trace)
    pids = {"before": before.pid, "after": after.pid, "late": late.pid}
    # The namespace workload is sh exec'ing train: same pid.
    pids["ns"] = ns.pid
    for k, pid in pids.items():
        eq(api_counts(r.trace, pid), expected_calls(manifest(m[k])["calls"]),
           "every call of the %s workload (pid %d)" % (k, pid))
    check(other.pid not in r.trace.processes, "a non-GPU process is not traced")
    # Each library file once: l1 (two processes), l2, the private copy
    # (other files may be probed: the host's, other processes').
    probed = re.findall(r"probing \d+ [^\n]* in (\S+) \(every process\)", r.stderr)
    for lib in (l1, l2, hidden):
        eq(probed.count(os.path.join(lib, "libcuda.so.1")), 1, "%s probed once" % lib)
    eq(len(probed), len(set(probed)), "no file probed twice: %r" % probed)
    files = re.search(r"(\d+) library file\(s\)", r.stdout)
    check(files and int(files.group(1)) == len(probed),
          "summary counts the %d files probed: %r" % (len(probed), r.stdout[-600:]))


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.startswith("cgroup2 "):
                return pre.split()[4]
    return None


def test_filters_comm_and_container():
    d = tmpdir()
    mnt = cgroup2_mount()
    if not mnt:
        raise Skip("no cgroup v2 hierarchy mounted")
    # Two programs that differ only by name.
    for name in ("gpu_keep", "gpu_drop"):
        shutil.copy(wl("mt"), os.path.join(d, name))
    ms = {k: os.path.join(d, k + ".json") for k in ("keep", "drop")}
    # The fake driver in FAKE is found through LD_LIBRARY_PATH: probed at
    # the exec of the matching process, which waits for that (gate) to
    # count every call; the other one is never looked at (no gate).
    bg = Bg(["-a", "--comm", "gpu_keep,other"] + FLAGS, tmp=d, gate=True)
    try:
        bg.wait_msg("system-wide capture running")
        for k in ("keep", "drop"):
            env = env_with(CGBPF_MANIFEST=ms[k])
            if k == "keep":
                env["CGBPF_CHILD_GATE"] = bg.gate
            p = start([os.path.join(d, "gpu_" + k)], env=env)
            eq(p.wait(60), 0, "gpu_%s exit" % k)
            if k == "keep":
                keep = p.pid
            else:
                drop = p.pid
        r = stop(bg)
    finally:
        kill_quiet(bg.p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-300:])
    clean_trace(r.trace)
    eq(api_counts(r.trace, keep), expected_calls(manifest(ms["keep"])["calls"]),
       "--comm: the matching process is traced")
    eq(api_counts(r.trace, drop), {}, "--comm: the other one is not")

    # A container-like cgroup (runtimes name them after the 64-digit id).
    cid = secrets.token_hex(32)
    top = os.path.join(mnt, "cgbpf-test-%s" % secrets.token_hex(4))
    cg = os.path.join(top, "docker-%s.scope" % cid)
    os.makedirs(cg)
    mc, mo = os.path.join(d, "in.json"), os.path.join(d, "out.json")
    try:
        # A folder of its own: the first capture's trace is there, and
        # cgbpf does not overwrite a file without --force.
        bg = Bg(["-a", "--cgroup", cid[:12]] + FLAGS, tmp=tmpdir(), gate=True)
        bg.wait_msg("system-wide capture running")
        inside = start(["sh", "-c", "echo $$ > %s/cgroup.procs && exec %s" % (cg, wl("mt"))],
                       env=env_with(CGBPF_MANIFEST=mc, CGBPF_CHILD_GATE=bg.gate))
        outside = start([wl("mt")], env=env_with(CGBPF_MANIFEST=mo))
        eq(inside.wait(60), 0, "workload in the cgroup")
        eq(outside.wait(60), 0, "workload outside")
        r = stop(bg)
    finally:
        kill_quiet(bg.p)
        for dd in (cg, top):
            try:
                os.rmdir(dd)
            except OSError:
                pass
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-300:])
    clean_trace(r.trace)
    eq(api_counts(r.trace, inside.pid), expected_calls(manifest(mc)["calls"]),
       "--cgroup: the process in the container's cgroup is traced")
    eq(api_counts(r.trace, outside.pid), {}, "--cgroup: the one outside is not")
    tr = r.trace.processes.get(inside.pid)
    check(tr is not None and ("[container %s]" % cid[:12]) in (tr.process_name or ""),
          "process named with its container id: %r" % (tr and tr.process_name))
    labels = [list(p.track_descriptor.process.process_labels) for p in r.trace.packets
              if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")
              and p.track_descriptor.process.pid == inside.pid]
    check(labels and all(lb == ["container=%s" % cid[:12]] for lb in labels),
          "process label: %r" % labels)


def test_bad_filters():
    cases = [
        (["-a", "--comm", "a_name_longer_than_15"], 2, "--comm"),
        (["--comm", "python", "-p", "1"], 2, "add -a"),
        (["-a", "--cgroup", "xyz"], 1, "not a cgroup path"),
        (["-a", "--cgroup", "deadbeefcafe0123"], 1, "no cgroup"),
        (["-a", "--cgroup", "/no/such/cgroup/here"], 1, "not a cgroup directory"),
        (["-a", "--comm", "a,,b"], 2, "--comm"),
    ]
    d = tmpdir()
    for args, rc, why in cases:
        out = os.path.join(d, "t.perfetto-trace")
        p = subprocess.run([CGBPF, "record", "-d", "1s", "-o", out] + args, capture_output=True,
                           text=True, timeout=60)
        eq(p.returncode, rc, "exit for %s (stderr %r)" % (args, p.stderr))
        check(why in p.stderr, "message %r for %s: %r" % (why, args, p.stderr))


def test_all_with_pid_filter():
    """-a -p PID: only that process (and its children) among the GPU
    processes; the capture does not end when it exits."""
    d = tmpdir()
    m1, m2 = os.path.join(d, "one.json"), os.path.join(d, "two.json")
    gate = os.path.join(d, "go")
    one = start([wl("mt")], env=env_with(CGBPF_MANIFEST=m1, CGBPF_WAIT_FILE=gate))
    try:
        bg = Bg(["-a", "-p", str(one.pid), "-d", "20s"] + FLAGS, tmp=d)
        bg.wait_msg("Ctrl-C stops")
        touch(gate)
        eq(one.wait(60), 0, "the chosen workload")
        two = start([wl("mt")], env=env_with(CGBPF_MANIFEST=m2))
        eq(two.wait(60), 0, "another GPU process")
        check(bg.p.poll() is None, "-a keeps running after the chosen process exited")
        r = stop(bg)
    finally:
        kill_quiet(one)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-300:])
    clean_trace(r.trace)
    eq(api_counts(r.trace, one.pid), expected_calls(manifest(m1)["calls"]), "the chosen one")
    eq(api_counts(r.trace, two.pid), {}, "not the other")
