#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Cost of Python call sites (issue 12), one run, not a test: a Python loop
# of N cuLaunchKernel calls through ctypes and the fake driver
# (bench/pyloop.py; timed after one warm-up launch from the same line and
# a 300 ms pause: the steady state of a long-running program), recorded
# by cgbpf with API sources only:
#   none       no cgbpf;
#   off        --python off: the probes and records without Python frames;
#   leaf       --python leaf (the default), the loop DEPTH frames deep;
#   stack-D    --python stack with the loop D frames deep (D = 8, 32, 64):
#              every frame read per call.
# Per call: the median of RUNS runs (interleaved round by round) of the
# loop's wall time per launch and of the launching thread's CPU time per
# launch (the probes run in it; the consumer's work competing for the CPU
# on a busy machine does not count there); ratios against "off" of the
# same run; bytes
# of trace per call: (trace size - trace size of "off") / N, every launch
# from the same line (its call site interned once per sequence).
#
#   sudo bash bench/python.sh        (after make; PYTHON=... to choose)
set -euo pipefail

N=${PY_BENCH_N:-100000}
RUNS=${PY_BENCH_RUNS:-3}
DEPTH=${PY_BENCH_DEPTH:-8}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
py=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12.*/bin/python3 2>/dev/null | tail -1)}
py=${py:-/usr/bin/python3}
. "$top/bench/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "bench/python.sh: needs root (attaches uprobes)" >&2; exit 1; }
[ -x "$out/cgbpf" ] && [ -r "$out/fake/libcuda.so.1" ] || { echo "bench/python.sh: run make first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$out/fake CGBPF_START_DELAY_MS=1500
pin=()
command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ] && pin=(taskset -c 1)

# one CONFIG: ns per call; the trace's size in $tmp/CONFIG.size.
one() {
	local mode depth=$DEPTH f=$tmp/$1.pftrace
	case $1 in
	none) "${pin[@]}" "$py" "$top/bench/pyloop.py" "$N" "$depth" |
		sed -n 's/^ns_per_call=\([0-9.]*\) cpu_ns_per_call=\([0-9.]*\)/\1 \2/p'
	      echo 0 > "$tmp/$1.size"; return ;;
	off|leaf) mode=$1 ;;
	stack-*) mode=stack depth=${1#stack-} ;;
	esac
	rm -f "$f"
	"$out/cgbpf" record --python "$mode" --sched off --syscall-threshold off --sample-hz 0 \
		--backtrace-threshold off --no-summary -o "$f" \
		-- "${pin[@]}" "$py" "$top/bench/pyloop.py" "$N" "$depth" 2>"$tmp/$1.err" |
		sed -n 's/^ns_per_call=\([0-9.]*\) cpu_ns_per_call=\([0-9.]*\)/\1 \2/p'
	stat -c %s "$f" > "$tmp/$1.size"
}

read -ra configs <<< "${PY_BENCH_CONFIGS:-none off leaf stack-8 stack-32 stack-64}"
declare -A ns cpu
for ((r = 0; r < RUNS; r++)); do
	for c in "${configs[@]}"; do
		v=$(one "$c")
		[ -n "$v" ] || { echo "bench/python.sh: $c failed:" >&2; cat "$tmp/$c.err" >&2; exit 1; }
		ns[$c]="${ns[$c]:-} ${v% *}"
		cpu[$c]="${cpu[$c]:-} ${v#* }"
		cp "$tmp/$c.size" "$tmp/$c.size.last"
	done
done
echo "python: $("$py" -c 'import platform; print(platform.python_version())') ($py), N=$N launches, leaf depth $DEPTH, $RUNS runs (median)"
off=$(median ${ns[off]})
offc=$(median ${cpu[off]})
offsz=$(cat "$tmp/off.size.last")
printf '%-10s %12s %8s %14s %8s %14s\n' config "wall ns/call" "x off" "CPU ns/call" "x off" "trace B/call"
for c in "${configs[@]}"; do
	m=$(median ${ns[$c]})
	mc=$(median ${cpu[$c]})
	sz=$(cat "$tmp/$c.size.last")
	b=-
	[ "$c" = none ] || b=$(calc "($sz - $offsz) / $N" 2)
	printf '%-10s %12s %8s %14s %8s %14s\n' "$c" "$m" "$(calc "$m / $off" 3)" "$mc" \
		"$(calc "$mc / $offc" 3)" "$b"
done
