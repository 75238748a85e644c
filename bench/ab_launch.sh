#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Before and after: the launch loop (bench_launch, 1 thread) under two cgbpf
# binaries, interleaved round by round, with the same fake driver and
# workload (this tree's). Not a test.
#
#   sudo bash bench/ab_launch.sh BEFORE_CGBPF [AFTER_CGBPF (build/cgbpf)]
#
# e.g. the binary of an older commit:
#   git worktree add /tmp/before COMMIT && make -C /tmp/before build/cgbpf
#   sudo bash bench/ab_launch.sh /tmp/before/build/cgbpf
#
# Each round runs the loop untraced, then under each binary's `record -p`
# with the API alone and with the defaults; prints the medians (ns per
# call), each configuration's overhead over the untraced loop, and the
# after/before ratio of the overheads (1.00: no change). Knobs: BENCH_N
# (calls per run, 1000000), BENCH_RUNS (rounds, 5).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
[ $# -ge 1 ] || { sed -n 4,18p "$0" | sed 's/^# \{0,1\}//'; exit 2; }
A=$(realpath "$1")
B=$(realpath "${2:-$ROOT/build/cgbpf}")
N=${BENCH_N:-1000000}
RUNS=${BENCH_RUNS:-5}
API="--sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off --python off"
make -s --no-print-directory -C "$ROOT" all test-bins >&2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# A private copy of the driver and workload: probes others hold on
# build/fake must not fire in this loop.
mkdir -p "$TMP/fake" "$TMP/workloads"
cp "$ROOT/build/fake/libcuda.so.1" "$TMP/fake/"
cp "$ROOT/build/workloads/bench_launch" "$TMP/workloads/"
WL=$TMP/workloads/bench_launch

untraced() {
	"$WL" "$N" > "$TMP/wl.out" 2>&1 || { cat "$TMP/wl.out" >&2; exit 1; }
	ns_of "$TMP/wl.out"
}

# traced CGBPF FLAGS: ns per call of the loop under `record -p`, the loop
# gated until the probes are live.
traced() {
	local gate=$TMP/gate w c i
	rm -f "$gate" "$TMP/cg.err"
	CGBPF_WAIT_FILE=$gate "$WL" "$N" > "$TMP/wl.out" 2>&1 &
	w=$!
	# shellcheck disable=SC2086
	rm -f "$TMP/t.pftrace"
	"$1" record $2 -p $w -o "$TMP/t.pftrace" > "$TMP/cg.out" 2> "$TMP/cg.err" &
	c=$!
	for ((i = 0; i < 1500; i++)); do
		grep -Eq "probing [0-9]+ CUDA driver functions" "$TMP/cg.err" 2>/dev/null && break
		kill -0 $c 2>/dev/null || { cat "$TMP/cg.err" >&2; exit 1; }
		sleep 0.02
	done
	touch "$gate"
	wait $w
	wait $c || { cat "$TMP/cg.err" >&2; exit 1; }
	ns_of "$TMP/wl.out"
}

declare -a U AA AD BA BD
for ((r = 1; r <= RUNS; r++)); do
	U+=("$(untraced)")
	AA+=("$(traced "$A" "$API")")
	BA+=("$(traced "$B" "$API")")
	AD+=("$(traced "$A" "")")
	BD+=("$(traced "$B" "")")
	echo "round $r/$RUNS: untraced ${U[-1]}, before ${AA[-1]} / ${AD[-1]}, after ${BA[-1]} / ${BD[-1]} ns" >&2
done
mu=$(median "${U[@]}")
row() {	# name before-median after-median
	local ob oa
	ob=$(calc "$2 - $mu")
	oa=$(calc "$3 - $mu")
	printf '  %-22s %10s %10s   %8s %8s   %6s\n' "$1" "$2" "$3" "$ob" "$oa" \
		"$(calc "$oa / $ob" 2)"
}
echo "== launch loop, ns per cuLaunchKernel, median of $RUNS x $N calls"
echo "   before: $A"
echo "   after:  $B"
echo "   untraced: $mu ns"
printf '  %-22s %10s %10s   %8s %8s   %6s\n' "" before after "ovh bef" "ovh aft" "after/before"
row "API only" "$(median "${AA[@]}")" "$(median "${BA[@]}")"
row "defaults" "$(median "${AD[@]}")" "$(median "${BD[@]}")"
