# SPDX-License-Identifier: MIT
"""Per-program BPF cost of one cgbpf run, not a test: runs COMMAND (a
`cgbpf record ...` command line) with the kernel's BPF run-time stats on
and prints, for each BPF program that process loaded and that ran, its
run count, total run time and ns per run, from the last look at
/proc/PID/fdinfo of its program fds before the programs went away
(polled every 100 ms; names from bpftool).

The stats are switched on with BPF_ENABLE_STATS, which holds them on
while its fd is open and off again after (unless kernel.bpf_stats_enabled
or another holder keeps them on): nothing to restore. They count the
programs' own time only (not the uprobe trap around them), so they do
not depend on what else the machine runs, unlike wall or CPU time.

Usage (root, /usr/bin/python3 or any python3):
    python3 bench/bpfstats.py -- build/cgbpf record ... -- WORKLOAD
"""
import ctypes
import json
import os
import subprocess
import sys
import time

SYS_BPF = 321           # x86-64
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


def enable_stats():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 4)(BPF_STATS_RUN_TIME, 0, 0, 0)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        sys.exit("bpfstats: BPF_ENABLE_STATS: %s (needs root, Linux >= 5.8)" %
                 os.strerror(ctypes.get_errno()))
    return fd


def snapshot(pid):
    """prog id -> {run_cnt, run_time_ns} of the BPF programs pid holds fds
    of (/proc/PID/fdinfo: no bpftool needed for the counts)."""
    progs = {}
    try:
        fds = os.listdir("/proc/%d/fdinfo" % pid)
    except OSError:
        return progs
    for fd in fds:
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                info = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        if "prog_id" in info and "run_cnt" in info:
            progs[int(info["prog_id"])] = {"run_cnt": int(info["run_cnt"]),
                                           "run_time_ns": int(info["run_time_ns"])}
    return progs


def prog_name(pid):
    out = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(pid)],
                         capture_output=True, text=True)
    try:
        return json.loads(out.stdout)["name"]
    except (ValueError, KeyError):
        return "id %d" % pid


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    cmd = sys.argv[sys.argv.index("--") + 1:]
    fd = enable_stats()
    child = subprocess.Popen(cmd)
    last = {}
    while child.poll() is None:
        snap = snapshot(child.pid)
        for k, v in snap.items():
            if k not in last:
                v["name"] = prog_name(k)
            else:
                v["name"] = last[k]["name"]
            last[k] = v
        time.sleep(0.1)
    os.close(fd)
    rows = [p for p in last.values() if p.get("run_cnt")]
    rows.sort(key=lambda p: -p.get("run_time_ns", 0))
    print("%-24s %10s %14s %10s" % ("program", "runs", "run_time_ns", "ns/run"))
    for p in rows:
        print("%-24s %10d %14d %10.1f" % (p.get("name", "?"), p["run_cnt"], p["run_time_ns"],
                                          p["run_time_ns"] / p["run_cnt"]))
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
