# SPDX-License-Identifier: MIT
"""Perfetto's own trace processor as a second reader of cgbpf's traces.

trace_processor_shell (v58.2, the engine behind ui.perfetto.dev) is not part
of the project: it is looked for in $CGBPF_SHARED/perfetto, else in
<repo>/../shared/perfetto (CI has it). Without it, tests print one line
"skipped: ..." (see skip_reason()).

compare(path) loads a trace in trace processor and in the project's decoder
(ptrace.py) and returns what differs, as sentences:
  * stats of severity error or data_loss above zero (those a test expects,
    e.g. the mismatched switches of --sched targets, are passed in allow);
  * slices per track and name and depth (thread tracks by tid, others by
    track name), string arguments (kernel names, NCCL ops, NVTX messages),
    counter values per counter track, CPU samples per thread and leaf
    function, backtraces on slices per leaf function, flows (the pairs of
    slice names and start times they link, ptrace's Trace.flows());
  * scheduler: sched slices and thread_state rows per thread, re-derived
    from the decoded ftrace bundles the way trace processor builds them
    (ThreadStateTracker);
  * identity: every thread with API slices is one thread in one process:
    its slices and its thread states on the same thread, one process row
    for its pid, the thread's name the one cgbpf gave it, and the process
    named after the program (its comm, or its command line's first word).
In a trace merged from several machines everything is keyed by machine.
"""
import csv
import io
import os
import subprocess
from collections import Counter, defaultdict

import ptrace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSION = "v58.2"


def shell_path():
    """trace_processor_shell's path, or None."""
    base = os.environ.get("CGBPF_SHARED") or os.path.join(os.path.dirname(REPO), "shared")
    p = os.path.join(base, "perfetto", "trace_processor_shell")
    return p if os.access(p, os.X_OK) else None


def skip_reason():
    base = os.environ.get("CGBPF_SHARED") or os.path.join(os.path.dirname(REPO), "shared")
    return ("skipped: Perfetto's trace processor not found at %s/perfetto/"
            "trace_processor_shell (CI has it; clone shared/ beside the repository or set "
            "CGBPF_SHARED)" % base)


