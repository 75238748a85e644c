# SPDX-License-Identifier: MIT
"""cgbpf stats: the summary's tables from a saved trace. For every test
workload the integration tests record (the driver and runtime API,
forks and threads, graphs, NCCL, NVTX v2 and v3, syscalls, the scheduler,
GPU activity from the fake CUPTI), the text tables equal those record
printed at its end, row for row and number for number; the CSV (read by
Python's csv module) and JSON (structure, then values) hold the same rows.
Then: --report filters and orders, -o PREFIX writes one file per table,
bad options exit 2, a non-trace or cut file is an error that says so,
several traces and their merge give one set of tables.

cold_names is left out: it runs under `record -p` with a handshake of its
own (test_strings.py), and its calls are the train workload's."""
import csv
import io
import json
import os
import re
import subprocess
import threading

import harness
from harness import CGBPF, Skip, check, clean_trace, env_with, eq, tmpdir, touch, wl

import ptrace
import tpcheck

# The text sections record prints and stats computes, by heading.
SECTIONS = {
    "** CUDA API Summary (cuda_api_sum):": "cuda_api_sum",
    "** Top kernels by launches:": "cuda_kern_launch_sum",
    "** Memory copies (cuda_gpu_mem_size_sum, API side):": "cuda_api_mem_size_sum",
    "** Peak memory allocated per process (since attach):": "cuda_mem_peak",
    "** NCCL Summary (nccl_sum):": "nccl_sum",
    "** NCCL stragglers: which rank the others wait for (nccl_stragglers):": "nccl_stragglers",
    "** NCCL stragglers, GPU side: whose kernel the others wait for (nccl_stragglers_gpu; "
    "NCCL's profiler plugin):": "nccl_stragglers_gpu",
    # After nccl_stragglers when it names a rank (both read the trace).
    "** NCCL straggler: what it did before its late entries (nccl_straggler_activity):":
    "nccl_straggler_activity",
    "** NVTX Range Summary (nvtx_sum):": "nvtx_sum",
    "** OS Runtime Summary (osrt_sum): syscalls of traced threads": "osrt_sum",
    "** Python call sites (python_sites):": "python_sites",
    "** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):": "cuda_gpu_kern_sum",
    "** CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum):": "cuda_gpu_mem_time_sum",
    "** CUDA GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum):": "cuda_gpu_mem_size_sum",
    "** GPU utilization and idle time:": "cuda_gpu_util",
    "** GPU activity per process:": "cuda_gpu_procs",
}
ALL = ["cuda_api_sum", "cuda_api_inner_sum", "cuda_kern_launch_sum", "cuda_api_mem_size_sum",
       "cuda_mem_peak", "nccl_sum", "nccl_stragglers", "nccl_stragglers_gpu", "nvtx_sum",
       "osrt_sum", "python_sites", "cuda_gpu_kern_sum",
       "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "cuda_gpu_util",
       "cuda_gpu_procs"]
TIME_COLS = ["Time (%)", "Total Time (ns)", None, "Avg (ns)", "Med (ns)", "Min (ns)",
             "Max (ns)", "StdDev (ns)"]
TIME_TABLES = {"cuda_api_sum": ("Num Calls", "Name"), "cuda_api_inner_sum": ("Num Calls", "Name"),
               "osrt_sum": ("Num Calls", "Name"), "nvtx_sum": ("Instances", "Range"),
               "cuda_gpu_kern_sum": ("Instances", "Name"),
               "cuda_gpu_mem_time_sum": ("Count", "Operation")}
TIME_ROW = re.compile(r"^ +([\d.]+) +(\d+) +(\d+) +([\d.]+) +(\d+) +(\d+) +(\d+) +([\d.]+)  (.*)$")


def stats(args, rc=0):
    p = subprocess.run([CGBPF, "stats"] + list(args), capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, rc, "cgbpf stats %s exit (stderr %r)" % (" ".join(args), p.stderr[-500:]))
    return p


