#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cgbpf export --format kineto-json on traces of growing size (issue 13):
# events written per second and the exporter's peak memory, which must
# not grow with the trace (two streaming passes, user/trace/export.c). Each
# trace is a real capture: tests/workloads/gpu_rate launching LAUNCHES
# kernels as fast as it can under `cgbpf record -p`, with the fake CUPTI
# making K kernel records per launch (CGBPF_FAKE_CUPTI_BURST, as
# bench/gpurate.sh), so a trace holds LAUNCHES API calls and LAUNCHES x K
# GPU slices. The JSON goes to standard output (-o -) into wc -c: the
# disk is not measured. Three exports per trace: the median time, the
# largest peak; the ratios in the last columns compare each size with the
# first.
# Usage: sudo bash bench/export.sh [LAUNCHES...]   (default 4000 16000)
# Environment: K (default 32), CGBPF (binary).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${*:-4000 16000}
K=${K:-32}
OUT=${OUT:-build}
CG=${CGBPF:-$PWD/$OUT/cgbpf}
lib=$PWD/$OUT/inject/libcgbpf-inject.so
cupti=$PWD/$OUT/fake/libcupti.so.13
wl=$PWD/$OUT/workloads/gpu_rate
for f in "$lib" "$cupti" "$wl" "$CG" /usr/bin/time; do
	[ -e "$f" ] || { echo "export.sh: $f missing (make all; the GPU part needs the CUDA toolkit)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "export.sh: needs root (BPF): sudo bash bench/export.sh" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf "%8s %9s %9s %10s %10s %8s %10s %9s %8s %8s\n" launches gpu_ops events "trace MB" \
	"json MB" seconds "events/s" "peak MiB" "size x" "peak x"
first_ev=0
first_rss=0
for n in $SIZES; do
	pause=$tmp/pause
	rm -f "$pause" "$pause.ready" "$tmp/t.pt"
	CGBPF_PAUSE_FILE=$pause CUDA_INJECTION64_PATH=$lib CGBPF_CUPTI_PATH=$cupti \
		CGBPF_FAKE_CUPTI_BURST=$K "$wl" "$n" 0 > "$tmp/wl.out" &
	w=$!
	for _ in $(seq 3000); do [ -e "$pause.ready" ] && break; sleep 0.01; done
	/usr/bin/python3 - "$CG" "$w" "$tmp/t.pt" "$pause" <<'PY'
import subprocess, sys
cg, pid, trace, pause = sys.argv[1:5]
p = subprocess.Popen([cg, "record", "-v", "-p", pid, "-o", trace, "--sched", "off",
                      "--sample-hz", "0", "--syscall-threshold", "off",
                      "--backtrace-threshold", "off", "--no-summary"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
for line in p.stderr:
    if "GPU activity: status" in line:
        open(pause, "w").close()
if p.wait() != 0:
    sys.exit("export.sh: cgbpf record failed")
PY
	wait "$w"
	: > "$tmp/time"
	for _ in 1 2 3; do
		/usr/bin/time -a -f "%e %M" -o "$tmp/time" "$CG" export --format kineto-json -o - \
			"$tmp/t.pt" 2> "$tmp/err" | wc -c > "$tmp/bytes"
	done
	/usr/bin/python3 - "$n" "$tmp" "$first_ev" "$first_rss" > "$tmp/row" <<'PY'
import os, re, sys
n, tmp, first_ev, first_rss = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
err = open(tmp + "/err").read()
m = re.search(r"(\d+) runtime and (\d+) driver calls, (\d+) kernels, (\d+) copies, (\d+) memsets, "
              r"(\d+) NVTX ranges, (\d+) NCCL calls", err)
if not m:
    sys.exit("export.sh: export failed: " + err)
c = [int(x) for x in m.groups()]
ev = sum(c)
gpu = c[2] + c[3] + c[4]
runs = [line.split() for line in open(tmp + "/time") if line.strip()]
secs = sorted(float(r[0]) for r in runs)[len(runs) // 2]
rss = max(int(r[1]) for r in runs)
jb = int(open(tmp + "/bytes").read())
tb = os.path.getsize(tmp + "/t.pt")
fe, fr = first_ev or ev, first_rss or rss
print("%8d %9d %9d %10.1f %10.1f %8.2f %10.0f %9.1f %8.2f %8.2f %d %d"
      % (n, gpu, ev, tb / 1e6, jb / 1e6, secs, ev / max(secs, 1e-9), rss / 1024, ev / fe,
         rss / fr, ev, rss))
PY
	read -r -a row < "$tmp/row"
	printf "%8s %9s %9s %10s %10s %8s %10s %9s %8s %8s\n" "${row[@]:0:10}"
	[ "$first_ev" -ne 0 ] || { first_ev=${row[10]}; first_rss=${row[11]}; }
done
echo "(events: X events written (API calls, kernels, copies, memsets, NVTX, NCCL), flows and"
echo " metadata not counted; seconds: median wall time of 3 exports (both passes); peak: the"
echo " largest maximum resident set of cgbpf export (GNU time %e, %M); size x, peak x: events and"
echo " peak memory over the first row's)"
