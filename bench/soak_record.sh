#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soak of `cgbpf record -a` and `cgbpf monitor` under process churn (issue
# 27; bench/soak.sh is the monitor's older soak with one kind of process).
# Not CI-blocking: a benchmark, run by hand.
#
# For MINUTES, a churn loop starts one process every 100 ms, in turn:
#   fork   a target that forks a child making CUDA calls (workloads/fork)
#   exec   a shell that execs a CUDA program (workloads/mt)
#   late   a program that dlopens a private copy of the driver by an
#          absolute path no search names (workloads/dl_late; a new copy
#          each time, removed after)
#   kill   a program killed (SIGKILL) while inside a 100 ms synchronize
# Every 10 s: cgbpf's RSS and open descriptors. At the end:
#   record: RSS and fds of the last sample against the one at 60 s (the
#           model keeps one entry per process it saw: that growth is
#           said apart), records lost (the summary), windows said on
#           stderr against the `late` processes started (each maps its
#           file before it can be probed: every one must be said), and
#           the trace's error stats in Perfetto's trace processor when
#           ../shared/perfetto has it;
#   monitor (--flight-recorder 5m, a dump every 5 minutes by SIGUSR1):
#           RSS and fds likewise, and the dumps written.
#
# Usage: sudo bash bench/soak_record.sh [MINUTES] [record|monitor|both]
#        (default 30 both; SOAK_SECONDS overrides MINUTES; SOAK_KEEP=DIR
#        keeps cgbpf's stdout, stderr and the samples there)
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${1:-30}
MODE=${2:-both}
SECS=${SOAK_SECONDS:-$(( MIN * 60 ))}
OUT=${OUT:-build}
make -s --no-print-directory all test-bins >&2
TMP=$(mktemp -d)
cg=
churn=
keep() { [ -n "${SOAK_KEEP:-}" ] && mkdir -p "$SOAK_KEEP" && cp "$TMP"/*.out "$TMP"/*.err "$TMP"/*.samples "$TMP/kinds" "$SOAK_KEEP"/ 2>/dev/null; true; }
trap '[ -n "$churn" ] && kill $churn 2>/dev/null; [ -n "$cg" ] && kill -INT $cg 2>/dev/null; wait 2>/dev/null || true; keep; rm -rf "$TMP"' EXIT

# The churn loop: one process every 100 ms, kinds in turn; counts in $TMP/kinds.
churn_loop() {
	local end=$1 n=0
	while [ "$(date +%s)" -lt "$end" ]; do
		case $((n % 4)) in
		0) LD_LIBRARY_PATH="$OUT/fake" "$OUT/workloads/fork" --children 1 --iters 2 \
			> /dev/null 2>&1 & echo fork ;;
		1) LD_LIBRARY_PATH="$OUT/fake" sh -c "exec $OUT/workloads/mt --threads 2 --iters 3" \
			> /dev/null 2>&1 & echo exec ;;
		2) # a fresh file each time (a new inode no search names: under -a a
		   # file's probes serve every process, so only its first mapping
		   # is late), removed once the process is gone
		   d="$TMP/late$n"
		   mkdir -p "$d" && cp "$OUT/fake/libcuda.so.1" "$d/" &&
		   { "$OUT/workloads/dl_late" --lib "$d/libcuda.so.1" --after-dlopen-ms 0 \
			--iters 3 > /dev/null 2>&1; rm -rf "$d"; } & echo late ;;
		3) sh -c "LD_LIBRARY_PATH='$OUT/fake' FAKECUDA_KERNEL_NS=100000000 \
			timeout -s KILL 0.05 '$OUT/workloads/train' --iters 3 > /dev/null 2>&1" &
		   echo kill ;;
		esac
		n=$((n + 1))
		sleep 0.1
	done > "$TMP/kinds"
	wait
}

# Samples pid's RSS (KiB) and descriptors every 10 s while churn runs, into $1.
sample() {
	local file=$1 pid=$2 t0
	t0=$(date +%s)
	printf '%8s %10s %6s\n' "t (s)" "RSS (KiB)" "fds" | tee "$file"
	while kill -0 "$churn" 2>/dev/null; do
		printf '%8d %10s %6s\n' $(( $(date +%s) - t0 )) \
			"$(awk '/VmRSS/ { print $2 }' /proc/$pid/status)" \
			"$(ls /proc/$pid/fd | wc -l)" | tee -a "$file"
		sleep 10
	done
}

# "RSS a -> b KiB, fds a -> b" between the sample at 60 s and the last.
flat() {
	awk 'NR > 1 && $1 >= 60 && !r0 { r0 = $2; f0 = $3 } NR > 1 { r1 = $2; f1 = $3 }
	     END { printf "RSS %s -> %s KiB (%+d), fds %s -> %s (%+d) from 60 s to the end\n",
	           r0, r1, r1 - r0, f0, f1, f1 - f0 }' "$1"
}

if [ "$MODE" = record ] || [ "$MODE" = both ]; then
	echo "== record -a, $SECS s of churn"
	"$OUT/cgbpf" record -a --comm fork,mt,dl_late,train -o "$TMP/soak.perfetto-trace" \
		> "$TMP/rec.out" 2> "$TMP/rec.err" &
	cg=$!
	for _ in $(seq 200); do grep -q "capture running" "$TMP/rec.err" && break; sleep 0.1; done
	churn_loop $(( $(date +%s) + SECS )) &
	churn=$!
	sample "$TMP/rec.samples" $cg
	wait $churn || true
	churn=
	sleep 2
	kill -INT $cg
	wait $cg || true
	cg=
	flat "$TMP/rec.samples"
	grep -E "records lost|LOST" "$TMP/rec.out" | head -3
	late=$(grep -c '^late$' "$TMP/kinds")
	said=$(grep -cE "libcuda.so.1 probed [0-9.]+ ms after it was mapped|had exited when cgbpf read that it mapped libcuda.so.1|mapped libcuda.so.1, but it was no longer in its memory map" "$TMP/rec.err" || true)
	echo "late-mapping processes started: $late; windows said for libcuda.so.1: $said"
	grep -E "window\(s\) before probes|\.\.\. and [0-9]+ more" "$TMP/rec.out" | head -2
	echo "trace: $(du -h "$TMP/soak.perfetto-trace" | cut -f1)"
	tp=../shared/perfetto/trace_processor_shell
	if [ -x "$tp" ]; then
		echo "trace processor error stats (name, idx, value):"
		echo "select name, idx, value from stats where severity in ('error', 'data_loss') and value > 0;" > "$TMP/q.sql"
		"$tp" -q "$TMP/q.sql" "$TMP/soak.perfetto-trace" 2>/dev/null | sed 's/^/   /'
	else
		echo "(no ../shared/perfetto: trace processor check skipped)"
	fi
fi

if [ "$MODE" = monitor ] || [ "$MODE" = both ]; then
	echo "== monitor --flight-recorder 5m, a dump every 5 minutes, $SECS s of churn"
	mkdir -p "$TMP/dumps"
	"$OUT/cgbpf" monitor --listen 127.0.0.1:${BENCH_PORT:-19466} --comm fork,mt,dl_late,train --flight-recorder 5m \
		--dump-dir "$TMP/dumps" --interval 10s --no-trigger-exit --no-trigger-errors \
		--trigger-slow off \
		> "$TMP/mon.out" 2> "$TMP/mon.err" &
	cg=$!
	for _ in $(seq 200); do grep -q "monitoring;" "$TMP/mon.err" && break; sleep 0.1; done
	churn_loop $(( $(date +%s) + SECS )) &
	churn=$!
	( while kill -0 $churn 2>/dev/null; do sleep 300; kill -USR1 $cg 2>/dev/null || true; done ) &
	dumper=$!
	sample "$TMP/mon.samples" $cg
	wait $churn || true
	churn=
	kill $dumper 2>/dev/null || true
	kill -TERM $cg
	wait $cg || true
	cg=
	flat "$TMP/mon.samples"
	echo "dumps written: $(ls "$TMP/dumps" | wc -l)"
fi
