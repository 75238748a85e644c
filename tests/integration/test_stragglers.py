# SPDX-License-Identifier: MIT
"""Which rank the others wait for (issue 28): nccl_stragglers, from
record's summary and from `cgbpf stats` on the trace, on the fake NCCL
whose collectives block until every rank entered (a late rank holds the
others, as on a GPU). One rank made slow (nccl_ranks --slow-rank: it
sleeps before each of its all-reduces) must be named, in one trace and
over the files of --split-per-process; with no slow rank nobody is named;
traces of two hosts are refused until merged; traces without NCCL give a
clear line."""
import csv
import glob
import io
import os
import re
import socket
import subprocess
import time

from harness import CGBPF, FAKE, Skip, check, clean_trace, eq, need_nccl_ranks, record, tmpdir, wait_for, wl

HEAD = "** NCCL stragglers: which rank the others wait for (nccl_stragglers):"
HEAD_ACT = "** NCCL straggler: what it did before its late entries (nccl_straggler_activity):"
NAMED = re.compile(r"Rank (\d+) of communicator (\S+) \((\d+) ranks; pid (\d+)")
ITERS = 60
SLOW_US = 10000   # well above the scheduling delays of a loaded 2-CPU machine


def need():
    need_nccl_ranks()


def stats(args, rc=0):
    p = subprocess.run([CGBPF, "stats"] + list(args), capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, rc, "cgbpf stats %s exit (stderr %r)" % (" ".join(args), p.stderr[-500:]))
    return p.stdout


def section(text, head=HEAD):
    """The body of one section of a summary (up to the next heading)."""
    out, on = [], False
    for line in text.splitlines():
        if line.startswith("** "):
            on = line == head
            continue
        if on:
            out.append(line.rstrip())
    return "\n".join(out).strip("\n")


def csv_rows(files):
    text = stats(["--report", "nccl_stragglers", "--format", "csv"] + files)
    return list(csv.DictReader(io.StringIO(text.split("\n\n", 1)[-1].strip())))


def run(procs, slow, split=False, async_=False):
    """async_: the fake NCCL's calls return at once and the ranks wait in
    cuStreamSynchronize after each all-reduce, as on a GPU."""
    from harness import env_with
    need()
    tmp = tmpdir()
    cmd = [wl("nccl_ranks"), "--ranks", "4", "--iters", str(ITERS)]
    if procs:
        cmd.append("--procs")
    if slow:
        cmd += ["--slow-rank", "2", "--slow-us", str(SLOW_US)]
    env = env_with(CGBPF_MANIFEST=os.path.join(tmp, "manifest.json"))
    if async_:
        cmd.append("--sync")
        env["FAKENCCL_ASYNC"] = "1"
    args = ["--sample-hz", "0"]
    if split:
        args += ["--split-per-process", "-o", os.path.join(tmp, "r.%p.perfetto-trace")]
    r = record(args, cmd=cmd, tmp=tmp, child_gate=procs, env=env)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    r.files = sorted(glob.glob(os.path.join(tmp, "r.*.perfetto-trace"))) if split else [
        r.trace_path]
    return r


def world_rows(rows):
    """The rows of the world: the 4-rank communicator with the most
    collectives (in the threads mode, ncclCommInitAll's communicator has 4
    ranks too, and one all-reduce)."""
    by = {}
    for x in rows:
        by.setdefault(x["comm"], []).append(x)
    out = sorted((v for v in by.values() if len(v) == 4),
                 key=lambda v: -max(int(x["collectives"]) for x in v))
    check(out and (len(out) == 1 or max(int(x["collectives"]) for x in out[1]) <= 1),
          "one communicator of four ranks with its collectives: %r" % rows)
    eq(sorted(int(x["rank"]) for x in out[0]), [0, 1, 2, 3], "the world's ranks")
    return {int(x["rank"]): x for x in out[0]}


