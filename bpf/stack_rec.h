/* SPDX-License-Identifier: MIT */
/*
 * Stack records (REC_STACK_SAMPLE, REC_STACK_BT): a CPU sample of a target
 * thread, or the backtrace of an API call that ran longer than
 * --backtrace-threshold, sent just before that call's REC_CALL_EXIT.
 *
 * Both carry the user stack walked by frame pointers in the kernel
 * (bpf_get_stack), the user registers, and a bounded copy of the user
 * stack memory from sp upward, so user space can unwind code built
 * without frame pointers with DWARF CFI (perf --call-graph dwarf does the
 * same). Only hdr.size - offsetof(data) bytes of the copy are sent.
 */
#ifndef CGBPF_STACK_REC_H
#define CGBPF_STACK_REC_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "events.h"

#define STACK_USER_MAX 127	/* frame-pointer frames (perf's default max is 127) */
#define STACK_KERNEL_MAX 64
#define STACK_COPY_MAX 16384	/* ceiling of --stack-copy (hdr.size is 16 bits) */

enum {
	STACK_F_KERNEL_MODE = 1,	/* the sample interrupted kernel code */
	STACK_F_COPY_SHORT = 2,		/* the stack copy was cut to fit the stack's mapping */
};

struct rec_stack {
	struct rec_hdr hdr;
	__u16 nuser;		/* entries of user[] filled */
	__u16 nkernel;		/* entries of kernel[] filled */
	__u16 copy_len;		/* bytes of data[] */
	__u8 flags;
	__u8 lib;		/* REC_STACK_BT: the call's library and function */
	__u16 func;
	__u16 pad[3];
	__u64 ip, sp, bp;	/* user registers */
	__u64 user[STACK_USER_MAX];
	__u64 kernel[STACK_KERNEL_MAX];
	__u8 data[STACK_COPY_MAX];
};

#endif
