# SPDX-License-Identifier: MIT
"""bench/pyfree.sh's workload: K iterations of compile, exec and free, each
freeing two code objects (the module code and the function it defined),
after a start delay (CGBPF_START_DELAY_MS, so that cgbpf has found the
interpreter and probed its code_dealloc). No API call: what it measures is
the cost of a code object's free alone. Prints ns_per_iter=... (wall) and
cpu_ns_per_iter=... (the thread's CPU time: the probe runs in it).

Usage: python pyfree.py K
"""
import os
import sys
import time

SRC = "def f():\n    return 1\n"


def main():
    k = int(sys.argv[1])
    time.sleep(int(os.environ.get("CGBPF_START_DELAY_MS", "0")) / 1000)
    code = compile(SRC, "pyfree_gen.py", "exec")
    t, c = time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(k):
        g = {}
        exec(compile(SRC, "pyfree_gen.py", "exec"), g)
        g.clear()
    ns, cpu = time.perf_counter_ns() - t, time.thread_time_ns() - c
    del code
    print("ns_per_iter=%.1f cpu_ns_per_iter=%.1f" % (ns / k, cpu / k))


if __name__ == "__main__":
    main()
