/* SPDX-License-Identifier: MIT */
/*
 * Which rank the others wait for (cgbpf stats --report nccl_stragglers):
 * NCCL operations of every rank, matched across ranks by communicator and
 * sequence number (the "seq" each collective, send and receive carries,
 * user/sources/nccl/nccl.c), and per (communicator, rank) how often and
 * how late it entered them last. Lateness is on entry: how long after the
 * first rank of an instance this rank's host call began.
 *
 * Operations come in any order (split files are read one after another);
 * an instance is folded into its ranks' rows once every rank entered it,
 * so memory is the instances still missing a rank, ~(3 x 8 x ranks + 80)
 * bytes each, plus the rows.
 */
#ifndef CGBPF_STRAGGLE_H
#define CGBPF_STRAGGLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "lib/sumtab.h"

/* One NCCL operation as a rank entered it. */
struct straggle_op {
	const char *host;	/* the capture's host name; "" when unknown */
	const char *comm;	/* the communicator as its tracks name it ("3fa2") */
	int rank, nranks;	/* -1: unknown (a communicator older than the capture) */
	uint32_t pid, tid;
	const char *name;	/* "ncclAllReduce" */
	uint64_t seq;		/* 0: none */
	int peer;		/* ncclSend / ncclRecv: the peer; -1 for a collective */
	bool recv;
	uint64_t ts, end;	/* entry and return, the trace's clock */
	/* How its instances are matched across ranks, for the CSV and JSON
	 * column matched_by (a static string): NULL "seq" (communicator id
	 * and cgbpf's sequence number); "env+time" (RANK and WORLD_SIZE,
	 * aligned by operation and time: user/lib/stragalign.c); "nccl_seq"
	 * (NCCL's commHash and its own sequence number: the plugin). */
	const char *how;
};

/* One stretch of a rank's time before an operation it entered last: from
 * the return of its previous operation on that communicator to the entry. */
struct straggle_gap {
	uint64_t from, to;
};

/* The rank the others wait for, when there is one. */
struct straggle_named {
	const char *comm, *host;
	int rank, nranks;
	uint32_t pid;
	uint64_t ops, last, waited_ns, late_med_ns;
	const struct straggle_gap *gaps;	/* sorted by from; at most STRAGGLE_GAPS */
	size_t ngaps;
};

#define STRAGGLE_GAPS 65536
#define STRAGGLE_MIN_OPS 10	/* fewer matched operations name nobody */

struct straggle;

/* A row as straggle__each gives it. */
struct straggle_row {
	const char *comm, *host;
	int rank, nranks;
	uint32_t pid;
	uint64_t ops, last, waited_ns;
	uint64_t late_ns;	/* its entries after its instances' first, summed */
};

struct straggle *straggle__new(void);
/* The text table's heading (a static string; default "NCCL stragglers:
 * which rank the others wait for (nccl_stragglers)") and a line under it
 * saying how lateness is measured (NULL: none). */
void straggle__title(struct straggle *s, const char *title, const char *basis);
/*
 * What the named rank did before its late entries, printed after the
 * text report by fn (ctx; f NULL: 0 if it can, which the named line then
 * says): record and cgbpf stats read the trace back for it
 * (user/trace/stragact.c). Without one the named line says which report
 * gives it.
 */
void straggle__activity(struct straggle *s,
			int (*fn)(void *ctx, const struct straggle_named *n, FILE *f), void *ctx);
/* Keeps no gaps (a monitor running for weeks needs only the counts). */
void straggle__no_gaps(struct straggle *s);
/* Drops the instances still open whose first entry is before ts (a rank
 * that exited, or one that is not watched): counted as not matched. */
void straggle__expire(struct straggle *s, uint64_t ts);
/* Forgets pid's rows (its process exited); a process taking its rank
 * later starts afresh. */
void straggle__forget_pid(struct straggle *s, uint32_t pid);
/* Calls cb for every row of a live process. */
void straggle__each(const struct straggle *s, void (*cb)(void *ctx, const struct straggle_row *r),
		    void *ctx);
/* The counters a monitor exports per row, as Prometheus families
 * PREFIX_matched_total, PREFIX_entered_last_total,
 * PREFIX_others_waited_seconds_total and PREFIX_late_seconds_total. */
enum straggle_series { STRAG_MATCHED, STRAG_LAST, STRAG_WAITED, STRAG_LATE, STRAG__SERIES };
/* Row r's sample of family (prefix, what) into buf, a whole line: labels
 * comm (its first 4 hex digits, as the traces show it), rank, nranks,
 * pid. */
void straggle__sample(const struct straggle_row *r, const char *prefix,
		      enum straggle_series what, char *buf, size_t len);
void straggle__free(struct straggle *s);
/* Adds one operation; 0 or -ENOMEM. */
int straggle__add(struct straggle *s, const struct straggle_op *op);
/* Whether an operation of two or more ranks of one communicator came
 * (record prints the report then). */
bool straggle__any(const struct straggle *s);
/* Operations of ranks not known (communicators older than the capture). */
uint64_t straggle__unknown(const struct straggle *s);
/* Adds n operations of unknown ranks (counted by another matcher). */
void straggle__count_unknown(struct straggle *s, uint64_t n);
/* A line for the report's notes (copied). 0 or -ENOMEM. */
int straggle__note(struct straggle *s, const char *line);
/* Ends the matching (instances still missing a rank are counted as
 * unmatched) and picks the rank to name; true when there is one. */
bool straggle__finish(struct straggle *s, struct straggle_named *named);
/* The table (after straggle__finish): text (with its notes and the named
 * rank's line), CSV or JSON. 0 or -ENOMEM. */
int straggle__print(struct straggle *s, enum sumtab_fmt fmt, FILE *f);

#endif
