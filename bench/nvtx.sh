#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Cost of one nvtxRangePushA + nvtxRangePop pair (NVTX v3, header-only),
# measured in one run (not a test):
#   none      no injection library: NVTX's own no-op path;
#   empty     an injection library whose push/pop do nothing
#             (bench/nvtx_noop_inject.c): the floor of any injection;
#   idle      libcgbpf-inject.so loaded, no tracer (USDT semaphores at 0);
#   count     a tracer attached to every probe, BPF program only counts
#             (the bare USDT trap: uprobe + trivial program);
#   record    the test-only checker (--drain): each probe copies its args
#             and the message string into a ring buffer that user space
#             drains without printing;
#   cgbpf     `cgbpf record -- CMD` (API sources only): cgbpf's own USDT
#             programs, records, model and Perfetto writer.
# Every figure is the median of NVTX_BENCH_RUNS runs of NVTX_BENCH_N pairs;
# configurations are interleaved round by round. Ratios are against "none"
# and "idle" of the same run. "record" is the test checker, not cgbpf.
#
#   sudo bash bench/nvtx.sh          (after make; needs the CUDA toolkit)
set -euo pipefail

N=${NVTX_BENCH_N:-2000000}
RUNS=${NVTX_BENCH_RUNS:-5}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
lib=$out/inject/libcgbpf-inject.so
checker=$out/tests/nvtx_usdt
bin=$out/bench/nvtx_pushpop

[ "$(id -u)" -eq 0 ] || { echo "bench/nvtx.sh: needs root (attaches uprobes)" >&2; exit 1; }
[ -r "$cuda_home/include/nvtx3/nvToolsExt.h" ] || { echo "bench/nvtx.sh: no NVTX headers under $cuda_home" >&2; exit 1; }
for f in "$lib" "$checker"; do
	[ -x "$f" ] || [ -r "$f" ] || { echo "bench/nvtx.sh: $f missing: run make" >&2; exit 1; }
done
mkdir -p "$out/bench"
gcc -O2 -g -I"$cuda_home/include" "$top/bench/nvtx_pushpop.c" -o "$bin"
noop=$out/bench/libnvtx-noop.so
gcc -O2 -g -fPIC -shared -fvisibility=hidden -I"$top/inject" "$top/bench/nvtx_noop_inject.c" -o "$noop"

errs=$(mktemp)
trap 'rm -f "$errs" "$errs.pftrace"' EXIT
lost=0
pin=()
command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ] && pin=(taskset -c 1)

one() {
	case $1 in
	none) "${pin[@]}" "$bin" "$N" ;;
	empty) NVTX_INJECTION64_PATH=$noop "${pin[@]}" "$bin" "$N" ;;
	idle) NVTX_INJECTION64_PATH=$lib "${pin[@]}" "$bin" "$N" ;;
	count) NVTX_INJECTION64_PATH=$lib "$checker" --count "$lib" -- "${pin[@]}" "$bin" "$N" 2>/dev/null ;;
	record) NVTX_INJECTION64_PATH=$lib "$checker" --drain "$lib" -- "${pin[@]}" "$bin" "$N" 2>"$errs" ;;
	cgbpf) NVTX_INJECTION64_PATH=$lib "$out/cgbpf" record --sched off --syscall-threshold off \
		--sample-hz 0 --backtrace-threshold off --no-summary -o "$errs.pftrace" \
		-- "${pin[@]}" "$bin" "$N" 2>/dev/null ;;
	esac | sed -n 's/^ns_per_pair=//p'
}

configs=(none empty idle count record cgbpf)
declare -A all
for ((r = 0; r < RUNS; r++)); do
	for c in "${configs[@]}"; do
		all[$c]+="$(one "$c") "
		[ "$c" = record ] && grep -q '^lost' "$errs" && lost=$((lost + 1))
	done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -A med
for c in "${configs[@]}"; do
	med[$c]=$(median <<<"${all[$c]}")
done

printf 'NVTX push/pop pair cost, N=%s pairs, median of %s runs (%s)\n' "$N" "$RUNS" "$(uname -r)"
[ "$lost" -gt 0 ] && echo "note: the record checker lost probe hits (ring full) in $lost of $RUNS runs"
printf '%-8s %12s %10s %10s   %s\n' config ns/pair "x none" "x idle" "runs (ns/pair)"
for c in "${configs[@]}"; do
	awk -v c="$c" -v m="${med[$c]}" -v n="${med[none]}" -v i="${med[idle]}" -v runs="${all[$c]}" \
		'BEGIN { printf "%-8s %12.2f %9.2fx %9.2fx   %s\n", c, m, m / n, m / i, runs }'
done
awk -v n="${med[none]}" -v e="${med[empty]}" -v i="${med[idle]}" -v c="${med[count]}" -v r="${med[record]}" 'BEGIN {
	printf "\nidle_minus_empty_ns=%.2f\n", i - e
	printf "idle_minus_none_ns=%.2f\ncount_minus_idle_ns=%.2f\nrecord_minus_idle_ns=%.2f\n", i - n, c - i, r - i }'
awk -v g="${med[cgbpf]}" -v i="${med[idle]}" -v c="${med[count]}" 'BEGIN {
	printf "cgbpf_minus_idle_ns=%.2f\ncgbpf_over_bare_usdt=%.2f\n", g - i, (g - i) / (c - i) }'
