/* SPDX-License-Identifier: MIT */
/*
 * `cgbpf monitor`: per (process, function) aggregates kept in BPF maps, so
 * the default monitoring mode sends no record per call to user space. The
 * entry time comes from the call_ts stack the return probe pops anyway
 * (calls.bpf.c); this file only folds a finished call into its bucket.
 */
#ifndef CGBPF_AGG_BPF_H
#define CGBPF_AGG_BPF_H

#include "common.bpf.h"
#include "agg.h"

/* Aggregate calls into `aggs` (monitor); off for record. */
const volatile __u8 aggregate __weak = 0;
/* Emit per-call records into `events` (record; monitor's flight recorder). */
const volatile __u8 emit_records __weak = 1;
/* Monitor without a flight recorder: NCCL calls still make records, for
 * the per-communicator metrics and the hang watch (a few per step). */
const volatile __u8 nccl_records __weak = 0;
/* Calls flagged AGG_F_SLOW lasting at least this make a trigger record. */
const volatile __u64 trigger_slow_ns __weak = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, AGG_MAX_KEYS);
	__type(key, struct agg_key);
	__type(value, struct agg_val);
} aggs SEC(".maps") __weak;

/* How to count bytes and what triggers a dump, per lib * 256 + func. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LIB__COUNT * 256);
	__type(key, __u32);
	__type(value, struct agg_cfg);
} agg_cfgs SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AGG_MAX_ALLOCS);
	__type(key, struct agg_alloc_key);
	__type(value, __u64);
} gpu_allocs SEC(".maps") __weak;

/* Bytes of device memory each process holds (allocated while watched). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __s64);
} gpu_mem SEC(".maps") __weak;

/* NCCL communicators seen created: handle -> number of ranks. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} nccl_comms SEC(".maps") __weak;

/* Bytes of one element of an NCCL datatype (ncclDataType_t), 0: unknown. */
static __always_inline __u64 nccl_dtype_size(__u64 t)
{
	switch (t) {
	case 0: case 1: case 10: case 11:	/* int8, uint8, fp8 e4m3, fp8 e5m2 */
		return 1;
	case 6: case 9:				/* float16, bfloat16 */
		return 2;
	case 2: case 3: case 7:			/* int32, uint32, float32 */
		return 4;
	case 4: case 5: case 8:			/* int64, uint64, float64 */
		return 8;
	}
	return 0;
}

static __always_inline const struct agg_cfg *agg_cfg_of(__u64 cookie)
{
	__u32 i = CK_LIB(cookie) * 256 + (CK_FUNC(cookie) & 0xff);

	if (CK_FUNC(cookie) > 0xff)
		return 0;
	return bpf_map_lookup_elem(&agg_cfgs, &i);
}

/* Argument i (1-based) of a0..a5; constant offsets only, as the verifier
 * wants for stack reads. */
static __always_inline __u64 arg_n(const __u64 a[6], __u8 i)
{
	switch (i) {
	case 1: return a[0];
	case 2: return a[1];
	case 3: return a[2];
	case 4: return a[3];
	case 5: return a[4];
	case 6: return a[5];
	}
	return 0;
}

/* Bytes a call moves, from its entry arguments (a0..a5). */
static __always_inline __u64 agg_bytes(__u64 cookie, const __u64 a[6])
{
	const struct agg_cfg *c = agg_cfg_of(cookie);
	__u64 n;

	if (!c || !c->bytes_arg)
		return 0;
	n = arg_n(a, c->bytes_arg);
	if (c->dtype_arg)
		return n * nccl_dtype_size(arg_n(a, c->dtype_arg));
	return n * (c->mult ? c->mult : 1);
}

static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 r = 0;

	/* Branch-free-ish: the verifier wants bounded work. */
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r < AGG_BUCKETS ? r : AGG_BUCKETS - 1;
}

/* Folds one finished event into its (pid, lib, func) aggregate; returns
 * whether it should trigger a flight-recorder dump (c may be NULL). */
