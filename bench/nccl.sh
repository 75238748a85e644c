#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What tracing an NCCL call costs (not a test).
#
#   sudo bash bench/nccl.sh
#
# Measures, in one run, ns per ncclAllReduce (one float, ungrouped) of
# build/workloads/nccl_bench on the fake libnccl.so.2:
#   1 rank    BENCH_N calls on a one-rank communicator: the library's own
#             work is a lock and an unlock (~40 ns), so what tracing adds
#             stands out
#   2 ranks   BENCH_N2 calls per rank, two rank threads meeting in every
#             call (a futex rendezvous, as ranks wait for each other on a
#             GPU): tracing next to a realistic wait
# each untraced and under `cgbpf record -p TARGET --trace nccl` (scheduler,
# syscalls, CPU samples and backtraces off: only the NCCL probes differ).
# ncclAllReduce takes seven arguments, so its probe also reads the stack.
# For reference, in the same rounds: ns per cuLaunchKernel
# (build/workloads/bench_launch, BENCH_N calls) untraced and under
# `cgbpf record -p TARGET --trace cuda`, the driver call bench/run.sh
# measures, so the NCCL figure can be read against it.
# Every figure is the median of BENCH_RUNS runs, configurations interleaved
# round by round; compare ratios within one run only. Also prints the trace
# bytes per traced call (1 rank) and whether any record was lost.
#
# Knobs (environment): BENCH_N (1000000), BENCH_N2 (20000), BENCH_RUNS (5).
set -euo pipefail

N=${BENCH_N:-1000000}
N2=${BENCH_N2:-20000}
RUNS=${BENCH_RUNS:-5}

if [ "$(id -u)" -ne 0 ]; then
	echo "bench/nccl.sh: needs root (it loads BPF programs): run it with sudo" >&2
	exit 1
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
echo "building (make -s all)..." >&2
make -s --no-print-directory all >&2

CGBPF=$ROOT/build/cgbpf
WL=$ROOT/build/workloads/nccl_bench
LAUNCH=$ROOT/build/workloads/bench_launch
[ -x "$WL" ] || { echo "bench/nccl.sh: $WL not built (it needs the CUDA toolkit's nccl.h)" >&2; exit 1; }
COMMON=(--sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off)
TMP=$(mktemp -d /tmp/cgbpf-bench-nccl.XXXXXX)
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() { echo "bench/nccl.sh: $*" >&2; exit 1; }
untrack() {
	local p keep=()
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# untraced CMD...: sets R_NS.
untraced() {
	LD_LIBRARY_PATH=$ROOT/build/fake "$@" > "$TMP/u.wl" 2>&1 || die "$* failed: $(cat "$TMP/u.wl")"
	R_NS=$(ns_of "$TMP/u.wl")
}

# traced LIB FUNC CMD...: CMD (gated) as the target of cgbpf --trace LIB;
# sets R_NS, R_LOST and R_BYTES (trace file size).
traced() {
	local lib=$1 fn=$2 gate=$TMP/gate w c
	shift 2
	rm -f "$gate" "$TMP"/t.*
	LD_LIBRARY_PATH=$ROOT/build/fake CGBPF_WAIT_FILE=$gate "$@" > "$TMP/t.wl" 2>&1 &
	w=$!
	PIDS+=($w)
	"$CGBPF" record -p $w --trace "$lib" "${COMMON[@]}" -o "$TMP/t.pftrace" > "$TMP/t.sum" 2> "$TMP/t.err" &
	c=$!
	PIDS+=($c)
	wait_for "$TMP/t.err" "tracing [0-9]+ process" 30 $c || die "cgbpf did not start: $(cat "$TMP/t.err")"
	touch "$gate"
	wait $w || die "$* failed: $(cat "$TMP/t.wl")"
	untrack $w
	wait $c || die "cgbpf failed: $(cat "$TMP/t.err")"
	untrack $c
	grep -Eq " $fn( |$)" "$TMP/t.sum" || die "cgbpf traced no $fn: $(cat "$TMP/t.err")"
	R_NS=$(ns_of "$TMP/t.wl")
	R_LOST=$(sed -n 's/.*LOST \([0-9]*\) records.*/\1/p' "$TMP/t.sum")
	R_BYTES=$(stat -c %s "$TMP/t.pftrace")
}

declare -a U1 T1 U2 T2 UL TL BYTES
LOST=0
for ((round = 1; round <= RUNS; round++)); do
	echo "round $round/$RUNS" >&2
	untraced "$WL" "$N" 1; U1+=("$R_NS")
	traced nccl ncclAllReduce "$WL" "$N" 1; T1+=("$R_NS"); BYTES+=("$R_BYTES")
	LOST=$((LOST + ${R_LOST:-0}))
	untraced "$LAUNCH" "$N"; UL+=("$R_NS")
	traced cuda cuLaunchKernel "$LAUNCH" "$N"; TL+=("$R_NS"); LOST=$((LOST + ${R_LOST:-0}))
	untraced "$WL" "$N2" 2; U2+=("$R_NS")
	traced nccl ncclAllReduce "$WL" "$N2" 2; T2+=("$R_NS"); LOST=$((LOST + ${R_LOST:-0}))
done

u1=$(median "${U1[@]}"); t1=$(median "${T1[@]}")
u2=$(median "${U2[@]}"); t2=$(median "${T2[@]}")
ul=$(median "${UL[@]}"); tl=$(median "${TL[@]}")
b1=$(median "${BYTES[@]}")
printf '\nns per ncclAllReduce (median of %d runs; %d calls with 1 rank, %d per rank with 2)\n\n' \
	"$RUNS" "$N" "$N2"
printf '  %-8s %12s %12s %14s %8s\n' ranks untraced traced "added per call" ratio
printf '  %-8s %12s %12s %14s %8s\n' 1 "$u1" "$t1" "$(calc "$t1 - $u1")" "$(calc "$t1 / $u1" 2)"
printf '  %-8s %12s %12s %14s %8s\n' 2 "$u2" "$t2" "$(calc "$t2 - $u2")" "$(calc "$t2 / $u2" 2)"
printf '\n  cuLaunchKernel, same rounds: untraced %s, traced %s, added %s ns per call\n' \
	"$ul" "$tl" "$(calc "$tl - $ul")"
printf '\n  runs, 1 rank: untraced %s; traced %s\n' "${U1[*]}" "${T1[*]}"
printf '  runs, 2 ranks: untraced %s; traced %s\n' "${U2[*]}" "${T2[*]}"
printf '  runs, cuLaunchKernel: untraced %s; traced %s\n' "${UL[*]}" "${TL[*]}"
printf '\n  trace bytes per traced call (1 rank): %s\n' "$(calc "$b1 / $N" 1)"
printf '  records lost in all traced runs: %d\n\n' "$LOST"
echo "nccl_untraced_1=$u1 nccl_traced_1=$t1 nccl_untraced_2=$u2 nccl_traced_2=$t2" \
	"launch_untraced=$ul launch_traced=$tl nccl_bytes_per_call=$(calc "$b1 / $N" 1) nccl_lost=$LOST"
