/* SPDX-License-Identifier: MIT */
/*
 * `cgbpf monitor --python-sites` (issue 12): at the return of an
 * aggregated API call, one call in py_site_every (at random) sends the
 * thread's Python frames (py_emit(), leaf walk) and a REC_PY_SITE with
 * its duration (bpf/pysites_rec.h). Off (0), the verifier removes it.
 */
#ifndef CGBPF_PYSITES_BPF_H
#define CGBPF_PYSITES_BPF_H

#include "common.bpf.h"
#include "python.bpf.h"
#include "pysites_rec.h"

/* 0: off; else sample one call in this many (1: every call). */
const volatile __u32 py_site_every __weak = 0;

/* A finished call of pid_tgid (cookie) that lasted dur ns. */
static __always_inline void py_site(__u64 pid_tgid, __u64 cookie, __u64 dur)
{
	struct rec_py_site r;

	if (!py_site_every)
		return;
	if (py_site_every > 1 && bpf_get_prandom_u32() % py_site_every)
		return;
	if (py_emit(0, pid_tgid, PY_SPEC(PYR_SITE, CK_LIB(cookie), CK_FUNC(cookie), PY_LEAF_MAX,
					 true)))
		return;
	fill_hdr(&r.hdr, REC_PY_SITE, sizeof(r), pid_tgid);
	r.dur_ns = dur;
	r.weight = py_site_every;
	r.func = CK_FUNC(cookie);
	r.lib = CK_LIB(cookie);
	r.pad = 0;
	if (bpf_ringbuf_output(&events, &r, sizeof(r), wake_flag()))
		count_drop(REC_PY_SITE);
}

#endif
