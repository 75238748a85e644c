#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cgbpf benchmark suite (not a test: `make test` never runs it).
#
#   sudo make bench            or            sudo bash bench/run.sh
#
# Measures, in one run, on the fake driver and build/workloads/bench_launch:
#   1. ns per cuLaunchKernel untraced, under a bare entry+return trap (empty
#      BPF programs; perf-event uprobes and uprobe_multi), under bpftrace
#      and under `cgbpf record -p`, with the API alone and with the
#      defaults a user gets (and the defaults less each default source:
#      what each costs a call); cgbpf's per-call overhead as a multiple
#      of the bare trap's (target: <= 1.15x, for both);
#   2. the call rate one thread sustains under cgbpf, and where a small ring
#      starts losing records;
#   3. trace bytes per traced launch (target: <= 48), and its slope;
#   4. what the same launches take as Chrome JSON trace events.
# Timings are noisy on a small VM: every figure is the median of BENCH_RUNS
# runs, and the configurations of 1. are interleaved round by round so that
# drift in the machine hits all of them alike; only ratios within one run
# are compared. Prints a table, then a key=value block for machines.
#
# cgbpf runs with CGBPF_FLAGS, by default the CUDA API alone (scheduler,
# syscalls, CPU samples, backtraces and Python frames off), and in 1. also
# with no flags at all, as a user runs it: the API path, then what the
# default sources add to a call of a C program; bench/sched.sh,
# bench/syscalls.sh, bench/stacks.sh and bench/python.sh measure the rest.
#
# Knobs (environment): CGBPF_FLAGS, BENCH_N (calls per run, 1000000), BENCH_RUNS (5),
# BENCH_RINGS (small ring sizes in MiB to try, "1 2 4"), BENCH_TMP (parent
# of the scratch folder, /tmp).
set -euo pipefail

N=${BENCH_N:-1000000}
CGBPF_FLAGS=${CGBPF_FLAGS---sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off --python off}
# 1.'s breakdown of the defaults: each leaves one default source out.
DEF_NOPY="--python off"
DEF_NOBT="--backtrace-threshold off"
# Syscall slices alone: the scheduler and CPU samples cost a call nothing
# directly (bench/sched.sh and bench/stacks.sh measure them); the syscall
# tracepoints run on every traced return, a syscall (sys_uretprobe).
DEF_NOSYS="--syscall-threshold off"
RUNS=${BENCH_RUNS:-5}
RINGS=${BENCH_RINGS:-1 2 4}
TARGET_RATIO=1.15
TARGET_BYTES=48
JSON_SAMPLE=10000

if [ "$(id -u)" -ne 0 ]; then
	echo "bench/run.sh: needs root (it loads BPF programs and attaches uprobes):" \
		"run 'sudo make bench' or 'sudo bash bench/run.sh'" >&2
	exit 1
fi

for tool in bpftrace bpftool taskset; do
	command -v $tool > /dev/null ||
		{ echo "bench/run.sh: $tool is missing: run 'sudo bash scripts/install-deps.sh --bench'" >&2; exit 1; }
done

cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
PY=/usr/bin/python3	# the pyenv python3 on PATH has no protobuf

echo "building (make -s all bench-bins)..." >&2
make -s --no-print-directory all bench-bins >&2

CGBPF=$ROOT/build/cgbpf
BARE=$ROOT/build/bench/bare

# ------------------------------------------------------------ housekeeping
TMP=$(mktemp -d "${BENCH_TMP:-/tmp}/cgbpf-bench.XXXXXX")
PIDS=()

