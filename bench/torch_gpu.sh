#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What cgbpf costs a real PyTorch training loop on a real GPU: the step time
# of tests/gpu/torch_step.py (a small MLP, forward + backward + AdamW, so
# launch-bound: the worst case for per-call costs), measured by the program
# itself over its checked iterations (after its first, warm-up step), in one
# run, configurations interleaved round by round:
#   untraced   no cgbpf;
#   api        cgbpf record --python off, GPU activity off (uprobes only:
#              CGBPF_CUPTI_PATH=/nonexistent);
#   gpu        cgbpf record --python off with GPU activity (uprobes and
#              CUPTI): gpu against api is CUPTI's cost;
#   full       cgbpf record with its defaults (uprobes, --python leaf, GPU
#              activity through CUPTI): full against gpu is --python leaf's;
#   noapi      gpu without CUPTI's per-call API records (CGBPF_CUPTI_API=none:
#              no flows): gpu against noapi is what the API records cost;
#   kineto     no cgbpf; the loop under torch.profiler with CPU and CUDA
#              activities (torch_step.py --kineto), the peer users run today.
# Interleaved order per round: untraced api gpu full noapi kineto.
# Prints each round's ms per step, the medians and the ratios against
# untraced. Needs root, a GPU and a python3 whose torch sees it.
# Usage: sudo bash bench/torch_gpu.sh [ITERS [ROUNDS]]   (default 300, 3)
# Environment: CGBPF (binary; default build/portable/cgbpf, else build/cgbpf),
# PYTHON (default python3), CONFIGS (the configurations to run, in this
# order; default "untraced api gpu full noapi kineto"; untraced is always
# run, first, as the ratios' baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${1:-300}
R=${2:-3}
py=${PYTHON:-python3}
cgbpf=${CGBPF:-}
if [ -z "$cgbpf" ]; then
	for c in build/portable/cgbpf build/cgbpf; do
		[ -x "$c" ] && cgbpf=$c && break
	done
fi
[ -x "$cgbpf" ] || { echo "torch_gpu.sh: no cgbpf binary (make, or make portable)" >&2; exit 2; }
configs=untraced
for cfg in ${CONFIGS:-api gpu full noapi kineto}; do
	case $cfg in
	untraced) ;;
	api|gpu|full|noapi|kineto) configs="$configs $cfg" ;;
	*) echo "torch_gpu.sh: unknown configuration '$cfg' in CONFIGS (untraced api gpu full noapi kineto)" >&2; exit 2 ;;
	esac
done
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
	{ echo "torch_gpu.sh: $py has no torch that sees a GPU" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one CONFIG ROUND: runs the loop, prints ms per step
one() {
	local cfg=$1 r=$2 m=$tmp/$1.$2.json
	case $cfg in
	untraced)
		CGBPF_MANIFEST=$m "$py" tests/gpu/torch_step.py --iters "$N" >"$tmp/$cfg.$r.log" 2>&1 ;;
	api)
		CGBPF_MANIFEST=$m CGBPF_CUPTI_PATH=/nonexistent "$cgbpf" record --python off \
			-o "$tmp/$cfg.$r.perfetto-trace" --summary-file "$tmp/$cfg.$r.sum" -- \
			"$py" tests/gpu/torch_step.py --iters "$N" >"$tmp/$cfg.$r.log" 2>&1 ;;
	gpu)
		CGBPF_MANIFEST=$m "$cgbpf" record --python off \
			-o "$tmp/$cfg.$r.perfetto-trace" --summary-file "$tmp/$cfg.$r.sum" -- \
			"$py" tests/gpu/torch_step.py --iters "$N" >"$tmp/$cfg.$r.log" 2>&1 ;;
	noapi)
		CGBPF_MANIFEST=$m CGBPF_CUPTI_API=none "$cgbpf" record --python off \
			-o "$tmp/$cfg.$r.perfetto-trace" --summary-file "$tmp/$cfg.$r.sum" -- \
			"$py" tests/gpu/torch_step.py --iters "$N" >"$tmp/$cfg.$r.log" 2>&1 ;;
	kineto)
		CGBPF_MANIFEST=$m "$py" tests/gpu/torch_step.py --iters "$N" --kineto \
			>"$tmp/$cfg.$r.log" 2>&1 ;;
	full)
		CGBPF_MANIFEST=$m "$cgbpf" record \
			-o "$tmp/$cfg.$r.perfetto-trace" --summary-file "$tmp/$cfg.$r.sum" -- \
			"$py" tests/gpu/torch_step.py --iters "$N" >"$tmp/$cfg.$r.log" 2>&1 ;;
	esac
	[ -s "$m" ] || { echo "torch_gpu.sh: $cfg round $r wrote no manifest:" >&2; tail -5 "$tmp/$cfg.$r.log" >&2; exit 1; }
	"$py" -c 'import json, sys
m = json.load(open(sys.argv[1]))
print("%.4f" % ((m["checked_until_ns"] - m["checked_from_ns"]) / m["iters"] / 1e6))' "$m"
}

echo "torch_gpu.sh: $N steps per run, $R rounds; $("$cgbpf" --version); $("$py" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))')"
declare -A ms
for ((r = 1; r <= R; r++)); do
	line="round $r:"
	for cfg in $configs; do
		v=$(one "$cfg" "$r")
		ms[$cfg]="${ms[$cfg]:-} $v"
		line="$line $cfg $v ms/step"
		if [ $cfg != untraced ] && [ $cfg != kineto ] && [ "$r" -eq "$R" ]; then
			# what the trace holds, from the last round's summary
			k=$(awk '/^\*\* GPU activity per process/ { on = 1; next } on && /^\*\*/ { exit } on && NF' \
				"$tmp/$cfg.$r.sum" | head -3 | tr -s ' ' | tr '\n' ';')
			echo "  $cfg: trace $(stat -c %s "$tmp/$cfg.$r.perfetto-trace") B; GPU activity: ${k:-none}"
		fi
	done
	echo "$line"
done
# shellcheck disable=SC2086
u=$(printf '%s\n' ${ms[untraced]} | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
for cfg in $configs; do
	# shellcheck disable=SC2086
	m=$(printf '%s\n' ${ms[$cfg]} | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	echo "median $cfg: $m ms/step, $(calc "$m / $u" 3)x untraced"
done
