#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Self-test of tpcheck.py on small traces built here with the stock
protobuf classes: it must find a pid that trace processor splits in two
(the ProcessTree entry and the track descriptors of a forked command
timed before its fork, as cgbpf wrote them until this was fixed), and
nothing on the same trace written right. Needs Perfetto's trace processor
(../shared/perfetto or $CGBPF_SHARED); prints one line "skipped: ..."
without it. Prints "ok"/"not ok" lines and "N passed, M failed, K skipped".
"""
import os
import shutil
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptrace  # noqa: E402
import tpcheck  # noqa: E402

pb = ptrace.pb2()
TP = pb.TracePacket
TE = pb.TrackEvent
TMP = tempfile.mkdtemp(prefix="test-tpcheck-")
PID = 50


def write(name, packets):
    t = pb.Trace()
    t.packet.extend(packets)
    path = os.path.join(TMP, name + ".perfetto-trace")
    with open(path, "wb") as f:
        f.write(t.SerializeToString())
    return path


def snapshot():
    p = TP(trusted_packet_sequence_id=9)
    for cid, ts in ((6, 1000), (3, 900), (1, 1_700_000_000_000_000_000)):
        p.clock_snapshot.clocks.add(clock_id=cid, timestamp=ts)
    return p


def tree(ts, cmdline):
    p = TP(timestamp=ts, trusted_packet_sequence_id=3)
    p.process_tree.processes.add(pid=PID, ppid=1, cmdline=[cmdline])
    p.process_tree.threads.add(tid=PID, tgid=PID)
    return p


def descriptors(ts):
    out = []
    for d in (pb.TrackDescriptor(uuid=700), pb.TrackDescriptor(uuid=800, parent_uuid=700)):
        p = TP(trusted_packet_sequence_id=1)
        if ts is not None:
            p.timestamp = ts
        if d.uuid == 700:
            d.process.pid = PID
            d.process.process_name = "prog"
        else:
            d.thread.pid, d.thread.tid, d.thread.thread_name = PID, PID, "prog"
        p.track_descriptor.CopyFrom(d)
        out.append(p)
    return out


def sched():
    """cpu 0: the parent (tid 1) forks PID at 2000; PID runs from 2100 to
    2300; the first switch (to tid 1, at 1900) has no prev."""
    p = TP(trusted_packet_sequence_id=5)
    b = p.ftrace_events
    b.cpu = 0
    e = b.event.add(timestamp=2000, pid=1)
    e.task_newtask.pid, e.task_newtask.comm, e.task_newtask.clone_flags = PID, "cgbpf", 0x11
    cs = b.compact_sched
    cs.intern_table.extend(["parent", "prog", ""])
    last = 0
    for ts, state, nxt, comm in ((1900, 0, 1, 0), (2100, 1, PID, 1), (2300, 1, 0, 2)):
        cs.switch_timestamp.append(ts - last)
        last = ts
        cs.switch_prev_state.append(state)
        cs.switch_next_pid.append(nxt)
        cs.switch_next_prio.append(120)
        cs.switch_next_comm_index.append(comm)
    return p


def slice_events():
    first = TP(timestamp=2150, trusted_packet_sequence_id=7,
               sequence_flags=TP.SEQ_INCREMENTAL_STATE_CLEARED)
    first.track_event.CopyFrom(TE(type=TE.TYPE_SLICE_BEGIN, track_uuid=800, name="cuInit"))
    end = TP(timestamp=2180, trusted_packet_sequence_id=7)
    end.track_event.CopyFrom(TE(type=TE.TYPE_SLICE_END, track_uuid=800))
    return [first, end]


def split_trace():
    # The tree entry at 1500 and the descriptors without timestamp, read
    # after it, come before the fork at 2000.
    return write("split", [snapshot(), tree(1500, "cgbpf")] + descriptors(None) + [sched()] +
                 slice_events())


def one_process_trace():
    return write("one", [snapshot(), sched(), tree(2001, "/bin/prog")] + descriptors(2140) +
                 slice_events())


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def finds_the_split():
    problems, facts = tpcheck.compare(split_trace())
    assert any("on 2 threads" in p for p in problems), problems
    assert len(facts["processes"][(0, PID)]) == 2, facts["processes"]
    # The decoder sees the cause.
    sd = ptrace.sched(ptrace.load(split_trace()))
    assert any("before the task_newtask" in e for e in sd.errors), sd.errors


@test
def nothing_on_one_process():
    problems, facts = tpcheck.compare(one_process_trace())
    assert problems == [], problems
    (p,) = facts["processes"][(0, PID)]
    assert p["name"] == "/bin/prog", p
    (t,) = facts["threads"][(0, PID)]
    assert (t["name"], t["slices"], t["upid"]) == ("prog", "1", p["upid"]), t
    assert int(t["states"]) == 3, t   # R at the fork, Running, S


@test
def finds_a_count_that_differs():
    """A decoded trace that says something else than the file (here: one
    slice dropped from the decoder's view) is a difference."""
    path = one_process_trace()
    t = ptrace.load(path)
    t.slices = []
    problems, _ = tpcheck.compare(path, t)
    assert any("slices on" in p and "cuInit" in p for p in problems), problems


@test
def query_keeps_blank_lines_inside_values():
    path = one_process_trace()
    a, b = tpcheck.query(path, "select 'x\n\ny' as v, null as n", "select 1 as k where 0")
    assert a == [{"v": "x\n\ny", "n": None}], a
    assert b == [], b


def main():
    if tpcheck.shell_path() is None:
        print(tpcheck.skip_reason())
        print("0 passed, 0 failed, 1 skipped")
        return 0
    passed = failed = 0
    for fn in TESTS:
        try:
            fn()
        except Exception:
            failed += 1
            print("not ok - %s" % fn.__name__)
            for line in traceback.format_exc().rstrip().splitlines():
                print("#   " + line)
        else:
            passed += 1
            print("ok - %s" % fn.__name__)
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
