#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compares what two builds of cgbpf write, for a change meant to alter no
# output (a refactor): run as root from the repository root after make
# all test-bins.
#   1. Each build records the same workloads (demo, train, nccl_ranks,
#      nvtx_ranges, crt_app, gpu_mix) with --sched off --sample-hz 0
#      --syscall-threshold off; per thread, the slice names and arguments
#      (decoded by tests/lib/ptrace.py, run-dependent values masked),
#      `stats --format csv` and the sections of record's summary must
#      match.
#   2. stats (table, csv, json), export and merge run by each build on the
#      traces the OLD build saved must be byte-identical.
# Usage: scripts/compare-outputs.sh OLD_CGBPF NEW_CGBPF [WORKDIR]
set -u
old=$(readlink -f "$1") new=$(readlink -f "$2")
work=${3:-$(mktemp -d /tmp/cgbpf-compare.XXXXXX)}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-build}
py=/usr/bin/python3
mkdir -p "$work"
cd "$top"
export LD_LIBRARY_PATH=$top/$out/fake
flags=(--sched off --sample-hz 0 --syscall-threshold off --force)
workloads=(demo train nccl_ranks nvtx_ranges crt_app gpu_mix)
fail=0 pass=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "not ok - $*"; fail=$((fail + 1)); }

for w in "${workloads[@]}"; do
	[ -x "$out/workloads/$w" ] || { echo "skip - $w: $out/workloads/$w not built"; continue; }
	for b in old new; do
		bin=$old; [ $b = new ] && bin=$new
		"$bin" record "${flags[@]}" -o "$work/$b-$w.perfetto-trace" -- "$out/workloads/$w" \
			> "$work/$b-$w.summary" 2>&1 || bad "$b build: record $w failed (see $work/$b-$w.summary)"
		"$bin" stats --format csv "$work/$b-$w.perfetto-trace" > "$work/$b-$w.csv" 2>&1
	done
	if "$py" - "$work/old-$w.perfetto-trace" "$work/new-$w.perfetto-trace" <<'PY'
import re, sys
sys.path.insert(0, "tests/lib")
import ptrace

HEX = re.compile(r"^(0x)?[0-9a-f]{6,}$")
TIMES = ("ns", "_ns", "dur", "ts", "time", "us", "ms")

def mask(k, v):
    # Values that differ between two runs of one program: addresses,
    # times, pids and tids, sizes of what the fake allocated.
    if isinstance(v, str) and HEX.match(v):
        return "<addr>"
    if k in ("comm", "comm_id", "new_comm", "peer_comm") and isinstance(v, str):
        # A communicator's id hashes its random unique id.
        v = re.sub(r"^[0-9a-f]{4}\b", "<comm>", v)
    if isinstance(v, str):
        return re.sub(r"0x[0-9a-f]{6,}", "<addr>", v)
    if isinstance(v, int) and (k.endswith(TIMES) or k in ("pid", "tid") or v > 1 << 32):
        return "<n>"
    return v

RANK = re.compile(r"\brank \d+/")
STREAM = re.compile(r"^stream \d+$")

def slice_key(s, ranks):
    args = []
    for k, v in s.args.items():
        v = mask(k, v)
        if isinstance(v, str) and STREAM.match(v):
            # Numbered in order of first sight in the process: threads
            # that race to their first stream number them either way.
            v = "stream <n>"
        elif not ranks and k == "rank":
            v = "<rank>"
        elif not ranks and isinstance(v, str):
            v = RANK.sub("rank <r>/", v)
        args.append((k, repr(v)))
    return (s.name, tuple(sorted(args)))

def per_thread(path):
    # Which thread of a multi-rank program (nccl_ranks) takes which rank
    # changes from run to run: per thread, ranks are masked; the slices
    # of the whole trace, ranks and all, are compared as a multiset.
    t = ptrace.load(path)
    threads = {}
    for s in t.slices:
        if s.tid is None:
            continue
        threads.setdefault(s.tid, []).append(s)
    seqs = []
    for tid, ss in threads.items():
        ss.sort(key=lambda s: (s.ts, s.depth))
        seqs.append(tuple(slice_key(s, False) for s in ss))
    every = sorted(slice_key(s, True) for s in t.slices if s.tid is not None)
    return sorted(seqs), every

