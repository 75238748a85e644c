# SPDX-License-Identifier: MIT
"""cgbpf merge: traces of two (simulated) hosts into one, each its own
Perfetto machine, aligned on REALTIME; bad inputs rejected with nothing
left behind. Hosts are simulated with a UTS namespace of their own
(unshare -u), so each trace carries another host name."""
import os
import time
import subprocess
import zlib

from harness import CGBPF, Skip, check, eq, tmpdir, wl

import ptrace

FLAGS = ["--sample-hz", "0", "--syscall-threshold", "off"]


def record_as(host, d, name):
    out = os.path.join(d, name)
    cmd = "hostname %s && exec %s record %s -o %s -- %s" % (
        host, CGBPF, " ".join(FLAGS), out, wl("mt"))
    p = subprocess.run(["unshare", "-u", "sh", "-c", cmd], capture_output=True, text=True,
                       timeout=120)
    eq(p.returncode, 0, "record on %s (stderr %r)" % (host, p.stderr[-300:]))
    return out


def packets(path):
    """Every TracePacket of a file, compressed bundles expanded in place."""
    pb = ptrace.pb2()
    tr = pb.Trace()
    with open(path, "rb") as f:
        tr.ParseFromString(f.read())
    out = []
    for p in tr.packet:
        if p.HasField("compressed_packets"):
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(p.compressed_packets))
            out.extend(inner.packet)
        else:
            out.append(p)
    return out


def first_clocks(pkts):
    for p in pkts:
        if p.HasField("clock_snapshot"):
            c = {x.clock_id: x.timestamp for x in p.clock_snapshot.clocks}
            if 6 in c and 1 in c:
                return c[6], c[1]
    raise AssertionError("no clock snapshot")


def split(pkts, d, name):
    """The packets of one machine as a trace of its own (machine_id and
    clock syncs dropped), for the independent decoder."""
    pb = ptrace.pb2()
    tr = pb.Trace()
    for p in pkts:
        if p.HasField("remote_clock_sync"):
            continue
        q = tr.packet.add()
        q.CopyFrom(p)
        q.ClearField("machine_id")
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(tr.SerializeToString())
    return ptrace.load(path)


def shape(t):
    """What a user sees, independent of track uuids."""
    procs = sorted((pid, tr.process_name or "") for pid, tr in t.processes.items())
    slices = sorted((s.tid or 0, s.name, s.ts, s.dur) for s in t.slices if s.tid)
    return procs, slices


def merge(args):
    return subprocess.run([CGBPF, "merge"] + args, capture_output=True, text=True, timeout=120)


def test_merge_two_hosts():
    d = tmpdir()
    a = record_as("hosta", d, "a.perfetto-trace")
    b = record_as("hostb", d, "b.perfetto-trace")
    out = os.path.join(d, "job.perfetto-trace")
    p = merge([a, b, "-o", out])
    eq(p.returncode, 0, "merge exit (stderr %r)" % p.stderr[-300:])
    check("merged 2 traces" in p.stderr, "says what it did: %r" % p.stderr)

    pa, pb_, pm = packets(a), packets(b), packets(out)
    m0 = [p for p in pm if not p.HasField("machine_id") or p.machine_id == 0]
    m1 = [p for p in pm if p.HasField("machine_id") and p.machine_id == 1]
    eq(len(m0) + len(m1), len(pm), "every packet belongs to machine 0 or 1")
    syncs = [p for p in m1 if p.HasField("remote_clock_sync")]
    eq(len(syncs), 1, "one RemoteClockSync for machine 1")
    eq(len(m0), len(pa), "machine 0 has every packet of the first trace")
    eq(len(m1) - 1, len(pb_), "machine 1 has every packet of the second trace")
    # Ordering preserved: packet kinds, sequences and timestamps in order.
    key = lambda p: (p.WhichOneof("data"), p.trusted_packet_sequence_id, p.timestamp)
    eq([key(p) for p in m0], [key(p) for p in pa], "machine 0 packets in input order")
    eq([key(p) for p in m1 if not p.HasField("remote_clock_sync")], [key(p) for p in pb_],
       "machine 1 packets in input order")

    # Host names: SystemInfo.machine_name and the trace attributes.
    names = {}
    for mid, ps in ((0, m0), (1, m1)):
        for p in ps:
            if p.HasField("system_info"):
                names[mid] = p.system_info.machine_name
    eq(names, {0: "hosta", 1: "hostb"}, "machine names")
    attrs = {(a.key, a.string_value) for p in m1 if p.HasField("trace_attributes")
             for a in p.trace_attributes.attribute}
    check(("cgbpf.hostname", "hostb") in attrs, "hostname attribute: %r" % attrs)

    # Track uuids: no machine-1 uuid is also a machine-0 uuid.
    u0 = {p.track_descriptor.uuid for p in m0 if p.HasField("track_descriptor")}
    u1 = {p.track_descriptor.uuid for p in m1 if p.HasField("track_descriptor")}
    check(u0 and u1 and not (u0 & u1), "uuids disjoint (%d vs %d)" % (len(u0), len(u1)))

    # Alignment: the clock sync maps machine 1's BOOTTIME to the host
    # BOOTTIME at which the host's REALTIME equals machine 1's.
    boot_a, real_a = first_clocks(pa)
    boot_b, real_b = first_clocks(pb_)
    rounds = syncs[0].remote_clock_sync.synced_clocks
    check(len(rounds) >= 2, "two rounds (trace processor needs pairs)")
    for r in rounds:
        c = {x.clock_id: x.timestamp for x in r.client_clocks.clocks}
        h = {x.clock_id: x.timestamp for x in r.host_clocks.clocks}
        eq(c[6], boot_b, "client BOOTTIME is machine 1's snapshot")
        eq(h[6] - boot_a, real_b - real_a, "host BOOTTIME offset = REALTIME offset")

    # Each machine, decoded on its own, is the trace it came from.
    ta, tb = ptrace.load(a), ptrace.load(b)
    sa, sb = split(m0, d, "m0.perfetto-trace"), split(m1, d, "m1.perfetto-trace")
    for t in (ta, tb, sa, sb):
        eq(t.errors, [], "decoder errors")
    check(len(ta.slices) > 10, "the first trace has API slices (%d)" % len(ta.slices))
    check(any(n == "mt" for _, n in shape(ta)[0]), "processes named: %r" % (shape(ta)[0],))
    eq(shape(sa), shape(ta), "machine 0 = first trace (processes, slices)")
    eq(shape(sb), shape(tb), "machine 1 = second trace (processes, slices)")
    nsw = lambda t: sum(len(v) for v in ptrace.sched(t).switches.values())
    check(nsw(tb) > 0, "the second trace has context switches")
    eq(nsw(sb), nsw(tb), "context switches of machine 1 (compressed bundles) all there")


