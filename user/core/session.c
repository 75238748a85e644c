// SPDX-License-Identifier: MIT
/*
 * core/: what every capture is built on: the session a capture runs
 * (session.h), the options (opts.h), the source interface (source.h),
 * the model of processes, threads and calls (model.h), record validation
 * (ingest.h), the API libraries and their probes (apilib.h, attach.h,
 * reaper.h). It includes only user/lib; everything above reaches it, it
 * reaches nothing above (docs/design.md).
 */
#include <time.h>
#include "core/session.h"
#include "core/source.h"

uint64_t session__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void *session__source(const struct session *s, const struct source *src)
{
	for (size_t i = 0; i < s->nsrc; i++)
		if (s->src[i] == src)
			return s->src_state[i];
	return NULL;
}
