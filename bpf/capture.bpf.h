/* SPDX-License-Identifier: MIT */
/*
 * Capture windows (--capture-range, --delay; docs/design.md, "Capture
 * windows"): probes stay attached all the time and every program checks
 * the gate first, so that outside a window a record costs the trap and a
 * lookup, not a ring reservation (the API functions that wait for the
 * gate have programs of their own that test it before anything else:
 * bpf/calls.bpf.c, enter_gated). Records that keep user space's model
 * right inside later windows (process life, allocations, kernel names,
 * streams, communicators, NVTX registrations, the triggers) pass anyway:
 * their cookie has CK_PASS (bpf/events.h). User space decides exactly
 * what each file holds; the gate only has to be open at least whenever a
 * window may be (cuProfilerStart's entry to cuProfilerStop's return, and
 * while an NVTX range of the capture name, or one whose name BPF could not
 * read, is open on some thread).
 */
#ifndef CGBPF_CAPTURE_BPF_H
#define CGBPF_CAPTURE_BPF_H

#include "capture_rec.h"

/* Knobs: CAPTURE_K_* (capture_rec.h); the NVTX range name. */
const volatile __u8 capture_gated __weak = 0;	/* records wait for the gate */
const volatile __u8 capture_kind __weak = 0;
const volatile __u32 capture_name_len __weak = 0;
const volatile char capture_name[CAPTURE_NAME_MAX] __weak = {};

/* gate.open > 0: inside a (possible) window. An NVTX capture counts the
 * matching ranges open; the profiler API counts the processes between a
 * start and a stop (gate_profiler); user space sets it for --delay alone. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct capture_gate);
} gate SEC(".maps") __weak;

static __always_inline bool gate_open(void)
{
	__u32 zero = 0;
	struct capture_gate *g;

	if (!capture_gated)
		return true;
	g = bpf_map_lookup_elem(&gate, &zero);
	return g && *(volatile __s64 *)&g->open > 0;
}

static __always_inline void gate_set(__s64 v)
{
	__u32 zero = 0;
	struct capture_gate *g = bpf_map_lookup_elem(&gate, &zero);

	if (g)
		*(volatile __s64 *)&g->open = v;
}

static __always_inline void gate_add(__s64 v)
{
	__u32 zero = 0;
	struct capture_gate *g = bpf_map_lookup_elem(&gate, &zero);

	/* A lost pop must not leave it below zero for good. */
	if (g && __sync_fetch_and_add(&g->open, v) + v < 0)
		*(volatile __s64 *)&g->open = 0;
}

/* Processes between cuProfilerStart and cuProfilerStop: each counts once
 * in the gate however often it starts (CUDA allows repeated starts), and
 * a stop closes its own window only, not another process's. A process
 * that exits inside its window is counted out at its exit
 * (bpf/proc.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} gate_procs SEC(".maps") __weak;

static __always_inline void gate_profiler(__u32 tgid, bool on)
{
	__u8 one = 1;

	if (on) {
		/* BPF_NOEXIST: only the process's first start counts. */
		if (!bpf_map_update_elem(&gate_procs, &tgid, &one, BPF_NOEXIST))
			gate_add(1);
	} else if (!bpf_map_delete_elem(&gate_procs, &tgid)) {
		gate_add(-1);
	}
}

#endif
