#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `cgbpf stats` throughput and memory on large traces (not a test).
# Records bench_launch with N and 4N cuLaunchKernel calls (API probes only:
# no syscalls, scheduler or samples, so nearly every slice is a launch),
# then reads each trace with `cgbpf stats --format json` STATS_RUNS times
# and reports the median wall time, the median CPU time (user + system:
# on a shared machine wall time includes waiting for a CPU), slices per
# second of each (the API calls the tables count) and the maximum resident
# set size (GNU time). Memory bounded means: 4x the slices, the same RSS.
#
#   sudo bash bench/stats.sh            (after make; STATS_N=1000000 STATS_RUNS=3)
set -euo pipefail

N=${STATS_N:-1000000}
RUNS=${STATS_RUNS:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
. "$top/bench/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "bench/stats.sh: needs root (records a trace)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/stats.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
for f in "$out/cgbpf" "$out/workloads/bench_launch"; do
	[ -x "$f" ] || { echo "bench/stats.sh: $f missing: run make" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "cgbpf stats on traces of bench_launch (cuLaunchKernel loop), median of $RUNS runs"
printf '%10s %10s %9s %8s %8s %14s %14s %12s\n' launches "trace MiB" slices "wall s" "CPU s" \
	"slices/wall s" "slices/CPU s" "max RSS MiB"
for n in "$N" "$((4 * N))"; do
	trace=$tmp/launch-$n.perfetto-trace
	LD_LIBRARY_PATH=$out/fake "$out/cgbpf" record --sample-hz 0 --syscall-threshold off \
		--sched off --trace cuda --no-summary -o "$trace" -- "$out/workloads/bench_launch" "$n" \
		>/dev/null 2>"$tmp/record.err" || { cat "$tmp/record.err" >&2; exit 1; }
	walls=() cpus=() rss=()
	for _ in $(seq "$RUNS"); do
		/usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$out/cgbpf" stats --format json \
			--report cuda_api_sum "$trace" >"$tmp/stats.json"
		read -r w u sy r < <(tail -1 "$tmp/time")
		walls+=("$w")
		cpus+=("$(calc "$u + $sy" 2)")
		rss+=("$r")
	done
	# Slices the tables counted: every API call (the trace's other
	# slices, a few hundred, are not counted).
	slices=$(/usr/bin/python3 -c 'import json,sys
print(sum(r["Num Calls"] for r in json.load(open(sys.argv[1]))["cuda_api_sum"]))' "$tmp/stats.json")
	wall=$(median "${walls[@]}")
	cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	printf '%10s %10s %9s %8s %8s %14s %14s %12s\n' "$n" \
		"$(calc "$(stat -c %s "$trace") / 1048576")" "$slices" "$wall" "$cpu" \
		"$(calc "$slices / $wall" 0)" "$(calc "$slices / $cpu" 0)" \
		"$(calc "$(median "${rss[@]}") / 1024")"
done
