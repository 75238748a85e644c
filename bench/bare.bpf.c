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

/*
 * The "floor" pair (bare --floor): the least any tracer must do to record
 * a call with its entry and exit timestamps. The entry program reads the
 * clock into task-local storage; the return program reads the clock again
 * and writes one 32-byte ring record (no wakeup; bare drains the ring on a
 * 50 ms poll). No arguments, no filtering, no header fields beyond the two
 * timestamps and the thread. It bounds from below what a design with both
 * timestamps can cost, whatever its record layout.
 */
/* Parts of the floor work to do (bare --floor=MASK, to see what each costs). */
#define FLOOR_CLOCK	1	/* bpf_ktime_get_boot_ns at entry and return */
#define FLOOR_STORAGE	2	/* task-local storage at entry and return */
#define FLOOR_RECORD	4	/* one ring record at return */
const volatile __u32 floor_parts = FLOOR_CLOCK | FLOOR_STORAGE | FLOOR_RECORD;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} floor_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} floor_entry SEC(".maps");

struct floor_rec {
	__u64 tid;
	__u64 func;
	__u64 ts_enter;
	__u64 ts_exit;
};

SEC("uprobe")
int BPF_KPROBE(floor_enter_multi)
{
	__u64 t = 0, *ts;

	if (floor_parts & FLOOR_CLOCK)
		t = bpf_ktime_get_boot_ns();
	if (floor_parts & FLOOR_STORAGE) {
		ts = bpf_task_storage_get(&floor_entry, bpf_get_current_task_btf(), 0,
					  BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (ts)
			*ts = t;
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(floor_exit_multi)
{
	struct floor_rec r = {};
	__u64 *ts;

	if (floor_parts & FLOOR_STORAGE) {
		ts = bpf_task_storage_get(&floor_entry, bpf_get_current_task_btf(), 0, 0);
		if (ts)
			r.ts_enter = *ts;
	}
	if (floor_parts & FLOOR_CLOCK)
		r.ts_exit = bpf_ktime_get_boot_ns();
	if (floor_parts & FLOOR_RECORD) {
		r.tid = bpf_get_current_pid_tgid();
		r.func = bpf_get_attach_cookie(ctx);
		bpf_ringbuf_output(&floor_ring, &r, sizeof(r), BPF_RB_NO_WAKEUP);
	}
	return 0;
}

/*
 * No-op syscall hooks (bare --sys=MODE), to measure what a syscall hook
 * costs every traced call: each traced return is the uretprobe
 * trampoline's syscall. "tp" attaches BTF tracepoints on sys_enter and
 * sys_exit (an enabled syscall tracepoint sends every syscall of every
 * task through the kernel's slow path); "tpexit" sys_exit alone; "fentry"
 * an fentry/fexit pair on the syscall dispatcher, x64_sys_call, which
 * leaves the fast path alone; "fexit" the fexit alone.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(noop_sys_enter, struct pt_regs *regs, long id)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(noop_sys_exit, struct pt_regs *regs, long ret)
{
	return 0;
}

SEC("fentry/x64_sys_call")
int BPF_PROG(noop_call_enter, const struct pt_regs *regs, unsigned int nr)
{
	return 0;
}

SEC("fexit/x64_sys_call")
int BPF_PROG(noop_call_exit, const struct pt_regs *regs, unsigned int nr, long ret)
{
	return 0;
}
