#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Cost of CPU stacks (not a test: `make test` never runs it).
#
#   sudo bash bench/stacks.sh          (after `make`; `sudo make bench` first
#                                       installs what bench/run.sh needs)
#
# Measures, in one run:
#   A. what the backtrace knob adds to every traced call: ns per
#      cuLaunchKernel of build/workloads/bench_launch untraced, under a bare
#      uprobe_multi trap (build/bench/bare --multi), and under cgbpf with
#      --backtrace-threshold off / 100us (sampling off in both), and with
#      the defaults (99 Hz sampling + 100us backtraces); interleaved rounds,
#      medians, ratios of overheads to the bare trap's;
#   B. cost per sampled stack: a target spinning on one CPU
#      (build/apichain/chain_fp_pie) under --sample-hz 999 with --stack-copy
#      8192 (default) and 0: BPF run time per sample (kernel.bpf_stats_enabled
#      for the duration, restored after), cgbpf's CPU time per sample (its
#      steady-state CPU rate, schedstat, on vs off), trace bytes per sample
#      (slope between a long and a short capture), ring bytes per sample.
# Knobs (environment): BENCH_N (calls per run, 1000000), BENCH_RUNS (5),
# BENCH_SPIN_MS (spin of B, 6000; cgbpf records -p it for SPIN - 800 ms),
# BENCH_PARTS ("A B").
set -euo pipefail

N=${BENCH_N:-1000000}
RUNS=${BENCH_RUNS:-5}
SPIN=${BENCH_SPIN_MS:-6000}
HZ=999

[ "$(id -u)" -eq 0 ] || { echo "bench/stacks.sh: needs root" >&2; exit 1; }
cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
make -s --no-print-directory all bench-bins >&2
CGBPF=$ROOT/build/cgbpf
BARE=$ROOT/build/bench/bare
TMP=$(mktemp -d /tmp/cgbpf-bench-stacks.XXXXXX)
STATS0=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
	sysctl -q -w kernel.bpf_stats_enabled="$STATS0" || true
	[ -n "${BB:-}" ] && kill "$BB" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

launch_copy "$TMP" "$CGBPF"
# The spinning target too: probes others hold on build/ fire nowhere here.
mkdir -p "$TMP/stacks"
cp build/apichain/chain_fp_pie "$TMP/stacks/"
CHAIN=$TMP/stacks/chain_fp_pie

echo "== cgbpf stacks benchmark: $(date -u +%FT%TZ), $(uname -r), $(nproc) CPUs," \
	"git $(git describe --always --dirty 2>/dev/null)"

# ------------------------------------------------------------ A
run_untraced() { "$WL" "$N" > "$TMP/wl.out" 2>&1; R=$(ns_of "$TMP/wl.out"); }
run_bare() {
	rm -f "$TMP/bare.out"
	"$BARE" --multi "$LIB" "$OFF" > "$TMP/bare.out" 2>&1 &
	BB=$!
	wait_for "$TMP/bare.out" "^bare: attached" 10 || { echo "bare did not attach" >&2; exit 1; }
	run_untraced
	kill -TERM $BB; wait $BB 2>/dev/null || true; BB=
}
run_cgbpf() {	# ARGS...
	local gate=$TMP/gate w c
	rm -f "$gate" "$TMP/a.err" "$TMP/a.sum"
	CGBPF_WAIT_FILE=$gate "$WL" "$N" > "$TMP/wl.out" 2>&1 &
	w=$!
	"$CGBPF" record -p $w -o "$TMP/a.pftrace" "$@" > "$TMP/a.sum" 2> "$TMP/a.err" &
	c=$!
	wait_for "$TMP/a.err" "probing [0-9]+ CUDA driver functions" 30 ||
		{ echo "cgbpf did not attach: $(cat "$TMP/a.err")" >&2; exit 1; }
	touch "$gate"
	wait $w || { echo "bench_launch failed: $(cat "$TMP/wl.out")" >&2; exit 1; }
	wait $c || { echo "cgbpf failed: $(tail -3 "$TMP/a.err")" >&2; exit 1; }
	grep -q "no records lost" "$TMP/a.sum" || echo "  (records lost in a run: $*)" >&2
	R=$(ns_of "$TMP/wl.out")
	rm -f "$TMP/a.pftrace"
}
PARTS=${BENCH_PARTS:-A B}
if [[ " $PARTS " == *" A "* ]]; then
U=() B=() OFFK=() ONK=() DEF=()
echo "running A ($RUNS rounds of $N calls)..." >&2
for ((r = 1; r <= RUNS; r++)); do
	run_untraced; U+=("$R")
	run_bare; B+=("$R")
	run_cgbpf --sample-hz 0 --backtrace-threshold off; OFFK+=("$R")
	run_cgbpf --sample-hz 0 --backtrace-threshold 100us; ONK+=("$R")
	run_cgbpf; DEF+=("$R")
	echo "  round $r: untraced ${U[-1]} bare ${B[-1]} bt-off ${OFFK[-1]} bt-100us ${ONK[-1]} defaults ${DEF[-1]}" >&2
