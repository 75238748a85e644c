# SPDX-License-Identifier: MIT
"""bench/pyfree.sh's workload: K iterations that each make a code object
(code.replace(), a copy: no compile, little else) and free it, after a
start delay (CGBPF_START_DELAY_MS, so that cgbpf has found the interpreter
and probed its code_dealloc). No API call: what it measures is the cost of
a code object's free. Prints ns_per_iter=... (wall) and cpu_ns_per_iter=...
(the thread's CPU time: the probe runs in it).

Usage: python pyfree.py K
"""
import os
import sys
import time


def f():
    return 1


def main():
    k = int(sys.argv[1])
    time.sleep(int(os.environ.get("CGBPF_START_DELAY_MS", "0")) / 1000)
    code = f.__code__
    t, c = time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(k):
        code.replace(co_firstlineno=2)
    ns, cpu = time.perf_counter_ns() - t, time.thread_time_ns() - c
    print("ns_per_iter=%.1f cpu_ns_per_iter=%.1f" % (ns / k, cpu / k))


if __name__ == "__main__":
    main()