def sections(text):
    """{heading line: body (trailing blank lines dropped)} of a summary."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("** "):
            cur = line
            out[cur] = []
        elif cur is not None:
            out[cur].append(line.rstrip())
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


def time_rows(body):
    """The rows of a time table in text: (pct, total, n, avg, med, min, max,
    stddev, name) strings; the first table only (cuda_api_sum's inner
    calls follow a blank line)."""
    rows, started = [], False
    for line in body.splitlines():
        m = TIME_ROW.match(line)
        if m:
            rows.append(m.groups())
            started = True
        elif started:
            break
    return rows


def inner_rows(body):
    parts = body.split("Time (%) of the same total:")
    return time_rows(parts[1]) if len(parts) == 2 else []


def csv_blocks(text):
    """{report: [rows as dicts]} of stats --format csv on stdout."""
    out, name, lines = {}, None, []

    def flush():
        if name is not None:
            rd = csv.reader(io.StringIO("\n".join(lines).strip("\n") + "\n"))
            rows = [r for r in rd if r]
            out[name] = (rows[0], rows[1:]) if rows else ([], [])

    for line in text.splitlines():
        m = re.match(r"^\*\* .* \(([a-z_]+)\):$", line)
        if m:
            flush()
            name, lines = m.group(1), []
        elif name is not None:
            lines.append(line)
    flush()
    return out


def f1(x):
    return "%.1f" % float(x)


def check_time_table(name, text_rows, header, rows, what):
    count, last = TIME_TABLES[name]
    cols = [c if c else count for c in TIME_COLS] + (["Style"] if name == "nvtx_sum" else []) + [last]
    eq(header, cols, "%s %s columns" % (what, name))
    eq(len(rows), len(text_rows), "%s %s rows" % (what, name))
    for t, r in zip(text_rows, rows):
        vals = [r[c] for c in cols]
        label = vals[-1] if name != "nvtx_sum" else "%-9s %s" % (vals[-2], vals[-1])
        got = (f1(vals[0]), str(vals[1]), str(vals[2]), f1(vals[3]), str(vals[4]), str(vals[5]),
               str(vals[6]), f1(vals[7]), label)
        eq(got, t, "%s %s row" % (what, name))


def check_formats(trace, text_secs, has_inner):
    """CSV and JSON of every report hold the rows of the text tables."""
    c = csv_blocks(stats(["--format", "csv", trace]).stdout)
    j = json.loads(stats(["--format", "json", trace]).stdout)
    check(isinstance(j, dict), "JSON output is an object of reports")
    eq(sorted(c), sorted(j), "the same reports in CSV and JSON")
    for name, rows in j.items():
        check(name in ALL, "known report %r" % name)
        check(isinstance(rows, list) and all(isinstance(r, dict) for r in rows),
              "%s: a list of row objects" % name)
        hdr, crow = c[name]
        eq(len(crow), len(rows), "%s: CSV and JSON rows" % name)
        for cr, jr in zip(crow, rows):
            eq(list(jr), hdr, "%s: JSON keys are the CSV columns" % name)
            for k, v in zip(hdr, cr):
                if isinstance(jr[k], str):
                    eq(v, jr[k], "%s %s" % (name, k))
                else:
                    check(float(v) == float(jr[k]), "%s %s: CSV %s, JSON %s" % (name, k, v, jr[k]))
    by_name = {v: k for k, v in SECTIONS.items()}
    for name in TIME_TABLES:
        if name == "cuda_api_inner_sum":
            if name in j:
                body = text_secs.get(by_name["cuda_api_sum"], "")
                dict_rows = [{k: v for k, v in zip(c[name][0], r)} for r in c[name][1]]
                check_time_table(name, inner_rows(body), c[name][0], dict_rows, "CSV")
                check_time_table(name, inner_rows(body), list(j[name][0]) if j[name] else c[name][0],
                                 j[name], "JSON")
                eq(bool(j[name]), has_inner, "inner calls listed")
            continue
        heading = by_name[name]
        if heading not in text_secs:
            continue
        trows = time_rows(text_secs[heading])
        dict_rows = [{k: v for k, v in zip(c[name][0], r)} for r in c[name][1]]
        check(name in j, "%s in the JSON as in the text" % name)
        check_time_table(name, trows, c[name][0], dict_rows, "CSV")
        check_time_table(name, trows, list(j[name][0]) if j[name] else c[name][0], j[name], "JSON")
    # The other tables, by their own columns.
    mem = text_secs.get(by_name["cuda_api_mem_size_sum"], "")
    for r in j.get("cuda_api_mem_size_sum", []):
        check(re.search(r"^ +%d +%d +.*  %s$" % (r["Count"], r["Total (bytes)"],
                                                 re.escape(r["Operation"])), mem, re.M),
              "API memory row %r in the text" % r)
    peak = text_secs.get(by_name["cuda_mem_peak"], "")
    more = re.search(r"\.\.\. and (\d+) more process", peak)
    shown = [r for r in j.get("cuda_mem_peak", [])
             if re.search(r"^ +%d %-16s " % (r["PID"], re.escape(r["Process"])), peak, re.M)]
    # The text shows 20 of many and counts the others; CSV and JSON all.
    eq(len(shown) + (int(more.group(1)) if more else 0), len(j.get("cuda_mem_peak", [])),
       "peak memory rows in the text, or counted there:\n%s" % peak)
    kern = text_secs.get(by_name["cuda_kern_launch_sum"], "")
    for r in j.get("cuda_kern_launch_sum", [])[:15]:
        check(re.search(r"^ +%d +%s +%s  %s$" % (r["Launches"], re.escape(f1(r["(%)"])),
                                                 re.escape(f1(r["Avg API (ns)"])),
                                                 re.escape(r["Kernel"])), kern, re.M),
              "kernel row %r in the text" % r)
    nccl = text_secs.get(by_name["nccl_sum"], "")
    for r in j.get("nccl_sum", []):
        check(re.search(r"^ %-18s +%d +%d +%d +%d +%d +%s +%d +%d " % (
            re.escape(r["Name"]), r["Calls"], r["Grouped"], r["Bytes"], r["Timed"],
            r["Total (ns)"], re.escape(f1(r["Avg (ns)"])), r["Med (ns)"], r["Max (ns)"]),
            nccl, re.M), "NCCL row %r in the text" % r)
    util = text_secs.get(by_name["cuda_gpu_util"], "")
    eq(len(j.get("cuda_gpu_util", [])), len(re.findall(r"^   pid \d+ GPU \d+", util, re.M)),
       "a cuda_gpu_util row per GPU line of the text")
    for r in j.get("cuda_gpu_util", []):
        check(re.search(r"^   pid %d GPU %d%s: busy %s%% of %.6f s \(its first to its last "
                        r"operation\), %d operations\n      idle %.6f s: waiting for the host "
                        r"%.6f s" % (r["PID"], r["GPU"], re.escape(" (%s)" % r["Name"]) if r["Name"]
                                     else "", re.escape(f1(r["Busy (%)"])), r["Span (ns)"] / 1e9,
                                     r["Operations"], r["Idle (ns)"] / 1e9,
                                     r["Waiting for host (ns)"] / 1e9), util, re.M),
              "GPU utilization row %r in the text" % r)
    procs = text_secs.get(by_name["cuda_gpu_procs"], "")
    more = re.search(r"^   \.\.\. and (\d+) more process\(es\)", procs, re.M)
    eq(len(j.get("cuda_gpu_procs", [])), len(re.findall(r"^   pid \d+ \(", procs, re.M)) +
       (int(more.group(1)) if more else 0),
       "a cuda_gpu_procs row per process of the text, or counted there")
    for r in j.get("cuda_gpu_procs", []):
        line = re.search(r"^   pid %d \(%s\): (.*)$" % (r["PID"], re.escape(r["Process"])), procs,
                         re.M)
        check(line or more, "GPU process row %r in the text" % r)
        if not line:
            continue
        if r["Measured"]:
            eq(line.group(1), "measured (CUPTI %s): %d kernels, %d copies, %d memsets, %d "
               "synchronizations" % (r["CUPTI"], r["Kernels"], r["Copies"], r["Memsets"],
                                     r["Synchronizations"]), "GPU process row %r" % r)
        est = re.search(r"^   pid %d: estimated from API calls: (\d+) spans" % r["PID"], procs, re.M)
        eq(int(est.group(1)) if est else 0, r["Estimated spans"], "estimated spans of %r" % r)
    py = text_secs.get(by_name["python_sites"], "")
    for r in j.get("python_sites", [])[:15]:
        check(re.search(r"^ +%s +%d +%d +%d  %s$" % (re.escape(f1(r["Time (%)"])),
                                                    r["Total Time (ns)"], r["Calls"],
                                                    r["Launches"], re.escape(r["Call site"])),
                        py, re.M), "Python call site row %r in the text" % r)
    size = text_secs.get(by_name["cuda_gpu_mem_size_sum"], "")
    for r in j.get("cuda_gpu_mem_size_sum", []):
        check(re.search(r"^ +%.3f +%d .*  %s$" % (r["Total (MB)"], r["Count"],
                                                  re.escape(r["Operation"])), size, re.M),
              "GPU memory size row %r in the text" % r)


def compare(res, expect_sections=(), has_inner=False):
    """stats' text tables equal record's; CSV and JSON hold them too.
    Returns stats' sections."""
    eq(res.rc, 0, "record exit (stderr %r)" % res.stderr[-800:])
    t = ptrace.load(res.trace_path)
    clean_trace(t)
    rec = sections(res.stdout)
    got = sections(stats([res.trace_path]).stdout)
    eq(sorted(got), sorted(k for k in rec if k in SECTIONS),
       "stats prints the tables record printed")
    for k, body in got.items():
        if body != rec[k]:
            raise AssertionError("%s differs:\nrecord:\n%s\nstats:\n%s" % (k, rec[k], body))
    for want in expect_sections:
        heading = [k for k, v in SECTIONS.items() if v == want][0]
        check(heading in got and time_rows(got[heading]) or
              re.search(r"^ +\S", got.get(heading, ""), re.M),
              "%s has rows (%r)" % (want, got.get(heading)))
    check_formats(res.trace_path, got, has_inner)
    return got


