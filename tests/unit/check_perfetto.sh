#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Unit test of the trace-level Perfetto writer: runs test_perfetto, which
# writes traces through user/out/perfetto.h and says what each must hold, then
# decodes every trace two independent ways: with the stock protoc against
# the project's subset of Perfetto's schema (tests/lib/perfetto_subset.proto,
# checked against the full schema by tests/lib/check_subset.py), and with
# tests/lib/ptrace.py
# (check_perfetto.py compares what it decodes with the expectations).
#
# Usage: tests/unit/check_perfetto.sh [TEST_PERFETTO]
#        (default: build/unit/test_perfetto)
# CGBPF_PERFETTO_PROTO names another schema file (e.g. Perfetto's full one).
# Prints "ok N - ..." / "not ok N - ..." lines and "N passed, M failed"
# counting test_perfetto's and the checker's results too; exits 1 on any
# failure.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
perfetto_proto=${CGBPF_PERFETTO_PROTO:-$root/tests/lib/perfetto_subset.proto}
proto_dir=$(dirname "$perfetto_proto")
py=/usr/bin/python3
bin=${1:-$root/build/unit/test_perfetto}
[[ $bin == /* ]] || bin=$PWD/$bin

pass=0
fail=0

ok() {
	pass=$((pass + 1))
	echo "ok $((pass + fail)) - $*"
}

not_ok() {
	fail=$((fail + 1))
	echo "not ok $((pass + fail)) - $*"
}

diag() {
	sed 's/^/#   /' "$@"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_perfetto.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/out"

# ---------------------------------------------------------------- test_perfetto
if [[ ! -x $bin ]]; then
	not_ok "test_perfetto binary $bin is missing: build it with 'make build/unit/test_perfetto'"
else
	"$bin" "$tmp/out" >"$tmp/test.out" 2>&1
	rc=$?
	cat "$tmp/test.out"
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/test.out" | tail -n 1)
	if [[ -n $summary ]]; then
		read -r p _ f _ <<<"$summary"
	else
		p=$(grep -cE '^ok [0-9]+' "$tmp/test.out")
		f=$(grep -cE '^not ok [0-9]+' "$tmp/test.out")
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	if [[ -z $summary ]] || { [[ $rc -ne 0 ]] && [[ $f -eq 0 ]]; } ||
		{ [[ $rc -eq 0 ]] && [[ $f -ne 0 ]]; }; then
		not_ok "test_perfetto exited $rc without a summary that matches (crash or sanitizer report above?)"
	fi
fi

shopt -s nullglob
traces=("$tmp"/out/*.perfetto-trace)
shopt -u nullglob
if ((${#traces[@]} == 0)); then
	not_ok "test_perfetto wrote no traces"
fi

# ---------------------------------------------------------------- protoc
if ! command -v protoc >/dev/null 2>&1; then
	not_ok "protoc not found: install protobuf-compiler (make deps)"
elif [[ ! -f $perfetto_proto ]]; then
	not_ok "schema $perfetto_proto not found"
else
	for t in "${traces[@]}"; do
		name=$(basename "$t")
		txt=${t%.perfetto-trace}.protoc.txt
		protoc --decode=perfetto.protos.Trace -I"$proto_dir" "$perfetto_proto" \
			<"$t" >"$txt" 2>"$tmp/err.txt"
		rc=$?
		if [[ $rc -eq 0 && ! -s $tmp/err.txt ]] && grep -q '^packet {$' "$txt"; then
			ok "protoc decodes $name as perfetto.protos.Trace ($(grep -c '^packet {$' "$txt") packets)"
		else
			not_ok "protoc decodes $name as perfetto.protos.Trace"
			echo "#   protoc exited $rc"
			diag "$tmp/err.txt"
			rm -f "$txt"	# no packet count for the checker to compare
		fi
	done
	# Without this, a protoc that accepted anything would make the above pass.
	if ((${#traces[@]})) && [[ -s ${traces[0]} ]]; then
		head -c -1 "${traces[0]}" >"$tmp/truncated.bin"
		if protoc --decode=perfetto.protos.Trace -I"$proto_dir" "$perfetto_proto" \
			<"$tmp/truncated.bin" >/dev/null 2>&1; then
			not_ok "protoc rejects $(basename "${traces[0]}") cut by one byte"
		else
			ok "protoc rejects $(basename "${traces[0]}") cut by one byte"
		fi
	fi
fi

# ---------------------------------------------------------------- independent decoder
"$py" "$here/check_perfetto.py" "$tmp/out" "$((pass + fail + 1))" >"$tmp/py.out" 2>&1
rc=$?
grep -v '^# checker: ' "$tmp/py.out"
line=$(grep -E '^# checker: [0-9]+ passed, [0-9]+ failed$' "$tmp/py.out" | tail -n 1)
if [[ -n $line ]]; then
	read -r _ _ p _ f _ <<<"$line"
	pass=$((pass + p))
	fail=$((fail + f))
	if { [[ $rc -ne 0 ]] && [[ $f -eq 0 ]]; } || { [[ $rc -eq 0 ]] && [[ $f -ne 0 ]]; }; then
		not_ok "check_perfetto.py exited $rc, which disagrees with its summary"
	fi
else
	not_ok "check_perfetto.py exited $rc without a summary (traceback above?)"
fi

echo "$pass passed, $fail failed"
((fail == 0))
