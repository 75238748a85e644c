#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Capture windows: what a call costs outside a window (the BPF gate closed)
# against inside one and against the bare trap (empty entry and return
# programs, bench/bare.c), on build/workloads/bench_launch's cuLaunchKernel
# loop over the fake driver.
#
#   sudo bash bench/capture.sh
#
# Configurations, interleaved round by round (BENCH_RUNS rounds, median):
#   untraced     no probe
#   bare         empty programs through a uprobe_multi link (the floor)
#   outside      cgbpf record --delay 1h: gated, every call outside
#   outside_bt   the same with --backtrace-threshold 100us (the default):
#                the gate keeps the backtrace stack paired, one task
#                storage access at entry and at return
#   inside       cgbpf record --delay 50ms, the loop started after it: gated,
#                every call inside (records written)
#   plain        cgbpf record without capture options
# Ratios are of ns per call (loop included) within this run: of the
# medians, of the minima, and per round (the median of each round's
# ratio); target: outside <= 1.05 x bare. cgbpf probes the driver alone
# (--trace cuda): with NVTX traced its mmap watch stays on, and that
# syscall tracepoint adds ~100 ns to every traced return (the uretprobe
# syscall), in and outside windows alike (docs/design.md, "Attaching"). Knobs: BENCH_N (calls, 200000), BENCH_RUNS (5),
# CGBPF_FLAGS (default: the API alone, as bench/run.sh).
set -euo pipefail

N=${BENCH_N:-200000}
RUNS=${BENCH_RUNS:-5}
CGBPF_FLAGS=${CGBPF_FLAGS---trace cuda --sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off}

[ "$(id -u)" -eq 0 ] || { echo "bench/capture.sh: needs root (BPF)" >&2; exit 1; }
cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
make -s --no-print-directory all bench-bins >&2
CGBPF=$ROOT/build/cgbpf
BARE=$ROOT/build/bench/bare
TMP=$(mktemp -d "${BENCH_TMP:-/tmp}/cgbpf-bench-capture.XXXXXX")
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
die() { echo "bench/capture.sh: $*" >&2; exit 1; }

launch_copy "$TMP" "$CGBPF"
[ -n "$OFF" ] || die "no cuLaunchKernel in $LIB"
# Every function cgbpf probes in the library, for bare_all.
ALL=$("$CGBPF" check "$LIB" | awk '!/^#/ && $2 ~ /^0x/ { printf "%s%s", s, $2; s = "," }')

# wait_line FILE REGEX: up to 30 s.
wait_line() {
	local i
	for ((i = 0; i < 1500; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.02
	done
	return 1
}

run_untraced() {
	"$WL" "$N" > "$TMP/wl.out" 2>&1 || die "bench_launch failed"
	R=$(ns_of "$TMP/wl.out")
}

run_bare() {
	local b
	rm -f "$TMP/bare.out"
	"$BARE" --multi "$LIB" "$OFF" > "$TMP/bare.out" 2>&1 &
	b=$!
	PIDS+=($b)
	wait_line "$TMP/bare.out" "^bare: attached" || die "bare did not attach: $(cat "$TMP/bare.out")"
	run_untraced
	kill -TERM $b
	wait $b 2>/dev/null || true
}

# bare_all: the bare programs on every function cgbpf probes in the
# library, in one pid-filtered link per direction as cgbpf's for -p: the
# kernel's share of the cost (its probe lookup among many, its pid
# filter) without any program's work.
run_bare_all() {
	local b w gate=$TMP/gate.bare_all
	rm -f "$gate" "$TMP/bare_all.out"
	CGBPF_WAIT_FILE=$gate "$WL" "$N" > "$TMP/wl.out" 2>&1 &
	w=$!
	PIDS+=($w)
	"$BARE" --multi --pid $w "$LIB" "$ALL" > "$TMP/bare_all.out" 2>&1 &
	b=$!
	PIDS+=($b)
	wait_line "$TMP/bare_all.out" "^bare: attached" ||
		die "bare did not attach: $(cat "$TMP/bare_all.out")"
	touch "$gate"
	wait $w || die "bench_launch failed under bare_all"
	kill -TERM $b
	wait $b 2>/dev/null || true
	R=$(ns_of "$TMP/wl.out")
}

# run_cgbpf TAG EXTRA-FLAGS...: the loop starts once the probes are live
# (and, for inside, the delay has passed).
run_cgbpf() {
	local tag=$1 w c gate=$TMP/gate.$1
	shift
	rm -f "$gate" "$TMP/cg.$tag".*
	CGBPF_WAIT_FILE=$gate "$WL" "$N" > "$TMP/cg.$tag.wl" 2>&1 &
	w=$!
	PIDS+=($w)
	"$CGBPF" record $CGBPF_FLAGS "$@" -p $w -o "$TMP/cg.$tag.pftrace" > "$TMP/cg.$tag.sum" \
		2> "$TMP/cg.$tag.err" &
	c=$!
	PIDS+=($c)
	wait_line "$TMP/cg.$tag.err" "Ctrl-C stops" || die "cgbpf did not start: $(cat "$TMP/cg.$tag.err")"
	[ "$tag" = inside ] && { wait_line "$TMP/cg.$tag.err" "delay passed" ||
		die "the delay did not pass: $(cat "$TMP/cg.$tag.err")"; }
	touch "$gate"
	wait $w || die "bench_launch failed under cgbpf ($tag)"
	wait $c || die "cgbpf failed ($tag): $(cat "$TMP/cg.$tag.err")"
	R=$(ns_of "$TMP/cg.$tag.wl")
	# Outside: nothing but state may reach the trace; inside: every launch.
	local got
	got=$(awk '$NF == "cuLaunchKernel" { print $3; exit }' "$TMP/cg.$tag.sum")
	case $tag in
	outside*) [ -z "$got" ] || die "$tag: $got launches recorded outside the window" ;;
	*) [ "$got" = "$N" ] || die "$tag: ${got:-no} launches of $N recorded" ;;
	esac
}

