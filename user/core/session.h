/* SPDX-License-Identifier: MIT */
/*
 * One capture (`record`, `monitor`): what record.c runs and what the
 * event sources (user/core/source.h) share. A source reads the options, the
 * BPF object, the model, the trace writer and the targets; it changes
 * only its own state and what its hooks are for.
 */
#ifndef CGBPF_SESSION_H
#define CGBPF_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "events.h"
#include "core/model.h"
#include "lib/hmap.h"

#define SESSION_SOURCES 16

struct record_opts;
struct cgbpf_bpf;
struct attach;
struct ring_buffer;
struct summary;
struct pftrace;
struct pfseq;
struct stacks;
struct monitor;
struct pysites;
struct hangwatch;
struct late_attach;
struct source;

struct session {
	const struct record_opts *o;
	struct cgbpf_bpf *skel;
	struct attach *attach;
	struct ring_buffer *rb;
	struct ring_buffer *ctl_rb;	/* the ctl ring alone, read ahead of rb's backlog */
	uint32_t since_ctl;		/* records handled since ctl_rb was read */
	struct hmap fork_probed;	/* children probed by one copy of their fork record (record.c) */
	struct model model;
	struct summary *summary;
	struct pftrace *pt;		/* NULL with --summary-only */
	FILE *summary_f;		/* --summary-file, open from the start */
	struct pfseq *meta;		/* cgbpf's own events (drops) */
	struct stacks *stacks;		/* the symbolizer, CPU samples and backtraces */
	struct monitor *mon;		/* `cgbpf monitor` */
	/* A source's reason to dump the monitor's flight recorder (set by
	 * record.c for a monitor; NULL otherwise). */
	void (*trigger)(struct session *s, const char *why);
	/* --nccl-hang-after: the NCCL hang watcher (core/hangwatch.h), which
	 * the NCCL source makes and the GPU source feeds too; NULL: off. */
	struct hangwatch *hang;
	struct pysites *pysites;	/* monitor --python-sites: the monitor's table of
					 * sampled Python call sites, or NULL */
	struct capture *cap;		/* capture windows (user/out/capwin.h), or NULL */
	struct hmap live;		/* tgid -> 1 for targets alive */
	struct hmap traced;		/* tgid -> 1 for every target, alive or gone */
	struct hmap seen;		/* targets whose first API call came */
	struct hmap waiting;		/* live targets that have not mapped libcuda */
	pid_t child;			/* -- CMD */
	int child_status;
	bool child_reaped;
	uint64_t records, invalid;
	uint64_t drops_reported;
	/* -a: cgroup filters (paths below the cgroup v2 mount, open dirs). */
	char cgmount[256];
	char *cg_rel[8];
	int cg_fd[8];
	size_t ncg;
	uint64_t new_targets;		/* processes made targets by -a */
	bool lib_mapped;		/* a REC_MMAP of a traced library came */
	uint64_t forks_unprobed;	/* forked children gone before their probes */
	struct late_attach *late;	/* mappings that came before their probes */
	struct hmap forked;		/* forked child -> its fork's ts */
	struct hmap forked_win;		/* forked child -> ns from its fork to its probes */
	size_t nlate, caplate;		/* windows said; late[] holds the first LATE_ROWS */
	uint64_t late_ns;		/* their windows, summed */
	dev_t root_dev;			/* cgbpf's root, to tell containers' (-a) */
	ino_t root_ino;
	int fatal;			/* -errno that ends the capture */
	/* The wanted sources (user/core/source.h), their states, and which one
	 * takes each record type. */
	const struct source *src[SESSION_SOURCES];
	void *src_state[SESSION_SOURCES];
	size_t nsrc;
	int8_t src_of[REC__COUNT];	/* index in src, -1: the core's */
	int8_t splitter;		/* index in src of the one with a split hook, -1: none */
	/* The events ring's callback (the capture runner's): validates a
	 * record and gives it to the core or the source that takes its type.
	 * A source adds its own rings to s->rb with it (ctx s) when their
	 * records take that path. */
	int (*handle)(void *ctx, void *data, size_t size);
	/* The one trace file written, once closed (before the summary);
	 * NULL: none, or several (split, windows). */
	const char *trace_written;
};

/* BOOTTIME now, ns: the clock of every record. */
uint64_t session__now(void);
/* The state of the source named name when it is on, else NULL. */
void *session__source(const struct session *s, const struct source *src);

#endif
