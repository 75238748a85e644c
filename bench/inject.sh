#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# record -p PID --inject (issue 26): how long the target's thread is held,
# over N injections (each into a fresh process: the library stays loaded),
# into an idle target (train with 50 ms kernels: asleep in its stream
# synchronization) and a busy one (train with 0 ns kernels: a launch loop);
# then the idle injection library's wakeups per second, in its first 2 s
# and after 7 s with nobody attached. Not a test.
#
#   sudo bash bench/inject.sh [N]        (default 100)
set -euo pipefail
N=${1:-100}
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/inject.sh: needs root" >&2; exit 1; }
make -s --no-print-directory all test-bins >&2
. bench/lib.sh
CG=build/cgbpf
WL=build/workloads/train
LIB=build/inject/libcgbpf-inject.so
CUPTI=build/fake/libcupti.so.13
TMP=$(mktemp -d /tmp/cgbpf-inject.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

hold() {	# KERNEL_NS: prints the held ms of one injection
	CGBPF_CUPTI_PATH=$CUPTI FAKECUDA_KERNEL_NS=$1 "$WL" --iters 100000000 > /dev/null 2>&1 &
	local w=$! i
	for ((i = 0; i < 500; i++)); do grep -q libcuda /proc/$w/maps 2>/dev/null && break; sleep 0.01; done
	sleep 0.2
	"$CG" record -p $w --inject -d 200ms --sample-hz 0 --summary-only > /dev/null 2> "$TMP/err" || true
	kill $w 2>/dev/null; wait $w 2>/dev/null || true
	sed -n 's/.*held \([0-9.]*\) ms.*/\1/p' "$TMP/err" | head -1
}

for kind in idle busy; do
	ns=50000000
	[ $kind = busy ] && ns=0
	H=()
	for ((r = 0; r < N; r++)); do
		h=$(hold $ns)
		[ -n "$h" ] && H+=("$h")
	done
	max=$(printf '%s\n' "${H[@]}" | sort -g | tail -1)
	echo "hold, $kind target: median $(median "${H[@]}") ms, max $max ms, ${#H[@]} of $N injected"
done

# The idle library's wakeups: voluntary context switches of its watcher.
CUDA_INJECTION64_PATH=$PWD/$LIB CGBPF_CUPTI_PATH=$CUPTI FAKECUDA_KERNEL_NS=50000000 \
	"$WL" --iters 100000000 > /dev/null 2>&1 &
w=$!
sleep 0.3
tid=$(grep -l cgbpf-inject /proc/$w/task/*/comm | head -1 | cut -d/ -f5)
vcs() { awk '/^voluntary_ctxt_switches/ { print $2 }' /proc/$w/task/$tid/status; }
a=$(vcs); sleep 1.5; b=$(vcs)
sleep 6.5
c=$(vcs); sleep 5; d=$(vcs)
kill $w; wait $w 2>/dev/null || true
echo "idle library watcher: $(calc "($b - $a) / 1.5") wakeups/s in its first 2 s," \
	"$(calc "($d - $c) / 5") wakeups/s after 8 s with nobody attached"
