#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Soak test of `cgbpf monitor` (not CI-blocking; tests/integration/
# test_monitor.py has a short version): processes that use the fake driver
# start and exit constantly for MINUTES; every 10 s the daemon's RSS, its
# BPF maps and links, the series it exports and the processes it tracks are
# sampled. Flat lines mean bounded memory and no leaked probes or maps.
#
# Usage: sudo bash bench/soak.sh [MINUTES]   (default 10; SOAK_SECONDS overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SOAK_SECONDS:-$(( ${1:-10} * 60 ))}
PORT=${BENCH_PORT:-19465}
make -s --no-print-directory all >&2
TMP=$(mktemp -d)
mon=
trap '[ -n "$mon" ] && kill -TERM $mon 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
links0=$(bpftool link show 2>/dev/null | grep -c "^[0-9]" || true)
maps0=$(bpftool map show 2>/dev/null | grep -c "^[0-9]" || true)
build/cgbpf monitor --listen 127.0.0.1:$PORT --dump-dir "$TMP" --interval 5s \
	--flight-recorder 10s --flight-memory 32 --no-trigger-exit 2> "$TMP/mon.err" &
mon=$!
for _ in $(seq 100); do grep -q "monitoring;" "$TMP/mon.err" && break; sleep 0.1; done
end=$(( $(date +%s) + SECS ))
# The churn: short-lived GPU processes, four at a time.
(
	while [ "$(date +%s)" -lt "$end" ]; do
		for _ in 1 2 3 4; do LD_LIBRARY_PATH=build/fake build/workloads/mt > /dev/null & done
		wait
	done
) &
churn=$!
printf '%8s %10s %8s %8s %8s %10s\n' "t (s)" "RSS (KiB)" "maps" "links" "series" "processes"
t0=$(date +%s)
while kill -0 $churn 2>/dev/null; do
	m=$(curl -s "127.0.0.1:$PORT/metrics")
	printf '%8d %10s %8s %8s %8s %10s\n' $(( $(date +%s) - t0 )) \
		"$(awk '/VmRSS/ { print $2 }' /proc/$mon/status)" \
		"$(( $(bpftool map show | grep -c '^[0-9]') - maps0 ))" \
		"$(( $(bpftool link show | grep -c '^[0-9]') - links0 ))" \
		"$(awk '$1 == "cgbpf_aggregate_series" { print $2 }' <<<"$m")" \
		"$(awk '$1 == "cgbpf_traced_processes" { print $2 }' <<<"$m")"
	sleep 10
done
kill -TERM $mon
wait $mon || true
mon=
sleep 3	# maps and links are freed after an RCU grace period
echo "after stop: $(( $(bpftool link show | grep -c '^[0-9]') - links0 )) links and" \
	"$(( $(bpftool map show | grep -c '^[0-9]') - maps0 )) maps more than before the start"
