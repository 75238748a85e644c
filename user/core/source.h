/* SPDX-License-Identifier: MIT */
/*
 * Event sources of a capture (`record`, `monitor`): what each needs from
 * the BPF object, which records it takes, what it adds to the model, the
 * trace and the summary, and how it ends. record.c runs the capture and
 * calls every wanted source at each step, in the order of the table in
 * user/sources/sources.c, so a new source is a new file and one line there.
 *
 * The API probes (user/core/attach.c, the libraries of user/core/apilib.c) and the
 * life of target processes (forks, execs, exits, mappings) are the
 * capture's core, not sources: every source sees them through proc().
 *
 * Steps, in order; any hook may be NULL:
 *   wanted   the options ask for it (NULL: always on);
 *   init     state allocated; the model, its trace sinks and the trace
 *            writer exist (s->pt NULL with --summary-only);
 *   prepare  the BPF object is open, not loaded: rodata, map sizes,
 *            which programs load;
 *   start    loaded; s->rb (the events ring) exists: attach the source's
 *            programs, add its own rings to s->rb. Sources start before
 *            the core's process tracepoints;
 *   spawn    -- CMD is about to start: set what CMD's environment needs;
 *   spawned  -- CMD is forked as pid and waits, before its exec: probes
 *            bound to it on files it will map can be placed now;
 *   split    a record that user/core/ingest.c passed, before anything
 *            else sees it, when it stands for two (records the source's
 *            BPF sends as one): writes the first into first and the
 *            second into rest (SRC_SPLIT_MAX bytes each), each with its
 *            header's size, and returns the first's size; 0: not such a
 *            record, nothing written. The first is handled as a record,
 *            then the second in the record's place. No state: a split
 *            is the record's layout alone. At most one wanted source has
 *            it: it sees every record;
 *   record   one record of a type listed in types[], validated by
 *            user/core/ingest.c; returns -EINVAL for a record it rejects
 *            (counted as malformed);
 *   proc     a target was seen (first call), changed its mappings (exec,
 *            mmap) or exited;
 *   tick     after each drain of the rings (every <= 50 ms);
 *   flush    the trace is flushed (every 250 ms and at the end);
 *   stop     the capture ends: the last chance to ask for data still
 *            held elsewhere, before the rings are drained for the last
 *            time (returns how long, at most, to keep draining, ns; 0:
 *            no need);
 *   settled  while draining after stop: whether what it asked for came;
 *   window_close  a capture window's file is about to close (pid: its
 *            process with --split-per-process, else 0: every target): ask
 *            for what is still held elsewhere; true: something was asked,
 *            and the file waits (boundedly) for window_settled;
 *   window_settled  whether what window_close asked for came;
 *   window_end  the file closes now: write what is held for it;
 *   metrics  `cgbpf monitor` renders its metrics page (on the capture's
 *            thread, between drains): the source's own series, in the
 *            Prometheus text format, through m (struct src_metrics);
 *   finish   fill the summary's capture info (sections, counts);
 *   fini     free the state; before the BPF object is destroyed.
 */
#ifndef CGBPF_SOURCE_H
#define CGBPF_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct session;
struct record_opts;
struct capture_info;

enum src_proc {
	SRC_PROC_SEEN,		/* first API call of a target */
	SRC_PROC_CHANGED,	/* exec, or a new executable mapping */
	SRC_PROC_EXIT,
};

/* A source's metrics lines (the metrics hook): line() writes text as
 * given (whole lines, '\n' included); comm() writes pid's name as a label
 * value (escaped), as the monitor names it in its other series. */
struct src_metrics {
	void (*line)(void *ctx, const char *text);
	void (*comm)(void *ctx, uint32_t pid, char *out, size_t len);
	void *ctx;
};

#define SRC_TYPES 4
#define SRC_SPLIT_MAX 256	/* bytes of each record split() writes */

struct source {
	const char *name;
	uint16_t types[SRC_TYPES];	/* events-ring record types it takes; 0 ends */
	bool (*wanted)(const struct record_opts *o);
	int (*init)(struct session *s, void **state);
	int (*prepare)(struct session *s, void *state);
	int (*start)(struct session *s, void *state);
	void (*spawn)(struct session *s, void *state, const char *cmd);
	void (*spawned)(struct session *s, void *state, uint32_t pid);
	size_t (*split)(const void *data, size_t size, void *first, void *rest);
	int (*record)(struct session *s, void *state, const void *data, size_t size);
	void (*proc)(struct session *s, void *state, enum src_proc ev, uint32_t pid, uint64_t ts);
	void (*tick)(struct session *s, void *state, uint64_t now);
	void (*flush)(struct session *s, void *state);
	uint64_t (*stop)(struct session *s, void *state);
	bool (*settled)(struct session *s, void *state);
	bool (*window_close)(struct session *s, void *state, uint32_t pid);
	bool (*window_settled)(struct session *s, void *state, uint32_t pid);
	void (*window_end)(struct session *s, void *state, uint32_t pid);
	void (*metrics)(struct session *s, void *state, const struct src_metrics *m);
	void (*finish)(struct session *s, void *state, struct capture_info *ci);
	void (*fini)(struct session *s, void *state);
};

/* The table (user/sources/sources.c), NULL-terminated. */
extern const struct source *const sources[];

/* The sources, defined in their own files. */
extern const struct source src_nccl;		/* user/sources/nccl/ncclsrc.c */
extern const struct source src_stacks;		/* user/sources/stacks/stacks.c */
extern const struct source src_sched;		/* user/sources/sched/schedtrace.c */
extern const struct source src_syscalls;	/* user/sources/syscalls/syscalls.c */
extern const struct source src_nvtx;		/* user/sources/nvtx/nvtx.c */
extern const struct source src_gpu;		/* user/sources/gpu/gpusrc.c */
extern const struct source src_python;		/* user/sources/python/pysrc.c */

#endif
