// SPDX-License-Identifier: MIT
/*
 * Process life of the targets: forks (children of a target become targets
 * in the kernel, before they can run a single instruction), execs, exits,
 * and executable file mappings of the libraries cgbpf probes. Files user
 * space found in advance (user/lib/elf/ldpath.c) carry their probes before they
 * are mapped; a mapping reported here of a file nobody predicted (a
 * container's private copy, a dlopen by absolute path) is probed at once.
 * Nothing here signals or stops a process.
 */
#include "common.bpf.h"
#include "capture.bpf.h"

#define NR_mmap 9
#define PROT_EXEC_BIT 4
#define MAP_ANON_BIT 0x20

#define WATCH_MAX 8
#define WATCH_LEN 24
#define FILTER_MAX 8

/* Library file name prefixes to watch ("libcuda.so"), set by user space. */
const volatile char watch_names[WATCH_MAX][WATCH_LEN] = {};
const volatile __u32 watch_count = 0;
/*
 * System-wide capture (record -a): a process becomes a target when it maps
 * a watched library (and passes the --comm / --cgroup filters), decided
 * here, before its mmap returns, so none of its calls can run untraced.
 * Filters are ANDed; each list matches when any of its entries does.
 */
const volatile __u8 target_on_map = 0;
const volatile __u32 filter_ncomm = 0;
const volatile char filter_comm[FILTER_MAX][16] = {};
const volatile __u32 filter_ncgroup = 0;

/* The cgroups of --cgroup, as directory fds: bpf_current_task_under_cgroup
 * matches a task in one of them or below. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, FILTER_MAX);
	__type(key, __u32);
	__type(value, __u32);
} filter_cgroups SEC(".maps");

static __always_inline int comm_matches(const char *comm)
{
	for (int i = 0; i < FILTER_MAX; i++) {
		int j;

		if (i >= filter_ncomm)
			return 0;
		for (j = 0; j < 16; j++) {
			if (comm[j] != filter_comm[i][j])
				break;
			if (!comm[j])
				return 1;
		}
		if (j == 16)
			return 1;
	}
	return 0;
}

/* Whether the current task's process passes the -a filters: its main
 * thread's comm (other threads name themselves), its cgroup. */
static __always_inline int passes_filters(struct task_struct *t)
{
	char comm[16];

	if (filter_ncomm) {
		if (bpf_probe_read_kernel_str(comm, sizeof(comm), t->group_leader->comm) < 0 ||
		    !comm_matches(comm))
			return 0;
	}
	if (filter_ncgroup) {
		int in = 0;

		for (__u32 i = 0; i < FILTER_MAX; i++) {
			if (i >= filter_ncgroup)
				break;
			if (bpf_current_task_under_cgroup(&filter_cgroups, i) == 1) {
				in = 1;
				break;
			}
		}
		if (!in)
			return 0;
	}
	return 1;
}

static __always_inline void fill_proc(struct rec_proc *r, __u16 type, __u32 size,
				      struct task_struct *t, __u32 other)
{
	r->hdr.type = type;
	r->hdr.size = size;
	r->hdr.cpu = bpf_get_smp_processor_id();
	r->hdr.pid = BPF_CORE_READ(t, tgid);
	r->hdr.tid = BPF_CORE_READ(t, pid);
	r->hdr.ts = bpf_ktime_get_boot_ns();
	r->other = other;
	r->flags = 0;
	BPF_CORE_READ_STR_INTO(&r->comm, t, comm);
}

static __always_inline void emit_proc_flags(__u16 type, struct task_struct *t, __u32 other,
					    __u32 flags)
{
	struct rec_proc *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_drop(type);
		return;
	}
	fill_proc(r, type, sizeof(*r), t, other);
	r->flags = flags;
	/* Process life is rare and user space waits on it: wake it now. */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

static __always_inline void emit_proc(__u16 type, struct task_struct *t, __u32 other)
{
	emit_proc_flags(type, t, other, 0);
}

/* REC_EXIT_* of an exiting process (bpf/events.h): whether it ever hit a
 * uprobe, which tells a forked child that called the API before its
 * probes came from one that did not. */
