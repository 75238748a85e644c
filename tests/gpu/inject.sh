#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# record -p PID --inject on a real GPU (issue 26): a PyTorch loop
# (tests/gpu/inject_loop.py) started plainly, attached mid-run with
# --inject for DURATION, then left running. Checks, and prints with "ok"
# or "FAIL": the library was injected and nothing before; kernels were
# measured (cgbpf stats on the trace); the loop ran to its end with exit
# 0; its step rate (median of its per-second rates) before the capture,
# during it, and after cgbpf left. Everything goes to $OUT (or
# /tmp/cgbpf-inject).
#
#   sudo bash tests/gpu/inject.sh [DURATION [LOOP_SECONDS]]   (after make portable)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
portable=${CGBPF_PORTABLE:-$top/build/portable}
cgbpf=$portable/cgbpf
py=${PYTHON:-python3}
dur=${1:-5s}
secs=${2:-40}
out=${OUT:-/tmp/cgbpf-inject}
mkdir -p "$out"
[ -x "$cgbpf" ] || { echo "inject.sh: no $cgbpf: run make portable" >&2; exit 2; }
fails=0
ok() { echo "ok $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
nvidia-smi -L
"$py" "$top/tests/gpu/inject_loop.py" --seconds "$secs" > "$out/app.log" 2>&1 &
app=$!
for ((i = 0; i < 900; i++)); do
	grep -q '^rate' "$out/app.log" && break
	kill -0 $app 2>/dev/null || break
	sleep 0.1
done
sleep 8
n=$(grep -c cgbpf /proc/$app/maps)
[ "$n" = 0 ] && ok "before: nothing of cgbpf in the process" || fail "before: $n cgbpf mappings"
t0=$(date +%s.%N)
timeout -s INT 120 "$cgbpf" record -v -p "$app" --inject -d "$dur" -o "$out/inject.perfetto-trace" \
	--force --summary-file "$out/inject.summary" > "$out/record.stdout" 2> "$out/record.stderr"
rc=$?
t1=$(date +%s.%N)
[ $rc = 0 ] && ok "record --inject exit 0" || fail "record --inject exit $rc"
line=$(grep "injected now" "$out/record.stdout")
[ -n "$line" ] && ok "injected:$line" || fail "not injected: $(grep -A2 'injection (--inject)' "$out/record.stdout")"
grep -E "measured \(CUPTI" "$out/record.stdout" | sed 's/^/   /'
"$cgbpf" stats --report cuda_gpu_kern_sum --format csv "$out/inject.perfetto-trace" > "$out/kern.txt" 2>&1
k=$(grep -cE "^[0-9.]+,[0-9]+," "$out/kern.txt")
[ "$k" -gt 0 ] && ok "cgbpf stats: $k kernel rows" || fail "no kernels in cgbpf stats: $(head -5 "$out/kern.txt")"
head -12 "$out/kern.txt"
wait $app
arc=$?
[ $arc = 0 ] && ok "the loop's own exit status 0" || fail "the loop exited $arc"
tail -1 "$out/app.log"
med() { sort -g | awk '{ a[NR] = $1 } END { if (!NR) print "none"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
before=$(awk -v t="$t0" '$1 == "rate" && $2 < t - 0.5 && $2 > t - 6 { print $3 }' "$out/app.log" | med)
during=$(awk -v a="$t0" -v b="$t1" '$1 == "rate" && $2 > a + 2 && $2 < b - 0.5 { print $3 }' "$out/app.log" | med)
after=$(awk -v t="$t1" '$1 == "rate" && $2 > t + 1.5 { print $3 }' "$out/app.log" | med)
echo "steps/s, medians of per-second rates: before $before, during $during, after cgbpf left $after"
awk -v b="$before" -v a="$after" 'BEGIN { if (b != "none" && a != "none") printf "after/before: %.3f\n", a / b }'
grep -c "debug: inject" "$out/record.stderr" | sed 's/^/inject debug lines: /'
n=$(grep -c libcgbpf-inject /proc/$app/maps 2>/dev/null || echo gone)
echo "$fails failed"
exit $((fails > 0))
