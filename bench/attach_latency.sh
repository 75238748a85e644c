#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How long after a process maps a library file cgbpf has never seen does
# `record -a` have its probes attached? N processes each map a fresh copy
# of the fake libcuda (a new inode: nothing is probed in advance); cgbpf
# prints, per new file, the delay from the mmap's return in the kernel to
# the probes being in place (the process is paused meanwhile, so no call
# is missed whatever the delay). The issue's target is 100 ms.
#
# Usage: sudo bash bench/attach_latency.sh [N]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${1:-20}
OUT=${OUT:-build}
TMP=$(mktemp -d)
trap 'kill -INT $cg 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT

"$OUT/cgbpf" record -a --summary-only --sched off --sample-hz 0 \
	--syscall-threshold off 2> "$TMP/err" > /dev/null &
cg=$!
for _ in $(seq 100); do grep -q "capture running" "$TMP/err" 2>/dev/null && break; sleep 0.1; done
for i in $(seq "$N"); do
	mkdir "$TMP/l$i"
	cp "$OUT/fake/libcuda.so.1" "$TMP/l$i/"
	LD_LIBRARY_PATH="$TMP/l$i" "$OUT/workloads/mt" > /dev/null
done
kill -INT $cg
wait $cg || true
mapfile -t ms < <(sed -n 's/.*probed \([0-9.]*\) ms after it was mapped.*/\1/p' "$TMP/err")
[ ${#ms[@]} -eq "$N" ] || { echo "expected $N attach reports, got ${#ms[@]}" >&2; exit 1; }
max=$(printf '%s\n' "${ms[@]}" | sort -g | tail -1)
echo "record -a: a newly mapped library file probed after median $(median "${ms[@]}") ms," \
	"max $max ms ($N files; the process paused meanwhile)"
