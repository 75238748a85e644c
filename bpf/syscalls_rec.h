/* SPDX-License-Identifier: MIT */
/*
 * Syscall records (bpf/syscalls.bpf.c -> user/sources/syscalls/syscalls.c): one record per
 * syscall of a target thread that lasted at least the threshold, sent at
 * its exit. Fixed-width types, explicit padding, no pointers.
 */
#ifndef CGBPF_SYSCALLS_REC_H
#define CGBPF_SYSCALLS_REC_H

#include "events.h"

#define SYS_PATH_PARTS 3
#define SYS_PATH_PART 24

/* Where a file descriptor points, read in the kernel at the syscall's exit. */
struct sys_fd {
	__u64 ino;
	__u32 magic;		/* super_block.s_magic: pipefs, sockfs, ... */
	__u8 nparts;		/* path components in part[], last first */
	__u8 rooted;		/* the walk reached the root: the path is complete */
	__u8 pseudo;		/* a dentry of a pseudo filesystem (pipe, socket) */
	__u8 found;		/* the fd was open */
	char part[SYS_PATH_PARTS][SYS_PATH_PART];	/* NUL-terminated, maybe cut */
};

/*
 * REC_SYSCALL: hdr.ts is the entry time. hdr.size is offsetof(fd) for
 * most syscalls and sizeof the whole record for ioctl, whose fd is
 * described.
 */
struct rec_syscall {
	struct rec_hdr hdr;
	__u64 dur;		/* exit - entry, ns */
	__s64 ret;
	__u64 args[3];		/* the first three arguments */
	__u32 nr;		/* x86_64 syscall number */
	__u32 pad;
	struct sys_fd fd;	/* ioctl only */
};

#define REC_SYSCALL_BASE_SIZE ((__u16)__builtin_offsetof(struct rec_syscall, fd))

#endif
