// SPDX-License-Identifier: MIT
/*
 * The scheduler: context switches, wakeups, new tasks, renames and exits,
 * as tp_btf programs (no tracefs needed). Records go to their own ring
 * buffer so a storm of switches cannot crowd out API records, and are
 * always submitted without a wakeup: waking the consumer from inside
 * sched_switch would itself switch (a feedback loop). The consumer drains
 * this ring on its 50 ms poll timeout.
 *
 * Scope (sched_scope): SCHED_SCOPE_ALL records every switch on every CPU,
 * cgbpf's own included, because Perfetto's compact encoding infers each
 * switch's prev task from the previous switch on that CPU: a filtered
 * stream would attribute CPU time to the wrong threads. SCHED_SCOPE_TARGETS
 * records only what involves a target thread (user space then writes
 * explicit prev pids).
 */
#include "common.bpf.h"
#include "sched_rec.h"

const volatile __u8 sched_scope = SCHED_SCOPE_ALL;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);		/* resized by user space */
} sched_events SEC(".maps");

/* Task state bits as include/linux/sched.h numbers them (6.x). */
#define TASK_REPORT		0x7f
#define TASK_IDLE_BITS		0x402	/* TASK_UNINTERRUPTIBLE | TASK_NOLOAD */
#define TASK_RTLOCK_WAIT	0x1000
#define TASK_UNINTERRUPTIBLE	0x2
#define TASK_REPORT_IDLE	0x80
#define TASK_REPORT_MAX		0x100

/*
 * What the sched_switch tracepoint reports as prev_state
 * (__trace_sched_switch_state): TASK_REPORT_MAX when preempted, else the
 * highest reported state bit (1 << (fls(state) - 1)), 0 for running.
 */
static __always_inline __u32 switch_state(bool preempt, __u32 state, struct task_struct *p)
{
	__u32 s;

	if (preempt)
		return TASK_REPORT_MAX;
	s = (state | (__u32)p->exit_state) & TASK_REPORT;
	if ((state & TASK_IDLE_BITS) == TASK_IDLE_BITS)
		s = TASK_REPORT_IDLE;
	if (state & TASK_RTLOCK_WAIT)
		s = TASK_UNINTERRUPTIBLE;
	s |= s >> 1;
	s |= s >> 2;
	s |= s >> 4;
	return s - (s >> 1);
}

/* comm by two direct BTF loads: no helper call on the hot path (the
 * verifier checks the loads stay inside task_struct.comm). */
static __always_inline void copy_comm(char *dst, struct task_struct *t)
{
	__u64 *d = (__u64 *)dst;
	const __u64 *s = (const __u64 *)t->comm;

	d[0] = s[0];
	d[1] = s[1];
}

/*
 * Whether the waker runs in interrupt context (a timer or device interrupt,
 * a softirq) rather than as the current task. x86 keeps the preempt count
 * that says so in the per-CPU variable __preempt_count (<= 6.1 and again
 * since 6.15; in between it sits in pcpu_hot, which this vmlinux.h lacks).
 * Reading it needs the variable's address from kallsyms, which only
 * CONFIG_KALLSYMS_ALL kernels have: sched_waking_pc reads it, and user
 * space loads it only there. Elsewhere sched_waking falls back to what the
 * current task says: a waking with the idle task current came from an
 * interrupt (idle wakes nothing by itself); on a busy CPU it cannot tell.
 */
extern int __preempt_count __ksym __weak;

#define PC_SOFTIRQ_OFFSET	0x100		/* serving a softirq (not merely bh-disabled) */
#define PC_HARDIRQ_MASK		0xf0000
#define PC_NMI_MASK		0xf00000

static __always_inline __u8 irq_flags_pc(void)
{
	int *pc;
	__u32 v;

	if (!&__preempt_count)
		return 0;
	pc = bpf_this_cpu_ptr(&__preempt_count);
	v = *pc;
	return (v & PC_NMI_MASK ? WAKING_NMI : 0) | (v & PC_HARDIRQ_MASK ? WAKING_HARDIRQ : 0) |
	       (v & PC_SOFTIRQ_OFFSET ? WAKING_SOFTIRQ : 0);
}

static __always_inline __u8 irq_flags_idle(void)
{
	return (__u32)bpf_get_current_pid_tgid() == 0 ? WAKING_HARDIRQ : 0;
}

