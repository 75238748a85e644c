#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# NCCL on a real GPU (issue 28), on one GPU: real NCCL refuses two ranks
# on one GPU, and runs a 1-rank collective as a copy (ncclLaunchOneRank:
# no task, no kernel, nothing for its profiler plugin), so three runs:
#   allreduce: `cgbpf record -- nccl_loop.py N` (torch.distributed, NCCL
#     backend, world size 1): the host side. ncclCommInitRank* seen, the
#     communicator "rank 0/1"; the all-reduces on its track carry seq
#     1..N, 1 MiB each; nccl_sum counts them, timed on the host (no GPU
#     side to time); no stragglers section (one rank); no hang said.
#   self: `cgbpf record -- nccl_self.py N` (a 1-rank communicator whose
#     rank sends 1 MiB to itself and receives it, in a group: NCCL's
#     kernel with its task and kernel-channel events): the plugin's side.
#     One "NCCL xxxx rank 0/1: GPU (NCCL profiler)" group whose channel
#     tracks hold Send and Recv spans of >= N operations each, carrying
#     bytes, channels and peer 0, inside the CUPTI span of an
#     ncclDevKernel (within 50 us: the clocks are mapped differently);
#     the GPU-side table counts them.
#   self_p: nccl_self.py 2N 20 started with NCCL_PROFILER_PLUGIN and
#     CUDA_INJECTION64_PATH set (as docs/injection.md says for a
#     service), then `cgbpf record -p PID` after its first operation (a
#     communicator older than the capture): as self, for >= N/2.
# tests/gpu/nccl_check.py prints "ok ..." / "FAIL ..." lines, then "N
# failed" (here, or where python3-protobuf is). Files in
# /tmp/cgbpf-gpu-nccl, packed into $OUT/nccl.tar.gz.
#
#   sudo bash tests/gpu/nccl.sh [ITERS]        (after make portable)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
portable=${CGBPF_PORTABLE:-$top/build/portable}
cgbpf=$portable/cgbpf
lib=$portable/inject/libcgbpf-inject.so
py=${PYTHON:-python3}
out=/tmp/cgbpf-gpu-nccl
pack=${OUT:-$out}	# nccl.tar.gz: every file, for the way back
iters=${1:-200}
mkdir -p "$out" "$pack"
[ -x "$cgbpf" ] || { echo "nccl.sh: no $cgbpf: run make portable" >&2; exit 2; }
[ -e "$lib" ] || { echo "nccl.sh: no $lib: run make portable" >&2; exit 2; }
"$py" -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()' ||
	{ echo "nccl.sh: $py has no CUDA torch with NCCL" >&2; exit 2; }
# The CUPTI of torch's wheels (the copy torch's own profiler would load).
cupti=${CGBPF_CUPTI_PATH:-$("$py" -c 'import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
hits = [h for d in dirs for h in sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcupti.so.1[0-9]")))]
print(hits[0] if hits else "")' 2>/dev/null)}
echo "# torch $("$py" -c 'import torch; print(torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')${cupti:+, CUPTI $cupti}"

# rec NAME ARGS...: cgbpf record ARGS, its summary, stderr and trace in $out.
rec() {
	local name=$1
	shift
	echo "== $name: cgbpf record $*"
	env ${cupti:+"CGBPF_CUPTI_PATH=$cupti"} timeout -s INT 300 "$cgbpf" record --sample-hz 0 \
		--nccl-hang-after 5s -o "$out/$name.perfetto-trace" --force "$@" \
		> "$out/$name.summary" 2> "$out/$name.err"
	echo "   exit $?"
}

rm -f "$out"/allreduce.* "$out"/self.* "$out"/self_p.*
rec allreduce -- "$py" "$top/tests/gpu/nccl_loop.py" "$iters"
rec self -- "$py" "$top/tests/gpu/nccl_self.py" "$iters"

# A job older than the capture: 2x the iterations, 20 ms apart.
echo "== self_p: NCCL_PROFILER_PLUGIN=$lib nccl_self.py $((2 * iters)) 20, then record -p"
NCCL_PROFILER_PLUGIN=$lib CUDA_INJECTION64_PATH=$lib \
	env ${cupti:+"CGBPF_CUPTI_PATH=$cupti"} "$py" "$top/tests/gpu/nccl_self.py" "$((2 * iters))" 20 \
	> "$out/self_p.app.out" 2> "$out/self_p.app.err" &
app=$!
for ((i = 0; i < 1200; i++)); do
	grep -q '^ready ' "$out/self_p.app.err" 2>/dev/null && break
	kill -0 "$app" 2>/dev/null || break
	sleep 0.1
done
rec self_p -p "$app" &
wait "$app"
echo "   job exit $?"
wait

# Everything in one file for the way back (the device tool brings 8).
tar -czf "$pack/nccl.tar.gz" -C "$out" $(cd "$out" && ls allreduce.* self.* self_p.* 2>/dev/null)
if /usr/bin/python3 -c 'import google.protobuf' 2>/dev/null; then
	/usr/bin/python3 "$top/tests/gpu/nccl_check.py" "$out" "$iters"
else
	echo "# no python3-protobuf here: on a machine with it,"
	echo "#   /usr/bin/python3 tests/gpu/nccl_check.py $pack/nccl.tar.gz $iters"
fi