FLAGS = ["--sample-hz", "0"]


def test_train():
    res = harness.record(FLAGS, [wl("train"), "--iters", "20"])
    got = compare(res, ["cuda_api_sum", "cuda_kern_launch_sum", "cuda_api_mem_size_sum", "osrt_sum"])
    check("train" in got["** Peak memory allocated per process (since attach):"],
          "peak memory of train")
    if tpcheck.shell_path():
        tpcheck.compare(res.trace_path)


def test_crt_app():
    """The runtime API: its driver calls are the inner table."""
    compare(harness.record(FLAGS, [wl("crt_app"), "--iters", "3"]), ["cuda_api_sum"],
            has_inner=True)


def test_threads_forks_graph():
    compare(harness.record(FLAGS, [wl("mt"), "--threads", "4", "--iters", "200"]),
            ["cuda_api_sum"])
    compare(harness.record(FLAGS, [wl("fork"), "--children", "2", "--iters", "10"]),
            ["cuda_api_sum"])
    compare(harness.record(FLAGS, [wl("graph"), "--launches", "3"]), ["cuda_api_sum"])
    compare(harness.record(FLAGS, [wl("dl_late"), "--after-dlopen-ms", "0", "--iters", "30"]),
            ["cuda_api_sum"])


def test_demo_gpu_mix_bench():
    compare(harness.record(FLAGS, [wl("demo"), "--steps", "3"]), ["cuda_api_sum"])
    compare(harness.record(FLAGS, [wl("gpu_mix")]), ["cuda_api_sum"])
    compare(harness.record(FLAGS + ["--syscall-threshold", "off"],
                           [wl("bench_launch"), "20000"]), ["cuda_api_sum"])


