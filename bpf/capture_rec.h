/* SPDX-License-Identifier: MIT */
/* Capture windows: what BPF and user space share (bpf/capture.bpf.h). */
#ifndef CGBPF_CAPTURE_REC_H
#define CGBPF_CAPTURE_REC_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum capture_kind {
	CAPTURE_K_NONE = 0,	/* --delay alone: user space opens the gate */
	CAPTURE_K_PROFILER,	/* cuProfilerStart/Stop, cudaProfilerStart/Stop */
	CAPTURE_K_NVTX,		/* an NVTX range of capture_name */
};

#define CAPTURE_NAME_MAX 64

struct capture_gate {
	__s64 open;
};

#endif
