/* SPDX-License-Identifier: MIT */
/*
 * The USDT probes libcgbpf-nvtx.so fires (provider "cgbpf_nvtx"): the
 * contract between the injection library and the BPF programs that read
 * them. Every probe has a semaphore, so the library does no work for a
 * probe no tracer is attached to (libbpf's bpf_program__attach_usdt sets
 * the uprobe's ref_ctr_offset and the kernel counts the semaphore up in
 * every process mapping the library, also those started before attach).
 *
 * Arguments are integers or pointers. Every string pointer points to a
 * NUL-terminated UTF-8 string valid for the duration of the probe: wide
 * (wchar_t) messages are converted to UTF-8 on the stack first, only when
 * the probe is enabled, and truncated to CGBPF_NVTX_UTF8_MAX - 1 bytes.
 *
 * A domain handle (0 for the default domain) and a registered string
 * handle point to the domain's name and to the string, as UTF-8, for as
 * long as the domain lives, so a tracer attached after the application
 * created them can still read them through the handle.
 *
 * Event attributes arrive as (msg_kind, msg, color_type, color, category,
 * payload_type, payload): msg_kind is enum cgbpf_nvtx_msg_kind, msg the
 * string (NULL for CGBPF_NVTX_MSG_NONE); color_type 1 means color is ARGB,
 * 0 no color; payload_type is NVTX's nvtxPayloadType_t (0 none, 1 u64,
 * 2 i64, 3 double, 4 u32, 5 i32, 6 float) and payload its bits: 32-bit
 * kinds zero-extended, floating point as their IEEE bit pattern.
 *
 *   push(domain, msg_kind, msg, color_type, color, category, payload_type,
 *        payload)                              nvtxRangePush*, nvtxDomainRangePushEx
 *   pop(domain)                                nvtxRangePop, nvtxDomainRangePop
 *   start(domain, id, msg_kind, msg, color_type, color, category,
 *         payload_type, payload)               nvtxRangeStart*, nvtxDomainRangeStartEx
 *   end(domain, id)                            nvtxRangeEnd, nvtxDomainRangeEnd
 *   mark(domain, msg_kind, msg, color_type, color, category, payload_type,
 *        payload)                              nvtxMark*, nvtxDomainMarkEx
 *   name_thread(tid, name)                     nvtxNameOsThreadA/W
 *   name_category(domain, category, name)      nvtxNameCategoryA/W, nvtxDomainNameCategoryA/W
 *   domain_create(domain, name)                nvtxDomainCreateA/W
 *   domain_destroy(domain)                     nvtxDomainDestroy
 *   register_string(domain, handle, str)       nvtxDomainRegisterStringA/W
 *
 * Range ids (start/end) are unique in the process, never 0. pop and end
 * carry no message: the tracer pairs pop with the thread's innermost push
 * of the same domain and end with the start of the same id, which may be
 * on another thread.
 */
#ifndef CGBPF_NVTX_PROBES_H
#define CGBPF_NVTX_PROBES_H

#define CGBPF_NVTX_PROVIDER "cgbpf_nvtx"
#define CGBPF_NVTX_UTF8_MAX 512

enum cgbpf_nvtx_msg_kind {
	CGBPF_NVTX_MSG_NONE = 0,
	CGBPF_NVTX_MSG_ASCII = 1,
	CGBPF_NVTX_MSG_UNICODE = 2,	/* converted: msg is UTF-8 */
	CGBPF_NVTX_MSG_REGISTERED = 3,	/* msg is the string handle, UTF-8 */
};

#endif /* CGBPF_NVTX_PROBES_H */
