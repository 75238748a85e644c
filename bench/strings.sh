#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What reading a string argument costs when its page is not in the
# process's page table yet, per way of reading it (bench/strread.bpf.c
# says what each way is; docs/design.md, "Strings", why cgbpf reads them
# the way it does). Not a test. One run, every way interleaved round by
# round; compare within one run only.
#
#   sudo bash bench/strings.sh        (BENCH_N calls per run, 100000;
#                                      BENCH_RUNS runs, 5; BENCH_TMP, /tmp)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-build}
[ "$(id -u)" -eq 0 ] ||
	{ echo "bench/strings.sh: needs root (loads BPF programs): run it with sudo" >&2; exit 1; }
cd "$top"
make --no-print-directory OUT="$out" "$out/bench/strread" > /dev/null
echo "kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at start"
"$out/bench/strread" "${BENCH_N:-100000}" "${BENCH_RUNS:-5}"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
