#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What a syscall hook costs, by the kind of hook (not a test): no-op BPF
# programs from bench/bare.c, under a bare uprobe on the fake driver's
# cuLaunchKernel, measured on
#   launch   ns per cuLaunchKernel (bench_launch): every traced call
#            returns through a syscall (sys_uretprobe), so it pays the hooks
#   getpid   ns per getpid (bench_syscall): any other syscall on the machine
# with, in turn:
#   none         the uprobe alone
#   tp           tp_btf/sys_enter and tp_btf/sys_exit (what cgbpf's syscall
#                slices attach): both programs run for every syscall
#   tpexit       tp_btf/sys_exit alone
#   perf:ioctl   the per-syscall tracepoints syscalls:sys_{enter,exit}_ioctl
#                (perf-event attached): getpid and the uretprobe return take
#                the syscall-tracing slow path but run no program
#   perf:getpid  the same on getpid's own tracepoints: a syscall that runs
#                the programs through the perf path
# Every figure is the median of ROUNDS runs, hooks interleaved round by
# round; compare within one run only. The perf: rows need tracefs: it is
# mounted on /sys/kernel/tracing for the run if it is not there (and
# unmounted after); without it they are skipped.
#
#   sudo bash bench/syshooks.sh [LAUNCHES] [ROUNDS]     (300000, 5)
set -euo pipefail
NL=${1:-300000}
ROUNDS=${2:-5}
NS=$((NL * 4))
[ "$(id -u)" -eq 0 ] || { echo "bench/syshooks.sh: needs root" >&2; exit 1; }
cd "$(dirname "$0")/.."
. bench/lib.sh
make -s --no-print-directory all test-bins build/bench/bare >&2
TMP=$(mktemp -d /tmp/cgbpf-syshooks.XXXXXX)
MOUNTED=
cleanup() {
	[ -z "$MOUNTED" ] || umount /sys/kernel/tracing 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
launch_copy "$TMP" build/cgbpf
HOOKS=(none tp tpexit)
if [ ! -d /sys/kernel/tracing/events/syscalls ] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
	MOUNTED=1
fi
if [ -d /sys/kernel/tracing/events/syscalls ]; then
	HOOKS+=(perf:ioctl perf:getpid)
else
	echo "bench/syshooks.sh: no tracefs with syscall events: the perf: rows are skipped" >&2
fi

one() {	# HOOK: "LAUNCH_NS GETPID_NS"
	local b flag=
	[ "$1" = none ] || flag=--sys=$1
	rm -f "$TMP/b.out"
	# shellcheck disable=SC2086
	build/bench/bare $flag --multi "$LIB" "$OFF" > "$TMP/b.out" 2>&1 &
	b=$!
	wait_for "$TMP/b.out" "^bare: attached" 20 $b || { cat "$TMP/b.out" >&2; exit 1; }
	"$WL" "$NL" > "$TMP/l.out"
	build/workloads/bench_syscall getpid "$NS" > "$TMP/g.out"
	kill -INT $b
	wait $b || true
	echo "$(ns_of "$TMP/l.out") $(ns_of "$TMP/g.out")"
}

declare -A L G
for ((r = 1; r <= ROUNDS; r++)); do
	for h in "${HOOKS[@]}"; do
		read -r l g <<< "$(one "$h")"
		L[$h]="${L[$h]:-} $l"
		G[$h]="${G[$h]:-} $g"
	done
	echo "round $r/$ROUNDS done" >&2
done
# shellcheck disable=SC2086
l0=$(median ${L[none]})
# shellcheck disable=SC2086
g0=$(median ${G[none]})
echo "== syscall hooks: ns per call, median of $ROUNDS ($NL launches, $NS getpids a run)"
printf '  %-12s %10s %8s %10s %8s\n' hook launch "+ns" getpid "+ns"
for h in "${HOOKS[@]}"; do
	# shellcheck disable=SC2086
	l=$(median ${L[$h]})
	# shellcheck disable=SC2086
	g=$(median ${G[$h]})
	printf '  %-12s %10s %8s %10s %8s\n' "$h" "$l" "$(calc "$l - $l0")" "$g" "$(calc "$g - $g0")"
done
echo "  (launch: under a bare entry+return uprobe; +ns: above the none row)"
