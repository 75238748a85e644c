#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cost of `cgbpf monitor --python-sites` (issue 12), one run, not a test: a
# Python loop of N cuLaunchKernel calls through ctypes (bench/pyloop.py,
# DEPTH frames deep, every call from one user line) under
#   monitor    cgbpf monitor (aggregates only: the default)
#   sites-16   cgbpf monitor --python-sites 10 (one call in 16 sampled)
#   sites-1    cgbpf monitor --python-sites 10 --python-site-sample 1
# Per call: the loop's wall time and the launching thread's CPU time (the
# probes run in it), medians of RUNS rounds (interleaved), ratios against
# "monitor"; the daemon's CPU time per call (/proc/PID/stat ticks, startup
# excluded).
#
#   sudo bash bench/pysites.sh       (after make; PYTHON=... to choose;
#                                     PY_BENCH_N, PY_BENCH_RUNS, PY_BENCH_DEPTH)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${PY_BENCH_N:-200000}
RUNS=${PY_BENCH_RUNS:-3}
DEPTH=${PY_BENCH_DEPTH:-8}
PORT=${BENCH_PORT:-19465}
py=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12.*/bin/python3 2>/dev/null | tail -1)}
py=${py:-/usr/bin/python3}
[ "$(id -u)" -eq 0 ] || { echo "bench/pysites.sh: needs root (attaches uprobes)" >&2; exit 1; }
[ -x build/cgbpf ] && [ -r build/fake/libcuda.so.1 ] || { echo "bench/pysites.sh: run make first" >&2; exit 1; }
TMP=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
# A private copy: probes of concurrent runs on build/fake must not fire here.
mkdir -p "$TMP/fake" "$TMP/dumps"
cp build/fake/libcuda.so.1 "$TMP/fake/"
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run CONFIG: sets NS, TCPU (thread CPU ns per call), DCPU (daemon CPU ns per call).
run() {
	local extra=() d t0 t1
	case $1 in
	sites-16) extra=(--python-sites 10) ;;
	sites-1) extra=(--python-sites 10 --python-site-sample 1) ;;
	esac
	rm -f "$TMP/d.err"
	build/cgbpf monitor -v --listen 127.0.0.1:$PORT --dump-dir "$TMP/dumps" --comm python3 \
		"${extra[@]}" 2> "$TMP/d.err" &
	d=$!
	pids+=($d)
	for _ in $(seq 300); do grep -q "monitoring; metrics" "$TMP/d.err" 2>/dev/null && break; sleep 0.1; done
	t0=$(cpu_ticks $d)
	LD_LIBRARY_PATH=$TMP/fake CGBPF_START_DELAY_MS=0 "$py" bench/pyloop.py "$N" "$DEPTH" \
		> "$TMP/wl.out"
	t1=$(cpu_ticks $d)
	if [ "$1" != monitor ]; then
		curl -s "http://127.0.0.1:$PORT/metrics" | grep '^cgbpf_python_site_calls_total' \
			> "$TMP/$1.sites" || true
	fi
	kill -INT $d 2>/dev/null || true
	wait $d 2>/dev/null || true
	NS=$(sed -n 's/^ns_per_call=\([0-9.]*\).*/\1/p' "$TMP/wl.out")
	TCPU=$(sed -n 's/.*cpu_ns_per_call=\([0-9.]*\).*/\1/p' "$TMP/wl.out")
	DCPU=$(calc "($t1 - $t0) * 1e9 / $TICK / $N" 1)
}

declare -A ns tcpu dcpu
for _ in $(seq "$RUNS"); do
	for c in monitor sites-16 sites-1; do
		run $c
		ns[$c]+="$NS "
		tcpu[$c]+="$TCPU "
		dcpu[$c]+="$DCPU "
	done
done
echo "python: $("$py" -c 'import platform; print(platform.python_version())') ($py), N=$N launches, depth $DEPTH, $RUNS rounds (median)"
printf '%-10s %12s %8s %14s %8s %20s\n' config "wall ns/call" "x mon" "CPU ns/call" "x mon" \
	"daemon CPU ns/call"
m0=$(median ${ns[monitor]})
c0=$(median ${tcpu[monitor]})
for c in monitor sites-16 sites-1; do
	m=$(median ${ns[$c]})
	mc=$(median ${tcpu[$c]})
	printf '%-10s %12s %8s %14s %8s %20s\n' "$c" "$m" "$(calc "$m / $m0" 3)" "$mc" \
		"$(calc "$mc / $c0" 3)" "$(median ${dcpu[$c]})"
done
for c in sites-16 sites-1; do
	echo "$c, last round's sites:"
	sed 's/^/  /' "$TMP/$c.sites"
done
