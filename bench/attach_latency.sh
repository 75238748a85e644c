#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What attaching costs the calls of a target, on the three paths cgbpf has
# (no process is ever stopped or signalled, so a call made before its
# probes are in place is simply missed):
#  1. resolvable at start: `record -p PID` on a process that dlopens
#     libcuda.so.1 (found through its LD_LIBRARY_PATH) and calls it at once;
#     cgbpf probed the file before the mapping. Calls missed (target: 0).
#  2. a file first seen at its mapping: `record -a` while N processes each
#     dlopen a fresh copy by absolute path (a new inode no search names).
#     The window from the mmap's return to the probes in place (target:
#     under 1 ms median).
#  3. a forked child (fork without exec): per-pid probes are not inherited,
#     so the child gets its own after cgbpf sees the fork. The window.
#  4. path 2 behind a backlog: the same, while a traced launch loop
#     (bench_launch) fills the events ring with call records, so the
#     mapping's record waits behind them unless it is read from the ctl
#     ring first. The window.
#
# Usage: sudo bash bench/attach_latency.sh [N]   (default 20)
#        PATHS=2 sudo bash bench/attach_latency.sh   runs only path 2 (any of 1234)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${1:-20}
PATHS=${PATHS:-1234}
OUT=${OUT:-build}
TMP=$(mktemp -d)
cg=
trap '[ -n "$cg" ] && kill -INT $cg 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
py=/usr/bin/python3

# N processes one after another, each dlopening a fresh copy of the driver
# (TMP/PREFIXi) and staying until cgbpf's ERRFILE says it probed it.
late_copies() {
	local prefix=$1 errf=$2 i w
	for i in $(seq "$N"); do
		mkdir "$TMP/$prefix$i"
		cp "$OUT/fake/libcuda.so.1" "$TMP/$prefix$i/"
		"$OUT/workloads/dl_late" --lib "$TMP/$prefix$i/libcuda.so.1" --after-dlopen-ms 0 \
			--iters 5 --exit-file "$TMP/$prefix$i/leave" > /dev/null &
		w=$!
		for _ in $(seq 400); do grep -q "pid $w: libcuda.so.1 probed" "$errf" && break; sleep 0.05; done
		touch "$TMP/$prefix$i/leave"
		wait $w
	done
}

# 1. Resolvable at start.
if [[ $PATHS == *1* ]]; then
missed=0 made=0
for i in $(seq "$N"); do
	mkdir -p "$TMP/r$i"
	cp "$OUT/fake/libcuda.so.1" "$TMP/r$i/"
	LD_LIBRARY_PATH="$TMP/r$i" CGBPF_WAIT_FILE="$TMP/r$i/go" CGBPF_MANIFEST="$TMP/r$i/m.json" \
		"$OUT/workloads/dl_late" --after-dlopen-ms 0 --iters 20 > /dev/null &
	w=$!
	"$OUT/cgbpf" record -p $w --sched off --sample-hz 0 --syscall-threshold off \
		-o "$TMP/r$i/t.perfetto-trace" 2> "$TMP/r$i/err" > /dev/null &
	cg=$!
	for _ in $(seq 200); do grep -q "Ctrl-C stops" "$TMP/r$i/err" && break; sleep 0.05; done
	touch "$TMP/r$i/go"
	wait $w
	wait $cg || true
	cg=
	read -r m s < <($py - "$TMP/r$i" <<'EOF'
import json, os, re, sys
sys.path.insert(0, "tests/lib")
import ptrace
d = sys.argv[1]
funcs = set(re.findall(r"^\s*X\((cu\w+),", open("bpf/cuda_funcs.h").read(), re.M))
made = sum(v for k, v in json.load(open(os.path.join(d, "m.json")))["calls"].items()
           if k in funcs)
seen = sum(1 for x in ptrace.load(os.path.join(d, "t.perfetto-trace")).slices if x.name in funcs)
print(made, seen)
EOF
)
	made=$((made + m))
	missed=$((missed + m - s))
done
echo "1. record -p, libcuda found as the target's loader finds it, called right after dlopen:"
echo "   $missed of $made calls missed ($N processes)"
fi

# 2. A file first seen at its mapping.
if [[ $PATHS == *2* ]]; then
"$OUT/cgbpf" record -a --comm dl_late --summary-only --sched off --sample-hz 0 \
	--syscall-threshold off 2> "$TMP/err" > /dev/null &
cg=$!
for _ in $(seq 200); do grep -q "capture running" "$TMP/err" 2>/dev/null && break; sleep 0.05; done
late_copies l "$TMP/err"
kill -INT $cg
wait $cg || true
cg=
mapfile -t ms < <(sed -n 's/.*libcuda.so.1 probed \([0-9.]*\) ms after it was mapped.*/\1/p' "$TMP/err")
[ ${#ms[@]} -eq "$N" ] || { echo "expected $N attach reports, got ${#ms[@]}" >&2; exit 1; }
max=$(printf '%s\n' "${ms[@]}" | sort -g | tail -1)
echo "2. record -a, a library file first seen when it is mapped: probes in place after"
echo "   median $(median "${ms[@]}") ms, max $max ms ($N files; calls in that window are missed)"
fi

# 3. Forked children.
if [[ $PATHS == *3* ]]; then
LD_LIBRARY_PATH="$OUT/fake" "$OUT/cgbpf" record -v --summary-only --sched off --sample-hz 0 \
	--syscall-threshold off -- "$OUT/workloads/fork" --children "$N" --iters 200000 \
	2> "$TMP/ferr" > /dev/null || true
mapfile -t fk < <(sed -n 's/.*probes in place \([0-9.]*\) ms after its fork.*/\1/p' "$TMP/ferr")
if [ ${#fk[@]} -gt 0 ]; then
	max=$(printf '%s\n' "${fk[@]}" | sort -g | tail -1)
	echo "3. record --, a forked child (no exec): its probes in place after"
	echo "   median $(median "${fk[@]}") ms, max $max ms (${#fk[@]} children; calls in that window are missed)"
else
	echo "3. forked children: no window measured (children exited first?)" >&2
fi
fi

# 4. Path 2 behind a backlog.
if [[ $PATHS == *4* ]]; then
"$OUT/cgbpf" record -a --comm dl_late,bench_launch --summary-only --sched off --sample-hz 0 \
	--syscall-threshold off 2> "$TMP/berr" > /dev/null &
cg=$!
for _ in $(seq 200); do grep -q "capture running" "$TMP/berr" 2>/dev/null && break; sleep 0.05; done
LD_LIBRARY_PATH="$OUT/fake" "$OUT/workloads/bench_launch" 1000000000 > /dev/null 2>&1 &
hot=$!
sleep 2
late_copies b "$TMP/berr"
kill $hot
wait $hot 2>/dev/null || true
kill -INT $cg
wait $cg || true
cg=
mapfile -t ms < <(grep -v "pid $hot:" "$TMP/berr" |
	sed -n 's/.*libcuda.so.1 probed \([0-9.]*\) ms after it was mapped.*/\1/p')
if [ ${#ms[@]} -gt 0 ]; then
	max=$(printf '%s\n' "${ms[@]}" | sort -g | tail -1)
	echo "4. record -a, a file first seen at its mapping, behind a launch loop's backlog:"
	echo "   probes in place after median $(median "${ms[@]}") ms, max $max ms (${#ms[@]} of $N files reported)"
else
	echo "4. no window reported (of $N files)" >&2
fi
fi
