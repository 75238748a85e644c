#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every test suite and prints one closing line "N passed, M failed,
# K skipped". Unit tests need no privileges; integration tests load real
# BPF programs and need root (they skip, saying so, without it).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${OUT:-build}
py=/usr/bin/python3
total_pass=0 total_fail=0 total_skip=0
failed_suites=()

# Runs one suite, echoes its output, adds its closing "N passed, M failed"
# line to the totals. A suite that exits non-zero without counting a
# failure counts as one failure.
suite() {
	local name=$1 log line p f s rc
	shift
	log=$(mktemp)
	echo "=== $name"
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^([A-Za-z]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
	rm -f "$log"
	p=0 f=0 s=0
	if [ -n "$line" ]; then
		p=$(sed -E 's/.*\b([0-9]+) passed.*/\1/' <<<"$line")
		f=$(sed -E 's/.*\b([0-9]+) failed.*/\1/' <<<"$line")
		grep -q skipped <<<"$line" && s=$(sed -E 's/.*\b([0-9]+) skipped.*/\1/' <<<"$line")
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - $name exited with status $rc"
	fi
	[ "$f" -ne 0 ] && failed_suites+=("$name")
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
}

for t in "$out"/unit/test_*; do
	[ -x "$t" ] || continue
	case $t in
	*/test_pb) suite "unit: protobuf encoder (checked with protoc)" bash tests/unit/check_pb.sh "$t" ;;
	*/test_perfetto) suite "unit: Perfetto trace writer (protoc + independent decoder)" bash tests/unit/check_perfetto.sh "$t" ;;
	*/test_pfstacks) suite "unit: CPU sample writer (protoc + independent decoder)" bash tests/unit/check_pfstacks.sh "$t" ;;
	*/test_gpu) suite "unit: GPU activity (protoc + independent decoder)" bash tests/unit/check_gpu.sh "$t" ;;
	*) suite "unit: $(basename "$t")" "$t" ;;
	esac
done
suite "layers: user/ includes and calls run only downward (docs/design.md)" "$py" scripts/check-layers.py "$out"
suite "functions: none over 150 lines in user/ and inject/" "$py" scripts/check-functions.py
suite "schema subset (against Perfetto's schema when present)" "$py" tests/lib/check_subset.py
suite "decoder self-test" "$py" tests/lib/test_ptrace.py
suite "trace processor comparison self-test (when present)" "$py" tests/lib/test_tpcheck.py
suite "fake libcuda behaviour" bash tests/fake/selftest.sh "$out"
suite "fake libnccl behaviour" "$py" tests/fake/nccl_selftest.py "$out"
suite "integration" "$py" tests/integration/run.py "$@"

echo
[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]}"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
