// SPDX-License-Identifier: MIT
/*
 * GPU activity from cgbpf's injection library (inject/gpu.c): a uprobe on
 * its probe site cgbpf_gpu_batch(batch, len) copies the batch of entries
 * (bpf/gpu_rec.h) into the events ring as it is. The probe's presence is
 * also the library's signal to collect. user/sources/gpu/gpusrc.c attaches it per
 * process; the second site, cgbpf_gpu_flush, is probed at stop to ask for
 * a flush and needs no work here.
 */
#include "common.bpf.h"
#include "gpu_rec.h"

struct gpu_copy {
	__u64 busy;		/* scratch_take() */
	struct rec_hdr hdr;
	__u8 data[GPU_BATCH_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gpu_copy);
} gpu_scratch SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(gpu_batch, const void *batch, __u32 len)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	struct gpu_copy *r;
	__u64 n;

	if (!is_target(pid_tgid >> 32))
		return 0;
	r = bpf_map_lookup_elem(&gpu_scratch, &zero);
	/* A batch larger than the contract allows is the library's bug:
	 * counted as lost, never cut. */
	if (!r || len < sizeof(struct gpu_ent) || len > GPU_BATCH_MAX || !scratch_take(&r->busy)) {
		count_drop(REC_GPU_BATCH);
		return 0;
	}
	/* len <= GPU_BATCH_MAX (a power of two) already: the mask changes
	 * nothing but tells the verifier the bound of the register it sees. */
	n = len;
	barrier_var(n);
	n &= 2 * GPU_BATCH_MAX - 1;
	if (n > GPU_BATCH_MAX || bpf_probe_read_user(r->data, n, batch)) {
		count_drop(REC_GPU_BATCH);
	} else {
		fill_hdr(&r->hdr, REC_GPU_BATCH, sizeof(r->hdr) + n, pid_tgid);
		/* Batches are big and few: wake the consumer as for any record. */
		if (bpf_ringbuf_output(&events, &r->hdr, sizeof(r->hdr) + n, wake_flag()))
			count_drop(REC_GPU_BATCH);
	}
	scratch_give(&r->busy);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(gpu_flush)
{
	return 0;
}