def recount(trace):
    """{(comm, rank): (matched, last)} recomputed from the decoded trace:
    the slices on the communicators' tracks, matched by their seq."""
    # By name: a merge moves each machine's uuids out of their namespaces.
    names = {u: t.name for u, t in trace.tracks.items() if (t.name or "").startswith("NCCL comm ")}
    inst = {}
    for s in trace.slices:
        m = re.match(r"NCCL comm ([0-9a-f]{4}) rank (\d+)/(\d+)$", names.get(s.track_uuid, ""))
        if not m or "seq" not in s.args:
            continue
        comm, rank, n = m.group(1), int(m.group(2)), int(m.group(3))
        if s.name in ("ncclSend", "ncclRecv"):
            a, b = (rank, s.args["peer"]) if s.name == "ncclSend" else (s.args["peer"], rank)
            key, need = (comm, n, s.args["seq"], a, b), 2
        else:
            key, need = (comm, n, s.args["seq"]), n
        inst.setdefault(key, [need, []])[1].append((s.ts, rank))
    out = {}
    for key, (need, entries) in inst.items():
        if len(entries) != need:
            continue
        last = max(entries)[1]
        for _, rank in entries:
            m, l = out.get((key[0], rank), (0, 0))
            out[(key[0], rank)] = (m + 1, l + (rank == last))
    return out


def check_named(text, rows, rank_pids=None):
    m = NAMED.search(text)
    check(m, "a rank named:\n%s" % text)
    eq(int(m.group(1)), 2, "the slow rank named")
    eq(int(m.group(3)), 4, "its communicator's size")
    w = world_rows(rows)
    eq(w[2]["named"], "1", "rank 2's row is the named one")
    eq([x["named"] for k, x in w.items() if k != 2], ["0"] * 3, "nobody else named")
    eq({x["matched_by"] for x in w.values()}, {"seq"}, "matched by id and sequence number")
    # It slept 10 ms before each of its ITERS all-reduces: last in those
    # (most of them: a loaded machine may delay another rank as long).
    check(int(w[2]["last"]) >= 0.8 * ITERS, "rank 2 last in its all-reduces: %r" % w[2])
    check(float(w[2]["last_pct"]) >= 67, "last in most: %r" % w[2])
    check(int(w[2]["late_med_ns"]) >= SLOW_US * 500, "late by ~10 ms at the median: %r" % w[2])
    check(int(w[2]["others_waited_ns"]) >= 3 * SLOW_US * 500 * 0.8 * ITERS,
          "three ranks waited ~10 ms each time: %r" % w[2])
    for k, x in w.items():
        check(int(x["collectives"]) >= ITERS + 6, "rank %d: every collective matched: %r" % (k, x))
    if rank_pids:
        eq(int(m.group(4)), rank_pids[2], "the slow rank's process")
        eq(int(w[2]["pid"]), rank_pids[2], "its row's pid")


def rank_pids(files):
    """{rank: pid} from the world communicator's rows."""
    return {k: int(x["pid"]) for k, x in world_rows(csv_rows(files)).items()}


def test_slow_rank_named_threads():
    r = run(False, True)
    body = section(r.stdout)
    check(body, "record printed nccl_stragglers:\n%s" % r.stdout[-3000:])
    eq(section(stats([r.trace_path])), body, "stats prints what record printed")
    check_named(body, csv_rows(r.files))


