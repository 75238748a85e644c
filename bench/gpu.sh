#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What GPU activity costs (issue 11), on the launch loop of
# tests/workloads/bench_launch (N cuLaunchKernel of a zero-length kernel on
# the fake driver), in one run, configurations interleaved round by round:
#   untraced     no injection library;
#   idle         CUDA_INJECTION64_PATH=libcgbpf-inject.so, no cgbpf (the
#                library's watcher thread only; target: within 1.02x);
#   api          cgbpf record -p attached, the library loaded but without
#                CUPTI (CGBPF_CUPTI_PATH=/nonexistent): uprobes only;
#   gpu          the same with GPU activity on (the fake libcupti.so.13: its
#                own cost is the simulator's, not NVIDIA's).
# For gpu against api: GPU records carried per second and lost, trace bytes
# per kernel, cgbpf's CPU per kernel record. The loop starts (wl_pause)
# once the library has said, through cgbpf, that it collects (or cannot).
# Usage: sudo bash bench/gpu.sh [N [ROUNDS]]   (default 300000, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300000}
R=${2:-3}
OUT=${OUT:-build}
lib=$PWD/$OUT/inject/libcgbpf-inject.so
cupti=$PWD/$OUT/fake/libcupti.so.13
wl=$PWD/$OUT/workloads/bench_launch
for f in "$lib" "$cupti" "$wl" "$OUT/cgbpf"; do
	[ -e "$f" ] || { echo "gpu.sh: $f missing (make all; the GPU part needs the CUDA toolkit)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

ns_of() { sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p' "$1"; }

plain() {	# NAME [ENV...]: one untraced run, 10 N launches (a few ms of loop
	local name=$1	# would measure the library's loading, not its idle cost)
	shift
	env "$@" "$wl" "$((N * 10))" > "$tmp/$name.out"
	echo "$(ns_of "$tmp/$name.out")" >> "$tmp/$name.ns"
}

traced() {	# NAME CUPTI: the loop under cgbpf record -p; cgbpf's CPU seconds
	local name=$1 cp=$2 pause=$tmp/pause-$1
	rm -f "$pause" "$pause.ready"
	CGBPF_PAUSE_FILE=$pause CUDA_INJECTION64_PATH=$lib CGBPF_CUPTI_PATH=$cp \
		"$wl" "$N" > "$tmp/$name.out" &
	local w=$!
	for _ in $(seq 3000); do [ -e "$pause.ready" ] && break; sleep 0.01; done
	$py - "$OUT/cgbpf" "$w" "$tmp/$name.pt" "$tmp/$name.sum" "$pause" >> "$tmp/$name.cpu" <<'PY'
import resource, subprocess, sys
cg, pid, trace, summ, pause = sys.argv[1:6]
# The loop starts once the library said what it does (-v prints it):
# cgbpf is attached and the library collects, or knows it cannot.
with open(summ, "w") as f:
    p = subprocess.Popen([cg, "record", "-v", "-p", pid, "-o", trace, "--sched", "off",
                          "--sample-hz", "0", "--syscall-threshold", "off",
                          "--backtrace-threshold", "off"], stdout=f, stderr=subprocess.PIPE,
                         text=True)
    for line in p.stderr:
        if "GPU activity: status" in line:
            open(pause, "w").close()
    if p.wait() != 0:
        sys.exit("gpu.sh: cgbpf failed")
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime)
PY
	wait "$w"
	echo "$(ns_of "$tmp/$name.out")" >> "$tmp/$name.ns"
	stat -c %s "$tmp/$name.pt" >> "$tmp/$name.bytes"
	sed -n 's/.*measured (CUPTI [^)]*): \([0-9]*\) kernels.*/\1/p' "$tmp/$name.sum" >> "$tmp/$name.kernels"
}

for r in $(seq "$R"); do
	plain untraced
	plain idle CUDA_INJECTION64_PATH="$lib"
	traced api /nonexistent
	traced gpu "$cupti"
done
grep -q "GPU records lost\|LOST" "$tmp/gpu.sum" && lost=$(grep -i "lost" "$tmp/gpu.sum" | head -3) || lost="none"

$py - "$tmp" "$N" "$R" "$lost" <<'PY'
import statistics as st, sys
tmp, n, rounds, lost = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def vals(name, kind):
    try:
        return [float(x) for x in open("%s/%s.%s" % (tmp, name, kind)).read().split()]
    except FileNotFoundError:
        return []
med = {k: st.median(vals(k, "ns")) for k in ("untraced", "idle", "api", "gpu")}
print("launch loop, %d cuLaunchKernel per run (untraced and idle: %d), median of %d "
      "interleaved rounds:" % (n, 10 * n, rounds))
print("  %-10s %12s %10s" % ("config", "ns/launch", "x untraced"))
for k in ("untraced", "idle", "api", "gpu"):
    print("  %-10s %12.1f %10.3f" % (k, med[k], med[k] / med["untraced"]))
print("  idle library: %.3fx untraced (target <= 1.02x)" % (med["idle"] / med["untraced"]))
kern = vals("gpu", "kernels")
if kern:
    k = st.median(kern)
    loop_s = med["gpu"] * n / 1e9
    print("GPU records (kernels) per run: %d of %d launches (%.1f%%), %.0f per second carried"
          % (k, n, 100.0 * k / n, k / loop_s))
    db = st.median(vals("gpu", "bytes")) - st.median(vals("api", "bytes"))
    print("trace bytes per kernel (gpu - api): %.1f" % (db / k))
    dc = st.median(vals("gpu", "cpu")) - st.median(vals("api", "cpu"))
    print("cgbpf CPU per kernel record (gpu - api): %.0f ns" % (dc * 1e9 / k))
print("losses reported in the gpu summary: %s" % lost)
PY
