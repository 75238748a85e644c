#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GPU records carried per second with zero loss (issue 11): the whole path
# (CUPTI buffers, the injection library, the batch probe, the events ring,
# cgbpf's decoding, ordering, correlation and trace writing) fed faster
# than a traced launch loop can: tests/workloads/gpu_rate launches at a
# chosen rate under `cgbpf record -p` with GPU activity on, and the fake
# CUPTI (CGBPF_FAKE_CUPTI_BURST=K) makes K kernel records, each with its
# API record, per launch. For each offered rate (kernels per second; "max":
# as fast as the thread goes) one run prints: kernels the workload made,
# kernels in cgbpf's summary, every loss counter (the ring's drops per
# record type, CUPTI's and the library's counts via GPU_DROPPED, malformed
# batches and bad entries), the rate achieved, and cgbpf's CPU (user+sys)
# per kernel record. Loss starts where carried < made.
# Usage: sudo bash bench/gpurate.sh [LAUNCHES [K [RATES...]]]
#        (default 40000 launches, K=32, rates 250000 500000 1000000 max)
# Environment: RING (--ring-size MiB, default cgbpf's 64: it holds about
# 500000 kernels, so a short run can hide a consumer slower than the
# producer; a small RING shows the sustained rate), CGBPF (binary).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-40000}
K=${2:-32}
shift $(($# < 2 ? $# : 2))
RATES=${*:-250000 500000 1000000 max}
OUT=${OUT:-build}
CG=${CGBPF:-$PWD/$OUT/cgbpf}
lib=$PWD/$OUT/inject/libcgbpf-inject.so
cupti=$PWD/$OUT/fake/libcupti.so.13
wl=$PWD/$OUT/workloads/gpu_rate
for f in "$lib" "$cupti" "$wl" "$CG"; do
	[ -e "$f" ] || { echo "gpurate.sh: $f missing (make all; the GPU part needs the CUDA toolkit)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "gpurate.sh: needs root (BPF): sudo bash bench/gpurate.sh" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ring=()
[ -n "${RING:-}" ] && ring=(--ring-size "$RING")

printf "%-9s %9s %9s %9s %6s %6s %6s %10s %10s %8s\n" offered made carried lost ring cupti bad \
	"achieved/s" "carried/s" "ns/rec"
for rate in $RATES; do
	lr=0
	[ "$rate" = max ] || lr=$(((rate + K - 1) / K))
	pause=$tmp/pause
	rm -f "$pause" "$pause.ready"
	CGBPF_PAUSE_FILE=$pause CUDA_INJECTION64_PATH=$lib CGBPF_CUPTI_PATH=$cupti \
		CGBPF_FAKE_CUPTI_BURST=$K "$wl" "$N" "$lr" > "$tmp/wl.out" &
	w=$!
	for _ in $(seq 3000); do [ -e "$pause.ready" ] && break; sleep 0.01; done
	/usr/bin/python3 - "$CG" "$w" "$tmp/t.pt" "$tmp/sum" "$pause" "${ring[@]}" > "$tmp/cpu" <<'PY'
import resource, subprocess, sys
cg, pid, trace, summ, pause = sys.argv[1:6]
with open(summ, "w") as f:
    p = subprocess.Popen([cg, "record", "-v", "-p", pid, "-o", trace, "--sched", "off",
                          "--sample-hz", "0", "--syscall-threshold", "off",
                          "--backtrace-threshold", "off"] + sys.argv[6:], stdout=f,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "GPU activity: status" in line:
            open(pause, "w").close()
    if p.wait() != 0:
        sys.exit("gpurate.sh: cgbpf failed")
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime)
PY
	wait "$w"
	/usr/bin/python3 - "$rate" "$N" "$K" "$tmp" <<'PY'
import re, sys
rate, n, k, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = open(tmp + "/sum").read()
wl = dict(x.split("=") for x in open(tmp + "/wl.out").read().split())
cpu = float(open(tmp + "/cpu").read())
made = n * k
m = re.search(r"measured \(CUPTI [^)]*\): (\d+) kernels", s)
carried = int(m.group(1)) if m else 0
m = re.search(r"LOST (\d+) records \(ring buffer full", s)
ring = int(m.group(1)) if m else 0
m = re.search(r"LOST (\d+) GPU activity records", s)
cupti = int(m.group(1)) if m else 0
m = re.search(r"GPU batches: (\d+) rejected as malformed, (\d+) bad entries", s)
bad = int(m.group(1)) + int(m.group(2)) if m else 0
secs = float(wl["seconds"])
print("%-9s %9d %9d %9d %6d %6d %6d %10.0f %10.0f %8.0f"
      % (rate, made, carried, made - carried, ring, cupti, bad, made / secs, carried / secs,
         cpu * 1e9 / max(carried, 1)))
PY
done
echo "(made: LAUNCHES x K kernels; lost: made - carried; ring: records of any type the ring" \
	"had no room for; cupti: records CUPTI or the library lost (GPU_DROPPED); bad: malformed" \
	"batches and bad entries; achieved/s, carried/s: over the workload's loop (cgbpf may drain" \
	"the ring after it); ns/rec: cgbpf's CPU, user + system, whole run, per kernel carried)"
