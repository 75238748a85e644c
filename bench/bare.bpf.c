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
/* And what cgbpf does beyond the floor, to see what each costs: */
#define FLOOR_ENTRY_REC	8	/* a 120-byte record at entry, six argument registers */
#define FLOOR_STACK	16	/* three stack arguments read from user memory at entry */
#define FLOOR_WAKEQ	32	/* the ring's fill and a wake level read per record */
#define FLOOR_STACK8	64	/* with 16: one stack argument (8 bytes), not three */
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

/* cgbpf's entry record's size: a 24-byte header, 8 bytes of function,
 * 11 arguments. */
struct floor_entry_rec {
	__u64 hdr[3];
	__u64 func;
	__u64 args[11];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} floor_wake SEC(".maps");

static __always_inline __u64 floor_wake_flag(void)
{
	__u32 zero = 0;
	__u64 *last;

	if (!(floor_parts & FLOOR_WAKEQ))
		return BPF_RB_NO_WAKEUP;
	last = bpf_map_lookup_elem(&floor_wake, &zero);
	if (bpf_ringbuf_query(&floor_ring, BPF_RB_AVAIL_DATA) > (32 << 20) && last)
		*last += 1;
	return BPF_RB_NO_WAKEUP;
}

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
	if (floor_parts & FLOOR_ENTRY_REC) {
		struct floor_entry_rec *r = bpf_ringbuf_reserve(&floor_ring, sizeof(*r), 0);

		if (!r)
			return 0;
		r->hdr[0] = bpf_get_smp_processor_id();
		r->hdr[1] = bpf_get_current_pid_tgid();
		r->hdr[2] = t;
		r->func = bpf_get_attach_cookie(ctx);
		r->args[0] = PT_REGS_PARM1(ctx);
		r->args[1] = PT_REGS_PARM2(ctx);
		r->args[2] = PT_REGS_PARM3(ctx);
		r->args[3] = PT_REGS_PARM4(ctx);
		r->args[4] = PT_REGS_PARM5(ctx);
		r->args[5] = ctx->r9;	/* x86-64; libbpf 1.1 has no PT_REGS_PARM6 */
		r->args[6] = r->args[7] = r->args[8] = r->args[9] = r->args[10] = 0;
		if (floor_parts & FLOOR_STACK) {
			__u64 st[3] = {};

			__u64 sp = PT_REGS_SP(ctx);
			barrier_var(sp);
			if (floor_parts & FLOOR_STACK8)
				bpf_probe_read_user(st, 8, (void *)(sp + 8));
			else
				bpf_probe_read_user(st, sizeof(st), (void *)(sp + 8));
			r->args[6] = st[0];
			r->args[7] = st[1];
			r->args[8] = st[2];
		}
		bpf_ringbuf_submit(r, floor_wake_flag());
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
		bpf_ringbuf_output(&floor_ring, &r, sizeof(r), floor_wake_flag());
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

SEC("tracepoint")
int noop_perf_enter(void *ctx)
{
	return 0;
}

SEC("tracepoint")
int noop_perf_exit(void *ctx)
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