static __always_inline int scoped(__u32 tgid)
{
	return sched_scope == SCHED_SCOPE_ALL || is_target(tgid);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct rec_switch *r;

	if (!gate_open())
		return 0;
	if (sched_scope != SCHED_SCOPE_ALL && !is_target(prev->tgid) && !is_target(next->tgid))
		return 0;
	r = bpf_ringbuf_reserve(&sched_events, sizeof(*r), 0);
	if (!r) {
		count_drop(REC_SCHED_SWITCH);
		return 0;
	}
	r->hdr.type = REC_SCHED_SWITCH;
	r->hdr.size = sizeof(*r);
	r->hdr.cpu = bpf_get_smp_processor_id();
	r->hdr.pid = prev->tgid;
	r->hdr.tid = prev->pid;
	r->hdr.ts = bpf_ktime_get_boot_ns();
	r->next_tid = next->pid;
	r->next_pid = next->tgid;
	r->prev_state = switch_state(preempt, prev_state, prev);
	r->prev_prio = prev->prio;
	r->next_prio = next->prio;
	copy_comm(r->prev_comm, prev);
	copy_comm(r->next_comm, next);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline void emit_waking(struct task_struct *p, __u8 flags, __u8 irq)
{
	struct rec_waking *r;

	if (!gate_open() || !scoped(p->tgid))
		return;
	r = bpf_ringbuf_reserve(&sched_events, sizeof(*r), 0);
	if (!r) {
		count_drop(REC_SCHED_WAKING);
		return;
	}
	fill_hdr(&r->hdr, REC_SCHED_WAKING, sizeof(*r), bpf_get_current_pid_tgid());
	r->tid = p->pid;
	r->pid = p->tgid;
	r->target_cpu = p->thread_info.cpu;
	r->prio = p->prio;
	r->flags = flags;
	r->irq_flags = irq;
	copy_comm(r->comm, p);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	emit_waking(p, 0, irq_flags_idle());
	return 0;
}

/* sched_waking where the preempt count is readable (see irq_flags_pc); not
 * loaded unless asked for ("?"): its ksym fails the load elsewhere. */
SEC("?tp_btf/sched_waking")
int BPF_PROG(sched_waking_pc, struct task_struct *p)
{
	emit_waking(p, 0, irq_flags_pc());
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	/* wake_up_new_task: the parent, in task context. */
	emit_waking(p, WAKING_NEW, 0);
	return 0;
}

static __always_inline struct rec_task *task_rec(__u16 type, struct task_struct *p)
{
	struct rec_task *r = bpf_ringbuf_reserve(&sched_events, sizeof(*r), 0);

	if (!r) {
		count_drop(type);
		return NULL;
	}
	fill_hdr(&r->hdr, type, sizeof(*r), bpf_get_current_pid_tgid());
	r->tid = p->pid;
	r->pid = p->tgid;
	r->clone_flags = 0;
	r->prio = p->prio;
	r->group_dead = 0;
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	bpf_probe_read_kernel(r->comm, sizeof(r->comm), p->comm);
	__builtin_memset(r->newcomm, 0, sizeof(r->newcomm));
	return r;
}

/* Fires in copy_process for processes and threads alike, with the child's
 * tid, tgid and comm set: enough to place it in the process tree. */
SEC("tp_btf/task_newtask")
int BPF_PROG(sched_newtask, struct task_struct *p, __u64 clone_flags)
{
	struct rec_task *r;

	if (!scoped(bpf_get_current_pid_tgid() >> 32))
		return 0;
	r = task_rec(REC_SCHED_NEWTASK, p);
	if (!r)
		return 0;
	r->clone_flags = clone_flags;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* prctl(PR_SET_NAME), pthread_setname_np, and exec (the new program's
 * name): called before the comm changes, so p->comm is the old one. */
SEC("tp_btf/task_rename")
int BPF_PROG(sched_rename, struct task_struct *p, const char *comm)
{
	struct rec_task *r;

	if (!scoped(p->tgid))
		return 0;
	r = task_rec(REC_SCHED_RENAME, p);
	if (!r)
		return 0;
	bpf_probe_read_kernel_str(r->newcomm, sizeof(r->newcomm), comm);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_exit, struct task_struct *p, bool group_dead)
{
	struct rec_task *r;

	if (!scoped(p->tgid))
		return 0;
	r = task_rec(REC_SCHED_EXIT, p);
	if (!r)
		return 0;
	r->group_dead = group_dead;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}
