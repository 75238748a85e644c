/* SPDX-License-Identifier: MIT */
/* The Perfetto sink: model events to track descriptors, slices and counters. */
#ifndef CGBPF_PFSINK_H
#define CGBPF_PFSINK_H

#include "core/model.h"
#include "out/perfetto.h"
#include "out/tracks.h"	/* the track ids its sequences and tracks use */

/* The sink writing model events into pt. */
struct sink pfsink__sink(struct pftrace *pt);
/* Thread t's packet sequence (created at ts on first use), for other sinks
 * writing on its behalf; NULL on ENOMEM. */
struct pfseq *pfsink__seq(struct pftrace *pt, struct thread *t, uint64_t ts);

#endif
