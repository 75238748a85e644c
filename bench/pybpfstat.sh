#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# BPF cost of a traced call with Python call sites, independent of the
# machine's load: kernel.bpf_stats_enabled's run_time_ns / run_cnt of the
# call_enter programs (the entry uprobe, where the Python walk runs) of one
# cgbpf, over a steady-state window (3 s) of bench/pyloop.py's launch loop
# (3M calls from one line, DEPTH frames deep), so the first calls, which
# meet code objects not known yet (described once: REC_PY_CODE), do not
# count. One run per (build, mode), interleaved. Not a test.
#
#   sudo bash bench/pybpfstat.sh [CGBPF...]     (after make; default build/cgbpf)
#   PY_BENCH_MODES="off leaf stack" PYTHON=... PY_BENCH_DEPTH=8
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
py=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12.*/bin/python3 2>/dev/null | tail -1)}
py=${py:-/usr/bin/python3}
depth=${PY_BENCH_DEPTH:-8}
read -ra modes <<< "${PY_BENCH_MODES:-off leaf}"
[ $# -gt 0 ] || set -- "$out/cgbpf"

[ "$(id -u)" -eq 0 ] || { echo "bench/pybpfstat.sh: needs root (attaches uprobes)" >&2; exit 1; }
command -v bpftool >/dev/null || { echo "bench/pybpfstat.sh: needs bpftool" >&2; exit 1; }
tmp=$(mktemp -d)
old=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$old"; rm -rf "$tmp"; }
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1
export LD_LIBRARY_PATH=$out/fake CGBPF_START_DELAY_MS=1500

# "run_time_ns run_cnt" of pid's call_enter programs (found by the prog ids
# of its file descriptors: other cgbpf processes have programs of the name).
snap() {
	local ids
	ids=$(grep -h '^prog_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{ print $2 }' | sort -u |
	      tr '\n' ,)
	bpftool -j prog show | /usr/bin/python3 -c '
import json, sys
ids = {int(x) for x in sys.argv[1].split(",") if x}
t = c = 0
for p in json.load(sys.stdin):
    if p["id"] in ids and p.get("name") in ("call_enter", "call_enter_multi"):
        t += p.get("run_time_ns", 0)
        c += p.get("run_cnt", 0)
print(t, c)' "$ids"
}

echo "python: $("$py" -c 'import platform; print(platform.python_version())') ($py), depth $depth"
printf '%-40s %-6s %12s %10s\n' cgbpf mode "ns/run" runs
for cg in "$@"; do
	for m in "${modes[@]}"; do
		"$cg" record --python "$m" --sched off --syscall-threshold off --sample-hz 0 \
			--backtrace-threshold off --summary-only \
			-- "$py" "$top/bench/pyloop.py" 3000000 "$depth" >/dev/null 2>"$tmp/err" &
		pid=$!
		sleep 4.5	# the start delay, the setup, the first calls
		read -r t0 c0 < <(snap "$pid")
		sleep 3
		read -r t1 c1 < <(snap "$pid")
		kill -INT "$pid"
		wait "$pid" || true
		[ "$c1" -gt "$c0" ] || { echo "bench/pybpfstat.sh: no calls counted" >&2; cat "$tmp/err" >&2; exit 1; }
		printf '%-40s %-6s %12d %10d\n' "$cg" "$m" $(( (t1 - t0) / (c1 - c0) )) $(( c1 - c0 ))
	done
done
