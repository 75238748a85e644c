#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What cgbpf's syscall slices (--syscall-threshold) cost (not a test).
#
#   sudo bash bench/syscalls.sh
#
# Measures, in one run, ns per call of a tight syscall loop
# (build/workloads/bench_syscall: getpid, a 1-byte read of /dev/zero, and
# an mmap and munmap of one anonymous page, a pair that takes the mm's lock
# for writing twice, which cgbpf's mmap watch sees):
#   untraced           no cgbpf at all
#   cgbpf, sys off     cgbpf record -p TARGET --syscall-threshold off
#   non-target, off    cgbpf traces another process, --syscall-threshold
#                      off: nothing of cgbpf's should be on the syscall path
#                      (the mmap watch is not, where the kernel has the
#                      mmap_lock tracepoint)
#   non-target         cgbpf traces another process, syscalls on: the loop
#                      is not a target but its syscalls take the slow path
#   target             the loop is the target, default threshold (1 us):
#                      nothing recorded for these short calls
#   target, thr 0      every call recorded (one ring record each)
# and ns per cuLaunchKernel (build/workloads/bench_launch) under cgbpf
# with --syscall-threshold off and with the default: the cost the attached
# tracepoints add to the uretprobe return syscall of every traced call.
# cgbpf runs with --sched off --sample-hz 0 --backtrace-threshold off, so
# only the syscall part differs. Every figure is the median of BENCH_RUNS
# runs, configurations interleaved round by round; compare ratios within
# one run only.
#
# Knobs (environment): CGBPF (the binary, build/cgbpf), BENCH_N (syscalls per run, 1000000), BENCH_LAUNCHES
# (launches per run, 300000), BENCH_RUNS (5).
set -euo pipefail

N=${BENCH_N:-1000000}
NL=${BENCH_LAUNCHES:-300000}
RUNS=${BENCH_RUNS:-5}

if [ "$(id -u)" -ne 0 ]; then
	echo "bench/syscalls.sh: needs root (it loads BPF programs): run it with sudo" >&2
	exit 1
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
echo "building (make -s all)..." >&2
make -s --no-print-directory all >&2

CGBPF=${CGBPF:-$ROOT/build/cgbpf}	# CGBPF=OTHER/build/cgbpf measures another build
SYS=$ROOT/build/workloads/bench_syscall
LAUNCH=$ROOT/build/workloads/bench_launch
COMMON=(--sched off --sample-hz 0 --backtrace-threshold off)
TMP=$(mktemp -d /tmp/cgbpf-bench-sys.XXXXXX)
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

