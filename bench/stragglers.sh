#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `cgbpf stats --report nccl_stragglers` on a large trace (not a test):
# 8 ranks (threads of nccl_ranks on the fake NCCL) x N all-reduces,
# recorded with the NCCL probes alone, then read STRAG_RUNS times with
# --report nccl_stragglers and, for the baseline, --report nccl_sum (what
# `stats` reads NCCL traces at today); the median wall and CPU time and
# the maximum RSS of each, the ratio of the two, and the trace's size.
# Every report is computed in the one read of the trace (--report picks
# what is printed), so the cost of the matching shows against a cgbpf
# without it: STRAG_BASE=OLD_CGBPF times that one's `stats --report
# nccl_sum` on the same trace too (e.g. a build of commit 9e86696).
# Rank 3 sleeps 200 us before each all-reduce (less than the scheduling
# noise of 8 threads on 2 CPUs: not always last).
#
#   sudo bash bench/stragglers.sh        (after make test-bins; STRAG_N=100000 STRAG_RUNS=3;
#                                         STRAG_SPLIT=1: also one file per rank)
set -euo pipefail

N=${STRAG_N:-100000}
RUNS=${STRAG_RUNS:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
. "$top/bench/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "bench/stragglers.sh: needs root (records a trace)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/stragglers.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
for f in "$out/cgbpf" "$out/workloads/nccl_ranks" "$out/fake/libnccl.so.2"; do
	[ -e "$f" ] || { echo "bench/stragglers.sh: $f missing: run make test-bins" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trace=$tmp/ranks.perfetto-trace
LD_LIBRARY_PATH=$out/fake "$out/cgbpf" record --sample-hz 0 --syscall-threshold off --sched off \
	--python off --trace nccl --no-summary -o "$trace" -- "$out/workloads/nccl_ranks" --ranks 8 \
	--iters "$N" --slow-rank 3 --slow-us 200 > /dev/null 2> "$tmp/record.err" ||
	{ cat "$tmp/record.err" >&2; exit 1; }
echo "8 ranks x $N all-reduces: trace $(calc "$(stat -c %s "$trace") / 1048576") MiB, median of $RUNS runs"
printf '  %-16s %8s %8s %12s\n' report "wall s" "CPU s" "max RSS MiB"
declare -A W C R
reps=(nccl_sum nccl_stragglers)
[ -n "${STRAG_BASE:-}" ] && reps=(base:nccl_sum "${reps[@]}")
for rep in "${reps[@]}"; do
	walls=() cpus=() rss=()
	bin=$out/cgbpf
	[ "${rep%%:*}" = base ] && bin=$STRAG_BASE
	for _ in $(seq "$RUNS"); do
		/usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$bin" stats --report "${rep#base:}" \
			"$trace" > "$tmp/${rep#base:}.out"
		read -r w u s m < "$tmp/time"
		walls+=("$w") cpus+=("$(calc "$u + $s" 2)") rss+=("$m")
	done
	W[$rep]=$(median "${walls[@]}") C[$rep]=$(median "${cpus[@]}")
	R[$rep]=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
	printf '  %-16s %8s %8s %12s\n' "$rep" "${W[$rep]}" "${C[$rep]}" "$(calc "${R[$rep]} / 1024")"
done
echo "  nccl_stragglers / nccl_sum: CPU $(calc "${C[nccl_stragglers]} / ${C[nccl_sum]}" 2)x," \
	"RSS $(calc "${R[nccl_stragglers]} / ${R[nccl_sum]}" 2)x"
[ -n "${STRAG_BASE:-}" ] && echo "  this cgbpf / STRAG_BASE (nccl_sum): CPU" \
	"$(calc "${C[nccl_sum]} / ${C[base:nccl_sum]}" 2)x, RSS $(calc "${R[nccl_sum]} / ${R[base:nccl_sum]}" 2)x"
grep -E "^ +[0-9a-f]{4} +3 " "$tmp/nccl_stragglers.out" | sed 's/^/  rank 3: /' | head -1
grep -E "Rank [0-9]+ of communicator|No rank holds" "$tmp/nccl_stragglers.out" | sed 's/^ */  /'

# STRAG_SPLIT=1: the same job as one process per rank, one file each
# (--split-per-process): stats reads the files one after another, so an
# instance stays open until the last rank's file; its CPU and max RSS.
if [ -n "${STRAG_SPLIT:-}" ]; then
	rm -f "$trace"
	# Each forked rank waits at its gate (tests/workloads/child_gate.h)
	# until cgbpf says its probes are in place, so that its communicator's
	# creation is traced (else it falls in the fork's window).
	gate=$tmp/gate
	mkdir -p "$gate"
	CGBPF_CHILD_GATE=$gate LD_LIBRARY_PATH=$out/fake "$out/cgbpf" record -v --sample-hz 0 \
		--syscall-threshold off --sched off --python off --trace nccl --no-summary \
		--split-per-process -o "$tmp/r.%p.perfetto-trace" -- "$out/workloads/nccl_ranks" \
		--procs --ranks 8 --iters "$N" --slow-rank 3 --slow-us 200 2>&1 > /dev/null |
		while IFS= read -r line; do
			if [[ $line =~ pid\ ([0-9]+):\ probes\ in\ place ]]; then
				touch "$gate/${BASH_REMATCH[1]}"
			fi
		done
	files=("$tmp"/r.*.perfetto-trace)
	walls=() cpus=() rss=()
	for _ in $(seq "$RUNS"); do
		/usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$out/cgbpf" stats --report \
			nccl_stragglers "${files[@]}" > "$tmp/split.out"
		read -r w u s m < "$tmp/time"
		walls+=("$w") cpus+=("$(calc "$u + $s" 2)") rss+=("$m")
	done
	echo "split: ${#files[@]} files, $(calc "$(du -cb "${files[@]}" | tail -1 | cut -f1) / 1048576") MiB:" \
		"nccl_stragglers wall $(median "${walls[@]}") s, CPU $(median "${cpus[@]}") s," \
		"max RSS $(calc "$(printf '%s\n' "${rss[@]}" | sort -n | tail -1) / 1024") MiB"
	grep -E "Rank [0-9]+ of communicator|No rank holds|matched by" "$tmp/split.out" |
		sed 's/^ */  /' || true
fi
