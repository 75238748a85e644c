#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# --inject's safety on a real GPU (issue 26), the GPU host's version of
# test_inject.py's test_killed_at_every_step and test_all_with_comm:
#
# 1. For each step of the injection sequence (CGBPF_INJECT_DIE_AT), a
#    fresh PyTorch loop (tests/gpu/inject_loop.py, started plainly) gets
#    `record -p PID --inject` with cgbpf killed by SIGKILL at that step.
#    The loop must be left untraced (TracerPid 0), not stopped, and finish
#    with exit 0; from "regs" on, the stub loads the library by itself.
# 2. `record -a --inject --comm NAME` while two loops run under NAME (one
#    started after the capture began) and one under another name: both
#    NAME loops measured, the other left alone.
#
# Prints "ok ..." or "FAIL ..." per check, then "N failed". Everything
# goes to $OUT (or /tmp/cgbpf-inject-kill).
#
#   sudo bash tests/gpu/inject_kill.sh [STEPS...]   (after make portable)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
portable=${CGBPF_PORTABLE:-$top/build/portable}
cgbpf=$portable/cgbpf
py=${PYTHON:-python3}
out=${OUT:-/tmp/cgbpf-inject-kill}
steps=${*:-stub seized stopped checked frame regs detached}
mkdir -p "$out"
[ -x "$cgbpf" ] || { echo "inject_kill.sh: no $cgbpf: run make portable" >&2; exit 2; }
fails=0
ok() { echo "ok $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

# Starts the loop as COMM for SECS seconds; sets loop to its pid once it
# runs (not in a subshell: the script waits for it).
start_loop() {
	local comm=$1 secs=$2 log=$3
	"$py" "$top/tests/gpu/inject_loop.py" --seconds "$secs" --comm "$comm" > "$log" 2>&1 &
	loop=$!
	local pid=$loop
	for ((i = 0; i < 600; i++)); do
		grep -q '^rate' "$log" && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
}

nvidia-smi -L
for st in $steps; do
	start_loop inject_loop 6 "$out/app.$st.log"
	app=$loop
	CGBPF_INJECT_DIE_AT=$st timeout -s INT 60 "$cgbpf" record -p "$app" --inject -d 2s \
		--sample-hz 0 --summary-only > "$out/record.$st.stdout" 2> "$out/record.$st.stderr"
	rc=$?
	[ $rc = 137 ] && ok "$st: cgbpf killed" || fail "$st: cgbpf exit $rc, not SIGKILL"
	sleep 0.3
	tp=$(field "$app" TracerPid)
	state=$(field "$app" State)
	[ "$tp" = 0 ] && ok "$st: untraced" || fail "$st: TracerPid $tp"
	case "$state" in T|t) fail "$st: left stopped ($state)" ;; *) ok "$st: state $state" ;; esac
	if [ "$st" = regs ] || [ "$st" = detached ]; then
		for ((i = 0; i < 100; i++)); do
			grep -q libcgbpf "/proc/$app/maps" 2>/dev/null && break
			sleep 0.05
		done
		grep -q libcgbpf "/proc/$app/maps" 2>/dev/null && ok "$st: the stub loaded the library" ||
			fail "$st: no library after the stub ran on its own"
	fi
	wait "$app"
	arc=$?
	[ $arc = 0 ] && ok "$st: the loop's own exit status 0 ($(tail -1 "$out/app.$st.log"))" ||
		fail "$st: the loop exited $arc: $(tail -3 "$out/app.$st.log")"
done

# -a --inject --comm
start_loop gpuloop_a 25 "$out/a.log"
a=$loop
start_loop otherloop 25 "$out/o.log"
o=$loop
timeout -s INT 120 "$cgbpf" record -a --inject --comm gpuloop_a,gpuloop_b -d 14s \
	--sample-hz 0 -o "$out/all.perfetto-trace" --force > "$out/all.stdout" 2> "$out/all.stderr" &
rec=$!
sleep 3
start_loop gpuloop_b 15 "$out/b.log"
b=$loop
wait $rec
rc=$?
[ $rc = 0 ] && ok "-a --inject exit 0" || fail "-a --inject exit $rc: $(tail -3 "$out/all.stderr")"
for p in $a $b; do
	grep -q "pid $p: injected now" "$out/all.stdout" && ok "-a: pid $p injected" ||
		fail "-a: pid $p not injected: $(grep -A6 'injection (--inject)' "$out/all.stdout")"
	grep -A1 "pid $p (.*measured (CUPTI" "$out/all.stdout" | grep -q "from the injection on" &&
		ok "-a: pid $p measured from the injection on" || fail "-a: pid $p not measured"
done
n=$(grep -c libcgbpf "/proc/$o/maps" 2>/dev/null)
[ "${n:-0}" = 0 ] && ok "-a: the other name got nothing" || fail "-a: otherloop has $n cgbpf mappings"
for p in $a $b $o; do
	wait "$p"
	arc=$?
	[ $arc = 0 ] && ok "loop $p exit 0" || fail "loop $p exited $arc"
done
grep -E "pid [0-9]+: (injected|refused|not injected)" "$out/all.stdout" | sed 's/^/   /'
echo "$fails failed"
exit $((fails > 0))
