#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `cgbpf stats` on a trace with GPU activity (not a test): what reading
# the GPU operations back through the summary's timeline code
# (cuda_gpu_util) costs. Records bench_launch N with the fake CUPTI (each
# cuLaunchKernel gives a kernel slice and a flow from its call), then runs
# `cgbpf stats --format json` (every table) STATS_RUNS times, interleaved
# with STATS_BASE (another cgbpf, e.g. one built before cuda_gpu_util)
# when given, and prints the medians of CPU time (user + system), the
# slices read per CPU second (API calls + GPU operations), the max RSS and
# the ratio of the CPU times.
#
#   sudo STATS_BASE=/path/to/old/cgbpf bash bench/stats_gpu.sh   (STATS_N=1000000 STATS_RUNS=5)
set -euo pipefail

N=${STATS_N:-1000000}
RUNS=${STATS_RUNS:-5}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
base=${STATS_BASE:-}
. "$top/bench/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "bench/stats_gpu.sh: needs root (records a trace)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/stats_gpu.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
for f in "$out/cgbpf" "$out/workloads/bench_launch" "$out/fake/libcupti.so.13" ${base:+"$base"}; do
	[ -e "$f" ] || { echo "bench/stats_gpu.sh: $f missing: run make" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

trace=$tmp/gpu.perfetto-trace
CGBPF_CUPTI_PATH=$out/fake/libcupti.so.13 LD_LIBRARY_PATH=$out/fake "$out/cgbpf" record \
	--sample-hz 0 --syscall-threshold off --sched off --trace cuda --no-summary \
	-o "$trace" -- "$out/workloads/bench_launch" "$N" >/dev/null 2>"$tmp/record.err" ||
	{ cat "$tmp/record.err" >&2; exit 1; }

# run BIN TAG: one timed run; appends CPU seconds and RSS KiB to TAG's lists.
declare -A cpu rss
run() {
	/usr/bin/time -f '%U %S %M' -o "$tmp/time" "$1" stats --format json "$trace" >"$tmp/$2.json"
	read -r u sy r < <(tail -1 "$tmp/time")
	cpu[$2]+="$(calc "$u + $sy" 3) "
	rss[$2]+="$r "
}
for _ in $(seq "$RUNS"); do
	run "$out/cgbpf" new
	[ -z "$base" ] || run "$base" base
done
slices=$(/usr/bin/python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(sum(r["Num Calls"] for r in d["cuda_api_sum"]) + sum(r["Instances"] for r in d["cuda_gpu_kern_sum"]))' "$tmp/new.json")
ops=$(/usr/bin/python3 -c 'import json,sys
print(sum(r["Operations"] for r in json.load(open(sys.argv[1])).get("cuda_gpu_util", [])))' "$tmp/new.json")

echo "cgbpf stats --format json on bench_launch $N with the fake CUPTI ($(calc "$(stat -c %s "$trace") / 1048576") MiB, $slices slices, $ops GPU operations in cuda_gpu_util), median of $RUNS runs"
printf '%-6s %8s %14s %12s\n' build "CPU s" "slices/CPU s" "max RSS MiB"
for tag in new ${base:+base}; do
	c=$(printf '%s\n' ${cpu[$tag]} | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	printf '%-6s %8s %14s %12s\n' "$tag" "$c" "$(calc "$slices / $c" 0)" \
		"$(calc "$(median ${rss[$tag]}) / 1024")"
	eval "med_$tag=$c"
done
[ -z "$base" ] || echo "CPU time new / base: $(calc "$med_new / $med_base" 2)"
