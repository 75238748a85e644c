#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/run.sh [OUTDIR]: records GPU workloads with cgbpf on a host with
# an NVIDIA GPU; tests/gpu/check.py (on any machine with Debian's
# python3-protobuf and protoc) checks what it wrote. See tests/gpu/README.md.
#
# Runs from a checkout holding build/portable (make portable, copied here;
# or CGBPF_PORTABLE=DIR). Needs root, nvidia-smi, nvcc and a python3 whose
# torch sees the GPU (PYTHON=... to pick another). Records:
#   kernels    tests/gpu/kernels.cu (built here with nvcc) under record --
#   kernels_p  the same program started with CUDA_INJECTION64_PATH set, then
#              recorded with record -p PID
#   torch      tests/gpu/torch_step.py under record --
#   windows    kernels --windows under record --capture-range cudaProfilerApi
#              --capture-range-end repeat: windows-N.perfetto-trace, one per
#              window, each closed while the window's last kernel still runs
# Each NAME gives NAME.perfetto-trace, NAME.summary, NAME.manifest.json and
# NAME.stdout/.stderr (cgbpf's, -v). Every workload waits at a pause point
# after its setup until cgbpf says GPU collection runs (its -v line "GPU
# activity: status 1"), so the checked work is all measured.
#
# CGBPF_GPU_LIMIT: seconds each recording may take (default 300).
# Output: OUTDIR if given; else, when $OUT is set (the device tool of the
# workplace this was written in, which brings back at most 8 files), a
# temporary folder packed into $OUT/cgbpf-gpu.tar.gz plus $OUT/run.log;
# else a new folder under /tmp. Exit status: 0 when every recording ran,
# 1 when one failed, 2 when a prerequisite is missing.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
portable=${CGBPF_PORTABLE:-$top/build/portable}
cgbpf=$portable/cgbpf
py=${PYTHON:-python3}
limit=${CGBPF_GPU_LIMIT:-300}   # seconds each recording may take

# ---------------------------------------------------------------- prerequisites
missing=()
need() {
	missing+=("$1")
}

[ "$(id -u)" -eq 0 ] || need "root: cgbpf loads BPF programs (run with sudo)"
if ! command -v nvidia-smi >/dev/null; then
	need "nvidia-smi: no NVIDIA driver on PATH"
elif ! nvidia-smi -L >/dev/null 2>&1; then
	need "a working GPU: nvidia-smi -L fails ($(nvidia-smi -L 2>&1 | head -1))"
fi
nvcc=${NVCC:-$(command -v nvcc || true)}
for c in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
	[ -n "$nvcc" ] && break
	[ -x "$c" ] && nvcc=$c
done
[ -n "$nvcc" ] || need "nvcc: not on PATH, nor in \$CUDA_HOME/bin or /usr/local/cuda/bin (NVCC=path)"
if ! command -v "$py" >/dev/null; then
	need "$py: no python3 (PYTHON=path to one with torch)"
