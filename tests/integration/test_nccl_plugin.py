# SPDX-License-Identifier: MIT
"""NCCL's profiler plugin in libcgbpf-inject.so (issue 28), against the
fake NCCL, which loads NCCL_PROFILER_PLUGIN and calls it as NCCL 2.28
does (v5: tasks on the calling thread, kernel channels with GPU
timestamps and proxy operations on its proxy thread, after the task
stopped) and writes what it reported (FAKENCCL_PROFILER_TRUTH). record --
sets the variable; the trace's per-channel GPU spans must be the fake's;
a plugin version the library does not export is declined and the job runs
on; another plugin the user named is kept and said; with nobody attached
the mask stays 0 and NCCL calls nothing."""
import csv
import glob
import io
import os
import subprocess

import re
import time

from harness import (CGBPF, OUT, Bg, Skip, check, clean_trace, env_with, eq, kill_quiet,
                     need_nccl_ranks, record, start, tmpdir, tp_clean, wl)
from test_stragglers import section

LIB = os.path.join(OUT, "inject", "libcgbpf-inject.so")
GROUP_TAIL = ": GPU (NCCL profiler)"
# The fake's proxy thread looks at a finished operation this long after
# its GPU end; the library's clock offset is the smallest delay it saw,
# so every mapped time is late by about that much.
LAG_US = 20


def need():
    need_nccl_ranks()
    if not os.path.exists(LIB):
        raise Skip("libcgbpf-inject.so not built (no cupti.h in the CUDA toolkit)")


def truth(tmp):
    """The fake's reports: ops and channel spans, from every process."""
    ops, chans = [], []
    for path in glob.glob(os.path.join(tmp, "truth.*")):
        for line in open(path):
            f = line.split()
            if f[0] == "op":
                ops.append({"hash": int(f[1], 16), "func": f[2], "seq": int(f[3]),
                            "rank": int(f[4]), "bytes": int(f[5])})
            elif f[0] == "ch":
                chans.append({"hash": int(f[1], 16), "func": f[2], "seq": int(f[3]),
                              "rank": int(f[4]), "channel": int(f[5]), "start": int(f[6]),
                              "end": int(f[7])})
    return ops, chans


def plugin_spans(t):
    """{(hash4, rank, channel, func, seq): slice} from the trace's plugin
    groups, and the groups by name."""
    groups = {x.uuid: x for x in t.tracks.values() if (x.name or "").endswith(GROUP_TAIL)}
    spans = {}
    for tr in t.tracks.values():
        g = groups.get(tr.parent_uuid)
        if not g or not (tr.name or "").startswith("channel "):
            continue
        # "NCCL 908d rank 2/4: GPU (NCCL profiler)"
        w = g.name.split()
        hash4, rank = w[1], int(w[3].split("/")[0])
        ch = int(tr.name.split()[1])
        for s in t.slices_on(track_uuid=tr.uuid):
            spans.setdefault((hash4, rank, ch, s.name, s.args.get("seq")), []).append(s)
    return spans, groups