def test_slow_rank_named_processes():
    """One process per rank (fork), each gated until its probes are in
    place so that its communicator's creation is traced."""
    r = run(True, True)
    body = section(r.stdout)
    eq(section(stats([r.trace_path])), body, "stats prints what record printed")
    pids = rank_pids(r.files)
    eq(len(set(pids.values())), 4, "four processes: %r" % pids)
    check_named(body, csv_rows(r.files), pids)
    check(" on " in body, "the host named")
    clean_trace(r.trace)
    got = {(x["comm"], int(x["rank"])): (int(x["collectives"]), int(x["last"]))
           for x in csv_rows(r.files)}
    want = recount(r.trace)
    eq({k: v for k, v in got.items() if k in want}, want, "matched and last, recomputed")
    # What it did before its late entries: it slept (usleep), 10 ms each.
    act = stats(["--report", "nccl_straggler_activity", r.trace_path])
    m = re.search(r"rank 2 of communicator \S+ \(pid (\d+) on \S+\): (\d+) stretch\(es\)", act)
    check(m and int(m.group(1)) == pids[2] and int(m.group(2)) >= 0.8 * ITERS - 1,
          "its stretches before the late entries:\n%s" % act)
    top = re.search(r"^ +([\d.]+) ms +([\d.]+)%  (\S+)$", act, re.M)
    check(top and top.group(3) in ("clock_nanosleep", "nanosleep") and float(top.group(2)) >= 80,
          "asleep before its late entries:\n%s" % act)
    check(float(top.group(1)) >= (0.8 * ITERS - 1) * SLOW_US / 2000, "~10 ms each time:\n%s" % act)
    # The named line points below, and the activity follows the report
    # once: in record's summary, in stats' default output, and when asked
    # for beside it.
    check("What it did before its late entries: below (nccl_straggler_activity)." in body,
          "the named line points below:\n%s" % body)
    eq(r.stdout.count(HEAD_ACT), 1, "the activity in record's summary")
    eq(section(r.stdout, HEAD_ACT), section(act, HEAD_ACT), "record's activity is stats'")
    eq(stats([r.trace_path]).count(HEAD_ACT), 1, "in stats' default output")
    both = stats(["--report", "nccl_stragglers,nccl_straggler_activity", r.trace_path])
    eq(both.count(HEAD_ACT), 1, "once when asked for beside the report")


def test_slow_rank_named_calls_return_at_once():
    """As on a GPU: every NCCL call returns at once and the ranks wait in
    cuStreamSynchronize; entries still tell the slow rank, and the
    others' waiting is in their synchronizations, not in the calls."""
    r = run(True, True, async_=True)
    body = section(r.stdout)
    pids = rank_pids(r.files)
    check_named(body, csv_rows(r.files), pids)
    t = r.trace
    ar = [s for s in t.slices if s.name == "ncclAllReduce" and s.pid in pids.values()]
    sync = [s for s in t.slices if s.name == "cuStreamSynchronize" and s.pid in pids.values()]
    check(len(sync) >= 4 * ITERS, "each rank synchronized after each all-reduce (%d)" % len(sync))
    ar_ms = sorted(s.dur for s in ar)[len(ar) // 2] / 1e6
    sync_ms = sum(s.dur for s in sync if s.pid != pids[2]) / 1e6
    check(ar_ms < SLOW_US / 1000 / 2, "the calls return at once (median %.3f ms)" % ar_ms)
    check(sync_ms >= 3 * 0.5 * ITERS * SLOW_US / 1000,
          "the others waited in cuStreamSynchronize (%.1f ms in all)" % sync_ms)


def test_slow_rank_named_over_split_files():
    for async_ in (False, True):
        r = run(True, True, split=True, async_=async_)
        check(len(r.files) >= 4, "a file per process: %r" % r.files)
        text = stats(["--report", "nccl_stragglers"] + r.files)
        check_named(text, csv_rows(r.files), rank_pids(r.files))


def test_no_slow_rank_nobody_named():
    """Blocking calls, and calls that return at once (as on a GPU)."""
    for async_ in (False, True):
        r = run(True, False, async_=async_)
        body = section(r.stdout)
        check("No rank holds the others back" in body, "nobody named (async %s):\n%s" %
              (async_, body))
        check(not NAMED.search(body), "no rank line")
        eq([x["named"] for x in csv_rows(r.files)], ["0"] * len(csv_rows(r.files)),
           "named column")


def test_hosts_differ_refused_until_merged():
    """Files of two hosts (a capture under unshare -u with another host
    name): refused with a hint to merge; the merge is read."""
    need()
    tmp = tmpdir()
    a = os.path.join(tmp, "a.perfetto-trace")
    b = os.path.join(tmp, "b.perfetto-trace")
    cmd = [wl("nccl_ranks"), "--ranks", "2", "--iters", "3"]
    r = record(["--sample-hz", "0", "-o", a], cmd=cmd, tmp=tmp)
    eq(r.rc, 0, "first capture")
    p = subprocess.run(["unshare", "-u", "sh", "-c", 'hostname cgbpf-other-host && exec "$@"',
                        "sh", CGBPF, "record", "--sample-hz", "0", "-o", b, "--"] + cmd,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LD_LIBRARY_PATH=FAKE))
    if p.returncode and "unshare" in p.stderr:
        raise Skip("unshare -u not allowed here: %s" % p.stderr.strip()[-200:])
    eq(p.returncode, 0, "second capture (stderr %r)" % p.stderr[-500:])
    text = stats(["--report", "nccl_stragglers", a, b])
    check("different hosts" in text and "cgbpf merge" in text, "refused with the hint:\n%s" % text)
    m = os.path.join(tmp, "m.perfetto-trace")
    subprocess.run([CGBPF, "merge", "-o", m, a, b], check=True, capture_output=True, timeout=120)
    rows = csv_rows([m])
    hosts = sorted({x["host"] for x in rows})
    eq(len(hosts), 2, "rows of both hosts in the merge: %r" % rows)
    check("cgbpf-other-host" in hosts, "the other host's name: %r" % hosts)


