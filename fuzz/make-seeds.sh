#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates the seed inputs of fuzz/corpus/ from real inputs (run as
# root: it records real captures). The seeds are checked in; this script
# says where each came from. Regression inputs (regress-*) are kept.
#   fuzz_records  ring records of real captures (train, crt_app, nccl_ranks,
#                 nvtx_v2, nvtx_ranges, sys_mix, a sampled stack chain, the
#                 scheduler, GPU activity from the fake CUPTI), tapped from the sanitized cgbpf by
#                 fuzz/tools/rbtap.c, cut to their first 48 KiB of records
#   fuzz_merge    pairs of the traces those captures wrote
#   fuzz_tread    the traces of those pairs, one a seed
#   fuzz_export   fuzz_tread's seeds, and two small captures (--sched off
#                 --syscall-threshold off --sample-hz 0) of test_export's
#                 tests/integration/export_names.py on the fake CUPTI and
#                 of nvtx_ranges: added by hand, not made here
#   fuzz_ldcache  this host's /etc/ld.so.cache
#   fuzz_elf      ELF files the tests use and /usr/local/cuda ships
#   fuzz_config   dist/monitor.conf
#   fuzz_http     hand-written requests (Prometheus's, cgbpf dump's)
#   fuzz_gpu      hand-built GPU batches and calls (fuzz/tools/gpu_seeds.py)
#   fuzz_pytable  CPython line tables of 3.8-3.13 (tests/unit/pycode_fixtures.h,
#                 fuzz/tools/pytable_seeds.py)
#   fuzz_pycoderec  REC_PY_CODE records as BPF makes them (fuzz/tools/pycoderec_seeds.py)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${OUT:-build}
asan=${ASAN_OUT:-${OUT:-build}/san}
seeds=fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make --no-print-directory all asan >/dev/null
gcc -O2 -g -shared -fPIC -Wall -Wextra -Werror fuzz/tools/rbtap.c -o "$tmp/rbtap.so" -ldl

# Whole records up to max bytes, in fuzz_records' framing.
cut_records() {
	/usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import sys
src, dst, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, "rb").read()
out, off = bytearray(data[:1]), 1
while off + 2 <= len(data):
    n = int.from_bytes(data[off:off + 2], "little")
    if off + 2 + n > len(data) or len(out) + 2 + n > cap:
        break
    out += data[off:off + 2 + n]
    off += 2 + n
open(dst, "wb").write(bytes(out))
PY
}

capture() {
	local name=$1
	shift
	CGBPF_RECORDS_TAP="$tmp/$name.rec" LD_PRELOAD="$tmp/rbtap.so" \
		ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 \
		LD_LIBRARY_PATH="$top/$out/fake" \
		"$asan/cgbpf" record -o "$tmp/$name.perfetto-trace" --no-summary "$@" >/dev/null 2>&1
	cut_records "$tmp/$name.rec" "$seeds/fuzz_records/seed-$name" 49152
	echo "  fuzz_records/seed-$name: $(stat -c %s "$seeds/fuzz_records/seed-$name") bytes"
}

mkdir -p "$seeds"/fuzz_{records,merge,ldcache,elf,config,http}
rm -f "$seeds"/fuzz_records/seed-* "$seeds"/fuzz_merge/seed-*
wl=$out/workloads
capture train --sched off --sample-hz 0 --syscall-threshold off -- "$wl/train" --iters 3
capture cudart --sched off --sample-hz 0 --syscall-threshold off -- "$wl/crt_app" --iters 2
capture nccl --sched off --sample-hz 0 --syscall-threshold off -- "$wl/nccl_ranks" --ranks 2 --iters 2
# nccl_stragglers: three ranks, one slow, numbered operations
capture nccl-slow --sched off --sample-hz 0 --syscall-threshold off -- "$wl/nccl_ranks" --ranks 3 \
	--iters 20 --slow-rank 1 --slow-us 1000
capture nvtx-v2 --sched off --sample-hz 0 --syscall-threshold off -- "$wl/nvtx_v2"
capture nvtx-v3 --sched off --sample-hz 0 --syscall-threshold off -- "$wl/nvtx_ranges"
capture syscalls --sched off --sample-hz 0 --syscall-threshold 1us -- "$wl/sys_mix" --sleeps 1 --getpids 20
capture stacks --sched off --sample-hz 499 --backtrace-threshold 1ms --stack-copy 2048 \
	-- "$out/apichain/chain_fp_pie" 30 5
