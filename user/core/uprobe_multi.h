/* SPDX-License-Identifier: MIT */
/*
 * uprobe_multi links (Linux >= 6.6) without libbpf support for them
 * (Debian's libbpf 1.1 has none): the kernel check and the raw
 * BPF_LINK_CREATE. Header-only, so that bench/bare.c shares it with
 * user/core/attach.c without linking cgbpf's objects.
 */
#ifndef CGBPF_UPROBE_MULTI_H
#define CGBPF_UPROBE_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/btf.h>

/* Not in libbpf 1.1's headers; values from the kernel UAPI. */
#define ATTACH_TRACE_UPROBE_MULTI 48
#define UPROBE_MULTI_RETURN 1

/* The link_create part of union bpf_attr for uprobe_multi (Linux 6.6). */
struct uprobe_multi_attr {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags;
	uint32_t pid;
	uint32_t pad[9];	/* zeroed tail up to the size of the kernel's view */
};

/* The link type exists on kernels whose BTF (vmlinux) has its struct. */
static inline bool uprobe_multi__in(const struct btf *vmlinux)
{
	return vmlinux &&
	       btf__find_by_name_kind(vmlinux, "bpf_uprobe_multi_link", BTF_KIND_STRUCT) > 0;
}

static inline bool uprobe_multi__supported(void)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	bool ok = uprobe_multi__in(vmlinux);

	btf__free(vmlinux);
	return ok;
}

/* Attaches prog_fd at n offsets of path (return probes when ret), in
 * process pid only (0: every process that maps path); the link's fd, or
 * -1 with errno set. */
static inline int uprobe_multi__link(int prog_fd, const char *path, const uint64_t *offs,
				     const uint64_t *cookies, size_t n, bool ret, int pid)
{
	struct uprobe_multi_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.attach_type = ATTACH_TRACE_UPROBE_MULTI;
	attr.path = (uintptr_t)path;
	attr.offsets = (uintptr_t)offs;
	attr.cookies = (uintptr_t)cookies;
	attr.cnt = n;
	attr.multi_flags = ret ? UPROBE_MULTI_RETURN : 0;
	attr.pid = pid;
	return syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
}

#endif
