#!/usr/bin/python3
"""Independent decoder for Perfetto traces written by cgbpf (test oracle).

The trace is decoded with the stock protobuf library (Debian python3-protobuf)
against the project's subset of Perfetto's schema (perfetto_subset.proto,
the messages and fields cgbpf writes, with Perfetto's numbers and types:
check_subset.py compares it with the full schema), compiled at run time with
protoc.  Nothing here shares code with cgbpf's C writer.  A field the schema
does not name is an error: either cgbpf writes a wrong number or the subset
lacks a field cgbpf now writes.

Run with /usr/bin/python3: the pyenv `python3` on PATH has no protobuf.

    import ptrace
    t = ptrace.load("out.perfetto-trace")
    assert t.errors == []
    for s in t.thread_slices(1234): ...

CLI:
    /usr/bin/python3 tests/lib/ptrace.py FILE [--slices] [--json]
        [--allow-truncated-tail]
Exit status 1 when the trace has semantic errors, 2 when it cannot be read.

Schema lookup (first match wins):
    $CGBPF_PERFETTO_PROTO (the .proto file, or the folder holding it; e.g.
        Perfetto's full perfetto_trace.proto)
    tests/lib/perfetto_subset.proto
Generated module cache: $CGBPF_PYPROTO_DIR, else <repo root>/build/pyproto
(regenerated when the schema's content changes: sha256 stamp file).

Semantics implemented (Perfetto trace-processor behaviour, see proto comments
in perfetto_trace.proto):
  * incremental state (interned data, TracePacketDefaults, incremental
    counters) is per trusted_packet_sequence_id and is reset by
    SEQ_INCREMENTAL_STATE_CLEARED (or the deprecated incremental_state_cleared);
    a sequence starts with *invalid* state and previous_packet_dropped
    invalidates it until the next clear;
  * packet timestamps use packet.timestamp_clock_id, else the sequence default,
    else BOOTTIME (6); clock ids 64..127 are sequence-scoped; incremental clocks
    add each packet's timestamp as a delta to the clock's last value (a
    ClockSnapshot containing the clock resets it); everything is converted to
    BOOTTIME ns through the ClockSnapshot graph (multi-hop, nearest snapshot at
    or before the source timestamp);
  * TrackDescriptors are global; the last non-empty name wins;
  * slices: BEGIN/END are matched as a stack per track; END args are merged
    into the slice's args; unterminated slices have dur None;
  * compressed_packets (deflate, zlib or gzip framing) are expanded in place.
"""

import bisect
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "load", "loads", "pb2", "Trace", "Track", "Slice", "Instant",
    "TraceFormatError", "TruncatedTraceError", "proto_path", "main",
    "sched", "Sched", "SchedSwitch", "SchedWaking",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(_HERE))

BOOTTIME = 6
MONOTONIC = 3
REALTIME = 1

SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2

# TrackEvent.Type
TYPE_UNSPECIFIED = 0
TYPE_SLICE_BEGIN = 1
TYPE_SLICE_END = 2
TYPE_INSTANT = 3
TYPE_COUNTER = 4
TYPE_STATE = 5

_MAX_ERRORS = 10000


class TraceFormatError(Exception):
    """The file is not a well-formed Trace."""


class TruncatedTraceError(TraceFormatError):
    """The file ends in the middle of a packet."""

    def __init__(self, msg, good_bytes, truncated_bytes):
        super().__init__(msg)
        self.good_bytes = good_bytes
        self.truncated_bytes = truncated_bytes


# --------------------------------------------------------------------------
# Schema compilation / loading
# --------------------------------------------------------------------------

SUBSET_PROTO = os.path.join(_HERE, "perfetto_subset.proto")


def proto_path() -> str:
    env = os.environ.get("CGBPF_PERFETTO_PROTO")
    if env:
        if os.path.isdir(env):
            return os.path.join(env, "perfetto_trace.proto")
        return env
    return SUBSET_PROTO


def _cache_dir() -> str:
    return os.environ.get("CGBPF_PYPROTO_DIR") or os.path.join(
        REPO_ROOT, "build", "pyproto")


