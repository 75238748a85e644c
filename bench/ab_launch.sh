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
# after/before ratio of the overheads (1.00: no change); then the CPU of
# each binary's consumer per traced call with the API alone (its CPU time,
# less that of a 1000-launch capture, divided by the calls; `times` counts
# 10 ms ticks). Knobs: BENCH_N (calls per run, 1000000), BENCH_RUNS
# (rounds, 5), AB_CONFIGS (more configurations, each run under both
# binaries: "NAME=FLAGS;NAME=FLAGS", e.g. "python off=--python off"),
# AB_BARE=1 (the bare entry+return trap too, bench/bare.c's uprobe_multi
# pair, and each configuration's overhead above it).
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
cd "$ROOT"
launch_copy "$TMP" "$B"

untraced() {
	"$WL" "$N" > "$TMP/wl.out" 2>&1 || { cat "$TMP/wl.out" >&2; exit 1; }
	ns_of "$TMP/wl.out"
}

# traced CGBPF FLAGS [CALLS]: "NS CPU": ns per call of the loop under
# `record -p` (the loop gated until the probes are live), and cgbpf's CPU
# seconds.
traced() {
	local gate=$TMP/gate w c i
	rm -f "$gate" "$TMP/cg.err"
	CGBPF_WAIT_FILE=$gate "$WL" "${3:-$N}" > "$TMP/wl.out" 2>&1 &
	w=$!
	rm -f "$TMP/t.pftrace"
	# shellcheck disable=SC2086
	"$1" record $2 -p $w -o "$TMP/t.pftrace" > "$TMP/cg.out" 2> "$TMP/cg.err" &
	c=$!
	for ((i = 0; i < 1500; i++)); do
		grep -Eq "probing [0-9]+ CUDA driver functions" "$TMP/cg.err" 2>/dev/null && break
		kill -0 $c 2>/dev/null || { cat "$TMP/cg.err" >&2; exit 1; }
		sleep 0.02
	done
	touch "$gate"
	wait $w
	# cgbpf is the only child reaped in between.
	times > "$TMP/t0"
	wait $c || { cat "$TMP/cg.err" >&2; exit 1; }
	times > "$TMP/t1"
	# CPU in ms: median() keeps one decimal.
	echo "$(ns_of "$TMP/wl.out") $(calc "($(child_cpu "$TMP/t1") - $(child_cpu "$TMP/t0")) * 1000" 0)"
}

declare -a U AA AD BA BD CA CB BARE
XN=() XF=()
declare -A XA XB
IFS=';' read -r -a XC <<< "${AB_CONFIGS:-}"
for x in "${XC[@]}"; do
	[[ $x == *=* ]] || { echo "ab_launch.sh: AB_CONFIGS wants NAME=FLAGS;...: $x" >&2; exit 2; }
	XN+=("${x%%=*}")
	XF+=("${x#*=}")
done
[ "${AB_BARE:-0}" != 1 ] || make -s --no-print-directory build/bench/bare >&2

# bare: ns per call of the loop under bench/bare.c's empty programs.
bare() {
	local b
	rm -f "$TMP/b.out"
	build/bench/bare --multi "$LIB" "$OFF" > "$TMP/b.out" 2>&1 &
	b=$!
	wait_for "$TMP/b.out" "^bare: attached" 20 $b || { cat "$TMP/b.out" >&2; exit 1; }
	"$WL" "$N" > "$TMP/wl.out" 2>&1
	kill -INT $b
	wait $b || true
	ns_of "$TMP/wl.out"
}

# The fixed part of a capture's CPU (loading, attaching, writing the
# trace's head), each binary's, subtracted below.
read -r _ FA <<< "$(traced "$A" "$API" 1000)"
read -r _ FB <<< "$(traced "$B" "$API" 1000)"
for ((r = 1; r <= RUNS; r++)); do
	U+=("$(untraced)")
	read -r ns cpu <<< "$(traced "$A" "$API")"; AA+=("$ns"); CA+=("$cpu")
	read -r ns cpu <<< "$(traced "$B" "$API")"; BA+=("$ns"); CB+=("$cpu")
	read -r ns _ <<< "$(traced "$A" "")"; AD+=("$ns")
	read -r ns _ <<< "$(traced "$B" "")"; BD+=("$ns")
	[ "${AB_BARE:-0}" != 1 ] || BARE+=("$(bare)")
	for ((i = 0; i < ${#XN[@]}; i++)); do
		read -r ns _ <<< "$(traced "$A" "${XF[i]}")"; XA[$i]="${XA[$i]:-} $ns"
		read -r ns _ <<< "$(traced "$B" "${XF[i]}")"; XB[$i]="${XB[$i]:-} $ns"
	done
	echo "round $r/$RUNS: untraced ${U[-1]}, before ${AA[-1]} / ${AD[-1]}, after ${BA[-1]} / ${BD[-1]} ns;" \
		"cgbpf CPU (API only) before ${CA[-1]} ms, after ${CB[-1]} ms" >&2
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
for ((i = 0; i < ${#XN[@]}; i++)); do
	# shellcheck disable=SC2086
	row "${XN[i]}" "$(median ${XA[$i]})" "$(median ${XB[$i]})"
done
if [ "${AB_BARE:-0}" = 1 ]; then
	mb=$(median "${BARE[@]}")
	ob=$(calc "$mb - $mu")
	echo "== above the bare entry+return trap ($mb ns/call: $ob ns of overhead)"
	printf '  %-22s %10s %10s   %8s %8s\n' "" "ns before" "ns after" "x bare b" "x bare a"
	bare_row() {	# name before-median after-median
		printf '  %-22s %10s %10s   %8s %8s\n' "$1" "$(calc "$2 - $mb")" "$(calc "$3 - $mb")" \
			"$(calc "($2 - $mu) / $ob" 3)" "$(calc "($3 - $mu) / $ob" 3)"
	}
	bare_row "API only" "$(median "${AA[@]}")" "$(median "${BA[@]}")"
	bare_row "defaults" "$(median "${AD[@]}")" "$(median "${BD[@]}")"
	for ((i = 0; i < ${#XN[@]}; i++)); do
		# shellcheck disable=SC2086
		bare_row "${XN[i]}" "$(median ${XA[$i]})" "$(median ${XB[$i]})"
	done
fi
ca=$(median "${CA[@]}")
cb=$(median "${CB[@]}")
echo "== cgbpf's consumer CPU per traced call, API only (median of $RUNS; less a 1000-launch capture's $FA / $FB ms)"
printf '  %-22s %10s %10s   %6s\n' "" before after "after/before"
printf '  %-22s %10s %10s   %6s\n' "ns of CPU per call" "$(calc "($ca - $FA) * 1e6 / $N")" \
	"$(calc "($cb - $FB) * 1e6 / $N")" "$(calc "($cb - $FB) / ($ca - $FA)" 2)"
echo "  (runs, ms: before ${CA[*]}; after ${CB[*]})"
