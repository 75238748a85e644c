#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cost of the scheduler programs per context switch, and trace bytes per
# context switch: bench/ctxsw (two processes pinned to one CPU passing a
# byte over pipes, lmbench lat_ctx-like) untraced, under
# `cgbpf record --sched all` and under `--sched targets`, interleaved
# ROUNDS times; medians and ratios against the untraced run of the same
# rounds. Needs root and a built cgbpf (make).
#
#   bash bench/sched.sh [ROUND_TRIPS] [ROUNDS]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
n=${1:-200000}
rounds=${2:-5}
cpu=${CPU:-1}
mkdir -p "$out/bench"
ctx=$out/bench/ctxsw
${CC:-cc} -O2 -Wall -Wextra -Werror -o "$ctx" "$top/bench/ctxsw.c"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

for i in $(seq "$rounds"); do
	"$ctx" "$n" "$cpu" | awk '/ns_per_roundtrip/ {print $2}' >> "$tmp/base"
	for scope in all targets; do
		"$out/cgbpf" record --sched "$scope" -o "$tmp/t.pftrace" -- "$ctx" "$n" "$cpu" \
			> "$tmp/out" 2>/dev/null
		awk '/ns_per_roundtrip/ {print $2}' "$tmp/out" >> "$tmp/$scope"
		sw=$(awk '/context switches/ {gsub(",", "", $3); print $3}' "$tmp/out")
		bytes=$(stat -c %s "$tmp/t.pftrace")
		echo "$bytes $sw" >> "$tmp/$scope.bytes"
		grep -q "no scheduler records lost" "$tmp/out" || echo "  (round $i, $scope: scheduler records lost)"
	done
done
b=$(median < "$tmp/base")
printf 'context switch ping-pong, %d round trips (2 switches each) on cpu %d, %d rounds, medians\n' \
	"$n" "$cpu" "$rounds"
printf '  %-22s %10s %8s %22s\n' configuration "ns/rtrip" ratio "trace bytes/switch"
printf '  %-22s %10.0f %8s %22s\n' untraced "$b" 1.00 -
for scope in all targets; do
	m=$(median < "$tmp/$scope")
	bps=$(awk '{print $1 / $2}' "$tmp/$scope.bytes" | median)
	printf '  %-22s %10.0f %8.2f %22.2f\n' "--sched $scope" "$m" "$(echo "$m / $b" | bc -l)" "$bps"
done
