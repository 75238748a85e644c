#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that the fake libcuda exports every function cgbpf probes
# (bpf/cuda_funcs.h) plus the ones the workloads and tests rely on, each
# at its own address (two names at one address would make one call fire
# two probes). Prints the missing names and exits 1 if any.
# Usage: check-exports.sh [LIB] [CUDA_FUNCS_H]
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
lib=${1:-$root/build/fake/libcuda.so.1}
funcs_h=${2:-$root/bpf/cuda_funcs.h}

extra="cuDriverGetVersion cuDeviceGet cuDeviceGetCount cuDeviceGetName
cuCtxDestroy_v2 cuCtxSetCurrent cuCtxGetCurrent cuModuleUnload cuLibraryUnload
cuEventCreate cuEventDestroy_v2 cuEventQuery cuEventElapsedTime_v2 cuStreamQuery
cuGetErrorName cuGetErrorString cuGetProcAddress_v2
cuGraphCreate cuGraphDestroy cuGraphAddKernelNode_v2 cuGraphAddMemsetNode
cuGraphInstantiateWithFlags cuGraphExecDestroy cuStreamBeginCapture_v2
cuStreamEndCapture cuStreamIsCapturing"

[ -r "$lib" ] || { echo "check-exports: no library at $lib" >&2; exit 2; }
[ -r "$funcs_h" ] || { echo "check-exports: no $funcs_h" >&2; exit 2; }

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sort -u)
probed=$(sed -n 's/^[[:space:]]*X(\(cu[A-Za-z0-9_]*\),.*/\1/p' "$funcs_h")
[ -n "$probed" ] || { echo "check-exports: no X(cu...) lines in $funcs_h" >&2; exit 2; }

missing=$(comm -23 <(printf '%s\n' $probed $extra | sort -u) <(printf '%s\n' "$exported"))
shared=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[Tt]$/ {print $1}' | sort | uniq -d)

rc=0
if [ -n "$missing" ]; then
	echo "check-exports: $lib lacks:" >&2
	printf '  %s\n' $missing >&2
	rc=1
fi
if [ -n "$shared" ]; then
	echo "check-exports: several names share an address: $shared" >&2
	rc=1
fi
if [ $rc -eq 0 ]; then
	echo "check-exports: ok: $(printf '%s\n' $probed | wc -l) probed + $(printf '%s\n' $extra | wc -l) extra symbols exported by $lib"
fi
exit $rc
