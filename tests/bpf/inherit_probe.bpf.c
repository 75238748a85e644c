// SPDX-License-Identifier: MIT
/* tests/bpf/inherit_probe.c's program: counts the hits of one uprobe per
 * process (tgid). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

SEC("uprobe")
int hit(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 one = 1, *v = bpf_map_lookup_elem(&hits, &tgid);

	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&hits, &tgid, &one, BPF_NOEXIST);
	return 0;
}
