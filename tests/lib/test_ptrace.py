#!/usr/bin/python3
"""Self-test for ptrace.py.

Traces are built with the generated perfetto_subset_pb2 classes and encoded
with SerializeToString (not with ptrace's code), then decoded by ptrace.

    /usr/bin/python3 tests/lib/test_ptrace.py
Prints `ok` / `not ok` lines and ends with `N passed, M failed`.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptrace  # noqa: E402

pb = ptrace.pb2()
TP = pb.TracePacket
TE = pb.TrackEvent
CLEARED = TP.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = TP.SEQ_NEEDS_INCREMENTAL_STATE
B, E, I, C = (TE.TYPE_SLICE_BEGIN, TE.TYPE_SLICE_END, TE.TYPE_INSTANT,
              TE.TYPE_COUNTER)

TMP = tempfile.mkdtemp(prefix="test-ptrace-")
_n = [0]


# -- builders (all encoding done by the stock protobuf classes) -------------

def pkt(seq=1, ts=None, flags=0, clock=None, **kw):
    p = TP()
    p.trusted_packet_sequence_id = seq
    if ts is not None:
        p.timestamp = ts
    if clock is not None:
        p.timestamp_clock_id = clock
    if flags:
        p.sequence_flags = flags
    for k, v in kw.items():
        getattr(p, k).CopyFrom(v)
    return p


def process(uuid, pid, name=None, cmdline=(), seq=1):
    d = pb.TrackDescriptor(uuid=uuid)
    d.process.pid = pid
    if name:
        d.process.process_name = name
    d.process.cmdline.extend(cmdline)
    return pkt(seq=seq, track_descriptor=d)


def thread(uuid, pid, tid, name=None, parent=None, seq=1):
    d = pb.TrackDescriptor(uuid=uuid)
    if parent is not None:
        d.parent_uuid = parent
    d.thread.pid = pid
    d.thread.tid = tid
    if name:
        d.thread.thread_name = name
    return pkt(seq=seq, track_descriptor=d)


def track(uuid, name=None, parent=None, counter=None, seq=1):
    d = pb.TrackDescriptor(uuid=uuid)
    if name is not None:
        d.name = name
    if parent is not None:
        d.parent_uuid = parent
    if counter is not None:
        d.counter.CopyFrom(counter)
    return pkt(seq=seq, track_descriptor=d)


def ann(name=None, name_iid=None, **value):
    a = pb.DebugAnnotation()
    if name is not None:
        a.name = name
    if name_iid is not None:
        a.name_iid = name_iid
    for k, v in value.items():
        if k in ("dict_entries", "array_values"):
            getattr(a, k).extend(v)
        elif k == "nested_value":
            a.nested_value.CopyFrom(v)
        else:
            setattr(a, k, v)
    return a


def ev(type_, ts, seq=1, track=None, name=None, name_iid=None, args=(),
       flags=0, clock=None, cats=(), cat_iids=(), interned=None, **te_kw):
    t = TE(type=type_)
    if track is not None:
        t.track_uuid = track
    if name is not None:
        t.name = name
    if name_iid is not None:
        t.name_iid = name_iid
    t.categories.extend(cats)
    t.category_iids.extend(cat_iids)
    t.debug_annotations.extend(args)
    for k, v in te_kw.items():
        if isinstance(v, (list, tuple)):
            getattr(t, k).extend(v)
        else:
            setattr(t, k, v)
    kw = {"track_event": t}
    if interned is not None:
        kw["interned_data"] = interned
    return pkt(seq=seq, ts=ts, flags=flags, clock=clock, **kw)


def snapshot(clocks, seq=1, ts=None):
    s = pb.ClockSnapshot()
    for c in clocks:
        cl = s.clocks.add()
        cl.clock_id = c[0]
        cl.timestamp = c[1]
        if len(c) > 2 and c[2]:
            cl.is_incremental = True
        if len(c) > 3 and c[3]:
            cl.unit_multiplier_ns = c[3]
    return pkt(seq=seq, ts=ts, clock_snapshot=s)


STD_SNAPSHOT = [(6, 1_000_000_000), (3, 900_000_000), (1, 1_700_000_000_000_000_000)]


def encode(packets):
    t = pb.Trace()
    t.packet.extend(packets)
    return t.SerializeToString()


def write(packets, data=None):
    _n[0] += 1
    path = os.path.join(TMP, "t%d.perfetto-trace" % _n[0])
    with open(path, "wb") as f:
        f.write(encode(packets) if data is None else data)
    return path


def load(packets, **kw):
    return ptrace.load(write(packets), **kw)


def has_error(t, *needles):
    return any(all(n in e for n in needles) for e in t.errors)


# -- test harness -----------------------------------------------------------

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: %r != %r" % (what, a, b))


# -- tests ------------------------------------------------------------------

@test
def interning_across_packets_and_reset():
    i1 = pb.InternedData()
    i1.event_names.add(iid=1, name="foo")
    i1.event_categories.add(iid=1, name="cat_a")
    i1.debug_annotation_names.add(iid=1, name="key")
    i1.debug_annotation_string_values.add(iid=1, str=b"val1")
    i2 = pb.InternedData()
    i2.event_names.add(iid=1, name="bar")
    i2.event_categories.add(iid=1, name="cat_b")
    i2.debug_annotation_names.add(iid=1, name="key2")
    i2.debug_annotation_string_values.add(iid=1, str=b"val2")
    a = [ann(name_iid=1, string_value_iid=1)]
    t = load([
        thread(10, 1, 2),
        pkt(ts=1, flags=CLEARED, interned_data=i1),          # interned only
        ev(B, 100, track=10, name_iid=1, cat_iids=[1], args=a, flags=NEEDS),
        ev(E, 200, track=10, flags=NEEDS),
        ev(I, 250, track=10, name_iid=1, flags=NEEDS),       # still "foo"
        ev(B, 300, track=10, name_iid=1, cat_iids=[1], args=a,
           flags=CLEARED | NEEDS, interned=i2),              # now "bar"
        ev(E, 400, track=10, flags=NEEDS),
    ])
    eq(t.errors, [], "errors")
    eq([s.name for s in t.slices], ["foo", "bar"], "names")
    eq([s.categories for s in t.slices], [["cat_a"], ["cat_b"]], "cats")
    eq(t.slices[0].args, {"key": "val1"}, "args0")
    eq(t.slices[1].args, {"key2": "val2"}, "args1")
    eq(t.instants[0].name, "foo", "instant")
    eq(t.sequences[1]["generations"], 2, "generations")


@test
def iid_from_previous_generation_is_error():
    i1 = pb.InternedData()
    i1.event_names.add(iid=1, name="foo")
    t = load([
        thread(10, 1, 2),
        ev(B, 100, track=10, name_iid=1, flags=CLEARED | NEEDS, interned=i1),
        ev(E, 200, track=10, flags=NEEDS),
        pkt(ts=250, flags=CLEARED),
        ev(B, 300, track=10, name_iid=1, flags=NEEDS),       # not re-interned
        ev(E, 400, track=10, flags=NEEDS),
    ])
    eq(len(t.errors), 1, "one error %r" % t.errors)
    assert has_error(t, "event_names iid 1 not interned"), t.errors
    eq(t.slices[1].name, None, "unresolved name")


@test
def incremental_sequence_clock_with_deltas():
    defaults = pb.TracePacketDefaults(timestamp_clock_id=64)
    defaults.track_event_defaults.track_uuid = 10
    t = load([
        snapshot(STD_SNAPSHOT, seq=9),
        thread(10, 1, 2),
        # clock 64 on seq 1: incremental, in microseconds
        snapshot([(6, 1_000_000_000), (64, 500, True, 1000)], seq=1),
        pkt(seq=1, flags=CLEARED, trace_packet_defaults=defaults),
        ev(B, 10, name="a", flags=NEEDS),       # 500+10 us -> +10_000 ns
        ev(B, 5, name="b", flags=NEEDS),        # +5 us
        # explicit absolute BOOTTIME packet: does not advance clock 64
        ev(I, 1_000_012_000, name="abs", clock=6, flags=NEEDS),
        ev(E, 1, flags=NEEDS),                  # 516 us
        ev(E, 4, flags=NEEDS),                  # 520 us
        # a new snapshot resets the running value
        snapshot([(6, 2_000_000_000), (64, 1000, True, 1000)], seq=1),
        ev(I, 7, name="after", flags=NEEDS),    # 1007 us => boot 2_000_007_000
        # a global clock packet (MONOTONIC) goes through the global snapshot
        ev(I, 900_000_123, name="mono", clock=3, flags=NEEDS),
    ])
    eq(t.errors, [], "errors")
    base = 1_000_000_000
    s = {x.name: x for x in t.slices}
    eq(s["a"].ts, base + 10_000, "a.ts")
    eq(s["b"].ts, base + 15_000, "b.ts")
    eq(s["b"].dur, 1_000, "b.dur")
    eq(s["a"].dur, 10_000, "a.dur")
    inst = {x.name: x.ts for x in t.instants}
    eq(inst["abs"], 1_000_012_000, "abs")
    eq(inst["after"], 2_000_007_000, "after")
    eq(inst["mono"], 1_000_000_123, "mono")
    eq(len(t.clock_snapshots), 3, "snapshots")
    for cid in (ptrace.BOOTTIME, ptrace.MONOTONIC, ptrace.REALTIME):
        assert cid in t.clock_snapshots[0], cid
    eq(t.clock_snapshots[1], {6: 1_000_000_000, 64: 500}, "raw snapshot")


@test
def clock_snapshot_monotonicity():
    # BOOTTIME going backwards between snapshots of *different* clock sets
    # is fine (e.g. a sequence's reset snapshot at an event timestamp that
    # precedes the global snapshot)
    t = load([snapshot(STD_SNAPSHOT),
              snapshot([(6, 500), (64, 500, True)], seq=2)])
    eq(t.errors, [], "different clock sets")
    # ... but not within the same set: trace processor rejects the snapshot
    t = load([snapshot([(6, 900), (64, 900, True)], seq=2),
              snapshot([(6, 500), (64, 500, True)], seq=2)])
    assert has_error(t, "BOOTTIME went backwards", "rejects"), t.errors
    # changing a clock's unit or incremental flag is rejected too
    t = load([snapshot([(6, 900), (64, 900, True)], seq=2),
              snapshot([(6, 1000), (64, 1000, False)], seq=2)])
    assert has_error(t, "re-registered"), t.errors
    t = load([snapshot([(6, 900), (3, 900, False, 1000)])])
    eq(t.errors, [], "unit multiplier on a global clock")
    t = load([snapshot([(6, 900), (3, 900, True)])])
    assert has_error(t, "is_incremental on global clock 3"), t.errors


@test
def sequence_clock_is_scoped_to_its_sequence():
    t = load([
        snapshot([(6, 1_000), (64, 0)], seq=1),
        thread(10, 1, 2),
        ev(I, 5, seq=2, track=10, name="x", clock=64),
    ])
    assert has_error(t, "clock 64 of seq 2", "no ClockSnapshot"), t.errors


@test
def clock_snapshot_after_use_still_converts():
    t = load([
        thread(10, 1, 2),
        ev(I, 500, track=10, name="early", clock=3),
        snapshot(STD_SNAPSHOT),
    ])
    eq(t.errors, [], "errors")
    eq(t.instants[0].ts, 1_000_000_000 - 900_000_000 + 500, "ts")


@test
def multi_hop_clock_conversion():
    # clock 64 only relates to MONOTONIC; MONOTONIC relates to BOOTTIME
    t = load([
        snapshot(STD_SNAPSHOT, seq=5),
        snapshot([(3, 900_000_100), (64, 7)], seq=1),
        thread(10, 1, 2),
        ev(I, 10, track=10, name="x", clock=64),
    ])
    eq(t.errors, [], "errors")
    eq(t.instants[0].ts, 1_000_000_103, "ts")


@test
def unconvertible_clock_is_error():
    t = load([thread(10, 1, 2), ev(I, 5, track=10, name="x", clock=3)])
    assert has_error(t, "no ClockSnapshot path from MONOTONIC"), t.errors


@test
def defaults_track_uuid_and_pid_tid():
    d = pb.TracePacketDefaults()
    d.track_event_defaults.track_uuid = 11
    t = load([
        process(1, 100, name="proc", cmdline=["./proc", "-x"]),
        thread(11, 100, 101, name="worker", parent=1),
        track(12, name="async", parent=1),
        pkt(seq=3, flags=CLEARED, trace_packet_defaults=d),
        ev(B, 10, seq=3, name="on_default", flags=NEEDS),
        ev(E, 20, seq=3, flags=NEEDS),
        ev(B, 15, seq=3, track=12, name="on_async", flags=NEEDS),
    ])
    eq(t.errors, [], "errors")
    s = {x.name: x for x in t.slices}
    eq(s["on_default"].track_uuid, 11, "default track")
    eq((s["on_default"].pid, s["on_default"].tid), (100, 101), "pid/tid")
    eq((s["on_async"].pid, s["on_async"].tid), (100, None), "async pid")
    eq(t.processes[100].process_name, "proc", "process name")
    eq(t.processes[100].cmdline, ["./proc", "-x"], "cmdline")
    eq(t.threads[101].thread_name, "worker", "thread name")
    eq(t.threads[101].kind, "thread", "kind")
    eq(t.tracks[12].kind, "other", "kind other")
    eq(t.track_by_name("worker").uuid, 11, "track_by_name thread")
    eq(t.track_by_name("async").uuid, 12, "track_by_name")
    eq([x.name for x in t.thread_slices(101)], ["on_default"], "thread_slices")
    eq(len(t.slices_on(pid=100)), 2, "slices_on pid")


@test
def defaults_reset_on_clear():
    d = pb.TracePacketDefaults()
    d.track_event_defaults.track_uuid = 11
    t = load([
        thread(11, 1, 2),
        pkt(seq=3, flags=CLEARED, trace_packet_defaults=d),
        pkt(seq=3, flags=CLEARED),            # defaults not re-emitted
        ev(I, 10, seq=3, name="x", flags=NEEDS),
    ])
    eq(t.instants[0].track_uuid, 0, "falls back to the global track")
    assert any("implicit global track" in w for w in t.warnings), t.warnings


@test
def missing_needs_flag_is_one_warning_per_sequence():
    i1 = pb.InternedData()
    i1.event_names.add(iid=1, name="foo")
    t = load([thread(10, 1, 2),
              ev(B, 100, track=10, name_iid=1, flags=CLEARED, interned=i1),
              ev(E, 200, track=10, name_iid=1),
              ev(I, 300, track=10, name_iid=1)])
    eq(t.errors, [], "errors")
    w = [x for x in t.warnings if "SEQ_NEEDS_INCREMENTAL_STATE" in x]
    eq(len(w), 1, "warnings %r" % t.warnings)
    assert "3 packet(s)" in w[0], w


@test
def nested_slices_end_args_merged_and_unterminated():
    t = load([
        thread(10, 1, 2),
        ev(B, 100, track=10, name="outer", args=[ann("a", int_value=1)]),
        ev(B, 110, track=10, name="inner", args=[ann("x", uint_value=5)]),
        ev(I, 115, track=10, name="mark"),
        ev(E, 150, track=10, args=[ann("r", string_value="done")]),
        ev(E, 200, track=10, args=[ann("b", int_value=2),
                                   ann("a", int_value=9)]),
        ev(B, 300, track=10, name="open"),
        ev(B, 310, track=10, name="open_child"),
        ev(E, 320, track=10),
    ])
    eq(t.errors, [], "errors")
    s = {x.name: x for x in t.slices}
    eq([x.name for x in t.slices],
       ["outer", "inner", "open", "open_child"], "order")
    eq((s["outer"].ts, s["outer"].dur, s["outer"].depth), (100, 100, 0), "outer")
    eq((s["inner"].ts, s["inner"].dur, s["inner"].depth), (110, 40, 1), "inner")
    eq(s["inner"].args, {"x": 5, "r": "done"}, "inner args")
    eq(s["inner"].end_args, {"r": "done"}, "inner end_args")
    eq(s["outer"].args, {"a": 9, "b": 2}, "outer args (END wins)")
    eq(s["open"].dur, None, "unterminated")
    eq(s["open"].end, None, "unterminated end")
    eq(s["open_child"].dur, 10, "closed child")
    eq(t.instants[0].depth, 2, "instant depth")
    eq((t.slices[0].pid, t.slices[0].tid), (1, 2), "pid/tid")


@test
def debug_annotation_value_types():
    NV = pb.DebugAnnotation.NestedValue
    nv = NV(nested_type=NV.DICT, dict_keys=["k", "l"])
    nv.dict_values.add(int_value=3)
    arr = nv.dict_values.add(nested_type=NV.ARRAY)
    arr.array_values.add(string_value="s")
    arr.array_values.add(bool_value=False)
    interned = pb.InternedData()
    interned.debug_annotation_names.add(iid=7, name="interned_name")
    interned.debug_annotation_string_values.add(iid=3, str=b"istr")
    t = load([
        thread(10, 1, 2),
        ev(I, 100, track=10, name="x", flags=CLEARED | NEEDS,
           interned=interned, args=[
               ann("b", bool_value=True),
               ann("u", uint_value=2**63 + 1),
               ann("i", int_value=-5),
               ann("d", double_value=1.5),
               ann("s", string_value="str"),
               ann("si", string_value_iid=3),
               ann("p", pointer_value=0xffff800012345678),
               ann(name_iid=7, int_value=1),
               ann("dict", dict_entries=[ann("x", int_value=1),
                                         ann("y", array_values=[
                                             ann(int_value=1),
                                             ann(string_value="two")])]),
               ann("arr", array_values=[ann(double_value=0.5),
                                        ann(bool_value=False)]),
               ann("nested", nested_value=nv),
               ann("legacy", legacy_json_value='{"a": 1}'),
           ]),
    ])
    eq(t.errors, [], "errors")
    eq(t.instants[0].args, {
        "b": True, "u": 2**63 + 1, "i": -5, "d": 1.5, "s": "str", "si": "istr",
        "p": 0xffff800012345678, "interned_name": 1,
        "dict": {"x": 1, "y": [1, "two"]}, "arr": [0.5, False],
        "nested": {"k": 3, "l": ["s", False]}, "legacy": '{"a": 1}',
    }, "args")


@test
def counters():
    cd = pb.CounterDescriptor(unit=pb.CounterDescriptor.UNIT_SIZE_BYTES)
    inc = pb.CounterDescriptor(is_incremental=True)
    mul = pb.CounterDescriptor(unit_multiplier=1000)
    t = load([
        process(1, 100),
        track(20, name="rss", parent=1, counter=cd),
        track(21, name="cpu_time", parent=1, counter=inc),
        track(22, name="us_counter", parent=1, counter=mul),
        thread(10, 100, 101),
        pkt(seq=1, flags=CLEARED),
        ev(C, 100, track=20, counter_value=4096, flags=NEEDS),
        ev(C, 200, track=20, double_counter_value=8192.5, flags=NEEDS),
        ev(C, 100, track=21, counter_value=10, flags=NEEDS),
        ev(C, 200, track=21, counter_value=5, flags=NEEDS),
        ev(C, 300, track=22, counter_value=3, flags=NEEDS),
        ev(B, 400, track=10, name="s", flags=NEEDS,
           extra_counter_track_uuids=[20, 21], extra_counter_values=[1, 1]),
        pkt(seq=1, flags=CLEARED),            # incremental counters reset
        ev(C, 500, track=21, counter_value=7, flags=NEEDS),
    ])
    eq(t.errors, [], "errors")
    eq(t.counters[20], [(100, 4096), (200, 8192.5), (400, 1)], "rss")
    eq(t.counters[21], [(100, 10), (200, 15), (400, 16), (500, 7)], "incr")
    eq(t.counters[22], [(300, 3000)], "multiplier")
    eq(t.counter_values("rss")[0], (100, 4096), "by name")
    eq(t.tracks[20].kind, "counter", "kind")
    eq(t.tracks[20].pid, 100, "counter pid via parent")
    eq(t.tracks[20].tid, None, "counter tid")


@test
def counter_on_non_counter_track_is_error():
    t = load([thread(10, 1, 2), ev(C, 100, track=10, counter_value=1)])
    assert has_error(t, "not a counter track"), t.errors


@test
def compressed_packets():
    inner = [
        thread(10, 1, 2, name="t"),
        ev(B, 100, track=10, name="z1"),
        ev(E, 150, track=10),
    ]
    blob = zlib.compress(encode(inner))
    outer = pkt(seq=1)
    outer.compressed_packets = blob
    t = load([snapshot(STD_SNAPSHOT), outer, ev(I, 160, track=10, name="after")])
    eq(t.errors, [], "errors")
    eq(t.compressed_bundles, 1, "bundles")
    eq(len(t.packets), 5, "packets after expansion")
    assert not any(p.HasField("compressed_packets") for p in t.packets)
    eq(t.packets_by_kind["track_event"], 3, "kinds")
    eq(t.packets_by_kind["track_descriptor"], 1, "kinds")
    eq(t.packets_by_kind["clock_snapshot"], 1, "kinds")
    eq([(s.name, s.dur) for s in t.slices], [("z1", 50)], "slices")
    # packet order: compressed contents are processed in place
    eq([p.WhichOneof("data") for p in t.packets],
       ["clock_snapshot", "track_descriptor", "track_event", "track_event",
        "track_event"], "order")


@test
def corrupt_compressed_packets_is_error():
    outer = pkt(seq=1)
    outer.compressed_packets = b"not deflate"
    t = load([outer])
    assert has_error(t, "cannot inflate"), t.errors


@test
def truncated_tail():
    packets = [thread(10, 1, 2), ev(B, 100, track=10, name="a"),
               ev(E, 200, track=10),
               ev(B, 300, track=10, name="b", args=[ann("k", string_value="x" * 40)])]
    full = encode(packets)
    last = len(packets[-1].SerializeToString())
    # frame of the last packet: tag + 1-byte length + payload
    last_frame = 2 + last
    cut = full[:len(full) - last // 2]
    path = write(None, data=cut)
    try:
        ptrace.load(path)
        raise AssertionError("truncated trace loaded without allow flag")
    except ptrace.TruncatedTraceError as e:
        eq(e.truncated_bytes, last_frame - last // 2, "exc bytes")
    t = ptrace.load(path, allow_truncated_tail=True)
    eq(t.errors, [], "errors")
    eq(t.bytes_total, len(cut), "bytes_total")
    eq(t.truncated_bytes, last_frame - last // 2, "truncated_bytes")
    eq([s.name for s in t.slices], ["a"], "slices")
    # cut inside the tag/length of the last packet
    cut2 = full[:len(full) - last_frame + 1]
    t2 = ptrace.load(write(None, data=cut2), allow_truncated_tail=True)
    eq(t2.truncated_bytes, 1, "cut in the tag")
    # an intact file reports 0
    eq(load(packets).truncated_bytes, 0, "intact")
    # zero padding after the last packet (preallocated file) is a tail too
    padded = write(None, data=full + bytes(100))
    eq(ptrace.load(padded, allow_truncated_tail=True).truncated_bytes, 100,
       "zero padding")
    try:
        ptrace.load(padded)
        raise AssertionError("zero padding accepted without the flag")
    except ptrace.TruncatedTraceError:
        pass


@test
def garbage_is_not_truncation():
    path = write(None, data=encode([thread(10, 1, 2)]) + b"\x12\x01x")
    try:
        ptrace.load(path, allow_truncated_tail=True)
        raise AssertionError("garbage accepted")
    except ptrace.TruncatedTraceError:
        raise AssertionError("garbage reported as truncation")
    except ptrace.TraceFormatError:
        pass


@test
def error_end_with_nothing_open():
    t = load([thread(10, 1, 2), ev(B, 100, track=10, name="a"),
              ev(E, 200, track=10), ev(E, 300, track=10)])
    eq(len(t.errors), 1, "errors %r" % t.errors)
    assert has_error(t, "SLICE_END", "no open slice"), t.errors


@test
def error_iid_never_interned():
    t = load([thread(10, 1, 2),
              ev(I, 100, track=10, name_iid=7, flags=CLEARED | NEEDS)])
    assert has_error(t, "event_names iid 7 not interned"), t.errors
    t = load([thread(10, 1, 2),
              ev(I, 100, track=10, name="x", flags=CLEARED | NEEDS,
                 args=[ann(name_iid=4, int_value=1)])])
    assert has_error(t, "debug_annotation_names iid 4"), t.errors
    t = load([thread(10, 1, 2),
              ev(I, 100, track=10, name="x", flags=CLEARED | NEEDS,
                 args=[ann("k", string_value_iid=4)])])
    assert has_error(t, "debug_annotation_string_values iid 4"), t.errors


@test
def error_timestamps_backwards_on_track():
    t = load([thread(10, 1, 2), ev(B, 100, track=10, name="a"),
              ev(B, 50, track=10, name="b")])
    assert has_error(t, "SLICE_BEGIN 'b' at 50", "before"), t.errors
    # child ends after its parent: END(child)=150 then END(parent)=140
    t = load([thread(10, 1, 2), ev(B, 100, track=10, name="p"),
              ev(B, 110, track=10, name="c"), ev(E, 150, track=10),
              ev(E, 140, track=10)])
    assert has_error(t, "SLICE_END of 'p' at 140", "nest"), t.errors
    # child starting before its parent
    t = load([thread(10, 1, 2), ev(B, 100, track=10, name="p"),
              ev(B, 90, track=10, name="c"), ev(E, 95, track=10),
              ev(E, 140, track=10)])
    assert has_error(t, "SLICE_BEGIN 'c' at 90"), t.errors
    # the same timestamps on two different tracks are fine
    t = load([thread(10, 1, 2), thread(11, 1, 3),
              ev(B, 100, track=10, name="a"), ev(B, 50, track=11, name="b"),
              ev(E, 60, track=11), ev(E, 120, track=10)])
    eq(t.errors, [], "independent tracks")


@test
def error_incremental_state_never_cleared():
    i1 = pb.InternedData()
    i1.event_names.add(iid=1, name="foo")
    t = load([thread(10, 1, 2),
              ev(I, 100, seq=4, track=10, name="x", flags=NEEDS)])
    assert has_error(t, "seq 4", "SEQ_NEEDS_INCREMENTAL_STATE",
                     "never cleared"), t.errors
    eq(t.skipped_packets, 1, "skipped")
    t = load([thread(10, 1, 2),
              ev(I, 100, seq=4, track=10, name_iid=1, interned=i1)])
    assert has_error(t, "interned_data", "never cleared"), t.errors
    assert has_error(t, "event_names iid 1",
                     "never cleared"), t.errors
    # after packet loss the state is invalid again until the next clear
    lost = ev(I, 200, seq=4, track=10, name="y", flags=NEEDS)
    lost.previous_packet_dropped = 1
    t = load([thread(10, 1, 2), pkt(seq=4, flags=CLEARED),
              ev(I, 100, seq=4, track=10, name="x", flags=NEEDS), lost])
    assert has_error(t, "packet loss since last clear"), t.errors


@test
def error_unknown_track_uuid():
    t = load([thread(10, 1, 2), ev(B, 100, track=99, name="a"),
              ev(E, 200, track=99)])
    assert has_error(t, "track uuid 99", "2 event(s)", "no TrackDescriptor"), \
        t.errors
    t = load([track(5, name="orphan", parent=77)])
    assert has_error(t, "parent_uuid 77"), t.errors


@test
def error_reinterned_iid_with_other_value():
    i1 = pb.InternedData()
    i1.event_names.add(iid=1, name="foo")
    i2 = pb.InternedData()
    i2.event_names.add(iid=1, name="bar")
    t = load([pkt(flags=CLEARED, interned_data=i1),
              pkt(flags=NEEDS, interned_data=i2)])
    assert has_error(t, "re-interned"), t.errors


@test
def track_descriptor_reemitted_with_new_name():
    t = load([thread(10, 1, 2, name="old"), track(20, name="a"),
              thread(10, 1, 2, name="new"), track(20, name="b"),
              track(20)])                       # unnamed: keeps "b"
    eq(t.errors, [], "errors")
    eq(t.tracks[20].name, "b", "latest name")
    eq(t.tracks[20].name_history, ["a", "b"], "history")
    eq(t.tracks[20].descriptor_count, 3, "count")
    eq(t.threads[2].thread_name, "new", "thread name")
    eq(t.threads[2].name_history, ["old", "new"], "thread name history")
    t = load([thread(10, 1, 2), thread(10, 1, 3)])
    assert has_error(t, "re-described"), t.errors


@test
def trace_without_snapshot_boottime_only():
    t = load([thread(10, 1, 2), ev(B, 100, track=10, name="a"),
              ev(E, 200, track=10)])
    eq(t.errors, [], "errors")
    eq(t.packet_ts, [None, 100, 200], "packet_ts")
    eq(t.clock_snapshots, [], "no snapshots")


@test
def cli_json_and_exit_codes():
    good = write([snapshot(STD_SNAPSHOT), thread(10, 1, 2, name="w"),
                  ev(B, 100, track=10, name="a"), ev(E, 200, track=10)])
    r = subprocess.run([sys.executable, ptrace.__file__, good, "--json",
                        "--slices"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    eq(r.returncode, 0, "rc good: " + r.stderr)
    s = json.loads(r.stdout)
    eq(s["slice_counts"], {"a": 1}, "slice counts")
    eq(s["packets_by_kind"]["track_event"], 2, "kinds")
    eq(s["slice_list"][0]["dur"], 100, "slice list")
    r = subprocess.run([sys.executable, ptrace.__file__, good, "--slices"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    eq(r.returncode, 0, "rc text")
    assert "errors: 0" in r.stdout, r.stdout
    bad = write([ev(E, 200, track=10)])
    r = subprocess.run([sys.executable, ptrace.__file__, bad],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    eq(r.returncode, 1, "rc bad")
    cut = write(None, data=encode([thread(10, 1, 2, name="abcdef")])[:-3])
    r = subprocess.run([sys.executable, ptrace.__file__, cut],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    eq(r.returncode, 2, "rc truncated")
    r = subprocess.run([sys.executable, ptrace.__file__, cut,
                        "--allow-truncated-tail"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    eq(r.returncode, 0, "rc truncated allowed")


@test
def pyproto_cache_dir_override():
    d = os.path.join(TMP, "pyproto")
    env = dict(os.environ, CGBPF_PYPROTO_DIR=d)
    r = subprocess.run([sys.executable, "-c",
                        "import sys; sys.path.insert(0, %r); import ptrace; "
                        "print(ptrace.pb2().__file__)" %
                        os.path.dirname(ptrace.__file__)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    eq(r.returncode, 0, r.stderr)
    eq(r.stdout.strip(), os.path.join(d, "perfetto_subset_pb2.py"), "path")


# -- scheduler: ftrace bundles (compact and full) and ProcessTree ----------

def _bundle(cpu, seq, switches=(), wakings=(), events=(), compress=False):
    """switches: (abs ts, prev_state, next_pid, prio, comm); wakings:
    (abs ts, pid, target_cpu, prio, comm); events: FtraceEvent messages."""
    p = TP()
    p.trusted_packet_sequence_id = seq
    b = p.ftrace_events
    b.cpu = cpu
    for e in events:
        b.event.add().CopyFrom(e)
    cs = b.compact_sched
    tab = []

    def idx(c):
        if c not in tab:
            tab.append(c)
        return tab.index(c)
    last = 0
    for ts, st, pid, prio, comm in switches:
        cs.switch_timestamp.append(ts - last)
        last = ts
        cs.switch_prev_state.append(st)
        cs.switch_next_pid.append(pid)
        cs.switch_next_prio.append(prio)
        cs.switch_next_comm_index.append(idx(comm))
    last = 0
    for ts, pid, tcpu, prio, comm in wakings:
        cs.waking_timestamp.append(ts - last)
        last = ts
        cs.waking_pid.append(pid)
        cs.waking_target_cpu.append(tcpu)
        cs.waking_prio.append(prio)
        cs.waking_comm_index.append(idx(comm))
    cs.intern_table.extend(tab)
    if not compress:
        return p
    inner = pb.Trace()
    inner.packet.add().CopyFrom(p)
    q = TP()
    q.compressed_packets = zlib.compress(inner.SerializeToString())
    return q


@test
def sched_compact_prev_inferred_across_bundles():
    rn = pb.FtraceEvent(timestamp=1500, pid=11)
    rn.task_rename.pid = 11
    rn.task_rename.oldcomm = "a"
    rn.task_rename.newcomm = "a2"
    tree = TP()
    tree.process_tree.processes.add(pid=10, ppid=1, cmdline=["prog"])
    tree.process_tree.threads.add(tid=11, tgid=10)
    t = load([tree,
              _bundle(0, 5, [(1000, 0, 11, 120, "a"), (2000, 1, 12, 120, "b")],
                      [(2500, 11, 0, 120, "a")], [rn], compress=True),
              _bundle(0, 5, [(3000, 0x100, 11, 120, "a2")])])
    sd = ptrace.sched(t)
    eq(sd.errors, [], "errors")
    sw = sd.switches[0]
    eq([(s.ts, s.prev_pid, s.next_pid, s.next_comm) for s in sw],
       [(1000, None, 11, "a"), (2000, 11, 12, "b"), (3000, 12, 11, "a2")], "switches")
    st = sd.states(11)
    eq((st["Running"], st["S"], st["R"]), (1000, 500, 500), "running, asleep, woken")
    eq(sd.comms(11), ["a", "a2"], "renamed")
    eq(sd.tree_threads, {11: 10}, "threads")
    eq(sd.tree_procs[10]["ppid"], 1, "ppid")
    eq(sd.compact_bundles, 2, "bundles")


@test
def sched_full_switch_and_bad_comm_index():
    e = pb.FtraceEvent(timestamp=100, pid=7)
    x = e.sched_switch
    x.prev_pid, x.prev_state, x.next_pid, x.next_comm = 7, 2, 8, "n"
    bad = _bundle(1, 6, [(50, 0, 3, 120, "z")])
    bad.ftrace_events.compact_sched.switch_next_comm_index[0] = 4
    sd = ptrace.sched(load([_bundle(1, 6, events=[e]), bad]))
    eq([(s.prev_pid, s.prev_state, s.explicit) for s in sd.switches[1]], [(7, 2, True)],
       "explicit switch")
    check_err = [m for m in sd.errors if "comm index 4" in m]
    eq(len(check_err), 1, "bad comm index reported: %r" % sd.errors)


def _fork(ts, parent, child, comm):
    e = pb.FtraceEvent(timestamp=ts, pid=parent)
    e.task_newtask.pid = child
    e.task_newtask.comm = comm
    e.task_newtask.clone_flags = 0x01200011     # fork(): no CLONE_THREAD
    return e


def _exit(ts, pid):
    e = pb.FtraceEvent(timestamp=ts, pid=pid)
    e.sched_process_exit.pid = pid
    e.sched_process_exit.tgid = pid
    e.sched_process_exit.comm = "old"
    return e


def _tree(ts, pid, cmdline):
    p = TP(timestamp=ts)
    p.process_tree.processes.add(pid=pid, ppid=1, cmdline=[cmdline])
    return p


@test
def sched_pid_named_before_its_fork():
    """A ProcessTree entry or a thread/process descriptor that trace
    processor would apply to a pid before the task_newtask creating it."""
    snap = snapshot(STD_SNAPSHOT, seq=9)
    fork = _bundle(0, 5, events=[_fork(2000, 1, 50, "parent")])
    # Written (tree) and timed (descriptors, no timestamp: the latest
    # time read before them) before the fork at 2000.
    sd = ptrace.sched(load([snap, _tree(1500, 50, "cgbpf"), process(7, 50, "x"),
                            thread(8, 50, 50, "x", parent=7), fork]))
    eq(len([e for e in sd.errors if "before the task_newtask" in e]), 3,
       "tree entry and both descriptors flagged: %r" % sd.errors)
    # After the fork: in the file (descriptors) or by timestamp (tree).
    sd = ptrace.sched(load([snap, fork, _tree(2001, 50, "prog"), process(7, 50, "x"),
                            thread(8, 50, 50, "x", parent=7)]))
    eq(sd.errors, [], "after the fork")
    # Before the fork but of an older process with that pid, which exited.
    old = _bundle(0, 5, events=[_exit(1800, 50)])
    sd = ptrace.sched(load([snap, _tree(1500, 50, "old"), old, fork]))
    eq(sd.errors, [], "an older process's entry")


@test
def unknown_fields_are_errors():
    """A field the schema does not name: a wrong number in cgbpf's writer,
    or one it writes that the subset lacks."""
    good = encode([snapshot(STD_SNAPSHOT)])
    t = ptrace.loads(good)
    eq(t.errors, [], "known fields only")
    # TracePacket field 999 (varint 1) appended to a packet of its own.
    t = ptrace.loads(good + bytes([0x0a, 3, 0xb8, 0x3e, 1]))
    assert has_error(t, "TracePacket field 999", "perfetto_subset.proto"), t.errors
    # Inside a track event, inside a compressed bundle.
    inner = pb.Trace()
    inner.packet.add().CopyFrom(ev(I, 5, track=3))
    raw = bytearray(inner.SerializeToString())
    te = bytes([0xc0, 0x3e, 7])         # TrackEvent field 1000, varint 7
    raw += bytes([0x0a, 2 + len(te), 0x5a, len(te)]) + te
    q = TP()
    q.compressed_packets = zlib.compress(bytes(raw))
    t = ptrace.loads(good + encode([q]))
    assert has_error(t, "TrackEvent field 1000"), t.errors


def main():
    passed = failed = 0
    only = sys.argv[1:]
    for fn in TESTS:
        if only and fn.__name__ not in only:
            continue
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
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
