#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Unit test of the protobuf encoder: runs test_pb in a temporary directory,
# then decodes the fixtures it wrote with the stock protoc, against
# tests/unit/pb_test.proto and against the project's subset of Perfetto's
# schema (tests/lib/perfetto_subset.proto), so the encoder is judged by a
# decoder that is not ours.
#
# Usage: tests/unit/check_pb.sh [TEST_PB]   (default: build/unit/test_pb)
# CGBPF_PERFETTO_PROTO names another schema file (e.g. Perfetto's full one).
# Prints "ok N - ..." / "not ok N - ..." lines and "N passed, M failed"
# counting test_pb's results too; exits 1 on any failure.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
perfetto_proto=${CGBPF_PERFETTO_PROTO:-$root/tests/lib/perfetto_subset.proto}
bin=${1:-$root/build/unit/test_pb}
# The binary runs from the temporary directory, so pin a relative path now.
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

# Print a file's lines as diagnostics, indented under the failing line.
diag() {
	sed 's/^/#   /' "$@"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_pb.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- test_pb
if [[ ! -x $bin ]]; then
	not_ok "test_pb binary $bin is missing: build it with 'make build/unit/test_pb'"
else
	(cd "$tmp" && "$bin" .) >"$tmp/test_pb.out" 2>&1
	rc=$?
	cat "$tmp/test_pb.out"
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/test_pb.out" | tail -n 1)
	if [[ -n $summary ]]; then
		read -r p _ f _ <<<"$summary"
	else
		# Died before its summary: count the results it did print.
		p=$(grep -cE '^ok [0-9]+' "$tmp/test_pb.out")
		f=$(grep -cE '^not ok [0-9]+' "$tmp/test_pb.out")
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	# A sanitizer abort or a crash leaves no summary or one that disagrees with rc.
	if [[ -z $summary ]] || { [[ $rc -ne 0 ]] && [[ $f -eq 0 ]]; } ||
		{ [[ $rc -eq 0 ]] && [[ $f -ne 0 ]]; }; then
		not_ok "test_pb exited $rc without a summary that matches (crash or sanitizer report above?)"
	fi
fi

# ---------------------------------------------------------------- protoc
have_protoc=1
if ! command -v protoc >/dev/null 2>&1; then
	have_protoc=0
	not_ok "protoc not found: install protobuf-compiler (make deps)"
fi

# check_decode DESC MESSAGE INCLUDE_DIR PROTO FIXTURE EXPECTED_FILE
check_decode() {
	local desc=$1 msg=$2 inc=$3 proto=$4 fixture=$5 expected=$6 rc

	if ((!have_protoc)); then
		not_ok "$desc: protoc not found"
		return
	fi
	if [[ ! -f $proto ]]; then
		not_ok "$desc: schema $proto not found"
		return
	fi
	if [[ ! -f $fixture ]]; then
		not_ok "$desc: fixture $(basename "$fixture") missing (test_pb did not write it)"
		return
	fi
	protoc --decode="$msg" -I"$inc" "$proto" <"$fixture" >"$tmp/got.txt" 2>"$tmp/err.txt"
	rc=$?
	if [[ $rc -eq 0 && ! -s $tmp/err.txt ]] && cmp -s "$expected" "$tmp/got.txt"; then
		ok "$desc"
	else
		not_ok "$desc"
		echo "#   protoc exited $rc"
		diag "$tmp/err.txt"
		diff -u "$expected" "$tmp/got.txt" | diag
	fi
}

cat >"$tmp/all.expected" <<'EOF'
u64: 18446744073709551615
u32: 4000000000
i64: -9223372036854775808
i32: -5
s64: -1234567890123
s32: -2147483648
flag: true
f64: 9223372036854775809
f32: 4294967294
sf64: -7
dbl: -0.15625
blob: "\000\001\377"
text: "say \"hi\""
color: GREEN
inner {
  id: 1
  name: "outer"
  child {
    id: 2
    child {
      id: 3
      name: "a name long enough that every enclosing message needs a two-byte length: 0123456789012345678901234567890123456789012345678901234567890123456789"
    }
  }
}
items {
  id: 10
}
items {
  id: 11
}
items {
  id: 12
}
items {
}
nums: 0
nums: 300
packed: -1
packed: 2
far: 42
EOF

cat >"$tmp/perfetto.expected" <<'EOF'
packet {
  trusted_packet_sequence_id: 1
  track_descriptor {
    uuid: 42
    name: "gpu0"
  }
}
packet {
  timestamp: 5
  trusted_packet_sequence_id: 1
  track_event {
    type: TYPE_SLICE_BEGIN
    name: "x"
  }
}
packet {
  timestamp: 300
  trusted_packet_sequence_id: 1
  track_event {
    debug_annotations {
      int_value: -3
      name: "delta"
    }
    debug_annotations {
      double_value: 0.5
      name: "ratio"
    }
    type: TYPE_SLICE_END
    track_uuid: 42
  }
}
packet {
  timestamp: 1099511627776
  trusted_packet_sequence_id: 1
  track_event {
    type: TYPE_COUNTER
    track_uuid: 43
    categories: "cuda"
    double_counter_value: 1.25
  }
}
EOF

check_decode "protoc decodes pb_all.bin as cgbpf.pbtest.All" cgbpf.pbtest.All \
	"$here" "$here/pb_test.proto" "$tmp/pb_all.bin" "$tmp/all.expected"
check_decode "protoc decodes pb_perfetto.bin as perfetto.protos.Trace" perfetto.protos.Trace \
	"$(dirname "$perfetto_proto")" "$perfetto_proto" "$tmp/pb_perfetto.bin" "$tmp/perfetto.expected"

# Without this, a protoc that accepted anything would make the checks above pass.
if ((have_protoc)) && [[ -f $perfetto_proto && -s $tmp/pb_perfetto.bin ]]; then
	head -c -1 "$tmp/pb_perfetto.bin" >"$tmp/truncated.bin"
	if protoc --decode=perfetto.protos.Trace -I"$(dirname "$perfetto_proto")" "$perfetto_proto" \
		<"$tmp/truncated.bin" >/dev/null 2>&1; then
		not_ok "protoc rejects pb_perfetto.bin truncated by one byte"
	else
		ok "protoc rejects pb_perfetto.bin truncated by one byte"
	fi
else
	not_ok "protoc rejects pb_perfetto.bin truncated by one byte: protoc, schema or fixture missing"
fi

echo "$pass passed, $fail failed"
((fail == 0))
