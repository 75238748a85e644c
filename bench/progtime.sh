#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# BPF program time per call (kernel.bpf_stats_enabled), by configuration:
# bench_launch N under `cgbpf record -p` with each FLAGS set in turn,
# ROUNDS times interleaved; prints the median ns/run of every program that
# ran more than N/2 times. bpf_stats adds two clock reads to each run:
# compare configurations, not absolute figures. Not a test.
#
#   sudo bash bench/progtime.sh [N] [ROUNDS] [CGBPF] -- "FLAGS" "FLAGS"...
#   sudo bash bench/progtime.sh 300000 6 build/cgbpf -- "" "--python off"
set -euo pipefail
N=${1:-300000}; ROUNDS=${2:-6}; CG=${3:-build/cgbpf}
shift $(( $# >= 3 ? 3 : $# )); [ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || set -- "" "--sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off --python off"
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/progtime.sh: needs root" >&2; exit 1; }
make -s --no-print-directory all test-bins >&2
TMP=$(mktemp -d /tmp/cgbpf-progtime.XXXXXX)
trap 'sysctl -qw kernel.bpf_stats_enabled=0; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/fake" "$TMP/workloads"
cp build/fake/libcuda.so.1 "$TMP/fake/"; cp build/workloads/bench_launch "$TMP/workloads/"
sysctl -qw kernel.bpf_stats_enabled=1
one() {	# FLAGS TAG
	rm -f "$TMP/gate" "$TMP/err"
	CGBPF_WAIT_FILE=$TMP/gate "$TMP/workloads/bench_launch" "$N" > "$TMP/wl" 2>&1 & local w=$!
	"$CG" record $1 --force -p $w -o "$TMP/o.pftrace" > "$TMP/sum" 2> "$TMP/err" & local c=$!
	local k	# not i: the caller counts configurations in i
	for ((k = 0; k < 600; k++)); do grep -q "probing [0-9]* CUDA" "$TMP/err" && break; sleep 0.05; done
	touch "$TMP/gate"; wait $w
	bpftool prog show -j | /usr/bin/python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("run_cnt", 0) > int(sys.argv[1]) // 2:
        print(sys.argv[2], p["name"], "%.0f" % (p["run_time_ns"] / p["run_cnt"]))' "$N" "$2" >> "$TMP/all"
	kill -INT $c; wait $c || true
}
for ((r = 0; r < ROUNDS; r++)); do
	i=0
	for f in "$@"; do one "$f" "c$i"; i=$((i + 1)); done
done
i=0
for f in "$@"; do
	echo "flags: ${f:-(defaults)}"
	awk -v t="c$i" '$1 == t { v[$2] = v[$2] " " $3 } END { for (k in v) print k, v[k] }' "$TMP/all" |
		while read -r name vals; do
			printf '  %-24s median %6s ns/run   runs:%s\n' "$name" \
				"$(printf '%s\n' $vals | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')" "$vals"
		done
	i=$((i + 1))
done