def need(name):
    if not os.path.exists(wl(name)):
        raise Skip("%s not built (needs the CUDA toolkit's headers)" % wl(name))


def test_nccl():
    need("nccl_ranks")
    got = compare(harness.record(FLAGS, [wl("nccl_ranks"), "--ranks", "3", "--iters", "3"]),
                  ["nccl_sum"])
    check("communicator(s)" in got["** NCCL Summary (nccl_sum):"], "communicators listed")
    need("nccl_bench")
    compare(harness.record(FLAGS, [wl("nccl_bench"), "200", "2"]), ["nccl_sum"])
    # A slow rank: named, and what it did before its late entries follows
    # in both (stats reads the trace again, record its own file).
    got = compare(harness.record(FLAGS, [wl("nccl_ranks"), "--ranks", "4", "--iters", "60",
                                         "--slow-rank", "2", "--slow-us", "10000"]),
                  ["nccl_sum", "nccl_stragglers"])
    act = [k for k, v in SECTIONS.items() if v == "nccl_straggler_activity"][0]
    check(act in got and "rank 2 of communicator" in got[act],
          "the named rank's activity in both: %r" % sorted(got))


def test_nvtx():
    need("nvtx_ranges")
    got = compare(harness.record(FLAGS, [wl("nvtx_ranges")]), ["nvtx_sum"])
    body = got["** NVTX Range Summary (nvtx_sum):"]
    check("PushPop" in body and "StartEnd" in body, "both styles (%r)" % body)
    compare(harness.record(FLAGS, [wl("nvtx_v2")]), ["nvtx_sum"])