done
MU=$(median "${U[@]}") MB=$(median "${B[@]}") MOFF=$(median "${OFFK[@]}")
MON=$(median "${ONK[@]}") MDEF=$(median "${DEF[@]}")
rat() { calc "($1 - $MU) / ($MB - $MU)" 2; }
echo
echo "== A. ns per cuLaunchKernel (median of $RUNS x $N; overhead = ns - untraced)"
printf '  %-52s %8s %9s %7s\n' config ns/call overhead "x bare"
printf '  %-52s %8s %9s %7s\n' "untraced" "$MU" - -
printf '  %-52s %8s %9s %7s\n' "bare trap, empty progs (uprobe_multi)" "$MB" "$(calc "$MB - $MU")" 1.00
printf '  %-52s %8s %9s %7s\n' "cgbpf --sample-hz 0 --backtrace-threshold off" "$MOFF" "$(calc "$MOFF - $MU")" "$(rat "$MOFF")"
printf '  %-52s %8s %9s %7s\n' "cgbpf --sample-hz 0 --backtrace-threshold 100us" "$MON" "$(calc "$MON - $MU")" "$(rat "$MON")"
printf '  %-52s %8s %9s %7s\n' "cgbpf (defaults: 99 Hz, 100us)" "$MDEF" "$(calc "$MDEF - $MU")" "$(rat "$MDEF")"
echo "  backtrace knob adds $(calc "$MON - $MOFF") ns per call (difference of medians)"

# The programs' own run time per call (kernel.bpf_stats_enabled), knob off
# and on: what the knob adds inside BPF, free of the trap's noise.
prog_ns() {	# NAME: ns per run of that program (bpftool prog show, run_time_ns / run_cnt)
	bpftool prog show 2>/dev/null | awk -v n="$1" '
		{ for (i = 1; i < NF; i++) if ($i == "name" && $(i + 1) == n) hit = 1 }
		hit { for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t = $(i + 1); if ($i == "run_cnt") c = $(i + 1) }
		      if (c > 0) printf "%.1f\n", t / c; exit }' || true	# bpftool may get SIGPIPE
}
run_stats() {	# ARGS...: sets E_NS X_NS
	local gate=$TMP/gate w c e x
	rm -f "$gate" "$TMP/a.err" "$TMP/a.sum"
	CGBPF_WAIT_FILE=$gate "$WL" "$N" > "$TMP/wl.out" 2>&1 &
	w=$!
	"$CGBPF" record -p $w -o "$TMP/a.pftrace" "$@" > "$TMP/a.sum" 2> "$TMP/a.err" &
	c=$!
	wait_for "$TMP/a.err" "probing [0-9]+ CUDA driver functions" 30 ||
		{ echo "cgbpf did not attach: $(cat "$TMP/a.err")" >&2; exit 1; }
	touch "$gate"
	E_NS=n/a X_NS=n/a
	while kill -0 $w 2>/dev/null; do
		e=$(prog_ns call_enter_multi) x=$(prog_ns call_exit_multi)
		[ -n "$e" ] && E_NS=$e
		[ -n "$x" ] && X_NS=$x
		sleep 0.2
	done
	wait $w || { echo "bench_launch failed: $(cat "$TMP/wl.out")" >&2; exit 1; }
	wait $c || { echo "cgbpf failed: $(tail -3 "$TMP/a.err")" >&2; exit 1; }
	rm -f "$TMP/a.pftrace"
}
sysctl -q -w kernel.bpf_stats_enabled=1
EOFF=() XOFF=() EON=() XON=()
for ((r = 1; r <= 3; r++)); do
	run_stats --sample-hz 0 --backtrace-threshold off; EOFF+=("$E_NS"); XOFF+=("$X_NS")
	run_stats --sample-hz 0 --backtrace-threshold 100us; EON+=("$E_NS"); XON+=("$X_NS")
done
sysctl -q -w kernel.bpf_stats_enabled="$STATS0"
echo "  BPF run time per call (bpf_stats, median of 3): entry $(median "${EOFF[@]}") ns -> $(median "${EON[@]}") ns," \
	"return $(median "${XOFF[@]}") ns -> $(median "${XON[@]}") ns (knob off -> 100us)"
