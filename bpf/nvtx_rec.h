/* SPDX-License-Identifier: MIT */
/* NVTX records (bpf/nvtx.bpf.c -> user/sources/nvtx/nvtx.c), one per USDT probe of
 * libcgbpf-nvtx.so (inject/cgbpf_nvtx_probes.h has the probes' contract). */
#ifndef CGBPF_NVTX_REC_H
#define CGBPF_NVTX_REC_H

#include "events.h"

enum nvtx_probe {
	NV_PUSH = 1,
	NV_POP,
	NV_START,
	NV_END,
	NV_MARK,
	NV_NAME_THREAD,
	NV_NAME_CATEGORY,
	NV_DOMAIN_CREATE,
	NV_DOMAIN_DESTROY,
	NV_REGISTER_STRING,
	/* Legacy NVTX v2 (libnvToolsExt uprobes): the id / handle a start or
	 * a domain creation returns comes in a second record at the return. */
	NV_STARTED,		/* id: what the thread's last NV_START (id 0) returned */
	NV_DOMAIN_CREATED,	/* domain: what the thread's last NV_DOMAIN_CREATE returned */
	NV__COUNT,
};

#define REC_NVTX_STR 256
/* msg_kind of a v2 wide message sent as raw UTF-32 code units. */
#define NV_MSG_UTF32 4

struct rec_nvtx {
	struct rec_hdr hdr;
	__u8 probe;		/* enum nvtx_probe */
	__u8 msg_kind;		/* enum cgbpf_nvtx_msg_kind */
	__u8 color_type;	/* 1: color is ARGB */
	__u8 payload_type;	/* nvtxPayloadType_t */
	__u32 color;
	__u64 domain;		/* domain handle, 0: the default domain */
	__u64 id;		/* range id; category id; thread id; string handle */
	__u64 category;
	__u64 payload;
	__u64 msg;		/* v2: the message's address when str could not hold it
				 * (wide, or its page not yet touched): user space reads it */
	__u16 len;		/* bytes in str, without the NUL */
	__u8 truncated;
	__u8 pad[5];
	char str[REC_NVTX_STR];	/* message / name; only hdr.size - offsetof(str) sent */
};

#endif