elif ! torch_ok=$("$py" -c 'import torch, sys
print(torch.__version__, torch.version.cuda)
sys.exit(0 if torch.cuda.is_available() else 3)' 2>&1); then
	need "$py with torch.cuda available: $(tail -1 <<<"$torch_ok")"
fi
if [ ! -x "$cgbpf" ]; then
	need "$cgbpf: run 'make portable' on a build machine and copy build/portable into this checkout (or set CGBPF_PORTABLE=DIR)"
fi
lib=
for n in libcgbpf-inject.so libcgbpf-nvtx.so; do
	if [ -e "$portable/inject/$n" ]; then
		lib=$portable/inject/$n
		break
	fi
done
if [ -z "$lib" ]; then
	need "$portable/inject/libcgbpf-inject.so: the injection library (make portable copies it)"
elif ! grep -qaP '\x00InitializeInjection\x00' "$lib"; then
	need "the CUPTI part in $lib (no InitializeInjection): build from a tree with inject/gpu.c and the CUDA toolkit's CUPTI headers"
fi
[ -r /sys/kernel/btf/vmlinux ] || need "kernel BTF (/sys/kernel/btf/vmlinux): cgbpf's BPF programs need CONFIG_DEBUG_INFO_BTF"
command -v timeout >/dev/null || need "timeout (coreutils)"
if [ ${#missing[@]} -gt 0 ]; then
	echo "tests/gpu/run.sh: cannot run; missing:" >&2
	printf '  - %s\n' "${missing[@]}" >&2
	exit 2
fi

py=$(command -v "$py")

# CUPTI for the injection library (it searches by itself too, but a
# toolkit from pip or in an odd place is found here): the toolkit's for the
# CUDA program, the one of torch's wheels for torch (the copy torch's own
# profiler would load: one process must not get two). CGBPF_CUPTI_PATH
# set by the caller wins.
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
cupti_toolkit= cupti_wheel=
for c in "$cuda_home"/extras/CUPTI/lib64/libcupti.so.1[0-9] "$cuda_home"/lib64/libcupti.so.1[0-9] \
	"$cuda_home"/targets/*/lib/libcupti.so.1[0-9]; do
	[ -e "$c" ] && cupti_toolkit=$c && break
done
cupti_wheel=$("$py" -c 'import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
hits = [h for d in dirs for h in sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcupti.so.1[0-9]")))]
print(hits[0] if hits else "")' 2>/dev/null)
[ -e "$cupti_wheel" ] || cupti_wheel=
cupti_kernels=${CGBPF_CUPTI_PATH:-${cupti_toolkit:-$cupti_wheel}}
cupti_torch=${CGBPF_CUPTI_PATH:-${cupti_wheel:-$cupti_toolkit}}

# ---------------------------------------------------------------- output
pack=
if [ $# -ge 1 ]; then
	work=$1
	mkdir -p "$work" || exit 2
elif [ -n "${OUT:-}" ]; then
	work=$(mktemp -d /tmp/cgbpf-gpu.XXXXXX)
	pack=$OUT
else
	work=$(mktemp -d /tmp/cgbpf-gpu.XXXXXX)
fi
work=$(cd "$work" && pwd)
log=${pack:-$work}/run.log

# ---------------------------------------------------------------- recording
# Waits for the workload's pause point ("$1.ready") and for cgbpf (pid $3,
# stderr $2) to say which GPU status the library reached, then releases the
# workload. Gives up waiting for the status after 90 s (the summary then
# says what the library reported).
release() {
	local pause=$1 err=$2 pid=$3 i st=
	for ((i = 0; i < 900; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		if [ -e "$pause.ready" ]; then
			# (err may not exist yet: the background job opens it)
			st=$(grep -a -m1 -o 'GPU activity: status [0-9]* ([^)]*' "$err" 2>/dev/null)
			[ -n "$st" ] && break
		fi
		sleep 0.1
	done
	echo "   at the pause point: ${st:-no GPU status from the injection library within 90 s}"
	touch "$pause"
}

# record NAME CUPTI CMD...: cgbpf record -- CMD (CUPTI: the library's
# CGBPF_CUPTI_PATH, or empty to let it search).
record() {
	local name=$1 cupti=$2 rc
	shift 2
	echo "== $name: cgbpf record ${rec_args[*]} -- $*${cupti:+ (CGBPF_CUPTI_PATH=$cupti)}"
	rm -f "$work/$name".* "$work/$name"-*
	CGBPF_MANIFEST=$work/$name.manifest.json CGBPF_PAUSE_FILE=$work/$name.pause \
		env ${cupti:+"CGBPF_CUPTI_PATH=$cupti"} timeout -s INT "$limit" "$cgbpf" record -v "${rec_args[@]}" \
		-o "$work/$name.perfetto-trace" --summary-file "$work/$name.summary" -- "$@" \
		>"$work/$name.stdout" 2>"$work/$name.stderr" &
	local rec=$!
	release "$work/$name.pause" "$work/$name.stderr" "$rec"
	wait "$rec"
	rc=$?
	finish "$name" "$rc"
}

# record_attached NAME CUPTI CMD...: CMD started with the injection library
# set, then cgbpf record -p PID.
record_attached() {
	local name=$1 cupti=$2 rc app rec i
	shift 2
	echo "== $name: CUDA_INJECTION64_PATH=$lib $*${cupti:+ (CGBPF_CUPTI_PATH=$cupti)}, then cgbpf record -p"
	rm -f "$work/$name".*
	# The workload's own pause has a time limit: no timeout(1) around it,
	# so -p names the workload itself.
	CUDA_INJECTION64_PATH=$lib NVTX_INJECTION64_PATH=$lib \
		CGBPF_MANIFEST=$work/$name.manifest.json CGBPF_PAUSE_FILE=$work/$name.pause \
		env ${cupti:+"CGBPF_CUPTI_PATH=$cupti"} "$@" >"$work/$name.app.log" 2>&1 &
	app=$!
	for ((i = 0; i < 600; i++)); do
		[ -e "$work/$name.pause.ready" ] && break
		kill -0 "$app" 2>/dev/null || break
		sleep 0.1
	done
	timeout -s INT "$limit" "$cgbpf" record -v -p "$app" -o "$work/$name.perfetto-trace" \
		--summary-file "$work/$name.summary" >"$work/$name.stdout" 2>"$work/$name.stderr" &
	rec=$!
	release "$work/$name.pause" "$work/$name.stderr" "$rec"
	wait "$app"
	rc=$?
	[ "$rc" -eq 0 ] || echo "   the workload exited with $rc: $(tail -3 "$work/$name.app.log")"
	wait "$rec"
	local rrc=$?
	[ "$rc" -eq 0 ] && rc=$rrc
	finish "$name" "$rc"
}

finish() {
	local name=$1 rc=$2
	rm -f "$work/$name.pause" "$work/$name.pause.ready"
	if [ "$rc" -ne 0 ]; then
		echo "   FAILED (exit $rc); cgbpf's last words:"
		grep -av '^libbpf:' "$work/$name.stderr" | tail -15 | sed 's/^/     /'
		failed+=("$name")
	fi
	if [ -s "$work/$name.summary" ]; then
		awk '/^\*\* GPU activity per process/ { on = 1; next } on && /^\*\*/ { exit }
			on && NF { print "  " $0 }' "$work/$name.summary" | head -20
	fi
	ls -l "$work/$name".* "$work/$name"-* 2>/dev/null | awk '{print "   " $5 "\t" $9}'
}

main() {
	echo "== host"
	echo "kernel: $(uname -r)"
	nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv,noheader
	"$nvcc" --version | tail -1
	echo "python: $py, torch $torch_ok"
	echo "cgbpf: $cgbpf ($("$cgbpf" --version))"
	sed 's/^/  /' "$portable/BUILD-INFO" 2>/dev/null
	echo "injection library: $lib"
	echo "CUPTI: toolkit ${cupti_toolkit:-none found}, torch's wheels ${cupti_wheel:-none found}"
	echo "output: $work"

	failed=()
	rec_args=()	# more cgbpf record options, for one recording

	echo "== build: nvcc tests/gpu/kernels.cu"
	if ! "$nvcc" -O2 -lineinfo -o "$work/kernels" "$top/tests/gpu/kernels.cu"; then
		echo "nvcc failed" >&2
		failed+=(build)
	else
		record kernels "$cupti_kernels" "$work/kernels"
		record_attached kernels_p "$cupti_kernels" "$work/kernels"
		rec_args=(--capture-range cudaProfilerApi --capture-range-end repeat)
		record windows "$cupti_kernels" "$work/kernels" --windows
		rec_args=()
	fi
	record torch "$cupti_torch" "$py" "$top/tests/gpu/torch_step.py" --iters 20

	rm -f "$work/kernels"
	echo
	if [ -n "$pack" ]; then
		if tar -czf "$pack/cgbpf-gpu.tar.gz" -C "$work" .; then
			echo "packed into $pack/cgbpf-gpu.tar.gz ($(du -h "$pack/cgbpf-gpu.tar.gz" | cut -f1))"
			rm -rf "$work"
		else
			failed+=(pack)
		fi
		echo "check, where cgbpf-gpu.tar.gz was brought back: /usr/bin/python3 tests/gpu/check.py cgbpf-gpu.tar.gz"
	else
		echo "check: /usr/bin/python3 tests/gpu/check.py $work"
	fi
	if [ ${#failed[@]} -gt 0 ]; then
		echo "FAILED: ${failed[*]}"
		exit 1
	fi
	echo "all recordings ran"
}

main 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