static __always_inline __u32 exit_flags(struct task_struct *p)
{
	struct mm_struct *mm = BPF_CORE_READ(p, mm);

	if (!mm || !bpf_core_field_exists(mm->uprobes_state))
		return 0;
	return REC_EXIT_MM_READ |
	       (BPF_CORE_READ(mm, uprobes_state.xol_area) ? REC_EXIT_UPROBE_HIT : 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;

	/* New threads share the tgid and are covered already. */
	if (ptgid == ctgid || !is_target(ptgid))
		return 0;
	if (follow_children && !trace_all) {
		struct rec_proc *c = bpf_ringbuf_reserve(&ctl, sizeof(*c), 0);

		set_target(ctgid, 1);
		/* The fast copy (see ctl); its loss only costs time. */
		if (c) {
			fill_proc(c, REC_PROC_FORK, sizeof(*c), parent, ctgid);
			bpf_ringbuf_submit(c, BPF_RB_FORCE_WAKEUP);
		}
	}
	emit_proc(REC_PROC_FORK, parent, ctgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *p, pid_t old_pid)
{
	struct rec_exec *r;
	__u64 start, end, len;

	/* -a: any process that passes the filters may load a traced
	 * library next; user space probes what its loader will find. */
	if (!is_target(p->tgid) &&
	    (!target_on_map || p->tgid == self_tgid || !passes_filters(p)))
		return 0;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(REC_PROC_EXEC);
		return 0;
	}
	fill_proc(&r->p, REC_PROC_EXEC, sizeof(*r), p, old_pid);
	/* The task is current and runs its new program's mm: the arguments
	 * the exec just copied onto its stack. */
	start = BPF_CORE_READ(p, mm, arg_start);
	end = BPF_CORE_READ(p, mm, arg_end);
	len = end > start ? end - start : 0;
	r->args_cut = len > REC_EXEC_ARGS;
	if (len > REC_EXEC_ARGS)
		len = REC_EXEC_ARGS;
	barrier_var(len);
	if (len && len <= REC_EXEC_ARGS && bpf_probe_read_user(r->args, len, (void *)start))
		len = 0;
	r->args_len = len;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (!is_target(tgid))
		return 0;
	/* signal->live drops to zero in the last thread of the group to exit. */
	if (BPF_CORE_READ(p, signal, live.counter) == 0) {
		emit_proc_flags(REC_PROC_EXIT, p, p->exit_code, exit_flags(p));
		if (!trace_all)
			set_target(tgid, 0);
		/* Inside its cuProfilerStart window: its count in the gate
		 * goes with it (the window ends for user space too). */
		if (capture_gated)
			gate_profiler(tgid, false);
	} else {
		emit_proc(REC_THREAD_EXIT, p, p->exit_code);
	}
	return 0;
}

static __always_inline int name_watched(const char *name)
{
	for (int i = 0; i < WATCH_MAX; i++) {
		int j;

		if (i >= watch_count)
			return 0;
		for (j = 0; j < WATCH_LEN; j++) {
			char w = watch_names[i][j];

			if (w == 0)
				return 1;
			if (name[j] != w)
				break;
		}
	}
	return 0;
}

/*
 * The mmap watch: an executable mapping of a watched file by a target (or,
 * with -a, by any process that passes the filters). regs are the mmap
 * syscall's; addr is its result where known (the sys_exit watch), else 0.
 */
static __always_inline int watch_mmap(struct pt_regs *regs, long addr)
{
	__u64 pid_tgid;
	struct task_struct *t;
	struct file **fds;
	struct file *f = NULL;
	struct rec_mmap *r;
	int fd;

	if (!(regs->dx & PROT_EXEC_BIT) || (regs->r10 & MAP_ANON_BIT))
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!target_on_map && !is_target(pid_tgid >> 32))
		return 0;
	fd = (int)regs->r8;
	if (fd < 0)
		return 0;
	t = bpf_get_current_task_btf();
	fds = BPF_CORE_READ(t, files, fdt, fd);
	if (!fds || bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(REC_MMAP);
		return 0;
	}
	fill_hdr(&r->hdr, REC_MMAP, sizeof(*r), pid_tgid);
	r->addr = addr;
	r->ino = BPF_CORE_READ(f, f_inode, i_ino);
	r->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	r->pad = 0;
	r->new_target = 0;
	r->pad2 = 0;
	if (bpf_probe_read_kernel_str(r->name, sizeof(r->name),
				      BPF_CORE_READ(f, f_path.dentry, d_name.name)) < 0)
		r->name[0] = 0;
	r->watched = name_watched(r->name);
	if (!r->watched) {
		bpf_ringbuf_discard(r, 0);
		return 0;
	}
	if (target_on_map && !is_target(pid_tgid >> 32)) {
		t = bpf_get_current_task_btf();
		if ((__u32)(pid_tgid >> 32) == self_tgid || !passes_filters(t)) {
			bpf_ringbuf_discard(r, 0);
			return 0;
		}
		set_target(pid_tgid >> 32, 1);
		r->new_target = 1;
	}
	/* The fast copy (see ctl): the file is probed ahead of the events
	 * ring's backlog; its loss only costs time. */
	bpf_ringbuf_output(&ctl, r, sizeof(*r), BPF_RB_FORCE_WAKEUP);
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * Two ways to see the mmap. The sys_exit tracepoint, on every kernel: but
 * an attached syscall tracepoint sends every syscall of every task through
 * the kernel's syscall-tracing slow path, and the return of every traced
 * call is a syscall (sys_uretprobe), which costs each traced call ~100 ns
 * (docs/performance.md). And mmap_lock_released, where its prototype is
 * (mm, write) (user space checks the kernel's BTF): mmap takes the mm's
 * lock for writing, and the tracepoint fires as the mapping is complete,
 * before the syscall returns. It costs other syscalls and traced calls
 * nothing and each release of an mm's lock about 100 ns (an mmap+munmap
 * pair 2598.8 -> 2800.7 ns, bench/syscalls.sh), and sees the mmap a little
 * earlier.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_mmap, struct pt_regs *regs, long ret)
{
	if (regs->orig_ax != NR_mmap || (ret < 0 && ret > -4096))
		return 0;
	return watch_mmap(regs, ret);
}

#define ERRNO_ENOSYS 38
#define PF_KTHREAD 0x00200000	/* include/linux/sched.h */

SEC("tp_btf/mmap_lock_released")
int BPF_PROG(mmap_lock_mmap, struct mm_struct *mm, bool write)
{
	struct task_struct *t;
	struct pt_regs *regs;

	if (!write)
		return 0;
	t = bpf_get_current_task_btf();
	/* Another task's mm (khugepaged, a /proc reader): not a mapping
	 * this task made. */
	if (t->mm != mm || (t->flags & PF_KTHREAD))
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	/* Inside the mmap syscall: orig_ax is its number and ax holds
	 * -ENOSYS until it returns (a fault's frame has neither). */
	if (regs->orig_ax != NR_mmap || regs->ax != (unsigned long)-ERRNO_ENOSYS)
		return 0;
	return watch_mmap(regs, 0);
}