(a, ea), (b, eb) = per_thread(sys.argv[1]), per_thread(sys.argv[2])
if ea != eb:
    print("the trace's slices differ: %d vs %d; first only in old: %s; first only in new: %s"
          % (len(ea), len(eb), next((x for x in ea if x not in eb), None),
             next((x for x in eb if x not in ea), None)))
    sys.exit(1)
if a != b:
    print("threads: %d vs %d" % (len(a), len(b)))
    for x, y in zip(a, b):
        if x != y:
            for i, (p, q) in enumerate(zip(x, y)):
                if p != q:
                    print("first difference at slice %d:\n  old %s\n  new %s" % (i, p, q))
                    break
            else:
                print("lengths differ: %d vs %d" % (len(x), len(y)))
            break
    sys.exit(1)
PY
	then ok "$w: same slices and arguments per thread"
	else bad "$w: slices differ"
	fi
	if "$py" - "$work/old-$w.csv" "$work/new-$w.csv" <<'PY'
import csv, sys

TIMED = ("(ns)", "(%)", "Avg", "Med", "Min", "Max", "StdDev", "Time", "Bandwidth", "(us)", "Util", "GB/s")

def tables(path):
    # Each table: its title, then its header, then rows. Times differ
    # between runs; names, counts and sizes do not. Rows are ordered by
    # time, so they are compared as sets.
    out = {}
    title = None
    header = None
    with open(path) as f:
        for row in csv.reader(f):
            if not row or not "".join(row).strip():
                header = None
                continue
            if row[0].startswith("**"):
                title, header = row[0], None
                out[title] = []
                continue
            if header is None:
                header = row
                keep = [i for i, h in enumerate(row) if h not in ("PID", "TID") and not any(x in h for x in TIMED)]
                out.setdefault(title, []).append(tuple(row[i] for i in keep))
                continue
            out[title].append(tuple(row[i] if i < len(row) else "" for i in keep))
    return {k: sorted(v) for k, v in out.items()}

a, b = tables(sys.argv[1]), tables(sys.argv[2])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print("table %s differs:\n  old %s\n  new %s" % (k, a.get(k), b.get(k)))
    sys.exit(1)
print("tables: %s" % ", ".join("%s %d rows" % (k.strip("* "), len(v) - 1) for k, v in a.items()))
PY
	then ok "$w: stats --format csv has the same tables, names and counts"
	else bad "$w: stats csv differ ($work/old-$w.csv $work/new-$w.csv)"
	fi
	# record's own summary: the same sections, in the same order.
	if diff <(grep -E '^\*\* |^[A-Z][A-Za-z ]+:$' "$work/old-$w.summary") \
		<(grep -E '^\*\* |^[A-Z][A-Za-z ]+:$' "$work/new-$w.summary") > "$work/$w.sections.diff"
	then ok "$w: record's summary has the same sections in the same order"
	else bad "$w: summary sections differ ($work/$w.sections.diff)"
	fi
done

# 2. The commands over saved traces, byte for byte.
saved=("$work"/old-*.perfetto-trace)
# Each build writes into the same folder (paths appear in the outputs),
# which is then set aside under its name.
for b in old new; do
	bin=$old; [ $b = new ] && bin=$new
	rm -rf "$work/cmd" "$work/$b-cmd"
	mkdir -p "$work/cmd"
	for f in "${saved[@]}"; do
		n=$(basename "$f" .perfetto-trace)
		for fmt in table csv json; do
			"$bin" stats --format $fmt "$f" > "$work/cmd/$n.stats.$fmt" 2>&1
		done
		"$bin" export --format kineto-json -o "$work/cmd/$n.%p.json" "$f" > "$work/cmd/$n.export.log" 2>&1
	done
	"$bin" merge "${saved[@]}" -o "$work/cmd/merged.perfetto-trace" > "$work/cmd/merge.log" 2>&1
	"$bin" stats --format csv "$work/cmd/merged.perfetto-trace" > "$work/cmd/merged.stats.csv" 2>&1
	mv "$work/cmd" "$work/$b-cmd"
done
if diff -r "$work/old-cmd" "$work/new-cmd" > "$work/cmd.diff"; then
	ok "stats, export and merge on the old build's traces: byte-identical ($(ls "$work/old-cmd" | wc -l) files)"
else
	bad "stats/export/merge outputs differ: $work/cmd.diff"
fi
echo "compare: $pass passed, $fail failed ($work)"
[ "$fail" -eq 0 ]
