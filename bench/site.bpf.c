// SPDX-License-Identifier: MIT
/*
 * An empty uprobe program for bench/site.c: what a probe on a site costs
 * with no work in it, by the first instruction of the probed function.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("uprobe")
int BPF_KPROBE(site_hit)
{
	return 0;
}
