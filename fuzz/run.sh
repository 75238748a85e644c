#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every libFuzzer harness built in OUT/fuzz for SECONDS each (make
# fuzz-run FUZZ_SECONDS=N). Each starts from its checked-in corpus
# (fuzz/corpus/NAME: seeds and the regression inputs of bugs found) and a
# working corpus in OUT/fuzz/corpus/NAME that keeps what it learns between
# runs; new inputs never go into the checked-in corpus. A crash, leak,
# sanitizer report or timeout fails the run and leaves the input in
# OUT/fuzz/artifacts/ with the command that replays it.
# Usage: fuzz/run.sh [OUT [SECONDS [NAME...]]]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${1:-build}
secs=${2:-60}
shift 2 2>/dev/null || shift $#
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for src in fuzz/fuzz_*.c; do
		names+=("$(basename "$src" .c)")
	done
fi
case $secs in
'' | *[!0-9]*) echo "fuzz: FUZZ_SECONDS must be a whole number of seconds, not '$secs'" >&2; exit 2 ;;
esac

failed=()
mkdir -p "$out/fuzz/artifacts"
for name in "${names[@]}"; do
	bin=$out/fuzz/$name
	if [ ! -x "$bin" ]; then
		echo "fuzz: $bin missing: run make fuzz first" >&2
		exit 2
	fi
	work=$out/fuzz/corpus/$name
	seeds=fuzz/corpus/$name
	mkdir -p "$work" "$seeds"
	log=$out/fuzz/$name.log
	dict=()
	[ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
	echo "=== $name: ${secs}s"
	# -timeout: one input taking 10 s is a hang; -rss_limit_mb: the parsers
	# must stay bounded whatever the input; -close_fd_mask=1: the
	# harnesses' own output is noise.
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=1 \
		-print_final_stats=1 -artifact_prefix="$out/fuzz/artifacts/$name-" "${dict[@]}" \
		"$work" "$seeds" >"$log" 2>&1
	rc=$?
	grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" |
		sed 's/^stat::/    /'
	if [ $rc -ne 0 ]; then
		failed+=("$name")
		echo "not ok - $name found a problem (exit $rc); its report:"
		grep -E -A40 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|==[0-9]+==' \
			"$log" | head -60 | sed 's/^/#   /'
		art=$(grep -o "Test unit written to .*" "$log" | tail -1 | sed 's/Test unit written to //')
		[ -n "$art" ] && echo "#   replay: $bin $art  (keep it in $seeds/ once fixed)"
	else
		echo "ok - $name"
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: problems found by: ${failed[*]}"
	exit 1
fi
echo "fuzz: ${#names[@]} harnesses ran ${secs}s each without a finding"
