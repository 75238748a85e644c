#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A fast pass of integration tests against cgbpf built with ASan and UBSan
# (make asan -> build/san/cgbpf; make asan-test runs both): the record
# path with the driver, NCCL and NVTX decoders and their strings, syscalls,
# a private mount namespace, the monitor and its endpoint, merge, export
# (its errors and hostile names) and the CLI's errors.
# A sanitizer report fails the pass even where a test ignores cgbpf's
# exit status (reports are written to files and collected here); a leak
# is a report. Prints the closing "N passed, M failed" line.
# Usage: tests/asan.sh [substring filter...]  (default: the selection below)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
asan=${ASAN_OUT:-${OUT:-build}/san}
if [ ! -x "$asan/cgbpf" ]; then
	echo "not ok - $asan/cgbpf missing: run make asan first"
	echo "0 passed, 1 failed"
	exit 1
fi
# Tests whose assertions hold however far behind the traced program the
# slower sanitized cgbpf runs: their targets wait for cgbpf or are read
# from their own reports, not symbolized live after a race with exit.
# (Stacks and host-stub names need the target alive when cgbpf decodes
# them: test_symbolize covers the symbolizer under ASan instead.)
selection=(
	test_train::
	test_nvtx::test_legacy_nvtx_v2_library
	test_nvtx_inject::test_nvtx_probes_fire_with_args
	test_syscalls::test_names_counts_and_results
	test_syscalls::test_threshold_off_records_no_syscalls
	test_nccl::test_threads_
	test_isolation::test_library_in_private_mount_namespace
	test_monitor::test_monitor_bad_input
	test_monitor::test_monitor_http_slow_and_oversized_clients
	test_monitor::test_monitor_dump_names_communicators_created_before_its_ring
	test_monitor::test_monitor_dump_keeps_a_reused_handle_apart
	test_merge::test_merge_bad_input
	test_export::test_bad_inputs
	test_export::test_hostile_names
	test_cli::test_usage_errors_exit_2
	test_cli::test_disk_full_keeps_valid_trace
	test_capture::test_profiler_api_repeat_one_file_per_range
	test_capture::test_nvtx_schedule_writes_the_active_steps_of_each_cycle
)
[ $# -gt 0 ] && selection=("$@")
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
export CGBPF_BIN=$top/$asan/cgbpf
# exitcode 86: a sanitizer's, told apart from cgbpf's own failures.
export ASAN_OPTIONS="detect_leaks=1:exitcode=86:log_path=$reports/asan:strict_string_checks=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
log=$(mktemp)
/usr/bin/python3 tests/integration/run.py "${selection[@]}" 2>&1 | tee "$log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
rm -f "$log"
passed=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
passed=${passed:-0} failed=${failed:-1}
n=0
for r in "$reports"/*; do
	[ -e "$r" ] || continue
	n=$((n + 1))
	echo "not ok - sanitizer report $(basename "$r"):"
	sed 's/^/#   /' "$r" | head -60
done
[ $n -gt 0 ] && failed=$((failed + 1))
echo "asan: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
