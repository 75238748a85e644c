#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What a traced call costs between the bare trap and cgbpf, piece by piece
# (not a test). bench/bare.c's floor programs (two clock reads, task
# storage, one 32-byte record at the return) with cgbpf's further work
# added one part at a time:
#
#   bare          empty entry and return programs (uprobe_multi)
#   floor         --floor=7
#   +entry rec    --floor=15: a 120-byte record at the entry too, as
#                 cgbpf writes (header, cookie, six argument registers)
#   +stack read   --floor=31: three stack arguments read from user memory
#                 at the entry (cuLaunchKernel's blockDimZ, sharedMemBytes,
#                 hStream), as cgbpf's PK_STACK3
#   +wake query   --floor=63: the ring's fill and a wake level read per
#                 record, as cgbpf's wake_flag()
#   8-byte read   --floor=95: as +stack read, 8 bytes instead of 24
#
# and, in the same rounds, cgbpf record -p with the API alone. Prints the
# median ns per cuLaunchKernel of the loop (build/workloads/bench_launch)
# and, from kernel.bpf_stats_enabled, the median ns per run of the entry
# and return programs (bpf_stats adds its own two clock reads to every
# run: compare rows, not absolute figures).
#
#   sudo bash bench/floor.sh [N (300000)] [ROUNDS (5)]
set -euo pipefail
N=${1:-300000}
ROUNDS=${2:-5}
cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "bench/floor.sh: needs root" >&2; exit 1; }
make -s --no-print-directory all bench-bins >&2
TMP=$(mktemp -d /tmp/cgbpf-floor.XXXXXX)
trap 'sysctl -qw kernel.bpf_stats_enabled=0; rm -rf "$TMP"' EXIT
launch_copy "$TMP" build/cgbpf
API="--sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off --python off"
sysctl -qw kernel.bpf_stats_enabled=1

# progs TAG: "TAG enter=NS exit=NS" from the programs that ran >= N/2 times.
progs() {
	bpftool prog show -j | /usr/bin/python3 -c '
import json, sys
n, tag = int(sys.argv[1]), sys.argv[2]
v = {}
for p in json.load(sys.stdin):
    if p.get("run_cnt", 0) >= n // 2:
        k = "exit" if "exit" in p["name"] else "enter"
        v[k] = p["run_time_ns"] / p["run_cnt"]
print(tag, "%.0f" % v.get("enter", 0), "%.0f" % v.get("exit", 0))' "$N" "$1"
}

bare() {	# TAG FLAG
	local b
	rm -f "$TMP/b.out"
	build/bench/bare "$2" "$LIB" "$OFF" > "$TMP/b.out" 2>&1 &
	b=$!
	wait_for "$TMP/b.out" "^bare: attached" 10 $b || { cat "$TMP/b.out" >&2; exit 1; }
	"$WL" "$N" > "$TMP/wl.out"
	echo "$1 $(ns_of "$TMP/wl.out") $(progs "$1")" >> "$TMP/all"
	kill -INT $b
	wait $b || true
}

cgbpf() {	# TAG
	local w c
	rm -f "$TMP/gate" "$TMP/cg.err"
	CGBPF_WAIT_FILE=$TMP/gate "$WL" "$N" > "$TMP/wl.out" 2>&1 &
	w=$!
	# shellcheck disable=SC2086
	build/cgbpf record $API --force -p $w -o "$TMP/o.pftrace" > /dev/null 2> "$TMP/cg.err" &
	c=$!
	wait_for "$TMP/cg.err" "probing [0-9]+ CUDA driver" 30 $c || { cat "$TMP/cg.err" >&2; exit 1; }
	touch "$TMP/gate"
	wait $w
	echo "$1 $(ns_of "$TMP/wl.out") $(progs "$1")" >> "$TMP/all"
	kill -INT $c
	wait $c || true
}

ROWS=(bare floor +entry_rec +stack_read +wake_query 8-byte_read cgbpf_API_only)
for ((r = 1; r <= ROUNDS; r++)); do
	bare bare --multi
	bare floor --floor=7
	bare +entry_rec --floor=15
	bare +stack_read --floor=31
	bare +wake_query --floor=63
	bare 8-byte_read --floor=95
	cgbpf cgbpf_API_only
	echo "round $r/$ROUNDS done" >&2
done

col() {	# TAG FIELD: the median of that column over the rounds
	median $(awk -v t="$1" -v f="$2" '$1 == t { print $f }' "$TMP/all")
}
base=$(col bare 2)
echo "== bench/floor.sh: ns per cuLaunchKernel, median of $ROUNDS x $N calls; BPF ns per run (bpf_stats)"
printf '  %-16s %9s %10s %8s %8s\n' config ns/call "vs bare" enter exit
for t in "${ROWS[@]}"; do
	ns=$(col "$t" 2)
	printf '  %-16s %9s %10s %8s %8s\n' "$t" "$ns" "$(calc "$ns - $base")" \
		"$(col "$t" 4)" "$(col "$t" 5)"
done
echo "  (vs bare: ns per call above the bare trap; enter/exit include bpf_stats' own clock reads)"
