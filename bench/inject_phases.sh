#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The launch loop's cost before, during and after an injected capture
# (issue 26), in one process on the fake driver and the fake CUPTI:
# build/workloads/launch_phases runs cuLaunchKernel in rounds, started
# plainly; `record -p --inject` attaches after 4 s for 4 s; the loop goes
# on. Prints the median ns per call of the rounds before cgbpf started,
# of the rounds under its probes, and of those from 2.5 s after it left,
# and after/before (the target: within 1.02). RUNS processes, each
# phase's median over all.
# Not a test.
#
#   sudo bash bench/inject_phases.sh [RUNS] [CGBPF_FLAGS]
set -euo pipefail
RUNS=${1:-3}
FLAGS=${2:---sample-hz 0}
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/inject_phases.sh: needs root" >&2; exit 1; }
make -s --no-print-directory all test-bins >&2
. bench/lib.sh
TMP=$(mktemp -d /tmp/cgbpf-phases.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
B=() D=() A=()
for ((r = 0; r < RUNS; r++)); do
	# UNHOOK: the fake CUPTI then costs the driver nothing once every
	# kind is disabled, as NVIDIA's (its default keeps a hook: 261 ns).
	CGBPF_FAKE_CUPTI_UNHOOK=1 CGBPF_CUPTI_PATH=$PWD/build/fake/libcupti.so.13 FAKECUDA_KERNEL_NS=0 \
		build/workloads/launch_phases --seconds 16 --round 200000 > "$TMP/loop" 2>&1 &
	w=$!
	sleep 4
	t0=$(date +%s.%N)
	build/cgbpf record -p $w --inject -d 4s $FLAGS --summary-only > "$TMP/sum" 2> "$TMP/err"
	t1=$(date +%s.%N)
	grep -q "injected now" "$TMP/sum" || { echo "run $r: not injected: $(grep -A1 'injection (' "$TMP/sum")" >&2; }
	wait $w
	B+=("$(awk -v t="$t0" '$1 == "round" && $2 < t - 0.2 && $2 > t - 3.5 { print $3 }' "$TMP/loop" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')")
	# During: the rounds under the probes (a round is a count of calls,
	# so the capture's few slow rounds would drown in fast ones).
	D+=("$(awk -v a="$t0" -v b="$t1" -v m="${B[-1]}" '$1 == "round" && $2 > a && $2 < b && $3 > 5 * m { print $3 }' "$TMP/loop" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')")
	A+=("$(awk -v t="$t1" '$1 == "round" && $2 > t + 2.5 { print $3 }' "$TMP/loop" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')")
	echo "run $r: before ${B[-1]} ns/call, during ${D[-1]}, after ${A[-1]}" >&2
done
mb=$(median "${B[@]}") md=$(median "${D[@]}") ma=$(median "${A[@]}")
echo "launch loop, ns/call (medians of $RUNS runs): before $mb, during the injected capture $md," \
	"after cgbpf left $ma; after/before $(calc "$ma / $mb" 3) (target <= 1.02)"