declare -A V
CONFS="untraced bare bare_all outside outside_bt inside plain"
run_untraced	# warm-up
for ((r = 0; r < RUNS; r++)); do
	run_untraced; V[untraced]+="$R "
	run_bare; V[bare]+="$R "
	run_bare_all; V[bare_all]+="$R "
	run_cgbpf outside --delay 1h; V[outside]+="$R "
	run_cgbpf outside_bt --delay 1h --backtrace-threshold 100us; V[outside_bt]+="$R "
	run_cgbpf inside --delay 50ms; V[inside]+="$R "
	run_cgbpf plain; V[plain]+="$R "
done

declare -A M L
# The least of the runs too: on a loaded machine other tasks only ever add
# time to a run, so the minimum is the better estimate of the cost itself.
least() { printf '%s\n' "$@" | sort -g | head -1; }
echo
echo "== capture windows: ns per cuLaunchKernel ($N calls, median of $RUNS rounds)"
echo "   $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, git $(git describe --always --dirty)"
echo "   cgbpf flags: $CGBPF_FLAGS"
for c in $CONFS; do
	M[$c]=$(median ${V[$c]})
	L[$c]=$(least ${V[$c]})
	printf '   %-11s median %8s ns  min %8s ns   (runs: %s)\n' "$c" "${M[$c]}" "${L[$c]}" "${V[$c]}"
done
echo "   load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "   ratio               median    min"
for p in outside/bare outside/bare_all bare_all/bare outside_bt/bare inside/bare inside/plain plain/bare; do
	a=${p%/*} b=${p#*/}
	printf '   %-18s %7s  %6s%s\n' "$a / $b" "$(calc "${M[$a]} / ${M[$b]}" 3)" \
		"$(calc "${L[$a]} / ${L[$b]}" 3)" "$([ $p = outside/bare ] && echo '   (target <= 1.05)')"
done
# Per round: the configurations of one round ran back to back, so their
# ratio is the least disturbed by the machine's drift between rounds.
median3() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) printf "%.3f\n", v[(NR + 1) / 2];
		      else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
per_round() {
	local a=(${V[$1]}) b=(${V[$2]}) i out=()
	for ((i = 0; i < ${#a[@]}; i++)); do out+=("$(calc "${a[$i]} / ${b[$i]}" 3)"); done
	echo "${out[*]}"
}
R_OB=$(per_round outside bare)
R_OBB=$(per_round outside_bt bare)
R_OBA=$(per_round outside bare_all)
echo
echo "   per-round ratio outside / bare:     median $(median3 $R_OB)  (rounds: $R_OB)"
echo "   per-round ratio outside / bare_all: median $(median3 $R_OBA)  (rounds: $R_OBA)"
echo "   per-round ratio outside_bt / bare:  median $(median3 $R_OBB)  (rounds: $R_OBB)"
echo
for c in $CONFS; do echo "capture_${c}_ns=${M[$c]}"; echo "capture_${c}_min_ns=${L[$c]}"; done
echo "capture_outside_over_bare_round_median=$(median3 $R_OB)"
echo "capture_outside_over_bare_all_round_median=$(median3 $R_OBA)"
