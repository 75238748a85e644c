#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs the fake libcuda's self-test against $OUT/fake/libcuda.so.1
# (build it first: make $OUT/fake/libcuda.so.1), then checks its exports.
# Usage: selftest.sh [OUT]   (default build; CUDA_HOME as for make)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-build}
case $out in /*) ;; *) out=$root/$out ;; esac
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ -r "$cuda_home/include/cuda.h" ]; then
	inc=$cuda_home/include
else
	inc=$root/tests/fake/include
fi

lib=$out/fake/libcuda.so.1
[ -r "$lib" ] || { echo "selftest: build $lib first" >&2; exit 2; }

${CC:-gcc} -O2 -g -pthread -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wno-missing-field-initializers -I"$inc" "$root/tests/fake/selftest.c" \
	-o "$out/fake/selftest" -L"$out/fake" -lcuda -Wl,-rpath,"$out/fake" -ldl
"$out/fake/selftest"
echo "selftest: ok"
"$root/tests/fake/check-exports.sh" "$lib"