def test_traces_without_nccl_or_one_rank():
    need()
    r = record(["--sample-hz", "0"], cmd=[wl("train"), "--iters", "2"])
    eq(r.rc, 0, "record train")
    text = stats(["--report", "nccl_stragglers", r.trace_path])
    check("no NCCL operation" in text, "a clear line without NCCL:\n%s" % text)
    check(HEAD not in stats([r.trace_path]), "not among the default tables without NCCL")
    r = record(["--sample-hz", "0"], cmd=[wl("nccl_ranks"), "--ranks", "1", "--iters", "3"])
    eq(r.rc, 0, "record one rank")
    check(HEAD not in r.stdout, "record: no section for one rank")
    text = stats(["--report", "nccl_stragglers", r.trace_path])
    check("no communicator of two ranks or more: nothing to compare" in text and
          re.search(r"not compared: \d+ operation\(s\) on communicators of one rank", text) and
          "Rank 0 of" not in text and " 100.0 " not in text,
          "one rank: said so, no row, nobody named:\n%s" % text)
    clean_trace(r.trace)


def test_gaps_in_sequence_numbers_said():
    """A trace in which one rank's collectives #10-#12 are not NCCL
    operations any more (as when records were lost): the holes are said,
    with the rank and its range, their instances are not compared, and
    the slow rank is still named; exit 0."""
    import ptrace
    r = run(False, True)
    t = r.trace
    comm = sorted((u for u, k in t.tracks.items()
                   if re.match(r"NCCL comm \w+ rank 1/4$", k.name or "")),
                  key=lambda u: -len(t.slices_on(track_uuid=u)))
    check(comm, "rank 1's track on the world communicator")
    on = sorted(t.slices_on(track_uuid=comm[0]), key=lambda x: x.ts)
    drop = {i for i, x in enumerate(on) if x.name == "ncclAllReduce" and
            x.args.get("seq") in (10, 11, 12)}
    eq(len(drop), 3, "rank 1's all-reduces #10-#12")
    pb = ptrace.pb2()
    tr = pb.Trace()
    with open(r.trace_path, "rb") as f:
        tr.ParseFromString(f.read())
    # Those slices (their begins and ends: one slice at a time on the
    # track) move to a track of their own that nothing reads.
    away = 0x7e57ab1e
    n = {ev_type: 0 for ev_type in (1, 2)}
    for pk in tr.packet:
        ev = pk.track_event
        if pk.HasField("track_event") and ev.track_uuid == comm[0] and ev.type in n:
            if n[ev.type] in drop:
                ev.track_uuid = away
            n[ev.type] += 1
    eq((n[1], n[2]), (len(on), len(on)), "the decoder's slices are the packets' begins and ends")
    desc = tr.packet.add()
    desc.trusted_packet_sequence_id = 0x7e57
    desc.track_descriptor.uuid = away
    desc.track_descriptor.name = "moved away"
    holed = os.path.join(tmpdir(), "holed.perfetto-trace")
    with open(holed, "wb") as f:
        f.write(tr.SerializeToString())
    text = stats(["--report", "nccl_stragglers", holed])
    m = re.search(r"sequence numbers missing: 3 collective\(s\) of 1 rank\(s\) .*e\.g\. rank 1 of "
                  r"communicator \w+: 3 of #1-#(\d+); their instances are not compared", text)
    check(m and int(m.group(1)) >= ITERS, "the holes said:\n%s" % text)
    m = NAMED.search(text)
    check(m and m.group(1) == "2", "the slow rank still named:\n%s" % text)
    whole = stats(["--report", "nccl_stragglers", r.trace_path])
    check("sequence numbers missing" not in whole, "no holes said of the whole trace")

    def incomplete(text):
        m = re.search(r"(\d+) operation\(s\) of (\d+) instance\(s\) some rank never entered", text)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    a, b = incomplete(whole), incomplete(text)
    eq((b[0] - a[0], b[1] - a[1]), (9, 3),
       "the other ranks' entries into #10-#12 not matched:\n%s\n%s" % (whole, text))