static __always_inline int agg_fold(__u32 pid, __u8 lib, __u16 func, __u8 nranks,
				    const struct agg_cfg *c, __u64 dur, __u64 bytes, __s64 ret)
{
	struct agg_key k = { .pid = pid, .func = func, .lib = lib, .nranks = nranks };
	struct agg_val *v = bpf_map_lookup_elem(&aggs, &k);
	__u32 b = log2_bucket(dur);
	int err = c && (c->flags & AGG_F_ERRORS) && ret != 0 && ret != c->ok_ret2;

	if (!v) {
		struct agg_val zero = {};

		bpf_map_update_elem(&aggs, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&aggs, &k);
		if (!v)
			return 0;
	}
	/* Per-CPU values: plain adds, user space sums the CPUs. */
	v->count++;
	v->total_ns += dur;
	v->bytes += bytes;
	if (err)
		v->errors++;
	if (b < AGG_BUCKETS)
		v->hist[b]++;
	return err || (c && (c->flags & AGG_F_SLOW) && trigger_slow_ns && dur >= trigger_slow_ns);
}

/* The pointer argument an allocation or a free is about (0: none). */
static __always_inline __u64 agg_ptr_arg(__u64 cookie, const __u64 a[6])
{
	const struct agg_cfg *c = agg_cfg_of(cookie);

	if (!c || !(c->flags & (AGG_F_ALLOC | AGG_F_FREE | AGG_F_COMM_INIT)))
		return 0;
	return arg_n(a, c->ptr_arg);
}

/* At a successful return: the memory an allocation added or a free took
 * back. ptr is the out pointer's address (alloc) or the pointer (free). */
static __always_inline void agg_memory(__u32 pid, __u64 cookie, __u64 ptr, __u64 bytes)
{
	const struct agg_cfg *c = agg_cfg_of(cookie);
	struct agg_alloc_key k = { .pid = pid };
	__s64 delta, *held;
	__u64 *size;

	if (!c || !ptr)
		return;
	if (c->flags & AGG_F_ALLOC) {
		if (bpf_probe_read_user(&k.ptr, sizeof(k.ptr), (void *)ptr) || !k.ptr)
			return;
		bpf_map_update_elem(&gpu_allocs, &k, &bytes, BPF_ANY);
		delta = bytes;
	} else if (c->flags & AGG_F_FREE) {
		k.ptr = ptr;
		size = bpf_map_lookup_elem(&gpu_allocs, &k);
		/* Allocated before cgbpf watched: its size is not known. */
		if (!size)
			return;
		delta = -(__s64)*size;
		bpf_map_delete_elem(&gpu_allocs, &k);
	} else {
		return;
	}
	held = bpf_map_lookup_elem(&gpu_mem, &pid);
	if (held) {
		__sync_fetch_and_add(held, delta);
	} else if (delta > 0) {
		bpf_map_update_elem(&gpu_mem, &pid, &delta, BPF_NOEXIST);
	}
}

/* A finished API call (its attach cookie says which). */
static __always_inline int agg_add(__u32 pid, __u64 cookie, __u8 nranks, __u64 dur, __u64 bytes,
				   __s64 ret)
{
	return agg_fold(pid, CK_LIB(cookie), CK_FUNC(cookie), nranks, agg_cfg_of(cookie), dur,
			bytes, ret);
}

/* At entry: the size of the communicator a collective runs on (0:
 * unknown, e.g. created before cgbpf watched). sp is the stack pointer. */
static __always_inline __u8 agg_nranks(__u64 cookie, const __u64 a[6], __u64 sp)
{
	const struct agg_cfg *c = agg_cfg_of(cookie);
	__u64 comm = 0;
	__u32 *n;

	if (!c || !(c->flags & AGG_F_COMM))
		return 0;
	if (c->comm_arg == 7)
		bpf_probe_read_user(&comm, sizeof(comm), (void *)(sp + 8));
	else
		comm = arg_n(a, c->comm_arg);
	n = comm ? bpf_map_lookup_elem(&nccl_comms, &comm) : 0;
	return n ? (*n > 255 ? 255 : *n) : 0;
}

/* At a successful ncclCommInitRank*: remember the communicator's size. */
static __always_inline void agg_comm_init(__u64 cookie, __u64 out_addr, __u64 nranks)
{
	const struct agg_cfg *c = agg_cfg_of(cookie);
	__u64 comm = 0;
	__u32 n = nranks;

	if (!c || !(c->flags & AGG_F_COMM_INIT) || !out_addr ||
	    bpf_probe_read_user(&comm, sizeof(comm), (void *)out_addr) || !comm)
		return;
	bpf_map_update_elem(&nccl_comms, &comm, &n, BPF_ANY);
}

#endif
