// SPDX-License-Identifier: MIT
/*
 * Ways to read a string argument whose page may not be in the process's
 * page table yet (bench/strread.c measures them against each other):
 *
 *   entry     bpf_probe_read_user_str at the entry, nothing else: what
 *             cgbpf did before; a cold page gives an empty string.
 *   retry     the same, and when it fails the pointer is kept in a hash
 *             map and read again by the return probe, after the function
 *             has read the string (what bpf/calls.bpf.c does).
 *   sleep     a sleepable entry probe (SEC "uprobe.s", Linux >= 6.0) that
 *             copies with bpf_copy_from_user_str (a kfunc, Linux >= 6.12),
 *             which may fault the page in.
 *   user      entry read; when it fails the record carries the address
 *             and the consumer reads it with process_vm_readv.
 *   bare      empty entry and return programs: the trap alone.
 *
 * Every way has a return probe, as every function cgbpf probes has one.
 * Records: struct sr_rec, one per call (never a second one at entry).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define SR_STR 64
#define SR_UNREAD 1	/* str empty: addr tells user space where to read */

struct sr_rec {
	__u64 addr;
	__u32 len;
	__u32 flags;
	char str[SR_STR];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} sr_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} sr_retry SEC(".maps");

extern int bpf_copy_from_user_str(void *dst, __u32 dst__sz, const void *unsafe_ptr__ign,
				  __u64 flags) __weak __ksym;

/* Reads into a stack buffer, then one ring copy (as bpf/calls.bpf.c). */
static __always_inline long read_str(struct sr_rec *r, const char *s)
{
	long n = bpf_probe_read_user_str(r->str, sizeof(r->str), s);

	r->addr = (__u64)s;
	r->flags = n > 0 ? 0 : SR_UNREAD;
	r->len = n > 0 ? n - 1 : 0;
	if (n <= 0)
		r->str[0] = 0;
	return n;
}

static __always_inline void out(struct sr_rec *r)
{
	bpf_ringbuf_output(&sr_ring, r, sizeof(*r), BPF_RB_NO_WAKEUP);
}

SEC("uprobe")
int BPF_KPROBE(sr_bare_enter, const char *s)
{
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(sr_bare_exit)
{
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(sr_entry_enter, const char *s)
{
	struct sr_rec r;

	read_str(&r, s);
	out(&r);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(sr_retry_enter, const char *s)
{
	struct sr_rec r;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	/* cgbpf sends the (empty, pending) record at once either way. */
	if (read_str(&r, s) <= 0) {
		__u64 a = (__u64)s;

		bpf_map_update_elem(&sr_retry, &tid, &a, BPF_ANY);
	}
	out(&r);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(sr_retry_exit)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *a = bpf_map_lookup_elem(&sr_retry, &tid);
	struct sr_rec r;

	if (!a)
		return 0;
	read_str(&r, (const char *)*a);
	out(&r);
	bpf_map_delete_elem(&sr_retry, &tid);
	return 0;
}

SEC("uprobe.s")
int BPF_KPROBE(sr_sleep_enter, const char *s)
{
	struct sr_rec r;
	int n = -1;

	if (bpf_copy_from_user_str)
		n = bpf_copy_from_user_str(r.str, sizeof(r.str), s, 0);
	r.addr = (__u64)s;
	r.flags = n > 0 ? 0 : SR_UNREAD;
	r.len = n > 0 ? n - 1 : 0;
	if (n <= 0)
		r.str[0] = 0;
	out(&r);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(sr_user_enter, const char *s)
{
	struct sr_rec r;

	read_str(&r, s);	/* a failure leaves SR_UNREAD and the address */
	out(&r);
	return 0;
}
