#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# record -p PID --inject on a real GPU (issue 26): a PyTorch loop
# (tests/gpu/inject_loop.py) started plainly, attached mid-run with
# --inject for DURATION, then left running. Prints the loop's step rate
# per second (before, during, after), cgbpf's injection lines and the
# summary's GPU sections; the trace goes to $OUT (or /tmp/cgbpf-inject).
#
#   sudo bash tests/gpu/inject.sh [DURATION]      (after make portable)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
portable=${CGBPF_PORTABLE:-$top/build/portable}
cgbpf=$portable/cgbpf
py=${PYTHON:-python3}
dur=${1:-5s}
out=${OUT:-/tmp/cgbpf-inject}
mkdir -p "$out"
[ -x "$cgbpf" ] || { echo "inject.sh: no $cgbpf: run make portable" >&2; exit 2; }
nvidia-smi -L
"$py" "$top/tests/gpu/inject_loop.py" --seconds 30 > "$out/app.log" 2>&1 &
app=$!
for ((i = 0; i < 600; i++)); do
	grep -q '^rate' "$out/app.log" && break
	kill -0 $app 2>/dev/null || break
	sleep 0.1
done
sleep 5
echo "== before: $(grep -c . "$out/app.log") lines; libraries: $(grep -c cgbpf /proc/$app/maps) cgbpf mappings"
timeout -s INT 120 "$cgbpf" record -v -p "$app" --inject -d "$dur" -o "$out/inject.perfetto-trace" \
	--force --summary-file "$out/inject.summary" > "$out/record.stdout" 2> "$out/record.stderr"
echo "== record exit $?"
grep -E "inject|CUPTI|error|warning" "$out/record.stderr" | grep -v "debug: inject: thread .*#" | head -40
grep cgbpf /proc/$app/maps | awk '{ print $6 }' | sort -u
awk '/GPU activity/,/Capture/' "$out/record.stdout"
wait $app
echo "== app exit $?"
cat "$out/app.log"
grep TracerPid /proc/self/status
ls -la "$out"