def _compile(proto: str, outdir: str) -> str:
    protoc = shutil.which("protoc")
    if not protoc:
        raise RuntimeError("protoc not found (Debian package protobuf-compiler)")
    tmp = tempfile.mkdtemp(prefix=".protoc-", dir=outdir)
    try:
        r = subprocess.run(
            [protoc, "--python_out=" + tmp, "-I" + os.path.dirname(proto),
             os.path.basename(proto)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("protoc failed on %s:\n%s" % (proto, r.stderr))
        name = os.path.basename(proto)[:-len(".proto")] + "_pb2.py"
        target = os.path.join(outdir, name)
        os.replace(os.path.join(tmp, name), target)  # atomic vs. other loaders
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_PB2 = None


def pb2():
    """The generated module of the schema (compiled on first use)."""
    global _PB2
    if _PB2 is not None:
        return _PB2
    try:
        have_pb = importlib.util.find_spec("google.protobuf") is not None
    except ImportError:  # no `google` package at all
        have_pb = False
    if not have_pb:
        raise RuntimeError(
            "python protobuf is not available in %s; run with /usr/bin/python3 "
            "(Debian python3-protobuf)" % sys.executable)
    proto = proto_path()
    if not os.path.isfile(proto):
        raise FileNotFoundError(
            "Perfetto schema not found at %s (set CGBPF_PERFETTO_PROTO)" % proto)
    if not proto.endswith(".proto"):
        raise ValueError("schema path must end in .proto: %s" % proto)
    modname = os.path.basename(proto)[:-len(".proto")] + "_pb2"
    if modname in sys.modules:
        _PB2 = sys.modules[modname]
        return _PB2
    with open(proto, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    target = None
    for outdir in (_cache_dir(), None):
        try:
            if outdir is None:
                outdir = tempfile.mkdtemp(prefix="cgbpf-pyproto-")
            os.makedirs(outdir, exist_ok=True)
            cand = os.path.join(outdir, modname + ".py")
            stamp = os.path.join(outdir, modname + ".sha256")
            fresh = False
            if os.path.isfile(cand) and os.path.isfile(stamp):
                # content hash rather than mtimes: a newer but identical
                # schema reuses the cache, a changed one always regenerates
                with open(stamp) as f:
                    fresh = f.read().strip() == digest
            if not fresh:
                cand = _compile(proto, outdir)
                tmpstamp = stamp + ".%d.tmp" % os.getpid()
                with open(tmpstamp, "w") as f:
                    f.write(digest + "\n")
                os.replace(tmpstamp, stamp)
            target = cand
            break
        except OSError:
            continue  # cache not writable: fall back to a private temp dir
    if target is None:
        raise RuntimeError("could not compile %s" % proto)
    spec = importlib.util.spec_from_file_location(modname, target)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    _PB2 = mod
    return mod


# --------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------

@dataclass
class Track:
    uuid: int
    parent_uuid: Optional[int] = None
    name: Optional[str] = None
    kind: str = "other"            # process | thread | counter | other
    pid: Optional[int] = None      # own, or inherited through the ancestry
    tid: Optional[int] = None      # own, or inherited through the ancestry
    process_name: Optional[str] = None
    cmdline: List[str] = field(default_factory=list)
    thread_name: Optional[str] = None
    counter: Optional[Dict[str, Any]] = None   # CounterDescriptor fields
    description: Optional[str] = None
    name_history: List[str] = field(default_factory=list)  # display_name changes
    descriptor_count: int = 0
    seq_ids: List[int] = field(default_factory=list)
    machine: int = 0               # TracePacket.machine_id (cgbpf merge)

    @property
    def display_name(self):
        return self.name or self.thread_name or self.process_name

    def __repr__(self):
        return ("Track(uuid=%d, kind=%s, name=%r, pid=%r, tid=%r, parent=%r)" %
                (self.uuid, self.kind, self.display_name, self.pid, self.tid,
                 self.parent_uuid))


@dataclass
class Slice:
    track_uuid: int
    pid: Optional[int]
    tid: Optional[int]
    name: Optional[str]
    categories: List[str]
    ts: int                      # BOOTTIME ns
    dur: Optional[int]           # None: unterminated
    depth: int
    args: Dict[str, Any]         # BEGIN args updated with END args
    seq_id: int
    end_args: Dict[str, Any] = field(default_factory=dict)
    callstack: Optional[List[str]] = None   # function names, outermost first
    # Flows on the begin event: ids it starts (TrackEvent.flow_ids and
    # flow_ids_old), ids it ends without closing (LegacyEvent.bind_id,
    # FLOW_IN) and ids it ends and closes (terminating_flow_ids and
    # terminating_flow_ids_old); see Trace.flows().
    flow_out: List[int] = field(default_factory=list)
    flow_in: List[int] = field(default_factory=list)
    flow_end: List[int] = field(default_factory=list)

    @property
    def end(self):
        return None if self.dur is None else self.ts + self.dur


@dataclass
class Instant:
    track_uuid: int
    pid: Optional[int]
    tid: Optional[int]
    name: Optional[str]
    ts: int
    args: Dict[str, Any]
    categories: List[str] = field(default_factory=list)
    seq_id: int = 0
    depth: int = 0


class Trace:
    def __init__(self):
        self.path = None
        self.packets = []            # decoded TracePacket, after decompression
        self.packet_ts = []          # BOOTTIME ns per packet (None if no ts)
        self.packet_seq = []         # trusted_packet_sequence_id per packet
        self.clock_snapshots = []    # [{clock_id: timestamp}] as written
        self.clock_snapshot_info = []  # [{seq_id, packet, clocks:{id: {...}}}]
        self.tracks = {}             # uuid -> Track
        self.processes = {}          # pid -> Track (process tracks)
        self.threads = {}            # tid -> Track (thread tracks)
        self.slices = []
        self.syscall_slices = []     # category "syscall": see _is_syscall_slice
        self.instants = []
        self.counters = {}           # track uuid -> [(ts, value)]
        self.errors = []
        self.warnings = []
        self.bytes_total = 0
        self.truncated_bytes = 0
        self.packets_by_kind = Counter()
        self.compressed_bundles = 0
        self.sequences = {}          # seq id -> dict of stats
        self.skipped_packets = 0     # SEQ_NEEDS_INCREMENTAL_STATE on invalid seq
        self.perf_samples = []       # PerfSampleRec (CPU stacks block)

    # -- helpers ---------------------------------------------------------
    def tracks_named(self, name):
        exact = [t for t in self.tracks.values() if t.name == name]
        if exact:
            return exact
        return [t for t in self.tracks.values() if t.display_name == name]

    def track_by_name(self, name):
        """First track whose descriptor name (else thread/process name) is
        `name`, or None."""
        m = self.tracks_named(name)
        return m[0] if m else None

    def slices_on(self, tid=None, pid=None, name=None, track_uuid=None):
        out = []
        for s in self.slices:
            if tid is not None and s.tid != tid:
                continue
            if pid is not None and s.pid != pid:
                continue
            if name is not None and s.name != name:
                continue
            if track_uuid is not None and s.track_uuid != track_uuid:
                continue
            out.append(s)
        return out

    def flows(self):
        """[(from slice, to slice)] as trace processor links them, slices
        taken in time order (trace processor's FlowTracker; ids are global
        to the trace): an id a slice starts (flow_ids) that is open links
        from the slice that holds it and moves on to this one, else it
        opens; an id a slice ends without closing (bind_id, FLOW_IN) links
        from the slice that holds it and stays open; an id a slice
        terminates (terminating_flow_ids) links the same way and closes.
        Ends of ids not open link nothing."""
        active, out = {}, []
        for s in sorted(self.slices, key=lambda s: s.ts):
            for i in s.flow_in:
                if i in active:
                    out.append((active[i], s))
            for i in s.flow_out:
                if i in active:
                    out.append((active[i], s))
                active[i] = s
            for i in s.flow_end:
                if i in active:
                    out.append((active.pop(i), s))
        return out

    def thread_slices(self, tid):
        return self.slices_on(tid=tid)

    def counter_values(self, name_or_uuid):
        """[(ts, value)] of the counter track with that uuid or name."""
        if isinstance(name_or_uuid, int):
            return self.counters.get(name_or_uuid, [])
        t = self.track_by_name(name_or_uuid)
        return self.counters.get(t.uuid, []) if t else []

    def summary(self):
        slice_names = Counter(s.name for s in self.slices)
        counters = {}
        for uuid, vals in self.counters.items():
            t = self.tracks.get(uuid)
            vs = [v for _, v in vals]
            counters[str(uuid)] = {
                "name": t.display_name if t else None,
                "count": len(vs),
                "min": min(vs) if vs else None,
                "max": max(vs) if vs else None,
                "last": vs[-1] if vs else None,
            }
        return {
            "path": self.path,
            "bytes_total": self.bytes_total,
            "truncated_bytes": self.truncated_bytes,
            "packets": len(self.packets),
            "compressed_bundles": self.compressed_bundles,
            "packets_by_kind": dict(self.packets_by_kind),
            "sequences": {str(k): v for k, v in self.sequences.items()},
            "clock_snapshots": [{str(k): v for k, v in s.items()}
                                for s in self.clock_snapshots],
            "tracks": [{
                "uuid": t.uuid, "parent_uuid": t.parent_uuid, "kind": t.kind,
                "name": t.name, "pid": t.pid, "tid": t.tid,
                "process_name": t.process_name, "thread_name": t.thread_name,
                "cmdline": t.cmdline, "name_history": t.name_history,
            } for t in self.tracks.values()],
            "slices": len(self.slices),
            "syscall_slices": len(self.syscall_slices),
            "unterminated_slices": sum(1 for s in self.slices if s.dur is None),
            "slice_counts": {str(k): v for k, v in
                             sorted(slice_names.items(), key=lambda kv: str(kv[0]))},
            "instants": len(self.instants),
            "counters": counters,
            "skipped_packets": self.skipped_packets,
            "errors": self.errors,
            "warnings": self.warnings,
        }


# --------------------------------------------------------------------------
# Framing (only used to find packet boundaries / a truncated tail)
# --------------------------------------------------------------------------

def _varint(buf, pos, end):
    result = 0
    shift = 0
    while True:
        if pos >= end:
            return None, pos
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise TraceFormatError("malformed varint at offset %d" % pos)


def _good_prefix(data):
    """Length of the longest prefix made of whole `packet = 1` fields.
    Returns (good_end, reason) where reason is None when the whole file is
    well-framed."""
    n = len(data)
    pos = 0
    while pos < n:
        start = pos
        tag, pos = _varint(data, pos, n)
        if tag is None:
            return start, "file ends inside a packet tag"
        if tag != 0x0A:  # field 1, wire type 2 (Trace.packet)
            if not any(data[start:]):
                return start, "zero padding after the last packet"
            raise TraceFormatError(
                "unexpected top-level field tag 0x%x at offset %d (Trace holds "
                "only `repeated TracePacket packet = 1`)" % (tag, start))
        ln, pos = _varint(data, pos, n)
        if ln is None:
            return start, "file ends inside a packet length"
        if pos + ln > n:
            return start, ("packet at offset %d declares %d bytes, only %d "
                           "present" % (start, ln, n - pos))
        pos += ln
    return n, None


# --------------------------------------------------------------------------
# Loader
# --------------------------------------------------------------------------

class _SeqState:
    __slots__ = ("valid", "ever_cleared", "interned", "defaults",
                 "counter_incr", "generation", "packets", "losses",
                 "default_clock", "default_track", "default_te")

    def __init__(self):
        self.valid = False          # trace processor starts sequences invalid
        self.ever_cleared = False
        self.interned = {}          # InternedData field -> {iid: message}
        self.set_defaults(None)     # TracePacketDefaults
        self.counter_incr = {}      # counter track uuid -> running value
        self.generation = 0
        self.packets = 0
        self.losses = 0

    def clear(self):
        self.valid = True
        self.ever_cleared = True
        self.interned = {}
        self.set_defaults(None)
        self.counter_incr = {}
        self.generation += 1

    def set_defaults(self, d):
        self.defaults = d
        self.default_clock = d.timestamp_clock_id if d is not None else 0
        self.default_te = d.track_event_defaults if (
            d is not None and d.HasField("track_event_defaults")) else None
        self.default_track = self.default_te.track_uuid if (
            self.default_te is not None and
            self.default_te.HasField("track_uuid")) else None


class _SeqClock:
    __slots__ = ("incremental", "mult", "last_ns")

    def __init__(self, incremental, mult, last_ns):
        self.incremental = incremental
        self.mult = mult
        self.last_ns = last_ns


def _clock_name(node):
    names = {1: "REALTIME", 2: "REALTIME_COARSE", 3: "MONOTONIC",
             4: "MONOTONIC_COARSE", 5: "MONOTONIC_RAW", 6: "BOOTTIME",
             9: "TSC", 10: "PERF", 11: "TRACE_FILE"}
    if isinstance(node, tuple):
        return "clock %d of seq %d" % (node[1], node[0])
    return names.get(node, "clock %d" % node)


class _Clocks:
    """ClockSnapshot graph; converts (clock node, ns) to BOOTTIME ns."""

    def __init__(self):
        self.pairs = defaultdict(list)   # (a, b) -> [(a_ns, b_ns)]
        self.adj = defaultdict(set)
        self.mult = {}
        self._paths = {}
        self._sorted = False

    def add(self, values):
        nodes = list(values)
        for a in nodes:
            for b in nodes:
                if a != b:
                    self.pairs[(a, b)].append((values[a], values[b]))
                    self.adj[a].add(b)
        self._paths.clear()
        self._sorted = False

    def _path(self, src):
        if src in self._paths:
            return self._paths[src]
        prev = {src: None}
        q = deque([src])
        while q:
            c = q.popleft()
            if c == BOOTTIME:
                break
            for nb in sorted(self.adj[c], key=str):
                if nb not in prev:
                    prev[nb] = c
                    q.append(nb)
        path = None
        if BOOTTIME in prev:
            path = [BOOTTIME]
            while prev[path[-1]] is not None:
                path.append(prev[path[-1]])
            path.reverse()
        self._paths[src] = path
        return path

    def to_boot(self, node, ns):
        if node == BOOTTIME:
            return ns
        if not self._sorted:
            for v in self.pairs.values():
                v.sort()
            self._sorted = True
        path = self._path(node)
        if path is None:
            return None
        cur = ns
        for a, b in zip(path, path[1:]):
            snaps = self.pairs[(a, b)]
            i = bisect.bisect_right(snaps, (cur, float("inf"))) - 1
            if i < 0:
                i = 0
            a_ns, b_ns = snaps[i]
            cur = cur - a_ns + b_ns
        return cur


class _Where:
    """Lazily formatted location of a packet, for diagnostics."""
    __slots__ = ("idx", "seq")

    def __init__(self, idx, seq):
        self.idx = idx
        self.seq = seq

    def __str__(self):
        return "packet %d (seq %d)" % (self.idx, self.seq)


_EXTRA_COUNTER_FIELDS = (
    ("extra_counter_values", "extra_counter_track_uuids"),
    ("extra_double_counter_values", "extra_double_counter_track_uuids"),
)
_DATA_FIELDS = frozenset()   # filled in by _Loader from the descriptor


@dataclass
class _Ev:
    idx: int
    seq_id: int
    type: int
    track_uuid: int
    tsref: Any
    name: Optional[str] = None
    categories: List[str] = field(default_factory=list)
    args: Dict[str, Any] = field(default_factory=dict)
    counter: Any = None                      # raw absolute value (after incr.)
    extra: List[Tuple[int, Any]] = field(default_factory=list)
    callstack: Optional[List[str]] = None    # TrackEvent callstack (stacks block)
    flow_out: List[int] = field(default_factory=list)
    flow_in: List[int] = field(default_factory=list)
    flow_end: List[int] = field(default_factory=list)


class _Loader:
    def __init__(self, trace):
        self.t = trace
        self.pb = pb2()
        global _DATA_FIELDS
        if not _DATA_FIELDS:
            _DATA_FIELDS = frozenset(
                fd.name for fd in
                self.pb.TracePacket.DESCRIPTOR.oneofs_by_name["data"].fields)
        self.seqs = {}
        self.seq_clocks = {}       # (seq, clock id) -> _SeqClock
        self.clocks = _Clocks()
        self.events = []
        self.tsrefs = []
        self.suppressed = 0
        self.snap_series = {}      # (clock set, node) -> last ns
        self.clock_props = {}      # node -> (unit_multiplier_ns, incremental)
        self.desc_identity = {}    # uuid -> (kind, pid, tid)
        self.noflag = {}           # seq -> (first packet, count)

    # -- diagnostics -----------------------------------------------------
    def err(self, msg):
        if len(self.t.errors) < _MAX_ERRORS:
            self.t.errors.append(msg)
        else:
            self.suppressed += 1

    def warn(self, msg):
        if len(self.t.warnings) < _MAX_ERRORS:
            self.t.warnings.append(msg)

    # -- pass 1: packets ---------------------------------------------------
    def feed(self, packets, depth=0):
        t = self.t
        for p in packets:
            # one ListFields() call per packet: much cheaper than many
            # HasField()/attribute reads on the C++ protobuf backend
            pf = {fd.name: v for fd, v in p.ListFields()}
            if "compressed_packets" in pf or "zstd_compressed_packets" in pf:
                t.compressed_bundles += 1
                self._expand(p, depth)
                continue
            kind = None
            for k in pf:
                if k in _DATA_FIELDS:
                    kind = k
                    break
            idx = len(t.packets)
            t.packets.append(p)
            t.packet_seq.append(pf.get("trusted_packet_sequence_id", 0))
            self.tsrefs.append(None)
            t.packets_by_kind[kind or "none"] += 1
            self._packet(idx, p, pf, kind)

    def _expand(self, p, depth):
        where = "compressed bundle #%d" % self.t.compressed_bundles
        if p.HasField("zstd_compressed_packets"):
            self.err("%s: zstd_compressed_packets not supported by this "
                     "decoder" % where)
            return
        if depth > 4:
            self.err("%s: compressed packets nested too deep" % where)
            return
        try:
            # 32+15: accept zlib or gzip framing (perfetto's reader does too)
            d = zlib.decompressobj(32 + zlib.MAX_WBITS)
            raw = d.decompress(p.compressed_packets) + d.flush()
            if not d.eof:
                raise zlib.error("incomplete deflate stream")
        except zlib.error as e:
            self.err("%s: cannot inflate: %s" % (where, e))
            return
        n, why = _good_prefix(raw)
        if why is not None:
            self.err("%s: inner packets malformed: %s" % (where, why))
            raw = raw[:n]
        try:
            inner = self.pb.Trace.FromString(raw)
        except Exception as e:  # DecodeError
            self.err("%s: inner packets do not decode: %s" % (where, e))
            return
        _unknown_fields(self, inner, where)
        self.feed(inner.packet, depth + 1)

    def _packet(self, idx, p, pf, kind):
        seq_id = pf.get("trusted_packet_sequence_id", 0)
        st = self.seqs.get(seq_id)
        first = st is None
        if first:
            st = self.seqs[seq_id] = _SeqState()
        st.packets += 1
        where = _Where(idx, seq_id)
        flags = pf.get("sequence_flags", 0)

        if pf.get("incremental_state_cleared") or \
                flags & SEQ_INCREMENTAL_STATE_CLEARED:
            if seq_id == 0:
                self.err("%s: SEQ_INCREMENTAL_STATE_CLEARED without "
                         "trusted_packet_sequence_id" % where)
            st.clear()
        elif pf.get("previous_packet_dropped"):
            if not first:
                st.losses += 1
                self.warn("%s: previous_packet_dropped=%d" %
                          (where, p.previous_packet_dropped))
            st.valid = False

        if "trace_packet_defaults" in pf:
            if seq_id == 0:
                self.err("%s: trace_packet_defaults without "
                         "trusted_packet_sequence_id" % where)
            d = self.pb.TracePacketDefaults()
            d.CopyFrom(pf["trace_packet_defaults"])
            st.set_defaults(d)
            if not st.valid:
                self.warn("%s: trace_packet_defaults on a sequence whose "
                          "incremental state was never cleared" % where)

        uses_incr = [False]  # set when the packet reads incremental state

        if "interned_data" in pf:
            if not st.valid:
                self.err("%s: interned_data on a sequence whose incremental "
                         "state is invalid (%s); trace processor drops it" %
                         (where, "never cleared" if not st.ever_cleared
                          else "packet loss since last clear"))
            else:
                self._intern(where, st, pf["interned_data"])

        if flags & SEQ_NEEDS_INCREMENTAL_STATE and not st.valid:
            self.err("%s: SEQ_NEEDS_INCREMENTAL_STATE but incremental state "
                     "is invalid (%s); trace processor skips the packet" %
                     (where, "never cleared" if not st.ever_cleared
                      else "packet loss since last clear"))
            self.t.skipped_packets += 1
            return

        if kind == "clock_snapshot":
            # trace processor handles snapshots before (and instead of)
            # timestamp conversion: a snapshot packet's own timestamp is not
            # interpreted and does not advance incremental clocks.
            self._snapshot(idx, where, seq_id, pf[kind], pf.get("machine_id", 0))
            return

        tsref = None
        if "timestamp" in pf:
            tsref = self._tsref(where, seq_id, st, pf["timestamp"],
                                pf.get("timestamp_clock_id", 0), uses_incr)
            self.tsrefs[idx] = tsref

        if kind == "track_event":
            if tsref is None:
                self.err("%s: track_event without timestamp" % where)
            else:
                self._event(idx, where, seq_id, st, pf[kind], tsref,
                            uses_incr)
        elif kind == "track_descriptor":
            self._descriptor(where, seq_id, pf[kind])
            tr = self.t.tracks.get(pf[kind].uuid)
            if tr is not None:
                tr.machine = pf.get("machine_id", 0)
        elif kind == "perf_sample":
            _stacks_perf_sample(self, where, st, pf[kind], tsref, uses_incr,
                                pf.get("machine_id", 0))

        if uses_incr[0] and not flags & SEQ_NEEDS_INCREMENTAL_STATE:
            # TracePacket.trace_packet_defaults: "Requires that any future
            # packet emitted on the same sequence specifies the
            # SEQ_NEEDS_INCREMENTAL_STATE flag."  Aggregated per sequence.
            n = self.noflag.get(seq_id)
            self.noflag[seq_id] = (idx, 1) if n is None else (n[0], n[1] + 1)

    def _intern(self, where, st, idata):
        for fd, values in idata.ListFields():
            table = st.interned.setdefault(fd.name, {})
            for v in values:
                if not hasattr(v, "iid"):
                    continue
                if v.iid == 0:
                    self.err("%s: interned %s entry with iid 0" %
                             (where, fd.name))
                    continue
                old = table.get(v.iid)
                if old is not None and old[0] != v:
                    self.err("%s: %s iid %d re-interned with a different value "
                             "in the same generation (%r -> %r)" %
                             (where, fd.name, v.iid, old[1], _istr(v)))
                table[v.iid] = (v, _istr(v))

    def _lookup(self, where, st, table, iid, uses_incr):
        uses_incr[0] = True
        if not st.valid:
            self.err("%s: refers to %s iid %d but incremental state is "
                     "invalid (%s)" % (where, table, iid,
                                       "never cleared" if not st.ever_cleared
                                       else "packet loss since last clear"))
            return None
        v = st.interned.get(table, {}).get(iid)
        if v is None:
            self.err("%s: %s iid %d not interned in the current generation of "
                     "the sequence" % (where, table, iid))
            return None
        return v[1]

    # -- clocks ------------------------------------------------------------
    def _snapshot(self, idx, where, seq_id, snap, machine=0):
        values = {}
        info = {}
        raw = {}
        for c in snap.clocks:
            cid = c.clock_id
            mult = c.unit_multiplier_ns or 1
            ns = c.timestamp * mult
            raw[cid] = c.timestamp
            info[cid] = {"timestamp": c.timestamp, "is_incremental":
                         c.is_incremental, "unit_multiplier_ns": mult}
            if 64 <= cid < 128:
                if seq_id == 0:
                    self.err("%s: sequence-scoped clock %d in a snapshot "
                             "without trusted_packet_sequence_id" % (where, cid))
                node = (seq_id, cid)
                self.seq_clocks[node] = _SeqClock(c.is_incremental, mult, ns)
            else:
                node = cid
                if c.is_incremental:
                    self.err("%s: is_incremental on global clock %d (only "
                             "sequence-scoped clocks may be incremental)" %
                             (where, cid))
                if cid >= 128:
                    self.warn("%s: clock id %d is reserved" % (where, cid))
            # "All snapshots for the same clock within a trace need to use
            # the same unit" (trace processor also rejects a change of
            # is_incremental).
            props = (mult, bool(c.is_incremental))
            old = self.clock_props.get(node)
            if old is not None and old != props:
                self.err("%s: %s re-registered with (unit_multiplier_ns, "
                         "is_incremental) %r, previously %r" %
                         (where, _clock_name(node), props, old))
            self.clock_props[node] = props
            self.clocks.mult[node] = mult
            if node in values:
                self.err("%s: clock %d twice in one snapshot" % (where, cid))
            values[node] = ns
        # Trace processor keeps one time series per clock *per set of clock
        # ids* (snapshot hash) and rejects a snapshot in which the trace clock
        # (BOOTTIME) goes backwards within that series; other clocks going
        # backwards are marked non-monotonic and no longer used as sources.
        # Each machine of a merged trace (TracePacket.machine_id) has its
        # own clocks: two captures of one host merged overlap in time.
        key = (machine, frozenset(values))
        for node, ns in values.items():
            prev = self.snap_series.get((key, node))
            if prev is not None and ns < prev:
                msg = ("%s: %s went backwards across ClockSnapshots of the "
                       "same clock set (%d < %d)" %
                       (where, _clock_name(node), ns, prev))
                if node == BOOTTIME:
                    self.err(msg + "; trace processor rejects the snapshot")
                else:
                    self.warn(msg + "; trace processor stops converting "
                              "from it")
            self.snap_series[(key, node)] = ns
        if len(values) < 2:
            self.warn("%s: ClockSnapshot with fewer than two clocks" % where)
        primary = snap.primary_trace_clock
        if primary and primary != BOOTTIME:
            self.warn("%s: primary_trace_clock %d (this decoder reports "
                      "BOOTTIME)" % (where, primary))
        self.clocks.add(values)
        self.t.clock_snapshots.append(raw)
        self.t.clock_snapshot_info.append(
            {"seq_id": seq_id, "packet": idx, "clocks": info,
             "primary_trace_clock": primary or None})

    def _tsref(self, where, seq_id, st, value, clock, uses_incr):
        if not clock and st.default_clock:
            clock = st.default_clock
            uses_incr[0] = True
        if not clock:
            clock = BOOTTIME
        if 64 <= clock < 128:
            if seq_id == 0:
                self.err("%s: sequence-scoped clock %d without "
                         "trusted_packet_sequence_id" % (where, clock))
            node = (seq_id, clock)
            sc = self.seq_clocks.get(node)
            if sc is None:
                # may still be defined by a later snapshot (non-incremental)
                return (node, value, False, where)
            if sc.incremental:
                sc.last_ns += value * sc.mult
                return (node, sc.last_ns, True, where)
            return (node, value * sc.mult, True, where)
        return (clock, value, False, where)

    def _resolve_ts(self, ref):
        node, value, is_ns, where = ref
        if not is_ns:
            if isinstance(node, tuple):
                sc = self.seq_clocks.get(node)
                if sc is None:
                    self.err("%s: timestamp on %s, which no ClockSnapshot on "
                             "that sequence defines" % (where, _clock_name(node)))
                    return None
                if sc.incremental:
                    self.err("%s: timestamp on incremental %s before the "
                             "ClockSnapshot defining it" %
                             (where, _clock_name(node)))
                    return None
                value *= sc.mult
            else:
                value *= self.clocks.mult.get(node, 1)
        boot = self.clocks.to_boot(node, value)
        if boot is None:
            self.err("%s: no ClockSnapshot path from %s to BOOTTIME" %
                     (where, _clock_name(node)))
        return boot

    # -- tracks ------------------------------------------------------------
    def _descriptor(self, where, seq_id, d):
        if not d.HasField("uuid"):
            self.err("%s: TrackDescriptor without uuid" % where)
            return
        uuid = d.uuid
        t = self.t.tracks.get(uuid)
        if t is None:
            t = self.t.tracks[uuid] = Track(uuid=uuid)
        t.descriptor_count += 1
        if seq_id not in t.seq_ids:
            t.seq_ids.append(seq_id)
        if d.HasField("parent_uuid"):
            t.parent_uuid = d.parent_uuid
        which = d.WhichOneof("static_or_dynamic_name")
        if which:
            nm = getattr(d, which)
            if nm:
                t.name = nm
        if d.HasField("description"):
            t.description = d.description
        kind, pid, tid = "other", None, None
        if d.HasField("thread"):
            th = d.thread
            kind = "thread"
            pid = th.pid if th.HasField("pid") else None
            tid = th.tid if th.HasField("tid") else None
            if th.HasField("thread_name") and th.thread_name:
                t.thread_name = th.thread_name
            if tid is None:
                self.err("%s: thread track %d without tid" % (where, uuid))
        elif d.HasField("process"):
            pr = d.process
            kind = "process"
            pid = pr.pid if pr.HasField("pid") else None
            if pr.HasField("process_name") and pr.process_name:
                t.process_name = pr.process_name
            if len(pr.cmdline):
                t.cmdline = list(pr.cmdline)
            if pid is None:
                self.err("%s: process track %d without pid" % (where, uuid))
        elif d.HasField("counter"):
            kind = "counter"
            c = d.counter
            t.counter = {
                "type": c.type, "categories": list(c.categories),
                "unit": c.unit, "unit_name": c.unit_name or None,
                "unit_multiplier": c.unit_multiplier or None,
                "is_incremental": c.is_incremental,
                "y_axis_share_key": c.y_axis_share_key or None,
            }
        # history of the name shown for the track (descriptor name, else
        # thread / process name), one entry per change
        shown = t.display_name
        if shown and (not t.name_history or t.name_history[-1] != shown):
            t.name_history.append(shown)
        ident = (kind, pid, tid)
        old = self.desc_identity.get(uuid)
        if old is not None and old != ident:
            self.err("%s: track %d re-described with a different identity "
                     "%r -> %r (kind, pid, tid)" % (where, uuid, old, ident))
        self.desc_identity[uuid] = ident
        t.kind = kind
        t.pid, t.tid = pid, tid

    # -- track events ------------------------------------------------------
    def _event(self, idx, where, seq_id, st, te, tsref, uses_incr):
        f = {fd.name: v for fd, v in te.ListFields()}
        defaults = st.default_te
        if "track_uuid" in f:
            uuid = f["track_uuid"]
        elif st.default_track is not None:
            uuid = st.default_track
            uses_incr[0] = True
        else:
            uuid = 0
        etype = f.get("type", TYPE_UNSPECIFIED)
        ev = _Ev(idx, seq_id, etype, uuid, tsref)
        if etype == TYPE_UNSPECIFIED:
            self.err("%s: TrackEvent with TYPE_UNSPECIFIED" % where)
        if "name" in f:
            ev.name = f["name"]
        elif "name_iid" in f:
            ev.name = self._lookup(where, st, "event_names", f["name_iid"],
                                   uses_incr)
        if "categories" in f:
            ev.categories.extend(f["categories"])
        for ciid in f.get("category_iids", ()):
            c = self._lookup(where, st, "event_categories", ciid, uses_incr)
            if c is not None:
                ev.categories.append(c)
        # Trace processor reads the fixed64 field, else the varint one.
        ev.flow_out.extend(f.get("flow_ids", ()) or f.get("flow_ids_old", ()))
        ev.flow_end.extend(f.get("terminating_flow_ids", ()) or
                           f.get("terminating_flow_ids_old", ()))
        if f.get("flow_ids") and f.get("flow_ids_old") or \
                f.get("terminating_flow_ids") and f.get("terminating_flow_ids_old"):
            self.err("%s: flow ids in both the fixed64 and the varint field: trace "
                     "processor reads only the first" % where)
        le = f.get("legacy_event")
        if le is not None:
            lf = {fd.name: v for fd, v in le.ListFields()}
            if set(lf) != {"bind_id", "flow_direction"} or lf["flow_direction"] != 1:
                self.err("%s: legacy_event other than bind_id + FLOW_IN: %r" % (where, lf))
            else:
                ev.flow_in.append(lf["bind_id"])
        for a in f.get("debug_annotations", ()):
            key = self._ann_name(where, st, a, uses_incr)
            if key is None:
                key = ""
                self.warn("%s: debug annotation without a name" % where)
            ev.args[key] = self._ann_value(where, st, a, uses_incr)

        cf = "counter_value" if "counter_value" in f else (
            "double_counter_value" if "double_counter_value" in f else None)
        if etype == TYPE_COUNTER:
            if cf is None:
                self.err("%s: TYPE_COUNTER event without a counter value" %
                         where)
            else:
                ev.counter = self._counter_value(st, uuid, f[cf])
        elif cf is not None:
            self.warn("%s: counter value on a non-COUNTER event ignored" %
                      where)

        for vals_f, uuids_f in _EXTRA_COUNTER_FIELDS:
            vals = f.get(vals_f)
            if not vals:
                continue
            uuids = list(f.get(uuids_f, ()))
            if not uuids and defaults is not None:
                uuids = list(getattr(defaults, uuids_f))
                uses_incr[0] = True
            if len(uuids) < len(vals):
                self.err("%s: %d %s but only %d track uuids" %
                         (where, len(vals), vals_f, len(uuids)))
            for u, v in zip(uuids, vals):
                ev.extra.append((u, self._counter_value(st, u, v)))
        ev.callstack = _stacks_track_event(self, where, st, te, uses_incr)
        self.events.append(ev)

    def _counter_value(self, st, uuid, v):
        t = self.t.tracks.get(uuid)
        if t is not None and t.counter and t.counter["is_incremental"]:
            v = st.counter_incr.get(uuid, 0) + v
            st.counter_incr[uuid] = v
        return v

    def _ann_name(self, where, st, a, uses_incr):
        nf = a.WhichOneof("name_field")
        if nf == "name":
            return a.name
        if nf == "name_iid":
            return self._lookup(where, st, "debug_annotation_names",
                                a.name_iid, uses_incr)
        return None

    def _ann_value(self, where, st, a, uses_incr):
        w = a.WhichOneof("value")
        if w is None:
            if len(a.dict_entries):
                out = {}
                for e in a.dict_entries:
                    k = self._ann_name(where, st, e, uses_incr)
                    out["" if k is None else k] = self._ann_value(
                        where, st, e, uses_incr)
                return out
            if len(a.array_values):
                return [self._ann_value(where, st, e, uses_incr)
                        for e in a.array_values]
            if a.HasField("proto_value"):
                return bytes(a.proto_value)
            return None
        if w == "string_value_iid":
            return self._lookup(where, st, "debug_annotation_string_values",
                                a.string_value_iid, uses_incr)
        if w == "nested_value":
            return _nested(a.nested_value)
        return getattr(a, w)

    # -- pass 2 ------------------------------------------------------------
    def finish(self):
        t = self.t
        t.packet_ts = [None if r is None else self._resolve_ts(r)
                       for r in self.tsrefs]

        # parents and ancestry
        for tr in t.tracks.values():
            if tr.parent_uuid is not None and tr.parent_uuid not in t.tracks:
                self.err("track %d: parent_uuid %d has no TrackDescriptor" %
                         (tr.uuid, tr.parent_uuid))
        ident = {}
        for tr in t.tracks.values():
            ident[tr.uuid] = self._ancestry_ident(tr)
        for tr in t.tracks.values():
            tr.pid, tr.tid = ident[tr.uuid]
            if tr.kind == "process" and tr.pid is not None:
                if tr.pid in t.processes and t.processes[tr.pid].uuid != tr.uuid:
                    self.warn("pid %d has several process tracks (%d, %d)" %
                              (tr.pid, t.processes[tr.pid].uuid, tr.uuid))
                t.processes[tr.pid] = tr
            elif tr.kind == "thread" and tr.tid is not None:
                if tr.tid in t.threads and t.threads[tr.tid].uuid != tr.uuid:
                    self.warn("tid %d has several thread tracks (%d, %d)" %
                              (tr.tid, t.threads[tr.tid].uuid, tr.uuid))
                t.threads[tr.tid] = tr

        stacks = defaultdict(list)
        last_ts = {}
        unknown = Counter()
        counters = defaultdict(list)

        def tname(u):
            tr = t.tracks.get(u)
            return "track %d (%s)" % (u, tr.display_name if tr else "?")

        for ev in self.events:
            ts = t.packet_ts[ev.idx]
            if ts is None:
                continue
            u = ev.track_uuid
            known = u in t.tracks
            if not known:
                unknown[u] += 1
            pid, tid = ident.get(u, (None, None))
            where = _Where(ev.idx, ev.seq_id)
            if ev.type == TYPE_SLICE_BEGIN:
                prev = last_ts.get(u)
                if prev is not None and ts < prev[0]:
                    self.err("%s: %s: SLICE_BEGIN %r at %d is before the "
                             "previous begin/end at %d (%s)" %
                             (where, tname(u), ev.name, ts, prev[0], prev[1]))
                st = stacks[u]
                s = Slice(track_uuid=u, pid=pid, tid=tid, name=ev.name,
                          categories=ev.categories, ts=ts, dur=None,
                          depth=len(st), args=dict(ev.args), seq_id=ev.seq_id,
                          flow_out=list(ev.flow_out), flow_in=list(ev.flow_in),
                          flow_end=list(ev.flow_end))
                s.callstack = ev.callstack
                st.append(s)
                if _is_syscall_slice(ev):
                    t.syscall_slices.append(s)
                else:
                    t.slices.append(s)
                last_ts[u] = (ts, "begin %r" % ev.name)
            elif ev.type == TYPE_SLICE_END:
                st = stacks[u]
                if not st:
                    self.err("%s: %s: SLICE_END at %d with no open slice" %
                             (where, tname(u), ts))
                    continue
                prev = last_ts.get(u)
                s = st.pop()
                if prev is not None and ts < prev[0]:
                    self.err("%s: %s: SLICE_END of %r at %d is before the "
                             "previous begin/end at %d (%s); slices must "
                             "nest" % (where, tname(u), s.name, ts, prev[0],
                                       prev[1]))
                if ev.name is not None and s.name is not None and \
                        ev.name != s.name:
                    self.warn("%s: %s: SLICE_END named %r closes slice %r" %
                              (where, tname(u), ev.name, s.name))
                s.dur = ts - s.ts
                if ev.callstack is not None:
                    s.callstack = ev.callstack
                s.end_args = dict(ev.args)
                s.args.update(ev.args)
                last_ts[u] = (ts, "end %r" % s.name)
            elif ev.type == TYPE_INSTANT:
                prev = last_ts.get(u)
                if prev is not None and ts < prev[0]:
                    self.warn("%s: %s: INSTANT %r at %d before previous "
                              "begin/end at %d" % (where, tname(u), ev.name,
                                                   ts, prev[0]))
                t.instants.append(Instant(
                    track_uuid=u, pid=pid, tid=tid, name=ev.name, ts=ts,
                    args=dict(ev.args), categories=ev.categories,
                    seq_id=ev.seq_id, depth=len(stacks[u])))
            elif ev.type == TYPE_COUNTER:
                if ev.counter is not None:
                    self._counter(where, u, ts, ev.counter, counters)
            for eu, ev_val in ev.extra:
                if eu == 0:
                    self.err("%s: extra counter value for track uuid 0" %
                             where)
                elif eu not in t.tracks:
                    unknown[eu] += 1
                self._counter(where, eu, ts, ev_val, counters)

        for sid, (first, n) in sorted(self.noflag.items()):
            self.warn("seq %d: %d packet(s) use incremental state (interned "
                      "data / sequence defaults) without "
                      "SEQ_NEEDS_INCREMENTAL_STATE (first: packet %d)" %
                      (sid, n, first))
        if unknown.get(0):
            self.warn("%d event(s) on the implicit global track (uuid 0: no "
                      "track_uuid and no sequence default)" % unknown.pop(0))
        for u, n in sorted(unknown.items()):
            self.err("track uuid %d referenced by %d event(s) has no "
                     "TrackDescriptor" % (u, n))
        t.slices.sort(key=lambda s: (s.ts, s.depth))
        t.syscall_slices.sort(key=lambda s: (s.ts, s.depth))
        t.instants.sort(key=lambda i: i.ts)
        _stacks_finish(self)
        for u, vals in counters.items():
            ordered = all(vals[i][0] <= vals[i + 1][0]
                          for i in range(len(vals) - 1))
            if not ordered:
                self.warn("%s: counter samples out of timestamp order in the "
                          "file" % tname(u))
                vals.sort(key=lambda tv: tv[0])
            t.counters[u] = vals
        for sid, st in sorted(self.seqs.items()):
            t.sequences[sid] = {
                "packets": st.packets, "generations": st.generation,
                "losses": st.losses,
            }
        if self.suppressed:
            t.errors.append("... %d more errors suppressed" % self.suppressed)

    def _counter(self, where, u, ts, value, counters):
        tr = self.t.tracks.get(u)
        if tr is None:
            return  # reported as unknown uuid
        if tr.kind != "counter":
            self.err("%s: counter value for track %d (%s), which is a %s "
                     "track, not a counter track" %
                     (where, u, tr.display_name, tr.kind))
            return
        mult = tr.counter.get("unit_multiplier") if tr.counter else None
        if mult:
            value = value * mult
        counters[u].append((ts, value))

    def _ancestry_ident(self, tr):
        """(pid, tid) of a track: from its own thread/process descriptor, else
        from the nearest thread/process ancestor (a thread or process track
        ignores parent_uuid, as in trace processor)."""
        seen = set()
        cur = tr
        while cur is not None:
            if cur.uuid in seen:
                self.err("track %d: parent_uuid cycle" % tr.uuid)
                break
            seen.add(cur.uuid)
            kind, pid, tid = self.desc_identity.get(cur.uuid,
                                                    ("other", None, None))
            if kind == "thread":
                return pid, tid
            if kind == "process":
                return pid, None
            if cur.parent_uuid is None:
                break
            cur = self.t.tracks.get(cur.parent_uuid)
        return None, None


def _istr(msg):
    """String payload of an interned entry (name / str), else the message."""
    for f in ("name", "str"):
        try:
            if msg.HasField(f):
                v = getattr(msg, f)
                if isinstance(v, bytes):
                    return v.decode("utf-8", "replace")
                return v
        except ValueError:
            continue
    return msg


def _nested(n):
    NV = type(n)
    if n.nested_type == NV.DICT:
        return {k: _nested(v) for k, v in zip(n.dict_keys, n.dict_values)}
    if n.nested_type == NV.ARRAY:
        return [_nested(v) for v in n.array_values]
    for f in ("int_value", "double_value", "bool_value", "string_value"):
        if n.HasField(f):
            return getattr(n, f)
    return None


# --------------------------------------------------------------------------
# CPU stacks: PerfSample packets with interned callstacks, and callstacks
# on track events (inline InlineCallstack or interned callstack_iid).
# --------------------------------------------------------------------------

@dataclass
class StackFrame:
    function: Optional[str]      # None: unsymbolized
    mapping: Optional[str]       # path joined from mapping_paths components
    build_id: Optional[str]
    rel_pc: Optional[int]


@dataclass
class PerfSampleRec:
    ts: Optional[int]            # BOOTTIME ns
    pid: int
    tid: int
    cpu: Optional[int]
    cpu_mode: int
    frames: List[StackFrame]     # outermost first (Callstack.frame_ids order)
    seq_id: int
    tsref: Any = None
    machine: int = 0             # TracePacket.machine_id (cgbpf merge)

    @property
    def functions(self):
        """Function names, outermost first (None for unsymbolized frames)."""
        return [f.function for f in self.frames]


def _stacks_resolve(ld, where, st, cs_iid, uses_incr):
    """Interned callstack -> [StackFrame], outermost first; None on error."""
    cs = ld._lookup(where, st, "callstacks", cs_iid, uses_incr)
    if cs is None:
        return None
    tables = st.interned
    out = []
    for fid in tables["callstacks"][cs_iid][0].frame_ids:
        fr = tables.get("frames", {}).get(fid)
        if fr is None:
            ld.err("%s: callstack %d: frame iid %d not interned" %
                   (where, cs_iid, fid))
            return None
        fr = fr[0]
        fn = mp = bid = None
        if fr.function_name_id:
            v = tables.get("function_names", {}).get(fr.function_name_id)
            if v is None:
                ld.err("%s: frame %d: function name iid %d not interned" %
                       (where, fid, fr.function_name_id))
            else:
                fn = v[0].str.decode("utf-8", "replace")
        if fr.mapping_id:
            m = tables.get("mappings", {}).get(fr.mapping_id)
            if m is None:
                ld.err("%s: frame %d: mapping iid %d not interned" %
                       (where, fid, fr.mapping_id))
            else:
                m = m[0]
                if not fr.HasField("rel_pc"):
                    ld.err("%s: frame %d has a mapping but no rel_pc" % (where, fid))
                parts = []
                for pid_ in m.path_string_ids:
                    v = tables.get("mapping_paths", {}).get(pid_)
                    if v is None:
                        ld.err("%s: mapping %d: path iid %d not interned" %
                               (where, fr.mapping_id, pid_))
                    else:
                        parts.append(v[0].str.decode("utf-8", "replace"))
                # ProfilePacketUtils::MakeMappingName: "/" before every
                # component, a leading "//" cut to "/".
                mp = "".join("/" + x for x in parts)
                if mp.startswith("//"):
                    mp = mp[1:]
                if m.build_id:
                    v = tables.get("build_ids", {}).get(m.build_id)
                    if v is None:
                        ld.err("%s: mapping %d: build id iid %d not interned" %
                               (where, fr.mapping_id, m.build_id))
                    else:
                        # BuildId::FromRaw: the bytes of the id, shown hex.
                        raw = bytes(v[0].str)
                        bid = raw.hex()
                        if len(raw) in (32, 40, 64) and all(
                                c in b"0123456789abcdefABCDEF" for c in raw):
                            ld.err("%s: mapping %d: build id interned as hex "
                                   "text %r; trace processor reads raw bytes "
                                   "(it would show %s)" % (where, fr.mapping_id,
                                                           raw.decode(), bid))
        out.append(StackFrame(fn, mp, bid, fr.rel_pc if fr.mapping_id else None))
    return out


def _stacks_perf_sample(ld, where, st, ps, tsref, uses_incr, machine=0):
    if tsref is None:
        ld.err("%s: perf_sample without timestamp" % where)
        return
    frames = []
    if ps.HasField("callstack_iid"):
        frames = _stacks_resolve(ld, where, st, ps.callstack_iid, uses_incr)
        if frames is None:
            return
    ld.t.perf_samples.append(PerfSampleRec(
        ts=None, pid=ps.pid, tid=ps.tid,
        cpu=ps.cpu if ps.HasField("cpu") else None, cpu_mode=ps.cpu_mode,
        frames=frames, seq_id=where.seq, tsref=tsref, machine=machine))


def _stacks_track_event(ld, where, st, te, uses_incr):
    """TrackEvent callstack as function names, outermost first, or None."""
    which = te.WhichOneof("callstack_field") if hasattr(te, "WhichOneof") else None
    if which == "callstack":
        return [f.function_name for f in te.callstack.frames]
    if which == "callstack_iid":
        frames = _stacks_resolve(ld, where, st, te.callstack_iid, uses_incr)
        return None if frames is None else [f.function for f in frames]
    return None


def _stacks_finish(ld):
    t = ld.t
    for s in t.perf_samples:
        s.ts = ld._resolve_ts(s.tsref)
        s.tsref = None
    t.perf_samples.sort(key=lambda s: (s.ts or 0))


def chain_in(functions, chain):
    """True when `chain` (outermost first) appears as consecutive frames."""
    n = len(chain)
    return any(functions[i:i + n] == chain for i in range(len(functions) - n + 1))
# Syscall slices (cgbpf --syscall-threshold)
# --------------------------------------------------------------------------
# Syscalls are slices with the category "syscall" on the thread's track,
# nested inside the API call they happened in. They share the per-track
# BEGIN/END stack with every other slice (so nesting and ordering are
# checked together), but are listed in Trace.syscall_slices, not
# Trace.slices, so that API call counts stay what the tests expect.

SYSCALL_CATEGORY = "syscall"


def _is_syscall_slice(ev):
    return SYSCALL_CATEGORY in ev.categories


def syscall_slices_on(trace, tid=None, pid=None, name=None):
    """Syscall slices of a thread / process, optionally by syscall name."""
    return [s for s in trace.syscall_slices
            if (tid is None or s.tid == tid) and (pid is None or s.pid == pid)
            and (name is None or s.name == name)]


def syscall_parent(trace, s):
    """The innermost non-syscall slice on s's track enclosing s, or None."""
    best = None
    for p in trace.slices:
        if p.track_uuid != s.track_uuid or p.ts > s.ts or p.dur is None:
            continue
        if p.ts + p.dur >= s.ts + (s.dur or 0) and (best is None or p.depth > best.depth):
            best = p
    return best
# Scheduler: ftrace bundles (compact_sched and full events) and ProcessTree
# --------------------------------------------------------------------------
#
# Decoded the way trace processor reads them: compact switches infer prev
# from the previous switch on the same CPU (the first one on each CPU has
# prev None); thread states follow sched_switch prev_state and sched_waking.

# prev_state as the kernel reports it (>= 4.14): one bit per state,
# 0x100 (TASK_REPORT_MAX) for a preempted task.
SCHED_STATE_NAMES = {0: "R", 0x100: "R+", 0x1: "S", 0x2: "D", 0x4: "T", 0x8: "t",
                     0x10: "X", 0x20: "Z", 0x40: "P", 0x80: "I"}


@dataclass
class SchedSwitch:
    ts: int
    cpu: int
    prev_pid: Optional[int]      # None: first compact switch on the CPU
    prev_state: int
    next_pid: int
    next_comm: str
    next_prio: int
    prev_comm: Optional[str] = None
    explicit: bool = False       # full SchedSwitchFtraceEvent (prev written)
    machine: int = 0             # TracePacket.machine_id (cgbpf merge)


@dataclass
class SchedWaking:
    ts: int
    cpu: int
    pid: int
    comm: str
    target_cpu: int
    prio: int
    new: bool = False            # sched_wakeup_new
    explicit: bool = False
    common_flags: int = 0        # ftrace TRACE_FLAG_* (0x08 hardirq, 0x10 softirq)
    common_pid: Optional[int] = None  # explicit events: the waker
    machine: int = 0


# TRACE_FLAG_HARDIRQ | TRACE_FLAG_SOFTIRQ: trace processor's
# ThreadStateTracker::CommonFlagsToIrqContext marks such a waking as coming
# from interrupt context (thread_state.irq_context = 1).
IRQ_CONTEXT_FLAGS = 0x08 | 0x10


class Sched:
    """Scheduler data of a trace: per-CPU switch lists, wakings, task
    events, the process tree and per-thread state times."""

    def __init__(self):
        self.switches = defaultdict(list)   # cpu -> [SchedSwitch] by ts
        self.wakings = []
        self.newtasks = []      # (ts, parent tid, child tid, comm, clone_flags)
        self.pid_refs = []      # (ts as trace processor orders it, machine, pid,
                                # what): process/thread descriptors, tree entries
        self.newtask_machines = []  # machine_id of each newtasks entry
        self.forks = []         # (ts, machine, pid) of task_newtask of a process
        self.proc_exits = []    # (ts, machine, tgid) of a main thread's exit
        self.renames = []       # (ts, tid, oldcomm, newcomm)
        self.exits = []         # (ts, tid, tgid, comm)
        self.tree_procs = {}    # pid -> {"ppid", "cmdline", "cmdline_is_comm"}
        self.tree_threads = {}  # tid -> tgid
        # (in a merged trace, machine_id M > 0 keys these by (M, pid / tid))
        self.bundles = 0
        self.compact_bundles = 0
        self.bundle_seqs = defaultdict(set)  # cpu -> sequence ids
        self.errors = []

    def comms(self, tid):
        """Every comm tid ran (or was renamed) under, in time order."""
        ev = [(s.ts, s.next_comm) for sw in self.switches.values() for s in sw
              if s.next_pid == tid]
        ev += [(r[0], r[3]) for r in self.renames if r[1] == tid]
        ev += [(n[0], n[3]) for n in self.newtasks if n[2] == tid]
        out = []
        for _, c in sorted(ev):
            if not out or out[-1] != c:
                out.append(c)
        return out

    def states(self, tid):
        """{state letter: ns} for tid, plus "Running"; the time from its
        first to its last scheduler event only."""
        ev = []
        for sw in self.switches.values():
            for s in sw:
                if s.next_pid == tid:
                    ev.append((s.ts, 1, "Running"))
                if s.prev_pid == tid:
                    ev.append((s.ts, 0, SCHED_STATE_NAMES.get(s.prev_state,
                                                              hex(s.prev_state))))
        for w in self.wakings:
            if w.pid == tid:
                ev.append((w.ts, 2, "W"))
        ev.sort()
        out = Counter()
        cur, since = None, None
        for ts, _, st in ev:
            if st == "W":
                if cur in ("S", "D", "I", None):
                    if cur is not None:
                        out[cur] += ts - since
                    cur, since = "R", ts
                continue
            if cur is not None:
                out[cur] += ts - since
            cur, since = st, ts
        return out

    def waker(self, w):
        """The waker as trace processor sees it: "irq" when the common flags
        say interrupt context; else the explicit event's common_pid, or for
        a compact waking the task running on its CPU then (the next_pid of
        the latest switch at or before it; None before the CPU's first
        switch, where trace processor drops the waking)."""
        if w.common_flags & IRQ_CONTEXT_FLAGS:
            return "irq"
        if w.explicit:
            return w.common_pid
        sw = self.switches.get(w.cpu, [])
        i = bisect.bisect_right([s.ts for s in sw], w.ts) - 1
        return sw[i].next_pid if i >= 0 else None

    def running_intervals(self):
        """[(tid, cpu, start, end)] from each switch to the next on its CPU."""
        out = []
        for cpu, sw in self.switches.items():
            for a, b in zip(sw, sw[1:]):
                if a.next_pid:
                    out.append((a.next_pid, cpu, a.ts, b.ts))
        return out


CLONE_THREAD = 0x00010000


def sched(trace):
    """Decodes the ftrace bundles and process trees of a loaded Trace.
    In a merged trace, CPUs of machine_id M > 0 are keyed (M, cpu)."""
    sd = Sched()
    last_next = {}   # cpu key -> (pid, comm) of the latest switch
    # Trace processor gives a packet without timestamp the latest time it
    # has read so far (ProtoTraceReader::TimestampTokenizeAndPushToSorter).
    latest = 0
    for idx, p in enumerate(trace.packets):
        pts = trace.packet_ts[idx] if idx < len(trace.packet_ts) else None
        if pts is not None:
            latest = max(latest, pts)
        eff = pts if pts is not None else latest
        machine = p.machine_id
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("thread"):
                sd.pid_refs.append((eff, machine, d.thread.pid, "thread descriptor of tid %d"
                                    % d.thread.tid))
            elif d.HasField("process"):
                sd.pid_refs.append((eff, machine, d.process.pid, "process descriptor"))
        if p.HasField("process_tree"):
            for pr in p.process_tree.processes:
                if len(pr.cmdline):   # trace processor skips an entry without
                    sd.pid_refs.append((eff, machine, pr.pid, "process_tree entry %r"
                                        % " ".join(pr.cmdline)))
            for pr in p.process_tree.processes:
                if pr.cmdline_is_comm and not "".join(pr.cmdline):
                    # trace processor would name the process and its main
                    # thread "" (priority kProcessTree beats ftrace names)
                    sd.errors.append("process_tree: pid %d has an empty cmdline "
                                     "flagged cmdline_is_comm" % pr.pid)
                key = pr.pid if not machine else (machine, pr.pid)
                old = sd.tree_procs.get(key)
                if old and old["ppid"] and not pr.ppid:
                    # ParseProcessTree would re-parent it to pid 0
                    sd.errors.append("process_tree: pid %d announced again without "
                                     "its parent %d" % (pr.pid, old["ppid"]))
                sd.tree_procs[key] = {"ppid": pr.ppid, "cmdline": list(pr.cmdline),
                                      "cmdline_is_comm": pr.cmdline_is_comm}
            for th in p.process_tree.threads:
                sd.tree_threads[th.tid if not machine else (machine, th.tid)] = th.tgid
        if not p.HasField("ftrace_events"):
            continue
        b = p.ftrace_events
        cpu = b.cpu if not machine else (machine, b.cpu)
        sd.bundles += 1
        sd.bundle_seqs[cpu].add(p.trusted_packet_sequence_id)
        for e in b.event:
            kind = e.WhichOneof("event")
            if kind == "sched_switch":
                x = e.sched_switch
                sd.switches[cpu].append(SchedSwitch(
                    e.timestamp, cpu, x.prev_pid, x.prev_state, x.next_pid, x.next_comm,
                    x.next_prio, x.prev_comm, True, machine))
                if e.pid != x.prev_pid:
                    sd.errors.append("cpu %s: sched_switch event pid %d != prev_pid %d"
                                     % (cpu, e.pid, x.prev_pid))
            elif kind in ("sched_waking", "sched_wakeup_new"):
                x = getattr(e, kind)
                sd.wakings.append(SchedWaking(e.timestamp, cpu, x.pid, x.comm, x.target_cpu,
                                              x.prio, kind == "sched_wakeup_new", True,
                                              e.common_flags, e.pid, machine))
            elif kind == "task_newtask":
                x = e.task_newtask
                sd.newtasks.append((e.timestamp, e.pid, x.pid, x.comm, x.clone_flags))
                sd.newtask_machines.append(machine)
                if not x.clone_flags & CLONE_THREAD:
                    sd.forks.append((e.timestamp, machine, x.pid))
            elif kind == "task_rename":
                x = e.task_rename
                sd.renames.append((e.timestamp, x.pid, x.oldcomm, x.newcomm))
            elif kind == "sched_process_exit":
                x = e.sched_process_exit
                sd.exits.append((e.timestamp, x.pid, x.tgid, x.comm))
                if x.pid == x.tgid:
                    sd.proc_exits.append((e.timestamp, machine, x.tgid))
            else:
                sd.errors.append("cpu %s: unexpected ftrace event %s" % (cpu, kind))
            latest = max(latest, e.timestamp)
        if not b.HasField("compact_sched"):
            continue
        sd.compact_bundles += 1
        c = b.compact_sched
        tab = list(c.intern_table)
        n = len(c.switch_timestamp)
        if not (len(c.switch_prev_state) == len(c.switch_next_pid) ==
                len(c.switch_next_prio) == len(c.switch_next_comm_index) == n):
            sd.errors.append("cpu %s: compact switch arrays differ in length" % (cpu,))
            continue
        ts = 0
        for i in range(n):
            ts += c.switch_timestamp[i]   # first absolute, then deltas
            ci = c.switch_next_comm_index[i]
            if ci >= len(tab):
                sd.errors.append("cpu %s: comm index %d outside the %d-entry table"
                                 % (cpu, ci, len(tab)))
                continue
            prev = last_next.get(cpu)
            sd.switches[cpu].append(SchedSwitch(
                ts, cpu, prev[0] if prev else None, c.switch_prev_state[i],
                c.switch_next_pid[i], tab[ci], c.switch_next_prio[i],
                prev[1] if prev else None, machine=machine))
            last_next[cpu] = (c.switch_next_pid[i], tab[ci])
            latest = max(latest, ts)
        m = len(c.waking_timestamp)
        if not (len(c.waking_pid) == len(c.waking_target_cpu) == len(c.waking_prio) ==
                len(c.waking_comm_index) == m) or \
                (len(c.waking_common_flags) not in (0, m)):
            sd.errors.append("cpu %s: compact waking arrays differ in length" % (cpu,))
            continue
        ts = 0
        for i in range(m):
            ts += c.waking_timestamp[i]
            ci = c.waking_comm_index[i]
            if ci >= len(tab):
                sd.errors.append("cpu %s: waking comm index %d outside the table" % (cpu, ci))
                continue
            flags = c.waking_common_flags[i] if len(c.waking_common_flags) else 0
            sd.wakings.append(SchedWaking(ts, cpu, c.waking_pid[i], tab[ci],
                                          c.waking_target_cpu[i], c.waking_prio[i],
                                          common_flags=flags, machine=machine))
            latest = max(latest, ts)
    for cpu, sw in sd.switches.items():
        for a, b in zip(sw, sw[1:]):
            if b.ts < a.ts:
                sd.errors.append("cpu %s: switch at %d goes back in time (previous %d)"
                                 % (cpu, b.ts, a.ts))
                break
    sd.wakings.sort(key=lambda w: w.ts)
    _refs_before_fork(sd)
    return sd


def _refs_before_fork(sd):
    """A descriptor or ProcessTree entry that names a pid before the
    task_newtask that created it (and after any exit of an older process
    with that pid): trace processor binds it to a process of its own, which
    the fork then replaces (ParseTaskNewTask -> StartNewProcess), so one
    pid shows as two processes, e.g. API slices in one and the same
    thread's scheduler states in the other."""
    exits = defaultdict(list)
    for ts, machine, pid in sd.proc_exits:
        exits[(machine, pid)].append(ts)
    forks = defaultdict(list)
    for ts, machine, pid in sd.forks:
        forks[(machine, pid)].append(ts)
    found = []
    for eff, machine, pid, what in sd.pid_refs:
        for fts in forks.get((machine, pid), ()):
            if eff < fts and not any(eff <= x < fts for x in exits.get((machine, pid), ())):
                found.append("pid %d: %s at %d, before the task_newtask that creates the "
                             "process (%d): trace processor would show two processes for it"
                             % (pid, what, eff, fts))
                break
    sd.errors += found[:10]
    if len(found) > 10:
        sd.errors.append("... and %d more descriptors or ProcessTree entries before their "
                         "pid's fork" % (len(found) - 10))


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------

def loads(data, allow_truncated_tail=False, path=None):
    """Decode a trace held in memory (bytes)."""
    pb = pb2()
    t = Trace()
    t.path = path
    t.bytes_total = len(data)
    good, why = _good_prefix(data)
    if why is not None:
        cut = len(data) - good
        if not allow_truncated_tail:
            raise TruncatedTraceError(
                "%s: truncated trace: %s; last %d of %d bytes are not whole "
                "packets (pass allow_truncated_tail=True)" %
                (path or "<bytes>", why, cut, len(data)), good, cut)
        t.truncated_bytes = cut
        data = data[:good]
    try:
        trace = pb.Trace.FromString(bytes(data))
    except Exception as e:
        raise TraceFormatError("%s: does not decode as perfetto.protos.Trace: %s"
                               % (path or "<bytes>", e))
    ld = _Loader(t)
    _unknown_fields(ld, trace, "file")
    if not len(trace.packet):
        ld.warn("trace holds no packets")
    ld.feed(trace.packet)
    ld.finish()
    return t


def load(path, allow_truncated_tail=False):
    """Decode a .perfetto-trace file into a Trace."""
    with open(path, "rb") as f:
        data = f.read()
    return loads(data, allow_truncated_tail=allow_truncated_tail, path=path)


def _unknown_fields(ld, trace, where):
    """Reports fields the schema does not name. Cheap when there are none:
    the serialized size counts unknown fields, so it shrinks only when
    discarding them removes something."""
    before = trace.ByteSize()
    probe = type(trace)()
    probe.CopyFrom(trace)
    probe.DiscardUnknownFields()
    if probe.ByteSize() == before:
        return
    found = Counter()

    def walk(msg, path):
        for fd, v in msg.ListFields():
            if fd.type != fd.TYPE_MESSAGE:
                continue
            for x in (v if fd.label == fd.LABEL_REPEATED else (v,)):
                walk(x, path + "." + fd.name)
        for u in msg.UnknownFields():
            found["%s field %d (in %s)" % (msg.DESCRIPTOR.name, u.field_number, path)] += 1
    walk(trace, "Trace")
    for k, n in sorted(found.items()):
        ld.err("%s: %s, %d time(s), is not in the schema %s: a wrong field number, or "
               "a field to add to perfetto_subset.proto with Perfetto's number and type"
               % (where, k, n, os.path.basename(proto_path())))


def _fmt_ts(ns):
    return "-" if ns is None else "%d.%09d" % divmod(ns, 10**9)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="Decode a cgbpf Perfetto trace "
                                 "against Perfetto's schema (the project's subset).")
    ap.add_argument("file")
    ap.add_argument("--slices", action="store_true", help="list every slice")
    ap.add_argument("--json", action="store_true", help="JSON summary")
    ap.add_argument("--allow-truncated-tail", action="store_true")
    a = ap.parse_args(argv)
    try:  # behave in pipes (`ptrace.py f | head`)
        import signal
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except (AttributeError, ValueError):
        pass
    try:
        t = load(a.file, allow_truncated_tail=a.allow_truncated_tail)
    except (TraceFormatError, OSError, RuntimeError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    if a.json:
        s = t.summary()
        if a.slices:
            s["slice_list"] = [{
                "track_uuid": x.track_uuid, "pid": x.pid, "tid": x.tid,
                "name": x.name, "categories": x.categories, "ts": x.ts,
                "dur": x.dur, "depth": x.depth, "args": x.args,
                "seq_id": x.seq_id} for x in t.slices]
        print(json.dumps(s, indent=1, default=repr))
        return 1 if t.errors else 0

    s = t.summary()
    print("file: %s  (%d bytes, %d truncated)" % (a.file, t.bytes_total,
                                                  t.truncated_bytes))
    print("packets: %d  (compressed bundles: %d, skipped: %d)" %
          (len(t.packets), t.compressed_bundles, t.skipped_packets))
    for k, n in sorted(t.packets_by_kind.items()):
        print("  %-28s %d" % (k, n))
    print("sequences: %s" % ", ".join(
        "%d: %d pkts/%d gen" % (k, v["packets"], v["generations"])
        for k, v in sorted(t.sequences.items())))
    print("clock snapshots: %d" % len(t.clock_snapshots))
    for snap in t.clock_snapshots:
        print("  " + "  ".join("%s=%d" % (_clock_name(k), v)
                               for k, v in sorted(snap.items())))
    print("tracks: %d  (processes %d, threads %d)" %
          (len(t.tracks), len(t.processes), len(t.threads)))
    for tr in sorted(t.tracks.values(), key=lambda x: (x.pid or 0, x.tid or 0,
                                                       x.uuid)):
        extra = ""
        if tr.kind == "process" and tr.cmdline:
            extra = " cmdline=%r" % " ".join(tr.cmdline)
        if len(tr.name_history) > 1:
            extra += " history=%r" % tr.name_history
        print("  %-20d %-8s pid=%-7s tid=%-7s parent=%-20s %r%s" %
              (tr.uuid, tr.kind, tr.pid, tr.tid, tr.parent_uuid,
               tr.display_name, extra))
    print("slices: %d  (unterminated %d)" % (s["slices"],
                                             s["unterminated_slices"]))
    top = sorted(s["slice_counts"].items(), key=lambda kv: (-kv[1], kv[0]))
    for name, n in top[:50]:
        print("  %-40s %d" % (name, n))
    if len(top) > 50:
        print("  ... %d more names (--json lists all)" % (len(top) - 50))
    print("instants: %d" % len(t.instants))
    print("counters: %d tracks" % len(t.counters))
    for u, c in s["counters"].items():
        print("  %-20s %-24r n=%d min=%r max=%r last=%r" %
              (u, c["name"], c["count"], c["min"], c["max"], c["last"]))
    if a.slices:
        print("slice list:")
        for x in t.slices:
            print("  %s %12s pid=%-7s tid=%-7s %s%r %s" %
                  (_fmt_ts(x.ts), "open" if x.dur is None else x.dur,
                   x.pid, x.tid, "  " * x.depth, x.name,
                   json.dumps(x.args, default=repr) if x.args else ""))
    print("warnings: %d" % len(t.warnings))
    for w in t.warnings[:50]:
        print("  " + w)
    if len(t.warnings) > 50:
        print("  ... %d more" % (len(t.warnings) - 50))
    print("errors: %d" % len(t.errors))
    for e in t.errors[:200]:
        print("  " + e)
    if len(t.errors) > 200:
        print("  ... %d more" % (len(t.errors) - 200))
    return 1 if t.errors else 0


if __name__ == "__main__":
    sys.exit(main())