cleanup() {
	local p i
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		# Give cgbpf and bpftrace a moment to detach before forcing them.
		for ((i = 0; i < 50; i++)); do
			alive "$p" || break
			((i % 10)) || kill -TERM "$p" 2>/dev/null || true
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

track() { PIDS+=("$1"); }

# Forgets a process that has been waited for, so cleanup never signals a
# pid the kernel may have handed to someone else since.
untrack() {
	local p keep=()
	for p in "${PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

die() {
	echo "bench/run.sh: $*" >&2
	exit 1
}

# stop PID [SIG]: signals it (again every second: bpftrace 0.17 was seen
# to miss one), waits up to 15 s, then kills it; forgets it.
stop() {
	local i
	for ((i = 0; i < 150; i++)); do
		alive "$1" || break
		((i % 10)) || kill -"${2:-TERM}" "$1" 2>/dev/null || true
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	untrack "$1"
}




# A private copy of the fake driver and the workload (its rpath is
# $ORIGIN/../fake): uprobes belong to a file, so probes other tools hold on
# build/fake/libcuda.so.1 (a concurrent test run) would otherwise fire in our
# loop, and ours, attached to every process, would slow theirs.
launch_copy "$TMP" "$CGBPF"
LOADS=$(ldd "$WL" | awk '$1 == "libcuda.so.1" { print $3 }')
if [ -z "$LOADS" ] || [ "$(realpath "$LOADS")" != "$LIB" ]; then
	die "$WL loads ${LOADS:-no libcuda}, not $LIB"
fi
[ -n "$OFF" ] || die "no cuLaunchKernel in $LIB"

# ------------------------------------------------------------ one measurement each
# Each sets R_NS (ns per call of the loop) and, for cgbpf, R_LOST, R_SIZE.

run_untraced() {
	"$WL" "$1" > "$TMP/wl.out" 2>&1 || die "bench_launch failed: $(cat "$TMP/wl.out")"
	R_NS=$(ns_of "$TMP/wl.out")
}

# run_bare perf|multi|floor N; returns 3 when the kernel has no uprobe_multi.
run_bare() {
	local flag="" b rc
	[ "$1" = multi ] && flag=--multi
	[ "$1" = floor ] && flag=--floor
	# Gone first, or wait_for could read the last run's line before the
	# new process truncates the file.
	rm -f "$TMP/bare.out"
	"$BARE" $flag "$LIB" "$OFF" > "$TMP/bare.out" 2>&1 &
	b=$!
	track $b
	if ! wait_for "$TMP/bare.out" "^bare: attached" 10 $b; then
		rc=0
		wait $b 2>/dev/null || rc=$?
		untrack $b
		[ $rc -eq 3 ] && return 3
		die "bare ($1) did not attach: $(cat "$TMP/bare.out")"
	fi
	run_untraced "$2"
	stop $b
}

# run_cgbpf N RING_MIB(empty: default) TAG [FLAGS (default: CGBPF_FLAGS; "-": none)]
run_cgbpf() {
	local flags=$CGBPF_FLAGS
	[ $# -ge 4 ] && flags=$4
	[ "$flags" = - ] && flags=
	local gate=$TMP/gate.$3 w c pfx=$TMP/cg.$3
	rm -f "$gate" "$pfx".*
	CGBPF_WAIT_FILE=$gate "$WL" "$1" > "$pfx.wl" 2>&1 &
	w=$!
	track $w
	"$CGBPF" record $flags -p $w -o "$pfx.pftrace" ${2:+--ring-size "$2"} > "$pfx.sum" 2> "$pfx.err" &
	c=$!
	track $c
	wait_for "$pfx.err" "probing [0-9]+ CUDA driver functions" 30 $c ||
		die "cgbpf did not attach: $(cat "$pfx.err")"
	touch "$gate"	# the loop starts only now that the probes are live
	wait $w || die "bench_launch under cgbpf failed: $(cat "$pfx.wl")"
	untrack $w
	# cgbpf is the only child reaped in between: the change in the
	# children's CPU time is its own (user space and the syscalls it makes).
	times > "$pfx.t0"
	wait $c || die "cgbpf record failed: $(cat "$pfx.err")"
	untrack $c
	times > "$pfx.t1"
	R_NS=$(ns_of "$pfx.wl")
	R_CPU=$(calc "$(child_cpu "$pfx.t1") - $(child_cpu "$pfx.t0")" 3)
	if grep -q "no records lost" "$pfx.sum"; then
		R_LOST=0
		# Every launch of the loop must be in the capture, or the probes
		# went live after the loop began and the timing is not cgbpf's.
		local got
		got=$(awk '$NF == "cuLaunchKernel" { print $3; exit }' "$pfx.sum")
		[ "$got" = "$1" ] || die "cgbpf captured ${got:-no} launches of $1: $(cat "$pfx.sum")"
	else
		R_LOST=$(sed -n 's/.*LOST \([0-9]*\) records.*/\1/p' "$pfx.sum")
		[ -n "$R_LOST" ] || die "no capture line in cgbpf's summary: $(cat "$pfx.sum")"
	fi
	R_SIZE=$(stat -c %s "$pfx.pftrace")
}

# run_cgbpf_pair N RING_MIB(empty: default) TAG: two bench_launch processes
# at once under one cgbpf, so that on a 2-CPU machine the consumer has to
# compete with the producers for CPU time. Sets R_RATE (calls/s, both
# together), R_NS (ns per call, the mean of the two loops), R_LOST.
run_cgbpf_pair() {
	local gate=$TMP/gate.$3 w1 w2 c pfx=$TMP/cg.$3 n1 n2
	rm -f "$gate" "$pfx".*
	CGBPF_WAIT_FILE=$gate "$WL" "$1" > "$pfx.wl1" 2>&1 &
	w1=$!
	track $w1
	CGBPF_WAIT_FILE=$gate "$WL" "$1" > "$pfx.wl2" 2>&1 &
	w2=$!
	track $w2
	"$CGBPF" record $CGBPF_FLAGS -p $w1,$w2 -o "$pfx.pftrace" ${2:+--ring-size "$2"} > "$pfx.sum" 2> "$pfx.err" &
	c=$!
	track $c
	wait_for "$pfx.err" "probing [0-9]+ CUDA driver functions" 30 $c ||
		die "cgbpf did not attach: $(cat "$pfx.err")"
	touch "$gate"
	wait $w1 || die "bench_launch under cgbpf failed: $(cat "$pfx.wl1")"
	untrack $w1
	wait $w2 || die "bench_launch under cgbpf failed: $(cat "$pfx.wl2")"
	untrack $w2
	wait $c || die "cgbpf record failed: $(cat "$pfx.err")"
	untrack $c
	n1=$(ns_of "$pfx.wl1")
	n2=$(ns_of "$pfx.wl2")
	R_NS=$(calc "($n1 + $n2) / 2")
	R_RATE=$(calc "1e9 / $n1 + 1e9 / $n2" 0)
	if grep -q "no records lost" "$pfx.sum"; then
		R_LOST=0
	else
		R_LOST=$(sed -n 's/.*LOST \([0-9]*\) records.*/\1/p' "$pfx.sum")
		[ -n "$R_LOST" ] || die "no capture line in cgbpf's summary: $(cat "$pfx.sum")"
	fi
	rm -f "$pfx.pftrace"
}

# bpftrace_start SCRIPT: starts bpftrace, returns once both of its uprobes
# on $LIB are in the kernel (its "Attaching" line comes before they are).
bpftrace_start() {
	rm -f "$TMP/bt.out"
	bpftrace -e "$1" > "$TMP/bt.out" 2>&1 &
	BT=$!
	track $BT
	local i
	for ((i = 0; i < 1500; i++)); do
		alive $BT || die "bpftrace exited: $(cat "$TMP/bt.out")"
		[ "$(bpftool perf show 2>/dev/null | grep -F "filename $LIB " | grep -Ec ' (uprobe|uretprobe) ')" = 2 ] &&
			return 0
		sleep 0.02
	done
	die "bpftrace did not attach in 30 s: $(cat "$TMP/bt.out")"
}

# ------------------------------------------------------------ environment
GIT_DESC=$(git describe --always --dirty 2>/dev/null || echo unknown)
GIT_COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
CPU=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
KERNEL=$(uname -r)
NPROC=$(nproc)
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
BT_VER=$(bpftrace --version 2>/dev/null | awk '{ print $2 }')
CLOCKSRC=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo ?)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "== cgbpf benchmark"
printf '  %-10s %s\n' date "$DATE" kernel "$KERNEL" cpu "$CPU" nproc "$NPROC" \
	clocksource "$CLOCKSRC" "cgbpf flags" "${CGBPF_FLAGS:-(defaults)}" git "$GIT_DESC ($GIT_COMMIT)" bpftrace "$BT_VER" \
	loadavg "$LOAD0 (at start)" calls "$N per run, $RUNS runs per configuration, median reported"
echo

# ------------------------------------------------------------ 1. per-call cost
echo "running 1: per-call cost ($RUNS interleaved rounds of 11 configurations)..." >&2
run_untraced 100000	# warm up: page cache, frequency
# A 1000-launch capture: cgbpf's fixed costs, for the slopes of 1. and 3.
run_cgbpf 1000 "" n1k
S1K=$R_SIZE CPU1K=$R_CPU
U=() BP=() BM=() FL=() CG=() CG_LOST=() CG_SIZE=() CG_CPU=() BT_HIST=() BT_EMPTY=()
CGD=() CGD_NOPY=() CGD_NOBT=() CGD_NOSYS=() CGD_LOST=()
BT_SCRIPT_EMPTY="uprobe:$LIB:cuLaunchKernel { } uretprobe:$LIB:cuLaunchKernel { }"
BT_SCRIPT_HIST="uprobe:$LIB:cuLaunchKernel { @s[tid] = nsecs; }
	uretprobe:$LIB:cuLaunchKernel { @d = hist(nsecs - @s[tid]); delete(@s[tid]); }"
HAVE_MULTI=1
for ((r = 1; r <= RUNS; r++)); do
	run_untraced "$N"; U+=("$R_NS")
	run_bare perf "$N"; BP+=("$R_NS")
	if [ $HAVE_MULTI = 1 ]; then
		if run_bare multi "$N"; then BM+=("$R_NS"); else HAVE_MULTI=0; fi
	fi
	[ $HAVE_MULTI = 1 ] && { run_bare floor "$N"; FL+=("$R_NS"); }
	# bpftrace starts in well under a second here: once per round too.
	bpftrace_start "$BT_SCRIPT_EMPTY"
	run_untraced "$N"; BT_EMPTY+=("$R_NS")
	stop $BT INT
	bpftrace_start "$BT_SCRIPT_HIST"
	run_untraced "$N"; BT_HIST+=("$R_NS")
	stop $BT INT
	run_cgbpf "$N" "" "r$r"; CG+=("$R_NS"); CG_LOST+=("$R_LOST"); CG_SIZE+=("$R_SIZE")
	# Less the fixed part (loading and verifying the BPF programs, setup).
	CG_CPU+=("$(calc "($R_CPU - $CPU1K) * 1e9 / ($N - 1000)" 0)")
	rm -f "$TMP/cg.r$r.pftrace"	# 40 MB each
	run_cgbpf "$N" "" "d$r" -; CGD+=("$R_NS"); CGD_LOST+=("$R_LOST")
	run_cgbpf "$N" "" "dp$r" "$DEF_NOPY"; CGD_NOPY+=("$R_NS")
	run_cgbpf "$N" "" "db$r" "$DEF_NOBT"; CGD_NOBT+=("$R_NS")
	run_cgbpf "$N" "" "ds$r" "$DEF_NOSYS"; CGD_NOSYS+=("$R_NS")
	rm -f "$TMP"/cg.d*"$r".pftrace
	echo "  round $r: untraced ${U[-1]}  bare/perf ${BP[-1]}  bare/multi $([ $HAVE_MULTI = 1 ] && echo "${BM[-1]} floor ${FL[-1]}" || echo n/a)" \
		" bpftrace ${BT_EMPTY[-1]}/${BT_HIST[-1]}  cgbpf ${CG[-1]} (lost ${CG_LOST[-1]})" \
		" defaults ${CGD[-1]} (lost ${CGD_LOST[-1]}) -py ${CGD_NOPY[-1]} -bt ${CGD_NOBT[-1]} -sys ${CGD_NOSYS[-1]}" >&2
done

# How much a busy CPU next door slows a trap here: the consumer of any
# tracer is such a neighbour, the bare trap has none.
IDLE=() BUSY=() M_IDLE="" M_BUSY=""
if [ "$NPROC" -ge 2 ] && [ $HAVE_MULTI = 1 ]; then
	PIN_WL=$((NPROC - 1)) PIN_BUSY=$((NPROC - 2))
	rm -f "$TMP/bare.out"
	"$BARE" --multi "$LIB" "$OFF" > "$TMP/bare.out" 2>&1 &
	BB=$!
	track $BB
	wait_for "$TMP/bare.out" "^bare: attached" 10 $BB || die "bare did not attach: $(cat "$TMP/bare.out")"
	for ((r = 1; r <= RUNS; r++)); do
		taskset -c $PIN_WL "$WL" "$N" > "$TMP/wl.out" 2>&1 || die "bench_launch failed"
		IDLE+=("$(ns_of "$TMP/wl.out")")
		# Exits 0 on SIGTERM, so that bash reports no killed job.
		taskset -c $PIN_BUSY sh -c 'trap "exit 0" TERM; while :; do :; done' &
		BURN=$!
		track $BURN
		taskset -c $PIN_WL "$WL" "$N" > "$TMP/wl.out" 2>&1 || die "bench_launch failed"
		BUSY+=("$(ns_of "$TMP/wl.out")")
		stop $BURN
	done
	stop $BB
	M_IDLE=$(median "${IDLE[@]}")
	M_BUSY=$(median "${BUSY[@]}")
fi

M_U=$(median "${U[@]}")
M_CPU=$(median "${CG_CPU[@]}")
M_BP=$(median "${BP[@]}")
M_BM=$([ $HAVE_MULTI = 1 ] && median "${BM[@]}" || echo "")
M_FL=$([ $HAVE_MULTI = 1 ] && median "${FL[@]}" || echo "")
M_CG=$(median "${CG[@]}")
M_CGD=$(median "${CGD[@]}")
M_CGD_NOPY=$(median "${CGD_NOPY[@]}")
M_CGD_NOBT=$(median "${CGD_NOBT[@]}")
M_CGD_NOSYS=$(median "${CGD_NOSYS[@]}")
M_BTH=$(median "${BT_HIST[@]}")
M_BTE=$(median "${BT_EMPTY[@]}")
# The fair baseline uses the mechanism cgbpf uses (uprobe_multi here).
M_BARE=${M_BM:-$M_BP}
BARE_KIND=$([ -n "$M_BM" ] && echo uprobe_multi || echo perf-event)

ovh() { calc "$1 - $M_U"; }
rat() { calc "($1 - $M_U) / ($2 - $M_U)" 2; }

echo "== 1. Per-call cost of cuLaunchKernel (bench_launch loop, 1 thread, median of $RUNS x $N calls)"
echo
printf '  %-46s %9s %13s %11s %11s  %s\n' config ns/call "overhead(ns)" "x bare" "x bpftrace" "runs (ns/call)"
row() {	# name median runs...
	local name=$1 m=$2
	shift 2
	printf '  %-46s %9s %13s %11s %11s  %s\n' "$name" "$m" "$(ovh "$m")" \
		"$(rat "$m" "$M_BARE")" "$(rat "$m" "$M_BTH")" "$*"
}
printf '  %-46s %9s %13s %11s %11s  %s\n' "untraced" "$M_U" - - - "${U[*]}"
row "bare trap, empty progs, perf-event uprobes" "$M_BP" "${BP[@]}"
if [ -n "$M_BM" ]; then
	row "bare trap, empty progs, uprobe_multi" "$M_BM" "${BM[@]}"
else
	printf '  %-46s %9s\n' "bare trap, empty progs, uprobe_multi" "n/a (kernel has no uprobe_multi)"
fi
[ -n "$M_FL" ] && row "floor: 2 clock reads + 1 record (uprobe_multi)" "$M_FL" "${FL[@]}"
row "bpftrace, empty actions (perf-event uprobes)" "$M_BTE" "${BT_EMPTY[@]}"
row "bpftrace, @s[tid]=nsecs; hist(delta)" "$M_BTH" "${BT_HIST[@]}"
row "cgbpf record -p PID, API only ($BARE_KIND)" "$M_CG" "${CG[@]}"
row "cgbpf record -p PID, defaults" "$M_CGD" "${CGD[@]}"
row "  defaults less Python frames" "$M_CGD_NOPY" "${CGD_NOPY[@]}"
row "  defaults less slow-call backtraces" "$M_CGD_NOBT" "${CGD_NOBT[@]}"
row "  defaults less syscall slices" "$M_CGD_NOSYS" "${CGD_NOSYS[@]}"
echo
echo "  API only: $CGBPF_FLAGS; defaults: no flags. What each default source adds to a call"
echo "  (defaults - defaults less it, ns): Python frames $(calc "$M_CGD - $M_CGD_NOPY")," \
	"backtraces $(calc "$M_CGD - $M_CGD_NOBT"), syscall slices $(calc "$M_CGD - $M_CGD_NOSYS")"
echo
RATIO=$(rat "$M_CG" "$M_BARE")
RATIO_PERF=$(rat "$M_CG" "$M_BP")
MULTI_VS_PERF=$(rat "$M_BARE" "$M_BP")
VS_BT=$(rat "$M_CG" "$M_BTH")
VERDICT=$(awk "BEGIN { print ($RATIO <= $TARGET_RATIO) ? \"MET\" : \"MISSED\" }")
RATIO_DEF=$(rat "$M_CGD" "$M_BARE")
VERDICT_DEF=$(awk "BEGIN { print ($RATIO_DEF <= $TARGET_RATIO) ? \"MET\" : \"MISSED\" }")
echo "  x bare = (config - untraced) / (bare $BARE_KIND - untraced); x bpftrace likewise against bpftrace hist."
echo "  cgbpf per-call overhead: ${RATIO}x the bare entry+return trap ($BARE_KIND, the mechanism cgbpf uses);" \
	"target <= ${TARGET_RATIO}x: $VERDICT"
echo "  with the defaults: ${RATIO_DEF}x; target <= ${TARGET_RATIO}x: $VERDICT_DEF"
echo "  against the bare perf-event trap: ${RATIO_PERF}x; bare uprobe_multi vs bare perf-event: ${MULTI_VS_PERF}x"
if [ -n "$M_FL" ]; then
	FLOOR_RATIO=$(rat "$M_FL" "$M_BARE")
	echo "  floor (the least a tracer recording entry and exit timestamps does: two clock reads, task"
	echo "    storage, one 32-byte record): ${FLOOR_RATIO}x the bare trap; cgbpf is $(rat "$M_CG" "$M_FL")x the floor"
fi
echo "  cgbpf overhead vs bpftrace (hist): ${VS_BT}x ($(calc "$M_CG - $M_BTH") ns/call difference)"
echo "  cgbpf's consumer (decoding, summary, Perfetto encoding, writing) on its own thread: $M_CPU ns"
echo "    of CPU per call (median of (CPU time - CPU time of a 1000-launch capture) / calls; runs:"
echo "    ${CG_CPU[*]}; 10 ms tick resolution), not in the traced thread's ns/call above"
if [ -n "$M_IDLE" ]; then
	echo
	echo "  This machine: the bare trap (uprobe_multi), bench_launch pinned to CPU $PIN_WL, with CPU $PIN_BUSY"
	echo "    idle:             $M_IDLE ns/call (runs: ${IDLE[*]})"
	echo "    on a busy loop:   $M_BUSY ns/call (runs: ${BUSY[*]})"
	echo "    busy/idle trap cost: $(calc "($M_BUSY - $M_U) / ($M_IDLE - $M_U)" 2)x; well above 1x means that work on another"
	echo "    CPU, such as any tracer's consumer, slows the traced thread here (vCPUs sharing a host core)."
fi
echo

# ------------------------------------------------------------ 2. sustained rate, drops
echo "running 2: sustained rate and small rings..." >&2
LOST_DEFAULT=0
for l in "${CG_LOST[@]}"; do LOST_DEFAULT=$((LOST_DEFAULT + l)); done
RATE=$(calc "1e9 / $M_CG" 0)
declare -A RING_NS RING_LOST
for mib in $RINGS; do
	run_cgbpf "$N" "$mib" "ring$mib"
	RING_NS[$mib]=$R_NS
	RING_LOST[$mib]=$R_LOST
	rm -f "$TMP/cg.ring$mib.pftrace"
done
# One thread cannot outrun the consumer; two processes on two CPUs might.
declare -A PAIR_NS PAIR_RATE PAIR_LOST
PAIR_RINGS="64 $(echo "$RINGS" | awk '{ print $1 }')"
for mib in $PAIR_RINGS; do
	run_cgbpf_pair "$N" "$mib" "pair$mib"
	PAIR_NS[$mib]=$R_NS
	PAIR_RATE[$mib]=$R_RATE
	PAIR_LOST[$mib]=$R_LOST
done

echo "== 2. Sustained call rate under cgbpf, 1 thread as fast as it goes ($N calls per run)"
echo
printf '  %-22s %9s %12s %14s %10s\n' ring ns/call calls/s "lost records" "lost %"
printf '  %-22s %9s %12s %14s %10s\n' "64 MiB (default)" "$M_CG" "$RATE" \
	"$LOST_DEFAULT in $RUNS runs" "$(calc "100 * $LOST_DEFAULT / ($RUNS * 2 * $N)" 3)"
for mib in $RINGS; do
	printf '  %-22s %9s %12s %14s %10s\n' "$mib MiB" "${RING_NS[$mib]}" \
		"$(calc "1e9 / ${RING_NS[$mib]}" 0)" "${RING_LOST[$mib]}" \
		"$(calc "100 * ${RING_LOST[$mib]} / (2 * $N)" 3)"
done
for mib in $PAIR_RINGS; do
	printf '  %-22s %9s %12s %14s %10s\n' "$mib MiB, 2 processes" "${PAIR_NS[$mib]}" \
		"${PAIR_RATE[$mib]}" "${PAIR_LOST[$mib]}" \
		"$(calc "100 * ${PAIR_LOST[$mib]} / (4 * $N)" 3)"
done
echo "  (2 records per call: entry and return; lost % is of those. \"2 processes\": two"
echo "   bench_launch at once under one cgbpf, ns/call the mean of the two, calls/s their sum)"
echo

# ------------------------------------------------------------ 3. bytes per call
echo "running 3: trace size..." >&2
run_cgbpf 100000 "" n100k; S100K=$R_SIZE
rm -f "$TMP/cg.n100k.pftrace"
S1M=$(median "${CG_SIZE[@]}")
S1M=${S1M%.*}
SLOPE=$(calc "($S1M - $S1K) / ($N - 1000)" 2)
BVERDICT=$(awk "BEGIN { print ($SLOPE <= $TARGET_BYTES) ? \"MET\" : \"MISSED\" }")

echo "== 3. Perfetto trace bytes per traced cuLaunchKernel (with its kernel name and launch config)"
echo
printf '  %-36s %12s %14s\n' "launches" "file bytes" "bytes/launch"
printf '  %-36s %12s %14s\n' 1000 "$S1K" "$(calc "$S1K / 1000" 2)"
printf '  %-36s %12s %14s\n' 100000 "$S100K" "$(calc "$S100K / 100000" 2)"
printf '  %-36s %12s %14s\n' "$N (median of the $RUNS runs of 1.)" "$S1M" "$(calc "$S1M / $N" 2)"
echo "  slope ($N vs 1000 launches, fixed header and setup calls removed): $SLOPE bytes/launch;" \
	"target <= $TARGET_BYTES: $BVERDICT"
echo "  fixed part: $(calc "$S1K - 1000 * $SLOPE" 0) bytes"
echo

# ------------------------------------------------------------ 4. Chrome JSON
echo "running 4: Chrome JSON comparison..." >&2
run_cgbpf "$JSON_SAMPLE" "" json; SJ=$R_SIZE
"$PY" bench/chrome_json.py "$TMP/cg.json.pftrace" "$JSON_SAMPLE" > "$TMP/json.kv" ||
	die "bench/chrome_json.py failed"
JB=$(sed -n 's/^json_bytes=//p' "$TMP/json.kv")
JBPL=$(sed -n 's/^json_bytes_per_launch=//p' "$TMP/json.kv")
JN=$(sed -n 's/^json_launches=//p' "$TMP/json.kv")
JSAMPLE=$(sed -n 's/^json_sample=//p' "$TMP/json.kv")

echo "== 4. The same launches as Chrome JSON trace events ($JN launches, decoded by tests/lib/ptrace.py)"
echo
printf '  %-44s %12s %14s\n' format "file bytes" "bytes/launch"
printf '  %-44s %12s %14s\n' "Perfetto (cgbpf), whole file" "$SJ" "$(calc "$SJ / $JN" 2)"
printf '  %-44s %12s %14s\n' "Perfetto (cgbpf), per launch (slope of 3.)" - "$SLOPE"
printf '  %-44s %12s %14s\n' "Chrome JSON, one \"X\" event per line" "$JB" "$JBPL"
echo "  JSON / Perfetto: $(calc "$JBPL / $SLOPE" 1)x per launch, $(calc "$JB / $SJ" 1)x whole file"
echo "  one event: $JSAMPLE"
echo

LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "  loadavg at end: $LOAD1"
echo

# ------------------------------------------------------------ machine-readable
echo "== key=value"
cat <<EOF
date=$DATE
kernel=$KERNEL
cpu=$CPU
nproc=$NPROC
clocksource=$CLOCKSRC
git_describe=$GIT_DESC
git_commit=$GIT_COMMIT
bpftrace_version=$BT_VER
loadavg_start=$LOAD0
loadavg_end=$LOAD1
calls_per_run=$N
runs=$RUNS
untraced_ns=$M_U
bare_perf_ns=$M_BP
bare_multi_ns=${M_BM:-na}
floor_ns=${M_FL:-na}
floor_x_bare=${FLOOR_RATIO:-na}
bpftrace_empty_ns=$M_BTE
bpftrace_hist_ns=$M_BTH
cgbpf_ns=$M_CG
cgbpf_overhead_ns=$(ovh "$M_CG")
bare_overhead_ns=$(ovh "$M_BARE")
bare_kind=$BARE_KIND
cgbpf_vs_bare_ratio=$RATIO
cgbpf_vs_bare_perf_ratio=$RATIO_PERF
cgbpf_vs_bpftrace_hist_ratio=$VS_BT
target_ratio=$TARGET_RATIO
target_ratio_met=$([ "$VERDICT" = MET ] && echo yes || echo no)
cgbpf_defaults_ns=$M_CGD
cgbpf_defaults_vs_bare_ratio=$RATIO_DEF
target_ratio_defaults_met=$([ "$VERDICT_DEF" = MET ] && echo yes || echo no)
cgbpf_defaults_lost=$(IFS=+; calc "${CGD_LOST[*]}" 0)
cgbpf_defaults_no_python_ns=$M_CGD_NOPY
cgbpf_defaults_no_backtrace_ns=$M_CGD_NOBT
cgbpf_defaults_no_syscalls_ns=$M_CGD_NOSYS
cgbpf_consumer_cpu_ns_per_call=$M_CPU
bare_multi_pinned_other_cpu_idle_ns=${M_IDLE:-na}
bare_multi_pinned_other_cpu_busy_ns=${M_BUSY:-na}
cgbpf_calls_per_s=$RATE
cgbpf_lost_default_ring=$LOST_DEFAULT
EOF
for mib in $RINGS; do
	echo "cgbpf_ring${mib}mib_ns=${RING_NS[$mib]}"
	echo "cgbpf_ring${mib}mib_lost=${RING_LOST[$mib]}"
done
for mib in $PAIR_RINGS; do
	echo "cgbpf_pair_ring${mib}mib_calls_per_s=${PAIR_RATE[$mib]}"
	echo "cgbpf_pair_ring${mib}mib_lost=${PAIR_LOST[$mib]}"
done
cat <<EOF
trace_bytes_1k=$S1K
trace_bytes_100k=$S100K
trace_bytes_${N}=$S1M
trace_bytes_per_launch_slope=$SLOPE
target_bytes=$TARGET_BYTES
target_bytes_met=$([ "$BVERDICT" = MET ] && echo yes || echo no)
json_launches=$JN
json_bytes=$JB
json_bytes_per_launch=$JBPL
perfetto_bytes_sample=$SJ
json_vs_perfetto_ratio=$(calc "$JBPL / $SLOPE" 2)
EOF
