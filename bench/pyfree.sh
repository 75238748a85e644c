#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Cost of watching CPython code objects being freed (py_code_free, the
# uprobe on each traced interpreter's code_dealloc: docs/python.md), one
# run, not a test:
#   pyfree   K iterations that each make and free one code object
#            (bench/pyfree.py: code.replace()), per iteration: the median
#            of RUNS runs (interleaved) of wall and thread CPU time,
#            under none (no cgbpf), off (--python off: no probe) and leaf
#            (--python leaf: the probe); the probe's cost per free is
#            leaf - off.
#   import   IMPORT (default: torch, with Debian's /usr/bin/python3.11)
#            imported and the interpreter shut down, wall time, the same
#            three configs, and the number of code objects freed (cgbpf -v).
#
#   sudo bash bench/pyfree.sh        (after make; PYTHON=... IMPORT=...)
set -euo pipefail

K=${PY_FREE_K:-1000000}
RUNS=${PY_BENCH_RUNS:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/build}
py=${PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12.*/bin/python3 2>/dev/null | tail -1)}
py=${py:-/usr/bin/python3}
imp=${IMPORT:-torch}
ipy=${IMPORT_PYTHON:-/usr/bin/python3.11}
. "$top/bench/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "bench/pyfree.sh: needs root (attaches uprobes)" >&2; exit 1; }
[ -x "$out/cgbpf" ] || { echo "bench/pyfree.sh: run make first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGBPF_START_DELAY_MS=1000
pin=()
command -v taskset >/dev/null && [ "$(nproc)" -gt 1 ] && pin=(taskset -c 1)
rec=(record --sched off --syscall-threshold off --sample-hz 0 --backtrace-threshold off
     --no-summary -v --force)

# one CONFIG: "wall cpu" ns per iteration.
one() {
	case $1 in
	none) "${pin[@]}" "$py" "$top/bench/pyfree.py" "$K" ;;
	*) "$out/cgbpf" "${rec[@]}" --python "$1" -o "$tmp/$1.pftrace" \
		-- "${pin[@]}" "$py" "$top/bench/pyfree.py" "$K" 2>"$tmp/$1.err" || true ;;
	esac | sed -n 's/^ns_per_iter=\([0-9.]*\) cpu_ns_per_iter=\([0-9.]*\)/\1 \2/p'
}

# imp_one CONFIG: wall ms of IMPORT.
imp_one() {
	local t0 t1
	t0=$(date +%s%N)
	case $1 in
	none) CGBPF_START_DELAY_MS=0 "$ipy" -c "import $imp" ;;
	*) CGBPF_START_DELAY_MS=0 "$out/cgbpf" "${rec[@]}" --python "$1" \
		-o "$tmp/i$1.pftrace" -- "$ipy" -c "import $imp" 2>"$tmp/i$1.err" || true ;;
	esac
	t1=$(date +%s%N)
	calc "($t1 - $t0) / 1000000" 0
}

configs=(none off leaf)
declare -A ns cpu isec
for ((r = 0; r < RUNS; r++)); do
	for c in "${configs[@]}"; do
		v=$(one "$c")
		[ -n "$v" ] || { echo "bench/pyfree.sh: $c failed:" >&2; cat "$tmp/$c.err" >&2; exit 1; }
		ns[$c]="${ns[$c]:-} ${v% *}"
		cpu[$c]="${cpu[$c]:-} ${v#* }"
		isec[$c]="${isec[$c]:-} $(imp_one "$c")"
	done
done
echo "pyfree: $("$py" -c 'import platform; print(platform.python_version())') ($py), K=$K iterations (1 code object freed each), $RUNS runs (median)"
off=$(median ${ns[off]})
offc=$(median ${cpu[off]})
printf '%-6s %14s %8s %14s %8s\n' config "wall ns/iter" "x off" "CPU ns/iter" "x off"
for c in "${configs[@]}"; do
	m=$(median ${ns[$c]})
	mc=$(median ${cpu[$c]})
	printf '%-6s %14s %8s %14s %8s\n' "$c" "$m" "$(calc "$m / $off" 3)" "$mc" "$(calc "$mc / $offc" 3)"
done
leafc=$(median ${cpu[leaf]})
echo "probe cost per code object freed (leaf - off, CPU): $(calc "$leafc - $offc" 1) ns"
freed=$(sed -n 's/.*python: \([0-9]*\) code objects freed.*/\1/p' "$tmp/ileaf.err" | tail -1)
echo "import $imp ($ipy): wall ms, median of $RUNS; code objects freed in the last leaf run: ${freed:-?}"
offi=$(median ${isec[off]})
for c in "${configs[@]}"; do
	m=$(median ${isec[$c]})
	printf '%-6s %8s ms %8s x off\n' "$c" "$m" "$(calc "$m / $offi" 3)"
done