fi
[[ " $PARTS " == *" B "* ]] || exit 0

# ------------------------------------------------------------ B
run_chain() {	# TAG SPIN_MS ARGS...: sets S_SAMPLES S_CPU S_SIZE S_RUN_NS S_RUN_CNT
	local tag=$1 spin=$2 c w dur a0 a1 t0 t1
	shift 2
	dur=$((spin - 800))
	LD_LIBRARY_PATH=$TMP/fake "$CHAIN" "$spin" 0 &
	w=$!
	"$CGBPF" record -p $w -d ${dur}ms -o "$TMP/$tag.pftrace" --backtrace-threshold off "$@" \
		> "$TMP/$tag.sum" 2> "$TMP/$tag.err" &
	c=$!
	S_RUN_NS=0 S_RUN_CNT=0
	# cgbpf's CPU time over a window in the steady state (schedstat: ns),
	# after setup and before the end, so fixed costs stay out.
	sleep 1
	read -r a0 _ < "/proc/$c/schedstat"
	t0=$(date +%s%N)
	sleep "$(calc "$dur / 1000 - 1.4" 2)"
	read -r a1 _ < "/proc/$c/schedstat"
	t1=$(date +%s%N)
	S_RATE=$(calc "($a1 - $a0) / ($t1 - $t0)" 6)	# CPU s per s
	if bpftool prog show name sample > "$TMP/prog" 2>/dev/null; then
		S_RUN_NS=$(sed -n 's/.*run_time_ns \([0-9]*\).*/\1/p' "$TMP/prog" | head -1)
		S_RUN_CNT=$(sed -n 's/.*run_cnt \([0-9]*\).*/\1/p' "$TMP/prog" | head -1)
	fi
	wait $c
	wait $w
	S_SAMPLES=$(sed -n 's/^ *\([0-9]*\) samples at.*/\1/p' "$TMP/$tag.sum")
	S_SIZE=$(stat -c %s "$TMP/$tag.pftrace")
	S_SAMPLES=${S_SAMPLES:-0}
	S_RUN_NS=${S_RUN_NS:-0} S_RUN_CNT=${S_RUN_CNT:-0}
	S_DUR=$dur
}
echo "running B (spin ${SPIN} ms at $HZ Hz)..." >&2
sysctl -q -w kernel.bpf_stats_enabled=1
# Trace bytes per sample: the slope between a long and a short capture
# (fixed parts cancel). cgbpf's CPU per sample: its CPU rate in the steady
# state with sampling on, less the rate with sampling off, over the sample
# rate.
SHORT=$(( (SPIN + 1600) / 3 ))
run_chain off "$SPIN" --sample-hz 0
OFF_RATE=$S_RATE
echo
echo "== B. cost per sampled stack (target spinning, captures of $((SPIN - 800)) and $((SHORT - 800)) ms, --sample-hz $HZ)"
printf '  %-14s %8s %12s %15s %17s %16s\n' "--stack-copy" samples "bpf ns/run" "bpf us/sample" "cgbpf us/sample" "trace B/sample"
for copy in 8192 0; do
	run_chain s$copy "$SHORT" --sample-hz $HZ --stack-copy $copy
	S1=$S_SAMPLES Z1=$S_SIZE
	run_chain c$copy "$SPIN" --sample-hz $HZ --stack-copy $copy
	[ "$S_SAMPLES" -gt "$S1" ] || { echo "no more samples in the long run: $(cat "$TMP/c$copy.err")" >&2; exit 1; }
	# The program runs on every CPU tick, idle ones included (they return
	# at once): charging all of its time to the samples is an upper bound.
	printf '  %-14s %8s %12s %15s %17s %16s\n' "$copy" "$S_SAMPLES" \
		"$([ "$S_RUN_CNT" -gt 0 ] && calc "$S_RUN_NS / $S_RUN_CNT" 0 || echo n/a)" \
		"$(calc "$S_RUN_NS / 1000 / $S_SAMPLES" 2)" \
		"$(calc "($S_RATE - $OFF_RATE) * 1e6 / ($S_SAMPLES * 1000 / $S_DUR)" 1)" \
		"$(calc "($S_SIZE - $Z1) / ($S_SAMPLES - $S1)" 1)"
done
echo "  ring bytes per sample record: $(( $(grep -o 'STACK_USER_MAX [0-9]*' bpf/stack_rec.h | awk '{print $2}') * 8 + 64 * 8 + 56 )) + stack copy"
