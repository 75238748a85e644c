#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Unit test of GPU activity in user space (user/gpu*.c): runs test_gpu,
# which feeds hand-built GPU batches and API calls through gpu__record and
# the model and writes a trace, a summary and its expectations per
# capture, then decodes every trace with protoc against the project's
# subset of Perfetto's schema (tests/lib/perfetto_subset.proto) and with
# tests/lib/ptrace.py (check_gpu.py compares tracks, slices, args, flows
# and the summary's tables with what was fed).
# Usage: check_gpu.sh [TEST_GPU]   (default: build/unit/test_gpu)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
proto=${CGBPF_PERFETTO_PROTO:-$root/tests/lib/perfetto_subset.proto}
bin=${1:-$root/build/unit/test_gpu}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_gpu.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/out"

if [ ! -x "$bin" ]; then
	echo "not ok 1 - test_gpu binary $bin is missing: build it with 'make $bin'"
	echo "0 passed, 1 failed"
	exit 1
fi
"$bin" "$tmp/out" > "$tmp/c.out" 2>&1
rc=$?
grep -v -E '^[0-9]+ passed' "$tmp/c.out"
read -r p _ f _ <<<"$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/c.out" | tail -1)"
pass=${p:-0} fail=${f:-1}
[ $rc -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
# A sanitizer report does not always change the exit status.
if grep -q -E 'runtime error:|ERROR: (Address|Leak)Sanitizer' "$tmp/c.out"; then
	fail=$((fail + 1)); echo "not ok - test_gpu: sanitizer report above"
fi
n=$((pass + fail))

for t in "$tmp"/out/*.perfetto-trace; do
	n=$((n + 1))
	if protoc --decode=perfetto.protos.Trace -I"$(dirname "$proto")" "$proto" \
		< "$t" > "$tmp/txt" 2> "$tmp/err" && [ ! -s "$tmp/err" ] &&
		grep -q 'track_event {' "$tmp/txt"; then
		pass=$((pass + 1)); echo "ok $n - protoc decodes $(basename "$t")"
	else
		fail=$((fail + 1)); echo "not ok $n - protoc decodes $(basename "$t")"
		sed 's/^/#   /' "$tmp/err" | head
	fi
done
/usr/bin/python3 "$here/check_gpu.py" "$tmp/out" > "$tmp/py.out" 2>&1
prc=$?
grep -v -E '^[0-9]+ passed' "$tmp/py.out"
read -r p _ f _ <<<"$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/py.out" | tail -1)"
[ -z "${p:-}" ] && { f=1; p=0; }
[ $prc -ne 0 ] && [ "${f:-0}" -eq 0 ] && f=1
pass=$((pass + p)) fail=$((fail + f))
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
