#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What NCCL's profiler plugin in libcgbpf-inject.so costs per collective
# on the calling thread, and what a collective's GPU side adds to the
# trace (issue 28). bench/nccl_plugin.c calls the plugin as NCCL 2.28
# does (a Coll task started and stopped on the calling thread; CHANNELS
# kernel-channel events on a proxy thread), in interleaved rounds of:
#   trap:     an empty function under bpftrace's empty entry uprobe: the
#             trap each traced NCCL host call pays anyway (the baseline);
#   detached: no cgbpf attached: NCCL's mask is 0 and real NCCL calls
#             nothing; the bench calls the callbacks anyway (upper bound);
#   attached: cgbpf record -p on the bench: mask set, every task, channel
#             and the watcher's hand-over live.
# Prints medians and ratios to the trap, and trace bytes per collective
# (the attached trace minus an idle capture of the same process, / N).
#
# Usage: sudo bench/nccl_plugin.sh [N] [CHANNELS] [ROUNDS]
#        (default 200000 collectives, 4 channels, 3 rounds)
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/bench/lib.sh"
N=${1:-200000}
CH=${2:-4}
ROUNDS=${3:-3}
LIB=$TOP/build/inject/libcgbpf-inject.so
CGBPF=$TOP/build/cgbpf
TMP=$(mktemp -d /tmp/nccl_plugin.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

[ "$(id -u)" = 0 ] || { echo "nccl_plugin.sh: needs root (cgbpf record -p)" >&2; exit 1; }
make -C "$TOP" -s build/cgbpf inject >/dev/null
[ -r "$LIB" ] || { echo "nccl_plugin.sh: no $LIB (needs the CUDA toolkit's cupti.h)" >&2; exit 1; }
gcc -O2 -g -fno-omit-frame-pointer -I"$TOP/inject" "$TOP/bench/nccl_plugin.c" -o "$TMP/np" -ldl -lpthread
command -v bpftrace >/dev/null || { echo "nccl_plugin.sh: bpftrace missing" >&2; exit 1; }

# attached N OUT [PACE_NS]: the bench under cgbpf record -p; the trace at OUT.
attached() {
	local n=$1 out=$2 pid
	"$TMP/np" "$LIB" "$n" "$CH" 20 "${3:-0}" > "$TMP/np.out" &
	local bench=$!
	for _ in $(seq 100); do grep -q '^ready' "$TMP/np.out" 2>/dev/null && break; sleep 0.05; done
	pid=$(sed -n 's/^ready pid=//p' "$TMP/np.out")
	"$CGBPF" record -p "$pid" --sample-hz 0 --force -o "$out" > "$TMP/rec.out" 2>&1 &
	local rec=$!
	wait "$bench"
	kill -INT "$rec"
	wait "$rec" || true
	grep -q 'mask=0 ' "$TMP/np.out" && { echo "nccl_plugin.sh: cgbpf never set the mask:" >&2;
		cat "$TMP/rec.out" >&2; exit 1; }
	ns_of "$TMP/np.out"
}

T=() D=() A=()
for r in $(seq "$ROUNDS"); do
	bpftrace -e "uprobe:$TMP/np:nccl_plugin_site {}" > "$TMP/bt.out" 2>&1 &
	bt=$!
	for _ in $(seq 200); do grep -q 'Attaching' "$TMP/bt.out" 2>/dev/null && break; sleep 0.05; done
	sleep 0.5
	"$TMP/np" --trap "$N" > "$TMP/trap.out"
	kill -INT "$bt"; wait "$bt" || true
	T+=("$(ns_of "$TMP/trap.out")")
	"$TMP/np" "$LIB" "$N" "$CH" 0 > "$TMP/det.out"
	D+=("$(ns_of "$TMP/det.out")")
	A+=("$(attached "$N" "$TMP/a.perfetto-trace")")
	echo "round $r: trap ${T[-1]} ns, detached ${D[-1]} ns, attached ${A[-1]} ns per collective"
done
# Bytes: 20,000 collectives at 20,000 a second (a busy job's rate; the
# timed rounds come in bursts the bounded queue drops from), against an
# idle capture of the same process.
BN=20000
attached "$BN" "$TMP/b.perfetto-trace" 50000 > /dev/null
lost=$(grep -o "LOST [0-9]* GPU activity records" "$TMP/rec.out" | head -1 || true)
attached 1 "$TMP/idle.perfetto-trace" > /dev/null
bytes=$(( $(stat -c %s "$TMP/b.perfetto-trace") - $(stat -c %s "$TMP/idle.perfetto-trace") ))
t=$(median "${T[@]}") d=$(median "${D[@]}") a=$(median "${A[@]}")
echo
echo "N=$N collectives, $CH channels each, $ROUNDS rounds (medians, ns per collective, calling thread)"
echo "  empty uprobe trap (baseline)  $t"
echo "  plugin, no cgbpf attached     $d   ($(calc "$d / $t" 2)x the trap; real NCCL calls nothing then)"
echo "  plugin, cgbpf attached        $a   ($(calc "$a / $t" 2)x the trap)"
echo "  trace bytes per collective with its $CH channel spans: $(calc "$bytes / $BN" 1)" \
     "($BN at 20,000/s${lost:+; $lost})"