def query(path, *sqls, timeout=300):
    """Runs the statements on one load of the trace; one list of rows
    (dicts of strings, None for NULL) per statement."""
    exe = shell_path()
    if exe is None:
        raise RuntimeError(skip_reason())
    text = "".join(s.strip().rstrip(";") + ";\n" for s in sqls)
    p = subprocess.run([exe, "query", "-f", "-", path], input=text, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("trace processor failed on %s (exit %d): %s"
                           % (path, p.returncode, p.stderr[-2000:]))
    # Result sets are CSV separated by one blank line, which csv reads as
    # an empty row (a quoted value with a blank line in it stays one cell).
    # The shell quotes every value but does not double the quotes inside
    # one: queries whose strings come from other processes (names, command
    # lines) double them in SQL.
    sets, cur = [], []
    for row in csv.reader(io.StringIO(p.stdout)):
        if row:
            cur.append(row)
        else:
            sets.append(cur)
            cur = []
    if cur:
        sets.append(cur)
    out = []
    for rows in sets:
        head = rows[0]
        out.append([{k: (None if v == "[NULL]" else v) for k, v in zip(head, r)}
                    for r in rows[1:]])
    if len(out) != len(sqls):
        raise RuntimeError("trace processor printed %d result sets for %d statements"
                           % (len(out), len(sqls)))
    return out


def _int(v):
    return None if v is None else int(v)


def _diff(what, tp, dec, limit=8):
    """Sentences for keys whose counts differ."""
    out = []
    for k in sorted(set(tp) | set(dec), key=repr):
        if tp.get(k, 0) != dec.get(k, 0):
            out.append("%s %r: trace processor %r, decoder %r" % (what, k, tp.get(k, 0),
                                                               dec.get(k, 0)))
    if len(out) > limit:
        out = out[:limit] + ["%s: %d more differences" % (what, len(out) - limit)]
    return out


# ---------------------------------------------------------------- decoder side

def _track_key(trace, uuid):
    tr = trace.tracks.get(uuid)
    if tr is None:
        return (0, "track", None)
    if tr.kind == "thread":
        return (tr.machine, "thread", tr.tid)
    if tr.kind == "process":
        # trace processor names a process's own track only by its
        # descriptor's name (the UI shows the process name over it)
        return (tr.machine, "track", tr.name)
    return (tr.machine, "track", tr.display_name)


def _argval(v):
    return v if isinstance(v, str) else None


def thread_state_rows(sd):
    """{(machine, tid): thread_state rows} as trace processor's
    ThreadStateTracker makes them from the decoded scheduler events: a
    switch gives prev a row in its prev_state and next a Running row (the
    first compact switch of a CPU is dropped, having no prev); a waking
    gives a row only to a thread with no row yet or whose last row is a
    blocked state (not "R" or "Running"); a task_newtask gives the child an
    "R" row. The idle task (tid 0) gets none."""
    ev = []
    for cpu, sw in sd.switches.items():
        for s in sw:
            if s.prev_pid is None and not s.explicit:
                continue        # compact_sched_switch_skipped
            ev.append((s.ts, 0, s.machine, "switch", s))
    first_switch = {cpu: sw[0].ts for cpu, sw in sd.switches.items() if sw}
    for w in sd.wakings:
        if w.new:
            continue            # sched_wakeup_new: no parser, ftrace_event only
        if not w.explicit:
            key = w.cpu
            if key not in first_switch or w.ts < first_switch[key]:
                continue        # compact_sched_waking_skipped: no waker known yet
        ev.append((w.ts, 1, w.machine, "waking", w))
    for n, machine in zip(sd.newtasks, sd.newtask_machines):
        ev.append((n[0], 2, machine, "newtask", n))
    ev.sort(key=lambda e: (e[0], e[1]))
    last = {}
    rows = Counter()

    def add(machine, tid, state):
        if tid == 0:
            return
        rows[(machine, tid)] += 1
        last[(machine, tid)] = state

    for _, _, machine, kind, x in ev:
        if kind == "switch":
            add(machine, x.prev_pid, ptrace.SCHED_STATE_NAMES.get(x.prev_state, "?"))
            add(machine, x.next_pid, "Running")
        elif kind == "waking":
            st = last.get((machine, x.pid))
            if st is None or st not in ("R", "Running"):
                add(machine, x.pid, "R")
        else:
            add(machine, x[2], "R")
    return rows


def sched_rows(sd):
    """{(machine, tid): sched slices}: one per switch to tid, but the first
    compact switch of each CPU (trace processor has no prev for it)."""
    out = Counter()
    for sw in sd.switches.values():
        for s in sw:
            if s.prev_pid is None and not s.explicit:
                continue
            out[(s.machine, s.next_pid)] += 1
    return out


# ---------------------------------------------------------------- comparison

def compare(path, trace=None, allow=(), sched=True):
    """(problems, facts): problems is a list of sentences (empty when the
    two readers agree and trace processor reports no error); facts holds
    what trace processor read, for a test's own assertions:
    facts["processes"][(machine, pid)] = [{upid, name, cmdline, start_ts}],
    facts["threads"][(machine, tid)] = [{utid, name, upid}] (threads with
    slices or thread states), facts["stats"] = {name: value}."""
    if trace is None:
        trace = ptrace.load(path)
    problems = []
    (stats, slices, sargs, counters, flows, samples, btraces, sched_tp, tstate_tp,
     threads, procs) = query(
        path,
        "select name, idx, severity, value from stats where value > 0 and "
        "severity in ('error', 'data_loss')",
        # slices per (machine, thread or track name, name, depth)
        "select coalesce(m.raw_id, 0) as machine, t.tid as tid, tr.name as track, "
        "s.name as name, s.depth as depth, count(*) as n from slice s "
        "join track tr on tr.id = s.track_id left join thread_track tt on tt.id = s.track_id "
        "left join thread t on t.utid = tt.utid left join machine m on m.id = tr.machine_id "
        "group by 1, 2, 3, 4, 5",
        "select a.key as key, a.string_value as v, count(*) as n from slice s "
        "join args a on a.arg_set_id = s.arg_set_id where a.key glob 'debug.*' and "
        "a.value_type = 'string' group by 1, 2",
        "select coalesce(m.raw_id, 0) as machine, ct.name as name, count(*) as n, "
        "sum(c.value) as total from counter c join counter_track ct on ct.id = c.track_id "
        "left join machine m on m.id = ct.machine_id group by 1, 2",
        "select so.name as a, so.ts as ats, si.name as b, si.ts as bts, count(*) as n "
        "from flow f join slice so on so.id = f.slice_out join slice si on si.id = f.slice_in "
        "group by 1, 2, 3, 4",
        "select coalesce(m.raw_id, 0) as machine, t.tid as tid, f.name as leaf, count(*) as n "
        "from perf_sample ps join thread t on t.utid = ps.utid "
        "left join stack_profile_callsite c on c.id = ps.callsite_id "
        "left join stack_profile_frame f on f.id = c.frame_id "
        "left join machine m on m.id = t.machine_id group by 1, 2, 3",
        "select f.name as leaf, count(*) as n from __intrinsic_track_event_callstacks cs "
        "join stack_profile_callsite c on c.id = cs.end_callsite_id "
        "join stack_profile_frame f on f.id = c.frame_id group by 1",
        "select coalesce(m.raw_id, 0) as machine, t.tid as tid, count(*) as n from sched s "
        "join thread t using (utid) left join machine m on m.id = t.machine_id group by 1, 2",
        "select coalesce(m.raw_id, 0) as machine, t.tid as tid, count(*) as n "
        "from thread_state s join thread t using (utid) "
        "left join machine m on m.id = t.machine_id group by 1, 2",
        # threads that hold slices or thread states, with their process
        "select coalesce(m.raw_id, 0) as machine, t.utid as utid, t.tid as tid, "
        "replace(t.name, '\"', '\"\"') as name, t.upid as upid, "
        "(select count(*) from thread_track tt join slice s on s.track_id = tt.id "
        " where tt.utid = t.utid) as slices, "
        "(select count(*) from thread_state ts where ts.utid = t.utid) as states "
        "from thread t left join machine m on m.id = t.machine_id where t.utid != 0",
        "select coalesce(m.raw_id, 0) as machine, p.upid as upid, p.pid as pid, "
        "replace(p.name, '\"', '\"\"') as name, "
        "replace(p.cmdline, '\"', '\"\"') as cmdline, p.start_ts as start_ts from process p "
        "left join machine m on m.id = p.machine_id where p.upid != 0")

    allow = set(allow)
    st = {}
    for r in stats:
        name = r["name"] + ("[%s]" % r["idx"] if r["idx"] is not None else "")
        st[name] = int(r["value"])
        if r["name"] not in allow:
            problems.append("trace processor stat %s (%s) = %s" % (name, r["severity"],
                                                                   r["value"]))

    # Slices, instants included.
    tp = Counter()
    for r in slices:
        key = ((int(r["machine"]), "thread", int(r["tid"])) if r["tid"] is not None
               else (int(r["machine"]), "track", r["track"]))
        tp[key + (r["name"], int(r["depth"]))] += int(r["n"])
    dec = Counter()
    for s in list(trace.slices) + list(trace.syscall_slices) + list(trace.instants):
        dec[_track_key(trace, s.track_uuid) + (s.name, s.depth)] += 1
    problems += _diff("slices on", tp, dec)

    tp = Counter({(r["key"][len("debug."):], r["v"]): int(r["n"]) for r in sargs})
    dec = Counter()
    for s in list(trace.slices) + list(trace.syscall_slices) + list(trace.instants):
        for k, v in s.args.items():
            if _argval(v) is not None:
                dec[(k, v)] += 1
    problems += _diff("string argument", tp, dec)

    tp = {(int(r["machine"]), r["name"]): (int(r["n"]), float(r["total"])) for r in counters}
    dec = defaultdict(lambda: (0, 0.0))
    for u, vals in trace.counters.items():
        tr = trace.tracks[u]
        n, tot = dec[(tr.machine, tr.display_name)]
        dec[(tr.machine, tr.display_name)] = (n + len(vals), tot + sum(v for _, v in vals))
    problems += _diff("counter (values, sum)", tp, dict(dec))

    tp = Counter({(r["a"], int(r["ats"]), r["b"], int(r["bts"])): int(r["n"]) for r in flows})
    dec = Counter((a.name, a.ts, b.name, b.ts) for a, b in trace.flows())
    problems += _diff("flows (from slice, its start, to slice, its start)", tp, dec)

    tp = Counter({(int(r["machine"]), int(r["tid"]), r["leaf"]): int(r["n"]) for r in samples})
    dec = Counter((s.machine, s.tid, s.frames[-1].function if s.frames else None)
                  for s in trace.perf_samples)
    problems += _diff("CPU samples (machine, tid, leaf)", tp, dec)

    tp = Counter({r["leaf"]: int(r["n"]) for r in btraces})
    dec = Counter(s.callstack[-1] for s in list(trace.slices) + list(trace.syscall_slices)
                  if s.callstack)
    problems += _diff("slice backtraces by leaf", tp, dec)

    sd = ptrace.sched(trace)
    if sched and sd.bundles:
        tp = Counter({(int(r["machine"]), int(r["tid"])): int(r["n"]) for r in sched_tp})
        problems += _diff("sched slices of (machine, tid)", tp, sched_rows(sd))
        tp = Counter({(int(r["machine"]), int(r["tid"])): int(r["n"]) for r in tstate_tp})
        problems += _diff("thread_state rows of (machine, tid)", tp, thread_state_rows(sd))

    # Identity: one thread, one process, the names cgbpf gave.
    by_tid = defaultdict(list)
    for r in threads:
        if int(r["slices"]) or int(r["states"]):
            by_tid[(int(r["machine"]), int(r["tid"]))].append(r)
    by_pid = defaultdict(list)
    by_upid = {}
    for r in procs:
        by_pid[(int(r["machine"]), int(r["pid"]))].append(r)
        by_upid[r["upid"]] = r
    for tr in trace.tracks.values():
        if tr.kind != "thread" or tr.tid is None:
            continue
        if not any(s.track_uuid == tr.uuid for s in trace.slices):
            continue
        key = (tr.machine, tr.tid)
        rows = by_tid.get(key, [])
        holding = [r for r in rows if int(r["slices"])]
        if len(rows) != 1 or not holding:
            problems.append("tid %d (machine %d): its slices and thread states are on %d "
                            "threads in trace processor: %s" % (
                                tr.tid, tr.machine, len(rows),
                                ["utid %s %r in upid %s: %s slices, %s states" % (
                                    r["utid"], r["name"], r["upid"], r["slices"], r["states"])
                                 for r in rows]))
            continue
        r = holding[0]
        if r["name"] != tr.display_name:
            problems.append("tid %d: trace processor names the thread %r, cgbpf %r"
                            % (tr.tid, r["name"], tr.display_name))
        p = by_upid.get(r["upid"])
        if p is None or _int(p["pid"]) != tr.pid:
            problems.append("tid %d: in trace processor's process %r, not pid %d"
                            % (tr.tid, p, tr.pid))
            continue
        same = by_pid.get((tr.machine, tr.pid), [])
        if len(same) != 1:
            problems.append("pid %d (machine %d): %d processes in trace processor: %s" % (
                tr.pid, tr.machine, len(same),
                ["upid %s %r start %s" % (x["upid"], x["name"], x["start_ts"]) for x in same]))
        ptr = trace.processes.get(tr.pid)
        comm = ptr.process_name if ptr else None
        if comm and " [container " in comm:
            comm = comm.split(" [container ")[0]
        if comm and not _names_program(p["name"], comm):
            problems.append("pid %d: trace processor names the process %r, cgbpf %r"
                            % (tr.pid, p["name"], comm))
    facts = {"stats": st, "threads": by_tid, "processes": by_pid}
    return problems, facts


def _names_program(tp_name, comm):
    """trace processor's process name is the last of the program's comm
    (task_rename, kernel-truncated to 15 characters) and the first word of
    its command line (ProcessTree): either names it."""
    if not tp_name:
        return False
    if tp_name == comm:
        return True
    return os.path.basename(tp_name)[:15] == comm[:15]