HANG = re.compile(r"NCCL hang\? (\w+) #(\d+) \((\d+) bytes\) on communicator (\w+) \((\d+) ranks\): "
                  r"rank\(s\) (.*) entered it, the first ([\d.]+) s ago; waiting for:")


def test_hang_said_while_it_lasts():
    """Rank 2 stops for 4 s before its 4th all-reduce while the others
    wait inside theirs: with --nccl-hang-after 1s the hang is said on
    stderr while it lasts, with the waiting ranks, the missing one and
    its threads (asleep in clock_nanosleep), then that it ended."""
    need()
    cmd = [wl("nccl_ranks"), "--procs", "--ranks", "4", "--iters", "6", "--hang-rank", "2",
           "--hang-ms", "4000"]
    r = record(["--sample-hz", "0", "--nccl-hang-after", "1s"], cmd=cmd, child_gate=True)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    said = HANG.findall(r.stderr)
    eq(len(said), 1, "one hang said:\n%s" % r.stderr[-3000:])
    name, seq, nbytes, comm, n, waiting, ago = said[0]
    eq((name, seq, nbytes, n), ("ncclAllReduce", "4", "4096", "4"), "the operation")
    pids = rank_pids([r.trace_path])
    want = ", ".join("%d (pid %d)" % (k, pids[k]) for k in (0, 1, 3))
    eq(waiting, want, "the ranks waiting, with their processes")
    check(float(ago) >= 1.0, "said after the limit")
    check(re.search(r"rank 2 \(pid %d\), which has not entered it; its threads now:" % pids[2],
                    r.stderr), "the missing rank named:\n%s" % r.stderr[-3000:])
    check(re.search(r"pid %d thread %d \S+ \(S, in (clock_)?nanosleep\)" % (pids[2], pids[2]),
                    r.stderr), "what it was doing: asleep:\n%s" % r.stderr[-3000:])
    check("ncclAllReduce #4 on communicator %s: every rank entered it at last" % comm in r.stderr,
          "its end said")
    # The operation it said is the one the trace shows late.
    check(r.stderr.index("NCCL hang?") < r.stderr.index("every rank entered it at last"),
          "said before it ended")


