#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Unit test of the CPU sample writer: runs test_pfstacks, then decodes its
# trace with protoc against the project's subset of Perfetto's schema
# (tests/lib/perfetto_subset.proto) and with tests/lib/ptrace.py
# (check_pfstacks.py). Usage: check_pfstacks.sh [TEST_PFSTACKS]
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
proto=${CGBPF_PERFETTO_PROTO:-$root/tests/lib/perfetto_subset.proto}
bin=${1:-$root/build/unit/test_pfstacks}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_pfstacks.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

"$bin" "$tmp" > "$tmp/c.out" 2>&1
rc=$?
grep -v -E '^[0-9]+ passed' "$tmp/c.out"
read -r p _ f _ <<<"$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/c.out" | tail -1)"
pass=${p:-0} fail=${f:-1}
[ $rc -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
n=$((pass + fail))

t=$tmp/pfstacks.perfetto-trace
if protoc --decode=perfetto.protos.Trace -I"$(dirname "$proto")" "$proto" \
	< "$t" > "$tmp/txt" 2> "$tmp/err" && [ ! -s "$tmp/err" ] &&
	grep -q 'perf_sample {' "$tmp/txt" && grep -q 'callstacks {' "$tmp/txt" &&
	grep -q 'function_name: "level_c"' "$tmp/txt"; then
	pass=$((pass + 1)); n=$((n + 1)); echo "ok $n - protoc decodes the trace (perf_sample, callstacks, inline callstack)"
else
	fail=$((fail + 1)); n=$((n + 1)); echo "not ok $n - protoc decodes the trace"; sed 's/^/#   /' "$tmp/err" | head
fi
/usr/bin/python3 "$here/check_pfstacks.py" "$t" > "$tmp/py.out" 2>&1
prc=$?
grep -v -E '^[0-9]+ passed' "$tmp/py.out" | sed -E "s/^(not )?ok [0-9]+/&/"
read -r p _ f _ <<<"$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/py.out" | tail -1)"
[ -z "${p:-}" ] && { f=1; p=0; }
[ $prc -ne 0 ] && [ "${f:-0}" -eq 0 ] && f=1
pass=$((pass + p)) fail=$((fail + f))
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