capture sched --sched targets --sample-hz 0 --syscall-threshold off -- "$wl/mt" --threads 2 --iters 3
# GPU activity: the fake CUPTI through the injection library, the loop
# held until the library collects (train's pause file, touched after 2 s);
# the backtraces of the slow setup calls but the first are left out.
if [ -e "$out/fake/libcupti.so.13" ]; then
	(sleep 2; touch "$tmp/gpu-pause") &
	CGBPF_PAUSE_FILE="$tmp/gpu-pause" CGBPF_CUPTI_PATH="$top/$out/fake/libcupti.so.13" \
		FAKECUDA_KERNEL_NS=20000 capture gpu-full --sched off --sample-hz 0 \
		--syscall-threshold off -- "$wl/train" --iters 5
	rm -f "$seeds/fuzz_records/seed-gpu-full"
	/usr/bin/python3 - "$tmp/gpu-full.rec" "$seeds/fuzz_records/seed-gpu" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
out, off, bts = bytearray(data[:1]), 1, 0
while off + 2 <= len(data):
    n = int.from_bytes(data[off:off + 2], "little")
    rec = data[off + 2:off + 2 + n]
    off += 2 + n
    if int.from_bytes(rec[:2], "little") == 10:	# REC_STACK_BT
        bts += 1
        if bts > 1:
            continue
    out += n.to_bytes(2, "little") + rec
open(sys.argv[2], "wb").write(bytes(out))
PY
	echo "  fuzz_records/seed-gpu: $(stat -c %s "$seeds/fuzz_records/seed-gpu") bytes"
fi

# merge: [u32 LE length of the first][first][second]
pair() {
	/usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
open(sys.argv[3], "wb").write(len(a).to_bytes(4, "little") + a + b)
PY
}
pair "$tmp/train.perfetto-trace" "$tmp/nccl.perfetto-trace" "$seeds/fuzz_merge/seed-train-nccl"
pair "$tmp/nvtx-v2.perfetto-trace" "$tmp/sched.perfetto-trace" "$seeds/fuzz_merge/seed-nvtx-sched"
"$out/cgbpf" merge "$tmp/train.perfetto-trace" "$tmp/sched.perfetto-trace" \
	-o "$tmp/merged.perfetto-trace" 2>/dev/null
pair "$tmp/merged.perfetto-trace" "$tmp/syscalls.perfetto-trace" "$seeds/fuzz_merge/seed-merged-syscalls"
# tread: each trace of those pairs on its own
mkdir -p "$seeds/fuzz_tread"
rm -f "$seeds"/fuzz_tread/seed-*
for f in train nccl nccl-slow nvtx-v2 sched merged syscalls; do
	cp "$tmp/$f.perfetto-trace" "$seeds/fuzz_tread/seed-$f"
done
# keep-nccl-env (kept, made by hand: record -p on two one-rank nccl_ranks
# processes with RANK/WORLD_SIZE whose communicator predates the capture,
# docs/design.md "Stragglers"): cgbpf.nccl_env, alignment by operation.

cp /etc/ld.so.cache "$seeds/fuzz_ldcache/seed-host-ld.so.cache"
for f in "$out/stacks/chain_stripped" "$out/stacks/chain_stripped.debug" "$out/stacks/chain_cxx" \
	"$out/fake/libnvToolsExt.so.1" "$wl/nvtx_v2"; do
	cp "$f" "$seeds/fuzz_elf/seed-$(basename "$f")"
done
[ -f /usr/local/cuda/lib64/libnvtx3interop.so.1 ] &&
	cp /usr/local/cuda/lib64/libnvtx3interop.so.1 "$seeds/fuzz_elf/seed-libnvtx3interop.so.1"
cp dist/monitor.conf "$seeds/fuzz_config/seed-dist-monitor.conf"
/usr/bin/python3 fuzz/tools/gpu_seeds.py "$seeds/fuzz_gpu"
/usr/bin/python3 fuzz/tools/pytable_seeds.py "$seeds/fuzz_pytable"
/usr/bin/python3 fuzz/tools/pycoderec_seeds.py "$seeds/fuzz_pycoderec"
du -sh "$seeds"
