// SPDX-License-Identifier: MIT
/*
 * The "bare trap" baseline: empty entry and return uprobe programs. What a
 * traced call costs under them is the kernel's trap, uprobe dispatch and
 * BPF program invocation with no work at all, the floor any uprobe-based
 * tracer pays; bench/run.sh compares cgbpf's per-call cost against it.
 *
 * Two pairs, as in bpf/calls.bpf.c: perf-event uprobes, and uprobe_multi
 * links (loaded with expected_attach_type BPF_TRACE_UPROBE_MULTI), because
 * the fair baseline uses the attach mechanism cgbpf itself uses.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("uprobe")
int BPF_KPROBE(bare_enter)
{
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(bare_exit)
{
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(bare_enter_multi)
{
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(bare_exit_multi)
{
	return 0;
}