die() { echo "bench/syscalls.sh: $*" >&2; exit 1; }
untrack() {
	local p keep=()
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# traced THRESHOLD TAG CMD...: runs CMD (gated) as cgbpf's target; sets R_NS.
traced() {
	local thr=$1 tag=$2 gate=$TMP/gate.$2 w c
	shift 2
	rm -f "$gate" "$TMP/$tag".*
	LD_LIBRARY_PATH=$ROOT/build/fake CGBPF_WAIT_FILE=$gate "$@" > "$TMP/$tag.wl" 2>&1 &
	w=$!
	PIDS+=($w)
	"$CGBPF" record -p $w "${COMMON[@]}" --syscall-threshold "$thr" -o "$TMP/$tag.pftrace" \
		> "$TMP/$tag.sum" 2> "$TMP/$tag.err" &
	c=$!
	PIDS+=($c)
	wait_for "$TMP/$tag.err" "tracing [0-9]+ process" 30 $c || die "cgbpf did not start: $(cat "$TMP/$tag.err")"
	touch "$gate"
	wait $w || die "$* failed: $(cat "$TMP/$tag.wl")"
	untrack $w
	wait $c || die "cgbpf failed: $(cat "$TMP/$tag.err")"
	untrack $c
	R_NS=$(ns_of "$TMP/$tag.wl")
	R_LOST=$(sed -n 's/.*LOST \([0-9]*\) records.*/\1/p' "$TMP/$tag.sum")
}

# nontarget MODE [THRESHOLD]: cgbpf traces an idle process; the loop runs beside it.
nontarget() {
	local idle c gate=$TMP/never
	rm -f "$TMP"/nt.*
	LD_LIBRARY_PATH=$ROOT/build/fake CGBPF_WAIT_FILE=$gate "$SYS" getpid 1 > /dev/null 2>&1 &
	idle=$!
	PIDS+=($idle)
	"$CGBPF" record -p $idle "${COMMON[@]}" --syscall-threshold "${2:-1us}" -o "$TMP/nt.pftrace" \
		> "$TMP/nt.sum" 2> "$TMP/nt.err" &
	c=$!
	PIDS+=($c)
	wait_for "$TMP/nt.err" "tracing [0-9]+ process" 30 $c || die "cgbpf did not start: $(cat "$TMP/nt.err")"
	LD_LIBRARY_PATH=$ROOT/build/fake "$SYS" "$1" "$N" > "$TMP/nt.wl" 2>&1 || die "loop failed"
	kill -KILL $idle
	wait $idle 2>/dev/null || true
	untrack $idle
	wait $c || die "cgbpf failed: $(cat "$TMP/nt.err")"
	untrack $c
	R_NS=$(ns_of "$TMP/nt.wl")
}

declare -A V
add() { V[$1]="${V[$1]:-} $2"; }

for ((r = 1; r <= RUNS; r++)); do
	echo "round $r/$RUNS..." >&2
	for m in getpid read mmap; do
		LD_LIBRARY_PATH=$ROOT/build/fake "$SYS" $m "$N" > "$TMP/u.wl" 2>&1 || die "loop failed"
		add "$m.untraced" "$(ns_of "$TMP/u.wl")"
		traced off "$m-off" "$SYS" $m "$N"
		add "$m.off" "$R_NS"
		nontarget $m off
		add "$m.ntoff" "$R_NS"
		nontarget $m
		add "$m.nontarget" "$R_NS"
		traced 1000 "$m-on" "$SYS" $m "$N"
		add "$m.target" "$R_NS"
		traced 0 "$m-all" "$SYS" $m "$N"
		add "$m.all" "$R_NS"
		add "$m.all_lost" "${R_LOST:-0}"
	done
	traced off launch-off "$LAUNCH" "$NL"
	add launch.off "$R_NS"
	traced 1000 launch-on "$LAUNCH" "$NL"
	add launch.on "$R_NS"
done

med() { median ${V[$1]}; }
range() { printf '%s\n' ${V[$1]} | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
echo
echo "== Syscall tracepoints: ns per call (median of $RUNS runs; $N syscalls, $NL launches per run)"
printf '  %-34s %10s %10s %10s\n' "" getpid read mmap+munmap
for k in untraced off ntoff nontarget target all; do
	case $k in
	untraced) l="untraced" ;;
	off) l="cgbpf, --syscall-threshold off" ;;
	ntoff) l="cgbpf, syscalls off, non-target" ;;
	nontarget) l="cgbpf, syscalls on, non-target" ;;
	target) l="cgbpf, syscalls on, target (1 us)" ;;
	all) l="cgbpf, target, threshold 0" ;;
	esac
	printf '  %-34s %10s %10s %10s   (runs: getpid %s, read %s, mmap %s)\n' "$l" \
		"$(med getpid.$k)" "$(med read.$k)" "$(med mmap.$k)" "$(range getpid.$k)" \
		"$(range read.$k)" "$(range mmap.$k)"
done
for m in getpid read mmap; do
	u=$(med $m.untraced)
	echo "  $m: non-target $(calc "$(med $m.nontarget) - $u" 1) ns/call more than untraced" \
		"($(calc "$(med $m.nontarget) / $u" 2)x); target $(calc "$(med $m.target) - $u" 1) ns" \
		"($(calc "$(med $m.target) / $u" 2)x); every call recorded $(calc "$(med $m.all) - $u" 1) ns" \
		"($(calc "$(med $m.all) / $u" 2)x, records lost per run:${V[$m.all_lost]})"
done
lo=$(med launch.off)
lon=$(med launch.on)
echo "  cuLaunchKernel under cgbpf: $lo ns/call with --syscall-threshold off, $lon ns/call with" \
	"syscalls on: +$(calc "$lon - $lo" 1) ns per traced call ($(calc "$lon / $lo" 2)x;" \
	"runs: off $(range launch.off), on $(range launch.on))"
echo
for m in getpid read mmap; do
	for k in untraced off ntoff nontarget target all; do
		echo "sys_${m}_${k}_ns=$(med $m.$k)"
	done
done
echo "launch_sys_off_ns=$lo"
echo "launch_sys_on_ns=$lon"