def test_merge_streams_in_bounded_memory():
    """An input of many MiB merges with a resident set far below its size."""
    d = tmpdir()
    a = record_as("hosta", d, "a.perfetto-trace")
    with open(a, "rb") as f:
        data = f.read()
    big = os.path.join(d, "big.perfetto-trace")
    reps = max(1, (48 << 20) // len(data))
    with open(big, "wb") as f:
        for _ in range(reps):
            f.write(data)
    size = os.path.getsize(big)
    del data
    # VmHWM of the running merge: the peak of its own (post-exec) memory;
    # rusage would count this Python process's pages the child had at fork.
    p = subprocess.Popen([CGBPF, "merge", a, big, "-o", os.path.join(d, "out.perfetto-trace")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rss = 0
    while p.poll() is None:
        try:
            with open("/proc/%d/status" % p.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:") and "cgbpf" in open(
                            "/proc/%d/cmdline" % p.pid).read():
                        rss = max(rss, int(line.split()[1]) * 1024)
        except OSError:
            pass
        time.sleep(0.002)
    err = p.stderr.read()
    eq(p.returncode, 0, "merge exit (stderr %r)" % err[-300:])
    check(rss > 0, "the merge's peak memory was seen")
    check(rss < size // 4, "max RSS %d B for a %d B input" % (rss, size))
    eq(os.path.getsize(os.path.join(d, "out.perfetto-trace")) > size, True,
       "everything written")


def test_merge_bad_input():
    d = tmpdir()
    a = record_as("hosta", d, "a.perfetto-trace")
    with open(a, "rb") as f:
        data = f.read()
    cut = os.path.join(d, "cut.perfetto-trace")
    with open(cut, "wb") as f:
        f.write(data[:len(data) - 7])
    text = os.path.join(d, "notes.txt")
    with open(text, "w") as f:
        f.write("this is not a trace\n" * 10)
    # A valid Perfetto trace from another tool: no cgbpf attributes.
    pb = ptrace.pb2()
    tr = pb.Trace()
    p = tr.packet.add()
    p.timestamp = 1000
    p.trusted_packet_sequence_id = 7
    p.track_event.type = 3
    p.track_event.name = "other tool"
    other = os.path.join(d, "other.perfetto-trace")
    with open(other, "wb") as f:
        f.write(tr.SerializeToString())
    # compressed_packets inside compressed_packets: no writer nests them,
    # and inflating the inner one reused the buffer the outer one was being
    # read from (fuzz/corpus/fuzz_merge/regress-nested-compressed).
    big = pb.Trace()
    for _ in range(1600):
        big.packet.add().track_event.name = "A" * 1000
    mid = pb.Trace()
    mid.packet.add().compressed_packets = zlib.compress(big.SerializeToString(), 9)
    mid.packet.add().track_event.name = "after"
    top = pb.Trace()
    top.packet.add().compressed_packets = zlib.compress(mid.SerializeToString(), 9)
    nested = os.path.join(d, "nested.perfetto-trace")
    with open(nested, "wb") as f:
        f.write(data + top.SerializeToString())
    out = os.path.join(d, "merged.perfetto-trace")
    cases = [
        ([a, cut], "truncated"),
        ([a, nested], "malformed"),
        ([a, text], "not a Perfetto trace"),
        ([a, other], "not a cgbpf trace"),
        ([a, os.path.join(d, "missing.perfetto-trace")], "No such file"),
    ]
    for inputs, why in cases:
        r = merge(inputs + ["-o", out])
        eq(r.returncode, 1, "exit for %s" % why)
        check(why in r.stderr, "message %r in %r" % (why, r.stderr))
        check(not os.path.exists(out), "no output left for %s" % why)
        check(not [f for f in os.listdir(d) if f.startswith("merged.perfetto-trace.")],
              "no temporary file left for %s" % why)
    for args in (["-o", out, a], [a, a], [a, out, "-o", out]):
        r = merge(args)
        eq(r.returncode, 2, "usage error for %s" % args)
        check(r.stderr.strip(), "a message for %s" % args)


def test_merge_keeps_gpu_flows_apart():
    """Two GPU traces merged: flow ids are global to a trace and both
    captures count theirs from 1, so machine 1's are moved apart from
    machine 0's; each launch keeps its one arrow to its GPU slice, within
    its own machine, for the decoder and trace processor alike."""
    from test_gpu import FAKE_CUPTI, need_gpu_part, record_until_status
    need_gpu_part()
    if not os.path.exists(FAKE_CUPTI):
        raise Skip("%s not built (no CUPTI headers)" % FAKE_CUPTI)
    ins = []
    for _ in range(2):
        rc, _, err, path, tmp = record_until_status(
            {"CGBPF_CUPTI_PATH": FAKE_CUPTI, "FAKECUDA_KERNEL_NS": "20000"}, iters=30)
        eq(rc, 0, "record (stderr %r)" % "".join(err)[-500:])
        ins.append(path)
    out = os.path.join(tmp, "merged.perfetto-trace")
    p = merge(ins + ["-o", out])
    eq(p.returncode, 0, "merge exit (stderr %r)" % p.stderr[-300:])

    ids = {0: set(), 1: set()}
    for q in packets(out):
        if q.HasField("track_event"):
            te = q.track_event
            got = (list(te.flow_ids) + list(te.flow_ids_old) + list(te.terminating_flow_ids) +
                   list(te.terminating_flow_ids_old) + [te.legacy_event.bind_id])
            ids[q.machine_id].update(i for i in got if i)
    check(ids[0] and ids[1] and not ids[0] & ids[1],
          "flow ids of the two machines disjoint (%d and %d ids)" % (len(ids[0]), len(ids[1])))
    check(max(ids[0]) < 1 << 48, "the first input's counters copied as they are")

    tin = [ptrace.load(x) for x in ins]
    tm = ptrace.load(out)
    eq(tm.errors, [], "decoder errors")
    fin = [t.flows() for t in tin]
    fm = tm.flows()
    check(all(len(f) > 10 for f in fin), "the inputs have flows (%r)" % [len(f) for f in fin])
    cross = [(x.name, y.name) for x, y in fm
             if tm.tracks[x.track_uuid].machine != tm.tracks[y.track_uuid].machine]
    eq(cross, [], "no flow between the machines")
    for m in (0, 1):
        eq(sorted((x.name, x.ts, y.name, y.ts) for x, y in fm
                  if tm.tracks[x.track_uuid].machine == m),
           sorted((x.name, x.ts, y.name, y.ts) for x, y in fin[m]),
           "machine %d's flows link the slices its input's did" % m)

    import tpcheck
    if tpcheck.shell_path() is None:
        print("# skipped trace processor check: %s" % tpcheck.skip_reason())
        return
    r = tpcheck.query(out, "select count(*) as n, sum(to_.machine_id is not from_.machine_id) "
                      "as cross_ from flow f join slice so on so.id = f.slice_out "
                      "join slice si on si.id = f.slice_in join track from_ on "
                      "from_.id = so.track_id join track to_ on to_.id = si.track_id")[0][0]
    eq((int(r["n"]), int(r["cross_"] or 0)), (len(fin[0]) + len(fin[1]), 0),
       "trace processor: as many flows, none between the machines")
