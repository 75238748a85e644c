// SPDX-License-Identifier: MIT
/*
 * Syscalls of target threads that last at least a threshold: the entry
 * keeps (time, number, three arguments) in task-local storage; the exit
 * sends one record only when the call was long enough, so short syscalls
 * cost no ring traffic. Attached only when --syscall-threshold is not off:
 * an attached sys_enter/sys_exit program sends every syscall of every task
 * through the kernel's syscall-tracing slow path.
 */
#include "common.bpf.h"
#include "agg.bpf.h"
#include "syscalls_rec.h"

#define NR_ioctl 16
#define NR_rt_sigreturn 15
/* Syscalls the kernel's uprobe machinery makes on the traced thread's
 * behalf: the uretprobe trampoline's return (every traced API return) and
 * the optimized uprobe's. Not the program's own work. */
#define NR_uretprobe 335
#define NR_uprobe 336

const volatile __u64 syscall_threshold_ns = 1000;

struct sys_start {
	__u64 ts;		/* 0: no syscall in flight */
	__u64 args[3];
	__u32 nr;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sys_start);
} sys_start SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(syscall_enter, struct pt_regs *regs, long id)
{
	struct sys_start *s;

	/* rt_sigreturn, like sys_uretprobe, leaves orig_ax -1 for the exit
	 * (the kernel's signal return, not the program's work): skipped at
	 * both ends, so that the exit of every traced call returns at once. */
	if (id == NR_uretprobe || id == NR_uprobe || id == NR_rt_sigreturn)
		return 0;
	if (!is_target(bpf_get_current_pid_tgid() >> 32) || !gate_open())
		return 0;
	s = bpf_task_storage_get(&sys_start, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return 0;
	s->nr = id;
	s->args[0] = regs->di;
	s->args[1] = regs->si;
	s->args[2] = regs->dx;
	s->ts = bpf_ktime_get_boot_ns();
	return 0;
}

/*
 * Describes the file behind fd: up to SYS_PATH_PARTS path components from
 * the dentry upwards, crossing mount points like d_path() does (bpf_d_path
 * is not allowed in tracepoints). Read at the exit: only recorded calls pay
 * for the walk; the file is the one the call used unless another thread
 * replaced the fd while the call ran.
 */
static __always_inline void describe_fd(struct sys_fd *out, int fd)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct file **fds = BPF_CORE_READ(t, files, fdt, fd);
	unsigned int max = BPF_CORE_READ(t, files, fdt, max_fds);
	struct file *f = NULL;
	struct dentry *d, *parent, *mroot;
	struct mount *mnt, *mparent;
	struct vfsmount *vm;
	int n = 0;

	if (fd < 0 || (unsigned int)fd >= max || !fds ||
	    bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return;
	out->found = 1;
	out->ino = BPF_CORE_READ(f, f_inode, i_ino);
	out->magic = BPF_CORE_READ(f, f_inode, i_sb, s_magic);
	d = BPF_CORE_READ(f, f_path.dentry);
	vm = BPF_CORE_READ(f, f_path.mnt);
	mnt = (void *)((char *)vm - bpf_core_field_offset(struct mount, mnt));
	for (int i = 0; i < SYS_PATH_PARTS + 4; i++) {
		mroot = BPF_CORE_READ(vm, mnt_root);
		if (d == mroot) {
			mparent = BPF_CORE_READ(mnt, mnt_parent);
			if (mparent == mnt) {
				out->rooted = 1;
				break;
			}
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = mparent;
			vm = (void *)((char *)mnt + bpf_core_field_offset(struct mount, mnt));
			continue;
		}
		if (n >= SYS_PATH_PARTS)
			break;
		if (bpf_probe_read_kernel_str(out->part[n], SYS_PATH_PART,
					      BPF_CORE_READ(d, d_name.name)) < 0)
			out->part[n][0] = 0;
		n++;
		parent = BPF_CORE_READ(d, d_parent);
		if (parent == d) {
			/* A pseudo filesystem's dentry (pipe, socket, anon inode). */
			out->pseudo = 1;
			break;
		}
		d = parent;
	}
	out->nparts = n;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(syscall_exit, struct pt_regs *regs, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now, ts;
	struct sys_start *s;
	struct rec_syscall *r;
	__u32 nr;

	/* The return of every traced call: sys_uretprobe sets orig_ax to -1
	 * (6.18; the number itself is checked too), as rt_sigreturn does.
	 * syscall_enter stored nothing for either: nothing to look up. */
	if ((long)regs->orig_ax == -1 || regs->orig_ax == NR_uretprobe ||
	    regs->orig_ax == NR_uprobe)
		return 0;
	if (!is_target(pid_tgid >> 32))
		return 0;
	s = bpf_task_storage_get(&sys_start, bpf_get_current_task_btf(), 0, 0);
	if (!s || !s->ts)
		return 0;
	ts = s->ts;
	s->ts = 0;
	now = bpf_ktime_get_boot_ns();
	if (now - ts < syscall_threshold_ns)
		return 0;
	nr = s->nr;
	/* monitor: syscall wait time per process and syscall, no record. */
	if (aggregate) {
		agg_fold(pid_tgid >> 32, AGG_LIB_SYSCALL, nr, 0, 0, now - ts, 0, 0);
		if (!emit_records)
			return 0;
	}
	if (nr == NR_ioctl) {
		r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
		if (!r) {
			count_drop(REC_SYSCALL);
			return 0;
		}
		__builtin_memset(&r->fd, 0, sizeof(r->fd));
		describe_fd(&r->fd, (int)s->args[0]);
		fill_hdr(&r->hdr, REC_SYSCALL, sizeof(*r), pid_tgid);
	} else {
		r = bpf_ringbuf_reserve(&events, REC_SYSCALL_BASE_SIZE, 0);
		if (!r) {
			count_drop(REC_SYSCALL);
			return 0;
		}
		fill_hdr(&r->hdr, REC_SYSCALL, REC_SYSCALL_BASE_SIZE, pid_tgid);
	}
	r->hdr.ts = ts;
	r->dur = now - ts;
	r->ret = ret;
	r->args[0] = s->args[0];
	r->args[1] = s->args[1];
	r->args[2] = s->args[2];
	r->nr = nr;
	r->pad = 0;
	bpf_ringbuf_submit(r, wake_flag());
	return 0;
}
