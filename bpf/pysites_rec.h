/* SPDX-License-Identifier: MIT */
/*
 * REC_PY_SITE (issue 12, `cgbpf monitor --python-sites`): one sampled API
 * call of a Python thread, for the per-process call-site metrics. The
 * monitor aggregates calls in BPF and sends no record per call
 * (bpf/agg.bpf.h); with --python-sites, one call in --python-site-sample
 * (chosen at random at its return, so that no loop period can alias with
 * it) also sends its Python frames (a REC_PY_FRAMES with what PYR_SITE,
 * leaf walk: up to the innermost user frame) followed by this record.
 * User space counts the call's site as weight calls and weight x dur_ns.
 */
#ifndef CGBPF_PYSITES_REC_H
#define CGBPF_PYSITES_REC_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "events.h"

struct rec_py_site {
	struct rec_hdr hdr;
	__u64 dur_ns;		/* the sampled call's duration */
	__u32 weight;		/* calls it stands for: the sampling period */
	__u16 func;		/* the call, as its REC_PY_FRAMES says */
	__u8 lib;
	__u8 pad;
};

#endif