def run_job(extra_env=None, iters=20):
    need()
    tmp = tmpdir()
    env = env_with(FAKENCCL_PROFILER_TRUTH=os.path.join(tmp, "truth.%p"),
                   FAKENCCL_NS_PER_BYTE="50", FAKENCCL_CHANNELS="2",
                   CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"), **(extra_env or {}))
    r = record(["--sample-hz", "0"], cmd=[wl("nccl_ranks"), "--ranks", "4", "--iters",
                                          str(iters)], env=env, tmp=tmp)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    return r, tmp


GPU_HEAD = ("** NCCL stragglers, GPU side: whose kernel the others wait for "
            "(nccl_stragglers_gpu; NCCL's profiler plugin):")
NAMED = re.compile(r"Rank (\d+) of communicator (\S+) \((\d+) ranks; pid (\d+)")


def test_gpu_spans_are_the_fakes():
    r, tmp = run_job()
    ops, chans = truth(tmp)
    check(len(chans) > 100, "the fake reported channel spans (%d)" % len(chans))
    t = r.trace
    clean_trace(t)
    spans, groups = plugin_spans(t)
    # Threads of one process: the world and ncclCommInitAll's communicator
    # (4 ranks each) and the two split children (2 ranks each), a group
    # per rank of each.
    by = {}
    for g in groups.values():
        w = g.name.split()
        by.setdefault((w[1], w[3].split("/")[1].rstrip(":")), set()).add(w[3].split("/")[0])
    eq(sorted((n, len(r)) for (h, n), r in by.items()), [("2", 2), ("2", 2), ("4", 4), ("4", 4)],
       "a group per rank of each communicator %s" % sorted(g.name for g in groups.values()))
    # One id per communicator: the host side's is NCCL's commHash (hashed
    # in BPF from the unique id, and for split children in user space),
    # so its tracks and the plugin's groups agree; ncclCommInitAll's
    # unique id is NCCL's own, unseen: that one has cgbpf's.
    host = set()
    for tr in t.tracks.values():
        m = re.match(r"NCCL comm ([0-9a-f]{4}) rank (\d+)/(\d+)$", tr.name or "")
        if m:
            host.add(m.groups())
    plugin = set()
    for g in groups.values():
        m = re.match(r"NCCL ([0-9a-f]{4}) rank (\d+)/(\d+):", g.name)
        plugin.add(m.groups())
    inits = [s for s in t.slices if (s.name or "").startswith("ncclCommInitRank")]
    world = {s.args.get("comm_id") for s in inits}
    eq(len(world), 1, "one world's unique id %r" % world)
    eq(sorted(x for x in host if x[0] in world), sorted((world.copy().pop(), str(i), "4")
                                                       for i in range(4)),
       "the world's host tracks %r" % sorted(host))
    eq(sorted(host - plugin), [x for x in sorted(host) if x[0] not in world and x[2] == "4"],
       "host-side communicators with the plugin's id (commHash), but ncclCommInitAll's "
       "(host %r, plugin %r)" % (sorted(host), sorted(plugin)))
    check(sum(1 for x in host & plugin if x[2] == "2") >= 2,
          "split children known by rank have the plugin's id: %r" % sorted(host & plugin))
    colls = [c for c in chans if c["seq"] >= 0]
    late, bad_dur, missing, clamped = [], [], [], 0
    for c in colls:
        key = ("%04x" % (c["hash"] >> 48), c["rank"], c["channel"], c["func"], c["seq"])
        got = spans.get(key)
        if not got:
            missing.append(key)
            continue
        s = got[0]
        if "clamped_ns" in s.args:
            # Past the channel's last lane (the clock estimate moved under
            # load): drawn from the previous span's end, and marked.
            clamped += 1
            eq(s.ts + s.dur >= c["start"], True, "a clamped span keeps its end")
            continue
        late.append(s.ts - c["start"])
        if abs(s.dur - (c["end"] - c["start"])) > 20000:
            bad_dur.append((key, s.dur, c["end"] - c["start"]))
    eq(missing, [], "every collective channel span the fake reported is in the trace")
    eq(bad_dur, [], "each span's duration is the GPU's (within 20 us), unless marked clamped")
    check(clamped <= len(colls) // 10, "few spans clamped (%d of %d)" % (clamped, len(colls)))
    check(late and min(late) >= -50000 and max(late) <= 5000000,
          "spans are placed on the trace's clock, late by the proxy's smallest delay "
          "(fake: %d us): %.1f .. %.1f us" % (LAG_US, min(late) / 1e3, max(late) / 1e3))
    srt = sorted(late)
    med = srt[len(srt) // 2]
    check(LAG_US * 1000 * 0.5 <= med <= 2000000,
          "median offset error %.1f us, about the fake's %d us lag" % (med / 1e3, LAG_US))
    # Sends and receives: no NCCL number; the library counts them.
    p2p_truth = len([c for c in chans if c["seq"] < 0])
    p2p_trace = sum(len(v) for k, v in spans.items() if k[3] in ("Send", "Recv"))
    eq(p2p_trace, p2p_truth, "every send/receive channel span is in the trace")
    # Slices carry what the task said: every one (a task is sent before
    # its spans, though it is queued under another lock).
    ar = [s for k, v in spans.items() if k[3] == "AllReduce" for s in v]
    eq(sorted({(s.args.get("algo"), s.args.get("proto"), s.args.get("channels")) for s in ar},
              key=repr),
       [("RING", "SIMPLE", 2)], "algorithm, protocol and channels from the task, on every span")
    sizes = {x["bytes"] for x in ops if x["func"] == "AllReduce"}
    eq([s.args.get("bytes") for s in ar if s.args.get("bytes") not in sizes], [],
       "bytes from the task")
    # The summary's GPU-side table: every rank's all-reduces.
    rows = [ln.split() for ln in r.stdout.splitlines()
            if len(ln.split()) > 5 and ln.split()[3] == "AllReduce"]
    n_truth = len({(o["hash"], o["rank"], o["seq"]) for o in ops if o["func"] == "AllReduce"})
    eq(sum(int(x[4]) for x in rows), n_truth, "the GPU-side table counts every all-reduce %s"
       % rows)
    tp_clean(r.trace_path, t)


def test_declined_version_runs_on():
    r, tmp = run_job({"FAKENCCL_PROFILER_VERSIONS": "v6"}, iters=3)
    ops, chans = truth(tmp)
    eq((ops, chans), ([], []), "nothing reported to a plugin that was not loaded")
    _, groups = plugin_spans(r.trace)
    eq(list(groups), [], "no NCCL profiler tracks")
    check(any((s.name or "") == "ncclAllReduce" for s in r.trace.slices),
          "the host NCCL calls are traced as before")
    check("no ncclProfiler_vN symbol it knows" in r.stderr,
          "the fake says why it went on without (stderr %r)" % r.stderr[-400:])


def test_another_plugin_kept_and_said():
    other = "/nonexistent/libnccl-profiler-other.so"
    r, tmp = run_job({"NCCL_PROFILER_PLUGIN": other}, iters=3)
    check("NCCL_PROFILER_PLUGIN is %s, another profiler plugin" % other in r.stderr,
          "cgbpf says it keeps the user's plugin (stderr %r)" % r.stderr[-600:])
    _, groups = plugin_spans(r.trace)
    eq(list(groups), [], "no NCCL profiler tracks")


def test_unwatched_mask_stays_zero():
    need()
    tmp = tmpdir()
    env = env_with(NCCL_PROFILER_PLUGIN=LIB, CUDA_INJECTION64_PATH=LIB,
                   FAKENCCL_PROFILER_TRUTH=os.path.join(tmp, "truth.%p"),
                   FAKENCCL_DEBUG="1")
    p = subprocess.run([wl("nccl_ranks"), "--ranks", "2", "--iters", "5"], env=env,
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, "the job runs with the plugin and nobody attached (%r)" % p.stderr[-400:])
    ops, chans = truth(tmp)
    eq((len(ops), len(chans)), (0, 0), "mask 0: NCCL called no event function")
    check("ncclProfiler_v5" in p.stderr or "profiler" in p.stderr.lower(),
          "the fake loaded the plugin (FAKENCCL_DEBUG: %r)" % p.stderr[-400:])


def test_gpu_side_straggler_named():
    """One slow rank: its kernel starts last; the GPU-side report names it
    with NCCL's commHash and the world's size."""
    need()
    tmp = tmpdir()
    env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"))
    r = record(["--sample-hz", "0"], cmd=[wl("nccl_ranks"), "--ranks", "4", "--iters", "40",
                                          "--slow-rank", "2", "--slow-us", "10000"],
               env=env, tmp=tmp)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    body = section(r.stdout, GPU_HEAD)
    check(body, "the GPU-side straggler report is printed")
    m = NAMED.search(body)
    check(m and m.group(1) == "2" and m.group(3) == "4",
          "rank 2 of the 4-rank communicator is named on the GPU side: %r" % body[-600:])
    _, groups = plugin_spans(r.trace)
    check(any(g.name.startswith("NCCL %s rank 2/4" % m.group(2)) for g in groups.values()),
          "the named communicator is the plugin group's commHash")
    # cgbpf stats reads the same from the trace.
    p = subprocess.run([CGBPF, "stats", "--report", "nccl_stragglers_gpu", "--format", "csv",
                        r.trace_path], capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, "stats exit (%r)" % p.stderr[-300:])
    rows = list(csv.DictReader(io.StringIO(p.stdout.split("\n\n", 1)[-1].strip())))
    named = [x for x in rows if x.get("named") == "1"]
    eq([(x["comm"], x["rank"]) for x in named], [(m.group(2), "2")],
       "stats --report nccl_stragglers_gpu names the same rank")
    eq({x["matched_by"] for x in rows}, {"nccl_seq"}, "matched by NCCL's own numbers")


def record_p_on_a_running_job(job_args, args, settle_s=0):
    """record -p ARGS on nccl_ranks JOB_ARGS started with NCCL's profiler
    plugin (NCCL_PROFILER_PLUGIN, as docs/injection.md says), attached
    settle_s after its start (once its communicators exist), until the
    job exits; the record (checked: both exits 0, no communicator created
    during the capture)."""
    need()
    tmp = tmpdir()
    env = env_with(NCCL_PROFILER_PLUGIN=LIB, CUDA_INJECTION64_PATH=LIB)
    w = start([wl("nccl_ranks")] + job_args, env=env)
    try:
        time.sleep(settle_s)
        check(w.poll() is None, "the job still runs")
        bg = Bg(["-p", str(w.pid), "--sample-hz", "0"] + args, tmp=tmp)
        bg.wait_msg("Ctrl-C stops", timeout=60)
        out, err = w.communicate(timeout=120)
        eq(w.returncode, 0, "job exit (%r)" % err[-400:])
        r = bg.finish()
    finally:
        kill_quiet(w)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    inits = [s for s in r.trace.slices if (s.name or "").startswith("ncclCommInitRank")]
    eq(inits, [], "no communicator was created during the capture")
    return r


def test_communicators_older_than_record_p():
    """record -p on a job whose communicators exist already (NCCL_PROFILER_PLUGIN
    set at its start, as docs/injection.md says): the host-side report
    cannot match them (rank ?/?) and says so; the plugin's side knows
    their commHash, rank and size and names the slow rank."""
    r = record_p_on_a_running_job(["--ranks", "4", "--iters", "600", "--slow-rank", "2",
                                   "--slow-us", "10000"], [], settle_s=1.0)
    host = section(r.stdout, "** NCCL stragglers: which rank the others wait for "
                             "(nccl_stragglers):")
    check("rank or size is unknown (created before the capture" in host,
          "the host-side report says what it could not match: %r" % host[-500:])
    gpu = section(r.stdout, GPU_HEAD)
    m = NAMED.search(gpu)
    check(m and m.group(1) == "2" and m.group(3) == "4",
          "the plugin's side names rank 2 of 4: %r" % gpu[-600:])


PLUGIN_HANG = re.compile(r"NCCL hang\? (\w+) #(\d+) \((\d+) bytes\) on communicator (\w+) \((\d+) "
                         r"ranks; NCCL's profiler plugin: its commHash, and its numbers of this "
                         r"function's operations from 1\): "
                         r"rank\(s\) (.*) entered it, the first ([\d.]+) s ago; waiting for:")


def test_hang_of_communicators_older_than_record_p():
    """record -p on a job whose communicators exist already, one process
    per rank: the host side knows no rank of them and cannot watch for
    hangs; NCCL's profiler plugin's task starts can. Rank 2 stops for 5 s
    before its 4th all-reduce: the hang is said with NCCL's numbering
    (per function, shown from 1), the waiting ranks, the missing one and
    its threads, then that it ended."""
    r = record_p_on_a_running_job(["--procs", "--ranks", "4", "--iters", "6", "--hang-rank", "2",
                                   "--hang-ms", "5000", "--start-delay-ms", "3000"],
                                  ["--nccl-hang-after", "1s"])
    check(all("NCCL's profiler plugin" in x for x in re.findall(r"NCCL hang\?.*", r.stderr)),
          "no host-side hang line (it knows no rank):\n%s" % r.stderr[-3000:])
    said = PLUGIN_HANG.findall(r.stderr)
    eq(len(said), 1, "one hang said:\n%s" % r.stderr[-3000:])
    name, seq, nbytes, comm, n, waiting, ago = said[0]
    eq((name, seq, nbytes, n), ("ncclAllReduce", "4", "4096", "4"), "the operation")
    ranks = [int(x) for x in re.findall(r"(\d+) \(pid \d+\)", waiting)]
    eq(ranks, [0, 1, 3], "the ranks waiting")
    check(float(ago) >= 1.0, "said after the limit")
    m = re.search(r"rank 2 \(pid (\d+)\), which has not entered it; its threads now:", r.stderr)
    check(m, "the missing rank named:\n%s" % r.stderr[-3000:])
    check(re.search(r"pid %s thread %s \S+ \(S, in (clock_)?nanosleep\)" % (m.group(1), m.group(1)),
                    r.stderr), "what it was doing: asleep:\n%s" % r.stderr[-3000:])
    check("ncclAllReduce #4 on communicator %s: every rank entered it at last" % comm in r.stderr,
          "its end said:\n%s" % r.stderr[-3000:])



def test_v4_as_nccl_227_calls_it():
    """NCCL 2.27 looks up ncclProfiler_v4 (other init order, a one-byte
    type): the same spans come out."""
    r, tmp = run_job({"FAKENCCL_PROFILER_VERSIONS": "v4,v3,v1", "FAKENCCL_DEBUG": "1"},
                     iters=5)
    check("ncclProfiler_v4" in r.stderr, "the fake took v4 (%r)" % r.stderr[-300:])
    ops, chans = truth(tmp)
    spans, groups = plugin_spans(r.trace)
    check(any(g.name.endswith("/4" + GROUP_TAIL) for g in groups.values()),
          "groups with the communicator's size (init's arguments in v4's order)")
    colls = [c for c in chans if c["seq"] >= 0]
    check(colls, "the fake reported channel spans")
    bad = []
    for c in colls:
        key = ("%04x" % (c["hash"] >> 48), c["rank"], c["channel"], c["func"], c["seq"])
        got = spans.get(key)
        if not got or abs(got[0].dur - (c["end"] - c["start"])) > 20000:
            bad.append(key)
    eq(bad, [], "every v4 channel span in the trace with the GPU's duration")


UNLOAD = r'''
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
# struct npa_profiler_v5: name, init, start_event, stop_event, record_event_state, finalize
class P(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p)] + [(n, ctypes.c_void_p) for n in
                ("init", "start", "stop", "state", "finalize")]
p = P.in_dll(lib, "ncclProfiler_v5")
INIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64,
                        ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int,
                        ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
FIN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
ctx, mask = ctypes.c_void_p(), ctypes.c_int(0)
assert INIT(p.init)(ctypes.byref(ctx), 1, ctypes.byref(mask), b"x", 1, 2, 0, None) == 0
assert FIN(p.finalize)(ctx) == 0
handle = lib._handle
del lib, p
import _ctypes
_ctypes.dlclose(handle)      # as NCCL does after its last communicator
time.sleep(1.5)              # the library's watcher wakes up several times
print("alive")
'''


def test_nccl_unloading_the_plugin_is_safe():
    """NCCL dlcloses its plugin after the last communicator; the library's
    watcher thread (started by init) must not lose its code: the library
    is never unloaded (-z nodelete)."""
    need()
    p = subprocess.run(["/usr/bin/python3", "-c", UNLOAD, LIB], capture_output=True, text=True,
                       timeout=60)
    eq((p.returncode, p.stdout.strip()), (0, "alive"),
       "the process lives on after the plugin's dlclose (stderr %r)" % p.stderr[-300:])