def test_syscalls_sched():
    got = compare(harness.record(FLAGS + ["--syscall-threshold", "1us"],
                                 [wl("sys_mix"), "--sleeps", "2", "--getpids", "10"]),
                  ["osrt_sum"])
    check(">= 1000 ns" in got["** OS Runtime Summary (osrt_sum): syscalls of traced threads"],
          "the threshold read from the trace")
    got = compare(harness.record(FLAGS + ["--syscall-threshold", "off"],
                                 [wl("bench_syscall"), "getpid", "1000"]))
    check("not traced" in got["** OS Runtime Summary (osrt_sum): syscalls of traced threads"],
          "syscalls off, said from the trace")
    got = compare(harness.record(FLAGS + ["--syscall-threshold", "0"],
                                 [wl("bench_syscall"), "getpid", "200"]), ["osrt_sum"])
    check(">= 0 ns" in got["** OS Runtime Summary (osrt_sum): syscalls of traced threads"],
          "a threshold of 0 read from the trace")
    compare(harness.record(FLAGS + ["--sched", "all"], [wl("sched_mix")]))


def test_gpu_activity():
    """Kernels and memory operations measured by the fake CUPTI: the GPU
    tables (kernel times are FAKECUDA_KERNEL_NS each)."""
    lib = os.path.join(harness.OUT, "inject", "libcgbpf-inject.so")
    cupti = os.path.join(harness.OUT, "fake", "libcupti.so.13")
    if not os.path.exists(lib) or not os.path.exists(cupti):
        raise Skip("injection library or fake CUPTI not built (no CUPTI headers)")
    tmp = tmpdir()
    pause = os.path.join(tmp, "pause")
    env = env_with(CGBPF_PAUSE_FILE=pause, CGBPF_CUPTI_PATH=cupti, FAKECUDA_KERNEL_NS="20000")
    trace = os.path.join(tmp, "out.perfetto-trace")
    argv = [CGBPF, "record", "-v", "--sample-hz", "0", "-o", trace, "--", wl("train"),
            "--iters", "30"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    err = []

    def read_err():
        for line in p.stderr:
            err.append(line)
            if "GPU activity: status" in line:
                touch(pause)

    th = threading.Thread(target=read_err, daemon=True)
    th.start()
    out = p.stdout.read()
    p.wait(120)
    th.join(10)
    res = harness.Result(p.returncode, out, "".join(l for l in err if "libbpf" not in l), trace,
                         tmp)
    got = compare(res, ["cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
                        "cuda_gpu_util"])
    check("relu_kernel" in got["** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):"],
          "kernels by name")
    util = got["** GPU utilization and idle time:"]
    check(re.search(r"^   pid \d+ GPU 0 \(Fake GPU \(cgbpf tests\)\): busy ", util, re.M) and
          "kernel launch delay" in util, "the GPU timeline, its launch delays (%r)" % util)


def record_two():
    a = harness.record(FLAGS, [wl("mt"), "--threads", "2", "--iters", "50"])
    b = harness.record(FLAGS + ["--syscall-threshold", "1us"],
                       [wl("sys_mix"), "--sleeps", "1", "--getpids", "5"])
    eq((a.rc, b.rc), (0, 0), "records")
    return a, b


def test_several_and_merged():
    """Two traces give one set of tables; their merge (two machines) the
    same tables."""
    a, b = record_two()
    both = stats([a.trace_path, b.trace_path]).stdout
    d = tmpdir()
    merged = os.path.join(d, "merged.perfetto-trace")
    p = subprocess.run([CGBPF, "merge", a.trace_path, b.trace_path, "-o", merged],
                       capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, "merge (stderr %r)" % p.stderr[-300:])
    clean_trace(ptrace.load(merged))
    eq(stats([merged]).stdout, both, "stats of the merge = stats of both")
    sa, sb = (sections(stats([x.trace_path]).stdout) for x in (a, b))
    s2 = sections(both)
    api = "** CUDA API Summary (cuda_api_sum):"
    ra, rb, r2 = ({r[8]: int(r[2]) for r in time_rows(x[api])} for x in (sa, sb, s2))
    for name, n in r2.items():
        eq(n, ra.get(name, 0) + rb.get(name, 0), "%s calls over both traces" % name)
    peak = "** Peak memory allocated per process (since attach):"
    eq(len(s2[peak].splitlines()), len(sa[peak].splitlines()) + len(sb[peak].splitlines()) - 1,
       "both traces' processes")


def gpu_device_lines(text):
    """The per-GPU lines of a "GPU utilization and idle time" section:
    {"pid N GPU D": (busy line, idle line, overlap line or None)}."""
    body = sections(text).get("** GPU utilization and idle time:", "").splitlines()
    out = {}
    for i, line in enumerate(body):
        m = re.match(r"^   (pid \d+ GPU \d+)", line)
        if m:
            nxt = body[i + 2] if i + 2 < len(body) and body[i + 2].startswith("      ") else None
            out[m.group(1)] = (line, body[i + 1], nxt)
    return out


def test_gpu_several_and_merged():
    """Two GPU captures as two inputs and merged (the second machine's
    flow ids moved by merge): each GPU's utilization lines are its own
    capture's, as record printed them (they depend on its operations and
    launch calls only)."""
    import test_gpu
    test_gpu.need_gpu_part()
    cupti = os.path.join(harness.OUT, "fake", "libcupti.so.13")
    if not os.path.exists(cupti):
        raise Skip("fake CUPTI not built (no CUPTI headers)")
    ins, want = [], {}
    for _ in range(2):
        rc, _, err, path, tmp = test_gpu.record_until_status(
            {"CGBPF_CUPTI_PATH": cupti, "FAKECUDA_KERNEL_NS": "20000"}, iters=20)
        eq(rc, 0, "record (stderr %r)" % "".join(err)[-500:])
        ins.append(path)
        with open(os.path.join(tmp, "stdout")) as f:
            lines = gpu_device_lines(f.read())
        eq(len(lines), 1, "record printed one GPU line (%r)" % lines)
        want.update(lines)
    d = tmpdir()
    merged = os.path.join(d, "job.perfetto-trace")
    p = subprocess.run([CGBPF, "merge"] + ins + ["-o", merged], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "merge exit (stderr %r)" % p.stderr[-300:])
    eq(gpu_device_lines(stats(ins).stdout), want, "two inputs: each GPU's lines as recorded")
    eq(gpu_device_lines(stats([merged]).stdout), want, "merged: each GPU's lines as recorded")


def test_report_filter_and_files():
    res = harness.record(FLAGS + ["--syscall-threshold", "1us"], [wl("crt_app"), "--iters", "2"])
    eq(res.rc, 0, "record")
    tr = res.trace_path
    out = stats(["--report", "osrt_sum,cuda_api_sum", tr]).stdout
    heads = [l for l in out.splitlines() if l.startswith("** ")]
    eq(heads, ["** OS Runtime Summary (osrt_sum): syscalls of traced threads",
               "** CUDA API Summary (cuda_api_sum):"], "the reports asked for, in that order")
    listing = stats(["--report", "list"]).stdout.split()
    check(all(n in listing for n in ALL), "--report list names every report")
    d = tmpdir()
    for fmt, ext in (("table", "txt"), ("csv", "csv"), ("json", "json")):
        prefix = os.path.join(d, fmt)
        p = stats(["--format", fmt, "-o", prefix, tr])
        eq(p.stdout, "", "-o: nothing on stdout")
        files = sorted(f for f in os.listdir(d) if f.startswith(fmt + "_"))
        want = ["%s_%s.%s" % (fmt, n, ext) for n in ALL]
        check(set(files) <= set(want) and "%s_cuda_api_sum.%s" % (fmt, ext) in files,
              "one file per report: %r" % files)
        for f in files:
            name = f[len(fmt) + 1:-len(ext) - 1]
            with open(os.path.join(d, f)) as fh:
                body = fh.read()
            one = stats(["--format", fmt, "--report", name, tr]).stdout
            if fmt == "json":
                eq(json.loads(body), json.loads(one)[name], "%s = the report on stdout" % f)
            elif fmt == "csv":
                hdr, rows = csv_blocks(one)[name]
                eq(list(csv.reader(io.StringIO(body))), [hdr] + rows,
                   "%s = the report on stdout" % f)
            else:
                eq(body, one, "%s = the report on stdout" % f)


def test_bad_usage():
    res = harness.record(FLAGS, [wl("mt"), "--threads", "1", "--iters", "5"])
    eq(res.rc, 0, "record")
    p = stats(["--report", "cuda_api_sum,bogus", res.trace_path], rc=2)
    check("unknown report 'bogus'" in p.stderr and "osrt_sum" in p.stderr,
          "unknown report named, the list given (%r)" % p.stderr)
    p = stats(["--format", "xml", res.trace_path], rc=2)
    check("--format" in p.stderr and "xml" in p.stderr, "bad format said (%r)" % p.stderr)
    p = stats(["--report", "", res.trace_path], rc=2)
    stats([], rc=2)
    stats(["--output"], rc=2)
    stats(["--bogus", res.trace_path], rc=2)
    eq(stats(["--help"]).stdout.startswith("Usage: cgbpf stats"), True, "--help")


def test_not_a_trace():
    d = tmpdir()
    text = os.path.join(d, "notes.txt")
    with open(text, "w") as f:
        f.write("not a trace at all\n")
    p = stats([text], rc=1)
    check("not a Perfetto trace" in p.stderr and text in p.stderr,
          "a text file: said so with its name (%r)" % p.stderr)
    p = stats([os.path.join(d, "missing.perfetto-trace")], rc=1)
    check("No such file" in p.stderr, "a missing file (%r)" % p.stderr)
    res = harness.record(FLAGS, [wl("train"), "--iters", "3"])
    eq(res.rc, 0, "record")
    with open(res.trace_path, "rb") as f:
        data = f.read()
    cut = os.path.join(d, "cut.perfetto-trace")
    # Cut inside a packet past the middle, never on a packet's boundary
    # (half the length landed on one now and then: a shorter valid trace).
    pos, n = 0, 0
    while pos < len(data):
        eq(data[pos], 0x0a, "Trace.packet's tag at %d" % pos)
        ln, shift, q = 0, 0, pos + 1
        while True:
            b = data[q]
            ln |= (b & 0x7f) << shift
            shift += 7
            q += 1
            if not b & 0x80:
                break
        if pos >= len(data) // 2 and ln >= 2:
            n = q + ln // 2
            break
        pos = q + ln
    check(0 < n < len(data), "a packet past the middle to cut (%d of %d)" % (n, len(data)))
    with open(cut, "wb") as f:
        f.write(data[:n])
    p = stats([cut], rc=1)
    check("cut short" in p.stderr or "truncated" in p.stderr or "malformed" in p.stderr,
          "a trace cut in the middle: an error (%r)" % p.stderr)


def test_python_sites():
    """python_sites: API time, calls and launches per Python call site of
    the outermost API calls (their py arg), as record's Python section
    counts them, from the launches workload (a module function, nested
    functions, a method, a generator, a lambda, a coroutine, library
    frames, threads) under Debian's CPython."""
    from test_python import WRAP, debian_python
    d = tmpdir()
    # pywl.gate() waits 0.5 s first: cgbpf finds the interpreter before the
    # first call (docs/python.md, Limits).
    res = harness.record(FLAGS, [debian_python(), "-c", WRAP, "--iters", "4"], tmp=d,
                         env=env_with(CGBPF_START_DELAY_MS=500,
                                      CGBPF_MANIFEST=os.path.join(d, "manifest.json")))
    got = compare(res, ["python_sites"])
    sec = got["** Python call sites (python_sites):"]
    check(re.search(r"^ +[\d.]+ +\d+ +\d+ +4  \S+/launches.py:\d+ plain$", sec, re.M),
          "plain()'s 4 launches in the table: %r" % sec)


def test_cpu_samples():
    """cpu_samples: the samples in the trace by their innermost function,
    as record's CPU samples section counts them (its Self table and its
    sample count; the rate and CPUs from the trace's attributes), from a
    workload that spins 300 ms twice on the CPU. CSV and JSON hold every
    row."""
    res = harness.record(["--sample-hz", "997"], [wl("cap_profiler"), "1"],
                         env=env_with(CAP_SPIN_MS=300))
    eq(res.rc, 0, "record exit (stderr %r)" % res.stderr[-800:])
    rec = sections(res.stdout)["** CPU samples:"].splitlines()
    got = sections(stats([res.trace_path]).stdout)["** CPU samples (cpu_samples):"].splitlines()
    head = re.match(r"^   (\d+) samples at (\d+) Hz on (\d+) CPU\(s\)$", rec[0])
    check(head, "record's sample line: %r" % rec[0])
    eq(got[0], "   %s samples at %s Hz on %s CPU(s) in the trace" % head.groups(),
       "stats' sample line")
    table = rec[rec.index(""):]
    eq(got[got.index(""):], table, "the Self table")
    check(re.match(r"^ +\d+ +[\d.]+%  spin$", table[2]), "spin() on top: %r" % table[2])
    hdr, rows = csv_blocks(stats(["--report", "cpu_samples", "--format", "csv",
                                  res.trace_path]).stdout)["cpu_samples"]
    eq(hdr, ["Self", "(%)", "Function"], "CSV header")
    top = [(int(r[0]), r[2]) for r in rows]
    eq(sum(n for n, _ in top), int(head.group(1)), "CSV: every sample, by function")
    eq(["%8d %5.1f%%  %s" % (n, 100.0 * n / int(head.group(1)), f) for n, f in top[:10]],
       [x[3:] for x in table[2:]], "CSV: the text's rows first")
    js = json.loads(stats(["--report", "cpu_samples", "--format", "json",
                           res.trace_path]).stdout)["cpu_samples"]
    eq([(r["Self"], r["Function"]) for r in js], top, "JSON rows = CSV rows")


def test_process_rows_bounded():
    """25 processes: the per-process tables of the text summary show 20
    rows and a count of the others, record and stats alike; CSV and JSON
    keep every process."""
    loop = "for i in $(seq 25); do %s --iters 1 > /dev/null; done" % wl("train")
    res = harness.record(FLAGS, ["/bin/sh", "-c", loop])
    got = compare(res)
    peak = got["** Peak memory allocated per process (since attach):"]
    rows = [ln for ln in peak.splitlines() if re.match(r"^ +\d+ ", ln)]
    eq(len(rows), 20, "20 rows of peaks:\n%s" % peak)
    m = re.search(r"\.\.\. and (\d+) more process\(es\) with smaller peaks", peak)
    check(m, "the others counted:\n%s" % peak)
    csv_rows = csv_blocks(stats(["--format", "csv", "--report", "cuda_mem_peak",
                                 res.trace_path]).stdout)["cuda_mem_peak"][1]
    eq(len(csv_rows), 20 + int(m.group(1)), "CSV lists every process")
