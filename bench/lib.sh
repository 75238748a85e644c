# SPDX-License-Identifier: MIT
# Helpers shared by the bench/*.sh scripts (sourced, not run).

# median V...: the median of the numbers given, one decimal.
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2];
		      else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# calc EXPR [DECIMALS]: awk arithmetic, printed with DECIMALS (default 1).
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }

# ns_of FILE: the ns_per_call=... a bench workload printed.
ns_of() { sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p' "$1"; }

# child_cpu FILE: seconds of CPU (user + system) of reaped children, from
# the second line of `times` output ("0m1.234s 0m0.567s").
child_cpu() {
	tail -1 "$1" | awk '{ n = 0
		for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] }
		printf "%.3f", n }'
}

# alive PID: running (kill -0 also succeeds on a zombie we have not reaped).
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# wait_for FILE REGEX SECONDS [PID]: until FILE holds a line matching
# REGEX; fails when PID (if given) exits first or time runs out.
wait_for() {
	local i
	for ((i = 0; i < $3 * 50; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		[ -z "${4:-}" ] || alive "$4" ||
			{ grep -Eq "$2" "$1" 2>/dev/null && return 0; return 1; }
		sleep 0.02
	done
	return 1
}

# launch_copy DIR CGBPF: a private copy of the fake driver and of the
# launch loop in DIR (probes belong to a file: others' on build/fake must
# not fire in the loop, nor ours in theirs); sets LIB, WL and OFF (the
# file offset of cuLaunchKernel in LIB, as CGBPF check reads it; empty if
# none). Run from the repository's root.
launch_copy() {
	mkdir -p "$1/fake" "$1/workloads"
	cp build/fake/libcuda.so.1 "$1/fake/"
	cp build/workloads/bench_launch "$1/workloads/"
	LIB=$1/fake/libcuda.so.1
	WL=$1/workloads/bench_launch
	OFF=$("$2" check "$LIB" cuLaunchKernel | awk '$1 == "cuLaunchKernel" { print $2 }')
}
