#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# NCCL on a real GPU (issue 28): a 1-rank all-reduce loop
# (tests/gpu/nccl_loop.py: torch.distributed, NCCL backend, world size 1)
# under `cgbpf record --`. Checks, from the decoded trace
# (tests/lib/ptrace.py) and the summary:
#   * ncclCommInitRank* seen, the communicator "rank 0/1";
#   * the loop's all-reduces on the communicator's track carry seq 1..N
#     consecutively (NCCL's own calls nested inside none), bytes 1 MiB;
#   * nccl_sum counts them; nccl_stragglers is not printed (one rank);
#   * no "NCCL hang?" line (--nccl-hang-after 5s);
#   * NCCL's profiler plugin (record -- sets NCCL_PROFILER_PLUGIN): a
#     "NCCL xxxx rank 0/1: GPU (NCCL profiler)" group whose channel
#     tracks hold one AllReduce span per channel of each loop all-reduce
#     (NCCL's seq), each inside the CUPTI span of an ncclDevKernel on the
#     same process (within 50 us: the clocks are mapped differently), and
#     the summary's "NCCL operations, GPU side" row counts >= N, and
#     nccl_sum's all-reduce row is timed on the GPU (Time "gpu").
# Prints "ok ..." / "FAIL ..." lines, then "N failed". Files in $OUT.
#
#   sudo bash tests/gpu/nccl.sh [ITERS]        (after make portable)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
portable=${CGBPF_PORTABLE:-$top/build/portable}
cgbpf=$portable/cgbpf
py=${PYTHON:-python3}
out=${OUT:-/tmp/cgbpf-gpu-nccl}
iters=${1:-200}
mkdir -p "$out"
[ -x "$cgbpf" ] || { echo "nccl.sh: no $cgbpf: run make portable" >&2; exit 2; }
"$py" -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()' ||
	{ echo "nccl.sh: $py has no CUDA torch with NCCL" >&2; exit 2; }
"$cgbpf" record --sample-hz 0 --nccl-hang-after 5s -o "$out/nccl.perfetto-trace" --force \
	-- "$py" "$top/tests/gpu/nccl_loop.py" "$iters" > "$out/nccl.summary" 2> "$out/nccl.err"
echo "record exit $?"
/usr/bin/python3 - "$out" "$iters" "$top" <<'PY'
import os, re, sys
sys.path.insert(0, os.path.join(sys.argv[3], "tests", "lib"))
import ptrace
out, iters = sys.argv[1], int(sys.argv[2])
fails = 0
def ok(cond, what):
    global fails
    print(("ok " if cond else "FAIL ") + what)
    fails += 0 if cond else 1
summary = open(os.path.join(out, "nccl.summary")).read()
err = open(os.path.join(out, "nccl.err")).read()
line = [l for l in summary.splitlines() if l.startswith('{"pid"')]
ok(len(line) == 1, "the loop's JSON line")
t = ptrace.load(os.path.join(out, "nccl.perfetto-trace"))
names = {u: tr.name for u, tr in t.tracks.items() if u >> 56 == 5}
ok(any(re.match(r"NCCL comm [0-9a-f]{4} rank 0/1$", n) for n in names.values()),
   "the communicator rank 0/1: %r" % sorted(set(names.values())))
ar = sorted((s for s in t.slices if s.track_uuid in names and s.name == "ncclAllReduce"),
            key=lambda s: s.ts)
ok(len(ar) == iters, "%d all-reduces on the comm track (%d)" % (iters, len(ar)))
ok([s.args.get("seq") for s in ar] == list(range(1, len(ar) + 1)), "seq 1..N in order")
ok(all(s.args.get("bytes") == 1 << 20 for s in ar), "1 MiB each")
ok("** NCCL Summary (nccl_sum):" in summary and "nccl_stragglers" not in summary,
   "nccl_sum printed, no stragglers section for one rank")
ok("NCCL hang?" not in err, "no hang said")
grp = [tr for tr in t.tracks.values() if (tr.name or "").endswith(": GPU (NCCL profiler)")]
ok(len(grp) == 1 and " rank 0/1:" in grp[0].name, "one plugin group, rank 0/1: %r" %
   [g.name for g in grp])
if grp:
    chans = [tr.uuid for tr in t.tracks.values() if tr.parent_uuid == grp[0].uuid and
             (tr.name or "").startswith("channel ")]
    spans = [s for s in t.slices if s.track_uuid in chans and s.name == "AllReduce"]
    seqs = {s.args.get("seq") for s in spans}
    ok(len(seqs) >= iters, "GPU spans of >= %d all-reduces (%d)" % (iters, len(seqs)))
    kern = [s for s in t.slices if (s.name or "").startswith("ncclDevKernel")]
    kern.sort(key=lambda s: s.ts)
    import bisect
    starts = [k.ts for k in kern]
    inside = 0
    for s in spans:
        i = bisect.bisect_right(starts, s.ts + 50000) - 1
        if i >= 0 and kern[i].ts - 50000 <= s.ts and s.ts + s.dur <= kern[i].ts + kern[i].dur + 50000:
            inside += 1
    ok(spans and inside >= 0.95 * len(spans),
       "channel spans inside an NCCL kernel's CUPTI span (%d of %d)" % (inside, len(spans)))
    late = sorted(s.args.get("seen_late_ns", 0) for s in spans)
    print("# seen_late_ns median %d, max %d" % (late[len(late) // 2], late[-1]) if late else "#")
ok("** NCCL operations, GPU side" in summary, "the GPU-side table is printed")
row = [l.split() for l in summary.split("** NCCL Summary (nccl_sum):")[-1].splitlines()
       if l.startswith(" ncclAllReduce ")]
ok(row and row[0][-1] == "gpu" and int(row[0][4]) >= iters,
   "nccl_sum's all-reduce row timed on the GPU, >= %d timed: %r" % (iters, row))
print("%d failed" % fails)
PY
