#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks the traces test_perfetto wrote against its expectations.

Usage: /usr/bin/python3 tests/unit/check_perfetto.py DIR [FIRST_TEST_NUMBER]

For every DIR/NAME.expect.jsonl (one JSON object a line, see
test_perfetto.c) the trace it names is decoded with tests/lib/ptrace.py,
the independent decoder (stock protobuf and Perfetto's own schema), and
must hold exactly the tracks, slices, instants, counter values and typed
debug annotations the test wrote through the API; partial traces (cut by a
write error, or copied after a flush) must be whole packets and a prefix
of what was written. If check_perfetto.sh left NAME.protoc.txt (protoc's
text decoding) beside the trace, protoc must have seen as many packets.

Prints "ok N - ..." / "not ok N - ..." lines numbered from
FIRST_TEST_NUMBER (default 1) and a closing "# checker: P passed, F failed"
comment line; exits 1 on any failure.
"""

import glob
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SEQ_INCREMENTAL_STATE_CLEARED = 1

# Which DebugAnnotation value field each expected type must use.
VALUE_FIELDS = {
    "uint": {"uint_value"},
    "int": {"int_value"},
    "ptr": {"pointer_value"},
    "bool": {"bool_value"},
    "str": {"string_value", "string_value_iid"},
}

n_pass = 0
n_fail = 0
first = 1


def check(cond, desc, diag=()):
    global n_pass, n_fail
    num = first + n_pass + n_fail
    if cond:
        n_pass += 1
        print("ok %d - %s" % (num, desc))
    else:
        n_fail += 1
        print("not ok %d - %s" % (num, desc))
        for line in list(diag)[:20]:
            print("#   %s" % line)
    return cond


def load_ptrace():
    path = os.path.join(ROOT, "tests", "lib", "ptrace.py")
    spec = importlib.util.spec_from_file_location("ptrace", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ptrace"] = mod
    spec.loader.exec_module(mod)
    return mod


def read_expect(path):
    meta, items = {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if obj["kind"] == "meta":
                meta.update({k: v for k, v in obj.items() if k != "kind"})
            else:
                items.append(obj)
    return meta, items


def typed_equal(exp, got):
    """exp is [type, value] from the expectations; got a decoded value."""
    typ, val = exp
    if typ == "bool":
        return type(got) is bool and got == val
    if typ == "str":
        return type(got) is str and got == val
    return type(got) is int and got == val


def args_equal(exp, got, subset=False):
    if subset:
        if not set(got) <= set(exp):
            return False
    elif set(exp) != set(got):
        return False
    return all(typed_equal(exp[k], got[k]) for k in got)


def fmt_slice(track, ts, depth, name, dur):
    return "track %s ts %s depth %s %r dur %s" % (track, ts, depth, name, dur)


def compare_sorted(desc, exp, got, key, same, show):
    """Sorts both lists by key, then pairs them up."""
    exp = sorted(exp, key=key)
    got = sorted(got, key=key)
    diag = []
    if len(exp) != len(got):
        diag.append("expected %d, decoded %d" % (len(exp), len(got)))
    bad = 0
    for e, g in zip(exp, got):
        if not same(e, g):
            bad += 1
            if len(diag) < 12:
                diag.append("want " + show(e))
                diag.append("got  " + show(g))
    if bad:
        diag.append("%d mismatches" % bad)
    check(not diag, desc, diag)


def raw_annotation_types(t):
    """{annotation name: {value field}} straight from the packets, with
    the interned names of each sequence generation resolved here."""
    names = {}
    kinds = {}
    for p, seq in zip(t.packets, t.packet_seq):
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED:
            names[seq] = {}
        if p.HasField("interned_data"):
            tab = names.setdefault(seq, {})
            for e in p.interned_data.debug_annotation_names:
                tab[e.iid] = e.name
        if not p.HasField("track_event"):
            continue
        for a in p.track_event.debug_annotations:
            which = a.WhichOneof("name_field")
            if which == "name":
                nm = a.name
            else:
                nm = names.get(seq, {}).get(a.name_iid, "<iid %d>" % a.name_iid)
            kinds.setdefault(nm, set()).add(a.WhichOneof("value"))
    return kinds


def check_tracks(name, t, items):
    want = {}
    for o in items:
        if o["kind"] in ("process", "thread", "counter_track", "track"):
            want[o["uuid"]] = o          # re-emitted descriptors: last wins
    diag = []
    if set(want) != set(t.tracks):
        diag.append("track uuids: want %s, decoded %s" %
                    (sorted(want), sorted(t.tracks)))
    for uuid, o in sorted(want.items()):
        tr = t.tracks.get(uuid)
        if tr is None:
            continue
        k = o["kind"]
        if k == "process":
            ok = (tr.kind == "process" and tr.pid == o["pid"] and
                  tr.process_name == o["name"] and tr.cmdline == [o["cmdline"]])
        elif k == "thread":
            ok = (tr.kind == "thread" and tr.pid == o["pid"] and
                  tr.tid == o["tid"] and tr.thread_name == o["name"] and
                  tr.parent_uuid == (o["parent"] or None))
        elif k == "counter_track":
            ok = (tr.kind == "counter" and tr.name == o["name"] and
                  tr.parent_uuid == (o["parent"] or None) and
                  tr.counter is not None and tr.counter["unit"] == o["unit"])
        else:
            ok = (tr.kind == "other" and tr.name == o["name"] and
                  tr.parent_uuid == (o["parent"] or None))
        if not ok:
            diag.append("want %s" % json.dumps(o))
            diag.append("got  %r name=%r thread=%r process=%r cmdline=%r "
                        "counter=%r" % (tr, tr.name, tr.thread_name,
                                        tr.process_name, tr.cmdline,
                                        tr.counter))
    check(not diag, "%s: process, thread, counter and plain tracks with their "
          "final names, ids, parents and units" % name, diag)
    return want


def check_full(name, t, items, meta, tracks):
    exp_slices = [o for o in items if o["kind"] == "slice"]
    compare_sorted(
        "%s: all %d slices: name, ts, dur, depth and typed args" %
        (name, len(exp_slices)),
        [(o["track"], o["ts"], o["depth"], o["name"], o["dur"], o["args"])
         for o in exp_slices],
        [(s.track_uuid, s.ts, s.depth, s.name, s.dur, s.args)
         for s in t.slices],
        key=lambda x: (x[0], x[1], x[2], str(x[3])),
        same=lambda e, g: e[:5] == g[:5] and args_equal(e[5], g[5]),
        show=lambda x: fmt_slice(*x[:5]) + " " + json.dumps(x[5], default=repr))

    # A slice's thread is its track's thread.
    tids = {u: o["tid"] for u, o in tracks.items() if o["kind"] == "thread"}
    wrong = [s for s in t.slices if s.track_uuid in tids and
             s.tid != tids[s.track_uuid]]
    check(not wrong, "%s: every slice is attributed to its thread's tid" % name,
          ["%s tid %s" % (s.name, s.tid) for s in wrong])

    exp_inst = [o for o in items if o["kind"] == "instant"]
    compare_sorted(
        "%s: all %d instants: name, ts, track, depth and typed args" %
        (name, len(exp_inst)),
        [(o["track"], o["ts"], o["depth"], o["name"], o["args"])
         for o in exp_inst],
        [(i.track_uuid, i.ts, i.depth, i.name, i.args) for i in t.instants],
        key=lambda x: (x[0], x[1], str(x[3])),
        same=lambda e, g: e[:4] == g[:4] and args_equal(e[4], g[4]),
        show=lambda x: fmt_slice(x[0], x[1], x[2], x[3], "-") + " " +
        json.dumps(x[4], default=repr))

    exp_ctr = {}
    for o in items:
        if o["kind"] == "counter":
            exp_ctr.setdefault(o["track"], []).append((o["ts"], o["value"]))
    diag = []
    if set(exp_ctr) != set(t.counters):
        diag.append("counter tracks with values: want %s, decoded %s" %
                    (sorted(exp_ctr), sorted(t.counters)))
    for u, vals in sorted(exp_ctr.items()):
        got = [(ts, v) for ts, v in t.counters.get(u, [])]
        if sorted(vals) != got or any(type(v) is not int for _, v in got):
            diag.append("track %d: want %s" % (u, sorted(vals)))
            diag.append("track %d: got  %s" % (u, got))
    check(not diag, "%s: counter values (%d) on their tracks, in time order" %
          (name, sum(len(v) for v in exp_ctr.values())), diag)

    exp_flows = sorted((tuple(o["from"]), tuple(o["to"])) for o in items
                       if o["kind"] == "flow")
    got_flows = sorted(((a.track_uuid, a.ts), (b.track_uuid, b.ts)) for a, b in t.flows())
    check(exp_flows == got_flows, "%s: flows (%d) link the slices meant, as trace processor "
          "links them (a closed flow links no further end)" % (name, len(exp_flows)),
          ["want %s" % exp_flows, "got  %s" % got_flows])
    diag = []
    for i, p in enumerate(t.packets):
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        for fixed, var in (("flow_ids", "flow_ids_old"),
                           ("terminating_flow_ids", "terminating_flow_ids_old")):
            diag += ["packet %d: %s %#x fits a shorter varint" % (i, fixed, v)
                     for v in getattr(te, fixed) if v < 1 << 56]
            diag += ["packet %d: %s %#x is longer than fixed64" % (i, var, v)
                     for v in getattr(te, var) if v >= 1 << 56]
    check(not diag, "%s: flow ids below 2^56 in the varint fields, others in the fixed64 "
          "ones" % name, diag)

    want_types = {}
    for o in items:
        for k, (typ, _) in o.get("args", {}).items():
            want_types.setdefault(k, set()).add(typ)
    raw = raw_annotation_types(t)
    diag = []
    for k, typs in sorted(want_types.items()):
        allowed = set().union(*(VALUE_FIELDS[x] for x in typs))
        if not raw.get(k) or not raw[k] <= allowed:
            diag.append("%r: want %s, packets use %s" %
                        (k, sorted(allowed), sorted(raw.get(k, ()))))
    for k in sorted(set(raw) - set(want_types)):
        diag.append("unexpected annotation %r (%s)" % (k, sorted(raw[k])))
    check(not diag, "%s: each annotation uses the value field of its type "
          "(uint/int/pointer/bool/string), read from the raw packets" % name,
          diag)

    for key, cmp_, word in (("min_generations", lambda a, b: a >= b, "at least"),
                            ("max_generations", lambda a, b: a <= b, "at most")):
        for uuid, limit in sorted(meta.get(key, {}).items()):
            sids = {s.seq_id for s in t.slices if s.track_uuid == int(uuid)}
            clears = None
            if len(sids) == 1:
                sid = sids.pop()
                clears = sum(1 for p, q in zip(t.packets, t.packet_seq)
                             if q == sid and
                             p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED)
                gens = t.sequences[sid]["generations"]
            check(clears is not None and cmp_(clears, limit) and gens == clears,
                  "%s: the sequence of track %s clears its incremental state "
                  "%s %d times (%s; decoder counts %s generations)" %
                  (name, uuid, word, limit, clears,
                   gens if clears is not None else "-"))


def check_partial(name, t, items, meta, path):
    size = os.path.getsize(path)
    if "max_size" in meta:
        check(meta["min_size"] <= size <= meta["max_size"],
              "%s: %d bytes, between %d and %d" %
              (name, size, meta["min_size"], meta["max_size"]))
    exp = {}
    for o in items:
        if o["kind"] == "slice":
            exp[(o["track"], o["ts"])] = o
    diag = []
    idx = []
    for s in t.slices:
        o = exp.get((s.track_uuid, s.ts))
        if o is None:
            diag.append("unexpected " + fmt_slice(s.track_uuid, s.ts, s.depth,
                                                  s.name, s.dur))
            continue
        idx.append(o["idx"])
        ok = s.name == o["name"] and s.depth == o["depth"]
        if s.dur is None:
            ok = ok and args_equal(o["args"], s.args, subset=True)
        else:
            ok = ok and s.dur == o["dur"] and args_equal(o["args"], s.args)
        if not ok:
            diag.append("want " + fmt_slice(o["track"], o["ts"], o["depth"],
                                            o["name"], o["dur"]))
            diag.append("got  " + fmt_slice(s.track_uuid, s.ts, s.depth,
                                            s.name, s.dur))
    if sorted(idx) != list(range(len(idx))):
        diag.append("decoded slices are not the first %d written" % len(idx))
    check(idx and not diag, "%s: its %d slices are the first ones written, "
          "each as written (open ones with their begin args)" %
          (name, len(idx)), diag)


def main(argv):
    global first
    if len(argv) < 2:
        print("usage: check_perfetto.py DIR [FIRST_TEST_NUMBER]", file=sys.stderr)
        return 2
    d = argv[1]
    if len(argv) > 2:
        first = int(argv[2])
    try:
        ptrace = load_ptrace()
        ptrace.pb2()
    except Exception as e:  # no protobuf, no schema, no protoc
        check(False, "load tests/lib/ptrace.py and the Perfetto schema: %s" % e)
        print("# checker: %d passed, %d failed" % (n_pass, n_fail))
        return 1

    expects = sorted(glob.glob(os.path.join(d, "*.expect.jsonl")))
    traces = sorted(glob.glob(os.path.join(d, "*.perfetto-trace")))
    named = set()
    metas = {}
    for e in expects:
        meta, _ = read_expect(e)
        metas[e] = meta
        named.add(os.path.join(d, meta.get("trace", "?")))
    check(expects and set(traces) == named,
          "every trace has an expectations file and the other way round "
          "(%d traces)" % len(traces),
          ["traces: %s" % sorted(map(os.path.basename, traces)),
           "named:  %s" % sorted(map(os.path.basename, named))])

    for e in expects:
        meta, items = read_expect(e)
        name = meta["trace"]
        path = os.path.join(d, name)
        if "prefix_of" in meta:
            _, items = read_expect(os.path.join(d, meta["prefix_of"]))
        try:
            t = ptrace.load(path)
        except Exception as ex:
            check(False, "%s: decodes as whole packets: %s" % (name, ex))
            continue
        check(t.truncated_bytes == 0 and len(t.packets) > 0,
              "%s: decodes as %d whole packets (%d bytes)" %
              (name, len(t.packets), t.bytes_total))
        check(t.errors == [], "%s: the decoder reports no errors" % name,
              t.errors)
        if meta.get("no_warnings"):
            check(t.warnings == [], "%s: and no warnings" % name, t.warnings)
        ptxt = path[:-len(".perfetto-trace")] + ".protoc.txt"
        if os.path.exists(ptxt):
            with open(ptxt) as f:
                n = sum(1 for line in f if line == "packet {\n")
            check(n == len(t.packets), "%s: protoc and the decoder see the "
                  "same %d packets (protoc: %d)" % (name, len(t.packets), n))
        # Trace processor binds a track to a pid at the first packet that
        # uses it in time order; a descriptor without timestamp takes the
        # latest time read before it, which can precede the pid's fork.
        untimed = [i for i, p in enumerate(t.packets)
                   if p.HasField("track_descriptor") and not p.HasField("timestamp")]
        check(not untimed, "%s: every track descriptor carries a timestamp" % name,
              ["packet %d" % i for i in untimed])
        # Descriptors come first, so even a cut trace has all of them.
        tracks = check_tracks(name, t, items)
        if meta.get("partial"):
            check_partial(name, t, items, meta, path)
        else:
            check_full(name, t, items, meta, tracks)

    print("# checker: %d passed, %d failed" % (n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