MP_NCCL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads", "py",
                       "mp_nccl.py")


def test_hang_names_the_python_call_site():
    """Python ranks (multiprocessing, ctypes): rank 2 stalls 2.5 s in
    load_batch() before its 4th all-reduce. The hang line gives the stuck
    rank's last traced call from Python and its call site; then stats says
    what the slow rank did before its late entries, by Python call site."""
    need()
    if not os.path.exists("/usr/bin/python3.11"):
        raise Skip("no Debian /usr/bin/python3.11")
    r = record(["--sample-hz", "0", "--nccl-hang-after", "1s"],
               cmd=["/usr/bin/python3.11", MP_NCCL, "4", "6", "2", "2500", "3"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    check("ranks ok" in r.stdout, "the ranks ran: %r" % r.stdout[-400:])
    said = HANG.findall(r.stderr)
    eq(len(said), 1, "one hang said:\n%s" % r.stderr[-3000:])
    eq(said[0][0], "ncclAllReduce", "the operation")
    m = re.search(r"rank 2 \(pid (\d+)\), which has not entered it", r.stderr)
    check(m, "the missing rank named:\n%s" % r.stderr[-3000:])
    check(re.search(r"pid %s: its last traced call from Python: cuStreamSynchronize at "
                    r"\S*mp_nccl\.py:\d+ load_batch, [\d.]+ s ago" % m.group(1), r.stderr),
          "its last Python call site:\n%s" % r.stderr[-3000:])


def test_slow_python_rank_activity_by_call_site():
    """A Python rank slow before every all-reduce: named, and what it did
    before its late entries is its load_batch() call site."""
    need()
    if not os.path.exists("/usr/bin/python3.11"):
        raise Skip("no Debian /usr/bin/python3.11")
    r = record(["--sample-hz", "0"], cmd=["/usr/bin/python3.11", MP_NCCL, "4", "12", "2", "60"])
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-800:])
    body = section(r.stdout)
    check(re.search(r"Rank 2 of communicator \w+ \(4 ranks; pid \d+ on \S+\) is the one the "
                    r"others wait for", body), "rank 2 named:\n%s" % body)
    out = stats(["--report", "nccl_straggler_activity", r.trace_path])
    check(re.search(r"\S*mp_nccl\.py:\d+ load_batch", out),
          "its activity by Python call site:\n%s" % out)


def test_hang_off_and_no_hang_quiet():
    need()
    cmd = [wl("nccl_ranks"), "--procs", "--ranks", "4", "--iters", "6", "--hang-rank", "2",
           "--hang-ms", "2500"]
    r = record(["--sample-hz", "0", "--nccl-hang-after", "off"], cmd=cmd, child_gate=True)
    eq(r.rc, 0, "cgbpf exit")
    check("NCCL hang?" not in r.stderr, "off: nothing said")
    r = record(["--sample-hz", "0", "--nccl-hang-after", "1s"],
               cmd=[wl("nccl_ranks"), "--procs", "--ranks", "4", "--iters", "6"], child_gate=True)
    eq(r.rc, 0, "cgbpf exit")
    check("NCCL hang?" not in r.stderr, "no hang, nothing said:\n%s" % r.stderr[-2000:])
    p = subprocess.run([CGBPF, "record", "--nccl-hang-after", "soon", "--", "true"],
                       capture_output=True, text=True, timeout=30)
    eq(p.returncode, 2, "a bad value is a usage error")
    check("--nccl-hang-after" in p.stderr, "named in the message")


