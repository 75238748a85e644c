# SPDX-License-Identifier: MIT
"""The training-loop workload recorded end to end: exact call counts,
kernel names, argument values, ordering, memory counters, no drops."""
from harness import (api_counts, check, clean_trace, demangle, eq, expected_calls, no_drops,
                     record, wl)

ITERS = 300
_res = None


def res():
    """One recording shared by the tests of this file."""
    global _res
    if _res is None:
        _res = record([], cmd=[wl("train"), "--iters", str(ITERS)])
        eq(_res.rc, 0, "cgbpf exit (stderr: %r)" % _res.stderr[-500:])
    return _res


def test_trace_is_clean_and_complete():
    r = res()
    clean_trace(r.trace)
    no_drops(r)
    m = r.manifest()
    eq(api_counts(r.trace, m["pid"]), expected_calls(m["calls"]), "calls per function")
    unended = [s for s in r.trace.slices if s.dur is None]
    eq(unended, [], "every call returned")


def test_process_and_thread_named():
    r = res()
    m = r.manifest()
    p = r.trace.processes.get(m["pid"])
    check(p is not None, "process track for pid %d" % m["pid"])
    eq(p.process_name, "train", "process name")
    check(p.cmdline and p.cmdline[0].endswith("train --iters %d" % ITERS),
          "cmdline %r" % p.cmdline)
    th = r.trace.threads.get(m["pid"])
    check(th is not None and th.thread_name == "train", "main thread track named")


def test_calls_are_sequential_on_the_thread():
    r = res()
    m = r.manifest()
    sl = sorted(r.trace.slices_on(tid=m["pid"]), key=lambda s: s.ts)
    for a, b in zip(sl, sl[1:]):
        check(a.end <= b.ts, "%s ends before %s starts" % (a.name, b.name))
    eq({s.depth for s in sl}, {0}, "driver calls do not nest")
    # Program order: init, context, module before the first launch.
    first = {}
    for s in sl:
        first.setdefault(s.name, s.ts)
    check(first["cuInit"] < first["cuCtxCreate_v4"] < first["cuModuleLoadData"] <
          first["cuModuleGetFunction"] < first["cuLaunchKernel"], "setup order")


def test_launch_names_and_arguments():
    r = res()
    m = r.manifest()
    names = demangle(sorted(m["kernels"]))
    streams = {"s_compute": "stream 1", "s_copy": "stream 2", "NULL": "per-thread default"}
    want = {}
    for c in m["launch_configs"]:
        key = (c["api"], names[c["kernel"]], "<<<(%d,%d,%d), (%d,%d,%d), %d, %s>>>" % (
            tuple(c["grid"]) + tuple(c["block"]) + (c["smem"], streams[c["stream"]])))
        want[key] = want.get(key, 0) + c["count"]
    got = {}
    for s in r.trace.slices_on(pid=m["pid"]):
        if s.name.startswith("cuLaunch"):
            key = (s.name, s.args.get("kernel"), s.args.get("launch"))
            got[key] = got.get(key, 0) + 1
    eq(got, want, "launches by (api, demangled kernel, <<<config>>>)")
    launches = sum(c["count"] for c in m["launch_configs"])
    check("%d launches of 5 kernels; 0 unnamed" % launches in r.stdout, "summary launch line")


def test_summary_tables():
    r = res()
    m = r.manifest()
    lines = r.stdout.splitlines()
    # The cuda_api_sum row (9 columns); a CPU sample can land inside the
    # fake's cuLaunchKernel and make a "Self % Function" row of the CPU
    # samples table end with the same name (seen beside two CPU hogs).
    row = [ln for ln in lines if ln.rstrip().endswith(" cuLaunchKernel") and len(ln.split()) >= 9]
    eq(len(row), 1, "one cuLaunchKernel row: %r\n%s" % (row, r.stdout[-4000:]))
    eq(int(row[0].split()[2]), m["calls"]["cuLaunchKernel"], "Num Calls column")
    names = demangle(sorted(m["kernels"]))
    for mangled, n in m["kernels"].items():
        check(any(ln.split()[:1] == [str(n)] and ln.rstrip().endswith(names[mangled])
                  for ln in lines), "kernel row for %s x%d" % (names[mangled], n))
    check("no records lost" in r.stdout, "no drops in summary")
    check("2 calls returned an error" in r.stdout, "errors counted")


def test_copy_bytes_and_directions():
    r = res()
    m = r.manifest()
    got = {}
    for s in r.trace.slices_on(pid=m["pid"]):
        if s.name.startswith("cuMemcpy"):
            got[s.args["kind"]] = got.get(s.args["kind"], 0) + s.args["bytes"]
    eq(got, {k: v for k, v in m["bytes"].items() if v}, "bytes per direction")
    memset = sum(s.args["bytes"] for s in r.trace.slices_on(pid=m["pid"], name="cuMemsetD32Async"))
    eq(memset, m["memset_bytes"], "memset bytes")
    check("%d" % m["bytes"]["HtoD"] in r.stdout, "HtoD bytes in the summary")


def test_error_results():
    r = res()
    m = r.manifest()
    errs = {}
    for s in r.trace.slices_on(pid=m["pid"]):
        if "result" in s.args:
            errs.setdefault((s.name, s.args["result"]), []).append(s)
    eq(sorted(errs), [("cuMemFree_v2", "CUDA_ERROR_INVALID_VALUE (1)"),
                      ("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND (500)")], "failed calls")
    eq(errs[("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND (500)")][0].args.get("name"),
       "missing_kernel", "name argument of the failed lookup")
    eq(errs[("cuMemFree_v2", "CUDA_ERROR_INVALID_VALUE (1)")][0].args.get("ptr"),
       0xdeadbeef00, "pointer argument of the failed free")


def test_memory_counters():
    r = res()
    m = r.manifest()
    proc = r.trace.processes[m["pid"]]
    tracks = {t.name: t for t in r.trace.tracks.values()
              if t.kind == "counter" and t.parent_uuid == proc.uuid}
    gpu = [v for _, v in r.trace.counters[tracks["GPU memory (cuMemAlloc)"].uuid]]
    host = [v for _, v in r.trace.counters[tracks["Pinned host memory (cuMemAllocHost)"].uuid]]
    eq(max(gpu), m["alloc_bytes_peak"], "GPU memory peak")
    eq(gpu[-1], 0, "GPU memory after every free")
    eq(max(host), m["host_alloc_bytes_peak"], "pinned host peak")
    eq(host[-1], 0, "pinned host memory after every free")
    # The counter steps by exactly the allocation sizes, in order.
    steps = [b - a for a, b in zip([0] + gpu, gpu)]
    eq([s for s in steps if s > 0], m["alloc_sizes"]["device"], "allocation steps")
