// SPDX-License-Identifier: MIT
/*
 * sources/nccl/: NCCL calls: the API library's descriptor and decoder
 * (nccl.c), the trace's group slices and communicator tracks (ncclpf.c),
 * the nccl_sum table (ncclsum.c) and this source, which wires them.
 *
 * The NCCL source. NCCL's calls come through the core's API probes and
 * are decoded by user/sources/nccl/nccl.c (the library's descriptor); this
 * source adds what a capture makes of them: the trace's group slices and
 * communicator tracks (user/sources/nccl/ncclpf.c), the "NCCL Summary"
 * section (user/sources/nccl/ncclsum.c), and the communicators written
 * into the trace for cgbpf stats.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include "core/opts.h"
#include "core/session.h"
#include "core/source.h"
#include "lib/log.h"
#include "out/summary.h"
#include "sources/nccl/ncclhang.h"
#include "sources/nccl/ncclpf.h"
#include "sources/nccl/ncclsum.h"

struct ncclsrc {
	struct ncclsum *sum;
	struct hangwatch *hang;	/* --nccl-hang-after (session.hang); NULL: off */
	bool last_flush;	/* finish came: the next flush is the trace's last */
};

/*
 * The trace's sinks go around the thread's own (user/out/pfsink.c, which
 * record.c adds before any source's): the group slice opens before the
 * ncclGroupStart slice and closes after the ncclGroupEnd slice. This
 * source is first in the table (user/sources/sources.c), so that sink is
 * the only one yet and the "after" sink comes right behind it.
 */
/* The named straggler's activity, read back from the trace record wrote
 * (one file) by the command line's reader (record_opts.nccl_activity). */
static int activity(void *ctx, const struct straggle_named *n, FILE *f)
{
	struct session *s = ctx;
	char *paths[1];

	if (!s->o->nccl_activity || !s->trace_written)
		return -1;
	if (!f)
		return 0;
	paths[0] = (char *)s->trace_written;
	return s->o->nccl_activity(n, paths, 1, f);
}

static int nccl_init(struct session *s, void **state)
{
	struct ncclsrc *n = calloc(1, sizeof(*n));
	struct sink before, after, sum, hang;

	if (n)
		n->sum = ncclsum__new(&s->model);
	if (n && s->o->nccl_hang_ns)
		n->hang = hangwatch__new(&s->model, s->o->nccl_hang_ns);
	if (!n || !n->sum || (s->o->nccl_hang_ns && !n->hang)) {
		if (n)
			ncclsum__free(n->sum);
		free(n);
		err("out of memory");
		return -ENOMEM;
	}
	ncclsum__activity(n->sum, activity, s);
	sum = ncclsum__sink(n->sum);
	if (s->pt) {
		before = ncclpf__sink_before(s->pt);
		after = ncclpf__sink_after(s->pt);
		if (model__add_sink_first(&s->model, &before) ||
		    model__add_sink(&s->model, &after))
			goto full;
	}
	if (model__add_sink(&s->model, &sum))
		goto full;
	if (n->hang) {
		hang = ncclhang__sink(n->hang);
		if (model__add_sink(&s->model, &hang))
			goto full;
	}
	s->hang = n->hang;
	*state = n;
	return 0;
full:
	err("too many model sinks for NCCL");
	ncclsum__free(n->sum);
	hangwatch__free(n->hang);
	free(n);
	return -E2BIG;
}

/* The communicators as the capture ended, for cgbpf stats: at the flush
 * that follows finish, the trace's last (user/capture/record.c), which
 * comes only when the capture ran. */
static void nccl_flush(struct session *s, void *state)
{
	struct ncclsrc *n = state;

	if (!n->last_flush)
		return;
	n->last_flush = false;
	ncclsum__describe(n->sum, s->pt);
}

static void nccl_finish(struct session *s, void *state, struct capture_info *ci)
{
	struct ncclsrc *n = state;

	(void)s;
	summary__add_section(ci, SUMMARY_LIB + LIB_NCCL, ncclsum__print, n->sum);
	n->last_flush = true;
}

/* An operation waiting past --nccl-hang-after is said now; a monitor
 * dumps its flight recorder. */
static void nccl_tick(struct session *s, void *state, uint64_t now)
{
	struct ncclsrc *n = state;

	if (hangwatch__tick(n->hang, now) && s->trigger)
		s->trigger(s, "nccl-hang");
}

static void nccl_fini(struct session *s, void *state)
{
	struct ncclsrc *n = state;

	if (s->hang == n->hang)
		s->hang = NULL;
	hangwatch__free(n->hang);
	ncclsum__free(n->sum);
	free(n);
}

const struct source src_nccl = {
	.name = "nccl",
	.init = nccl_init,
	.flush = nccl_flush,
	.tick = nccl_tick,
	.finish = nccl_finish,
	.fini = nccl_fini,
};
