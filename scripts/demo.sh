#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make demo`: records the bundled demo workload (a training-loop-like
# program on the fake CUDA driver in build/fake) into demo.perfetto-trace
# and prints the summary.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-build}
cd "$top"
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: cgbpf loads BPF programs: run as root (sudo make demo)" >&2
	exit 1
fi
echo "demo: recording $out/workloads/demo (fake libcuda and libnccl from $out/fake; no GPU needed):"
echo "      two ranks of a data-parallel loop, NCCL all-reduces, NVTX ranges per step and phase,"
echo "      GPU kernels and copies from the fake CUPTI on stream tracks, with flows from their launches"
LD_LIBRARY_PATH=$top/$out/fake "$out/cgbpf" record --force -o demo.perfetto-trace -- "$out/workloads/demo"
echo
echo "demo: open $top/demo.perfetto-trace at https://ui.perfetto.dev"
