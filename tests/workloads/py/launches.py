# SPDX-License-Identifier: MIT
"""launches: cuLaunchKernel from known Python places (issue 12 tests).

Usage: python launches.py [--iters N] [--threads T] [--depth D]
                          [--only NAME[,NAME...]] [--settle S]
Defaults: 3 iterations, 4 threads, library depth 4, every scenario.

Through ctypes and the fake driver (LD_LIBRARY_PATH=build/fake), after
pywl.gate() (CGBPF_WAIT_FILE, CGBPF_START_DELAY_MS): setup (cuInit,
cuDeviceGet, cuCtxCreate_v2, cuModuleLoadData, cuModuleGetFunction from
pywl.Gpu.__init__), pywl.pause() (CGBPF_PAUSE_FILE), then each scenario
makes N launches (grid size says which scenario, for a reader of the trace):
  plain      (grid 1) a module-level function
  nested     (grid 2) a function defined inside another
  method     (grid 3) a method of a class nested in a class
  generator  (grid 4) the body of a generator, between yields
  lambda     (grid 5) a lambda
  coroutine  (grid 6) an async coroutine run by asyncio (the loop's frames
             are below it)
  library    (grid 7) user function -> wllib (under tests/workloads/py/
             site-packages) -> D recursive library frames -> leaf: the leaf
             frame is the library's, the user frame is library_user()
  threads    (grid 8) T threads (named "py-launch-0"..) released together
             by a barrier, each binding the context and launching N times
             from thread_body()
  reuse      (grid 9) N functions compiled from source, each called once,
             then freed with the module code that defined it: each code
             object takes the address of the one before (CPython's
             allocator), with another file (reuse_I.py), function (gen_I)
             and line (I + 2)
then teardown (cuCtxSynchronize, cuModuleUnload, cuCtxDestroy_v2).
A name may come more than once (the same code again); --settle sleeps S
seconds after each scenario (cgbpf has seen its code objects by then).

Manifest (CGBPF_MANIFEST): pywl's fields (every call with leaf and user
frame, stack, native tid) plus "scenarios": the names run, "iters",
"thread_count", "depth", "launch_threads": [{"name", "tid"}], "reuse_ids": the reuse scenario's code
objects' addresses (id()), in order.
"""
import argparse
import asyncio
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "site-packages"))

import pywl  # noqa: E402
from pywl import check, here  # noqa: E402
import wllib  # noqa: E402

SCENARIOS = ["plain", "nested", "method", "generator", "lambda", "coroutine",
             "library", "threads", "reuse"]


def plain(gpu, n):
    for _ in range(n):
        check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=1))))


def nested(gpu, n):
    def inner():
        check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=2))))

    for _ in range(n):
        inner()


class Model:
    class Layer:
        def __init__(self, gpu):
            self.gpu = gpu

        def forward(self):
            g = self.gpu
            check(g.cu.cuLaunchKernel(*here("cuLaunchKernel", *g.launch_args(grid=3))))


def method(gpu, n):
    layer = Model.Layer(gpu)
    for _ in range(n):
        layer.forward()


def batches(gpu, n):
    for i in range(n):
        check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=4))))
        yield i


def generator(gpu, n):
    for _ in batches(gpu, n):
        pass


def lambda_(gpu, n):
    go = lambda: check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=5))))  # noqa: E731,E501
    for _ in range(n):
        go()


async def step(gpu, n):
    for _ in range(n):
        check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=6))))
        await asyncio.sleep(0)


def coroutine(gpu, n):
    asyncio.run(step(gpu, n))


def library_user(gpu, n, depth):
    for _ in range(n):
        wllib.run(gpu, depth)


def thread_body(gpu, n, barrier):
    pywl.set_scenario("threads", thread_local=True)
    gpu.bind()
    barrier.wait()
    for _ in range(n):
        check(gpu.cu.cuLaunchKernel(*here("cuLaunchKernel", *gpu.launch_args(grid=8))))


def threads(gpu, n, count, info):
    barrier = threading.Barrier(count)
    ts = [threading.Thread(target=thread_body, args=(gpu, n, barrier),
                           name="py-launch-%d" % i) for i in range(count)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for t in ts:
        info.append({"name": t.name, "tid": t.native_id})


REUSE_SRC = ("def gen_%d(gpu):\n%s"
             "    check(gpu.cu.cuLaunchKernel(*here('cuLaunchKernel', *gpu.launch_args(grid=9))))\n")


def reuse(gpu, n, ids):
    for i in range(n):
        g = {"check": check, "here": here}
        exec(compile(REUSE_SRC % (i, "\n" * i), "reuse_%d.py" % i, "exec"), g)
        fn = g["gen_%d" % i]
        ids.append(id(fn.__code__))
        fn(gpu)
        # The function and its globals refer to each other: cleared, so
        # that both go now, not at the next collection.
        g.clear()
        del fn, g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--settle", type=float, default=0)
    a = ap.parse_args()
    only = a.only.split(",")
    for s in only:
        if s not in SCENARIOS:
            ap.error("unknown scenario %r (known: %s)" % (s, ", ".join(SCENARIOS)))
    if a.iters < 1 or a.threads < 1 or a.depth < 0:
        ap.error("--iters and --threads must be >= 1, --depth >= 0")

    pywl.gate()
    gpu = pywl.Gpu()
    pywl.pause()
    info = []
    reuse_ids = []
    for s in only:
        pywl.set_scenario(s)
        if s == "plain":
            plain(gpu, a.iters)
        elif s == "nested":
            nested(gpu, a.iters)
        elif s == "method":
            method(gpu, a.iters)
        elif s == "generator":
            generator(gpu, a.iters)
        elif s == "lambda":
            lambda_(gpu, a.iters)
        elif s == "coroutine":
            coroutine(gpu, a.iters)
        elif s == "library":
            library_user(gpu, a.iters, a.depth)
        elif s == "threads":
            threads(gpu, a.iters, a.threads, info)
        elif s == "reuse":
            reuse(gpu, a.iters, reuse_ids)
        if a.settle > 0:
            time.sleep(a.settle)
    pywl.set_scenario("teardown")
    gpu.close()
    pywl.write_manifest(scenarios=only, iters=a.iters, thread_count=a.threads,
                        depth=a.depth, launch_threads=info, reuse_ids=reuse_ids)


if __name__ == "__main__":
    main()