def children_of(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def test_slow_rank_named_across_two_hosts_merged():
    """One job, two captures: ranks 0 and 1 recorded on this host, ranks
    2 and 3 by a cgbpf under another host name (unshare -u); each rank
    waits at its gate until both captures are attached. The merge names
    rank 2, on the other host."""
    two_hosts_merged(False)


def test_slow_rank_named_across_two_hosts_merged_calls_return_at_once():
    """The same with calls that return at once, the ranks waiting in
    cuStreamSynchronize (as on a GPU)."""
    two_hosts_merged(True)


def two_hosts_merged(async_):
    need()
    import tempfile
    import threading
    d = tmpdir()
    gate = tempfile.mkdtemp(prefix="gate-", dir=d)
    env = dict(os.environ, LD_LIBRARY_PATH=FAKE, CGBPF_CHILD_GATE=gate)
    extra = []
    if async_:
        env["FAKENCCL_ASYNC"] = "1"
        extra = ["--sync"]
    job = subprocess.Popen([wl("nccl_ranks"), "--procs", "--ranks", "4", "--iters", str(ITERS),
                            "--slow-rank", "2", "--slow-us", str(SLOW_US)] + extra, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    caps = []
    open(os.path.join(gate, str(job.pid)), "w").close()   # the parent is not traced
    try:
        kids = []
        for _ in range(300):
            kids = children_of(job.pid)
            if len(kids) == 4:
                break
            time.sleep(0.02)
        eq(len(kids), 4, "the four rank processes, waiting at their gate")
        kids.sort()
        a, b = os.path.join(d, "a.perfetto-trace"), os.path.join(d, "b.perfetto-trace")
        argv = [CGBPF, "record", "--sample-hz", "0", "--sched", "off", "-o"]
        cmds = [argv + [a, "-p", "%d,%d" % tuple(kids[:2])],
                ["unshare", "-u", "sh", "-c", 'hostname cgbpf-other-host && exec "$@"', "sh"] +
                argv + [b, "-p", "%d,%d" % tuple(kids[2:])]]
        for cmd in cmds:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            p.err = []
            threading.Thread(target=lambda p=p: p.err.extend(p.stderr), daemon=True).start()
            caps.append(p)
        wait_for(lambda: all(any("Ctrl-C stops" in ln for ln in p.err) or p.poll() is not None
                             for p in caps), 30, "both captures attached")
        if caps[1].poll() is not None and "unshare" in "".join(caps[1].err):
            raise Skip("unshare -u not allowed here: %s" % "".join(caps[1].err)[-200:])
        for k in kids:
            open(os.path.join(gate, str(k)), "w").close()
        eq(job.wait(120), 0, "the job (stderr %r)" % job.stderr.read()[-500:])
        for p in caps:
            eq(p.wait(60), 0, "a capture's exit (%r)" % "".join(p.err)[-500:])
    finally:
        for p in caps:
            if p.poll() is None:
                p.kill()
        if job.poll() is None:
            job.kill()
    text = stats(["--report", "nccl_stragglers", a, b])
    check("different hosts" in text, "unmerged: refused")
    m = os.path.join(d, "m.perfetto-trace")
    subprocess.run([CGBPF, "merge", "-o", m, a, b], check=True, capture_output=True, timeout=120)
    from harness import ptrace
    t = ptrace.load(m)
    clean_trace(t)
    want = recount(t)
    rows = csv_rows([m])
    got = {(x["comm"], int(x["rank"])): (int(x["collectives"]), int(x["last"])) for x in rows}
    eq({k: v for k, v in got.items() if k in want}, want, "matched and last, from the decoded merge")
    w = world_rows(rows)
    eq({k: int(x["pid"]) for k, x in w.items()}, dict(enumerate(kids)),
       "each rank its process: %r" % rows)
    eq(w[2]["host"], "cgbpf-other-host", "rank 2 recorded on the other host")
    eq(w[0]["host"], socket.gethostname(), "rank 0 on this one")
    check_named(stats(["--report", "nccl_stragglers", m]), rows, {2: kids[2]})
    check("on cgbpf-other-host" in stats(["--report", "nccl_stragglers", m]),
          "the named line gives its host")


def start_rank_procs(tmp, env_for, iters=ITERS * 5, delay_ms=1500):
    """Four nccl_ranks processes, one rank each (as torchrun starts its
    workers, each exec'ed with its environment: env_for(rank)), whose
    communicator exists before any cgbpf attaches (--start-delay-ms)."""
    from harness import start
    idf = os.path.join(tmp, "uid")
    procs = []
    for r in range(4):
        procs.append(start([wl("nccl_ranks"), "--ranks", "4", "--rank", str(r), "--id-file",
                            idf, "--iters", str(iters), "--slow-rank", "2", "--slow-us",
                            str(SLOW_US), "--start-delay-ms", str(delay_ms)], env=env_for(r)))
    return procs


def record_p_ranks(env_for):
    """record -p on the four, after their communicator was created."""
    from harness import Bg, env_with, kill_quiet
    need()
    tmp = tmpdir()
    procs = start_rank_procs(tmp, env_for)
    try:
        wait_for(lambda: os.path.exists(os.path.join(tmp, "uid")), 30, "rank 0's unique id")
        time.sleep(0.3)     # every rank in ncclCommInitRank, before its first all-reduce
        bg = Bg(["-p", ",".join(str(p.pid) for p in procs), "--sample-hz", "0"], tmp=tmp,
                env=env_with())
        bg.wait_msg("Ctrl-C stops", timeout=60)
        for p in procs:
            out, err = p.communicate(timeout=120)
            eq(p.returncode, 0, "rank exit (%r)" % err[-300:])
        r = bg.finish()
    finally:
        for p in procs:
            kill_quiet(p)
    eq(r.rc, 0, "cgbpf exit (stderr %r)" % r.stderr[-600:])
    inits = [s for s in r.trace.slices if (s.name or "").startswith("ncclCommInitRank")]
    eq(inits, [], "the communicator was created before the capture")
    return r, {r_: p.pid for r_, p in enumerate(procs)}


def test_older_communicator_matched_through_rank_env():
    """record -p on a job whose communicator predates the capture: each
    process's RANK and WORLD_SIZE give its rank, the collectives are
    aligned by operation and time, and the slow rank is named, by record
    and by stats on the trace."""
    from harness import env_with

    def env_for(r):
        return env_with(RANK=str(r), WORLD_SIZE="4", MASTER_ADDR="127.0.0.1",
                        MASTER_PORT="29511")
    r, pids = record_p_ranks(env_for)
    body = section(r.stdout)
    check("matched by RANK/WORLD_SIZE and alignment by operation and time" in body,
          "the report says how these were matched: %r" % body[-800:])
    m = NAMED.search(body)
    check(m and m.group(1) == "2" and m.group(3) == "4" and m.group(2).startswith("env:") and
          int(m.group(4)) == pids[2], "rank 2 of 4, pid %d, named: %r" % (pids[2], body[-600:]))
    rows = csv_rows([r.trace_path])
    named = [x for x in rows if x["named"] == "1"]
    eq([(x["rank"], int(x["pid"])) for x in named], [("2", pids[2])],
       "stats on the trace names the same rank")
    w = [x for x in rows if x["comm"] == m.group(2)]
    eq(sorted((int(x["rank"]), int(x["pid"])) for x in w), sorted((k, v) for k, v in pids.items()),
       "each process is the rank its RANK says")
    eq({x["matched_by"] for x in w}, {"env+time"}, "the CSV says how they were matched")


def test_older_communicator_without_rank_env_said():
    """The same job without RANK/WORLD_SIZE: nothing matched, and why."""
    from harness import env_with
    r, _ = record_p_ranks(lambda rank: env_with())
    body = section(r.stdout)
    check("no RANK and WORLD_SIZE in the process's environment" in body and
          NAMED.search(body) is None, "not aligned, and why: %r" % body[-600:])
