/* SPDX-License-Identifier: MIT */
/*
 * Streaming Perfetto trace writer. Packets are encoded straight into an
 * output buffer that is written to the file whenever it passes a threshold
 * or on pftrace__flush(); only whole packets are ever written, so a file
 * cut short by a crash holds complete packets up to the last flush.
 *
 * Each traced thread gets its own packet sequence: its track is the
 * sequence default, its timestamps are deltas on a sequence-scoped
 * incremental clock, and event names, annotation names and string values
 * are interned per sequence. Interning tables are bounded: a sequence that
 * fills them clears its incremental state and starts over, so memory does
 * not grow with trace length.
 */
#ifndef CGBPF_PERFETTO_H
#define CGBPF_PERFETTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/annot.h"

/*
 * Flow arrows (trace processor's flow table) on a slice's begin event.
 * Ids are global to the trace; small ones are cheap (a varint: ids below
 * 2^56 are written in the deprecated varint fields trace processor still
 * reads, flow_ids_old and terminating_flow_ids_old, not as fixed64).
 * out starts a flow at the slice (TrackEvent.flow_ids): a later slice
 * naming the same id ends it. in ends the flow started under that id
 * without closing it (LegacyEvent.bind_id with FLOW_IN), so several
 * slices can end one flow: the kernels of one graph launch. end ends and
 * closes it (TrackEvent.terminating_flow_ids): the one slice a flow
 * leads to. 0: none.
 */
struct pf_flow {
	uint64_t out;
	uint64_t in;
	uint64_t end;
};

enum pf_unit { PF_UNIT_NONE = 0, PF_UNIT_COUNT = 2, PF_UNIT_BYTES = 3 };

struct pftrace;
struct pfseq;

/* Creates the trace file as a new file (outfile__create: a regular file
 * there is replaced, a link or anything else refused; under sudo it is the
 * user's); NULL with errno set. */
struct pftrace *pftrace__create(const char *path);
struct pfsplit;
/* How a router reaches its files: the split (user/out/pfsplit.c) fills
 * one in, and the writer calls it through these, never by name. */
struct pf_router_ops {
	/* The i-th file a descriptor of uuid goes to: pid's file when pid
	 * is not 0, else its parent's owner, every file for a track of no
	 * process (also remembered for files opened later). false past the
	 * last. */
	bool (*route_desc)(struct pfsplit *sp, uint64_t uuid, uint64_t parent, int pid,
			   size_t i, struct pftrace **pt);
	/* Remembers a descriptor of no process for the files opened later. */
	void (*global_desc)(struct pfsplit *sp, bool counter, uint64_t uuid, uint64_t parent,
			    const char *name, const char *desc, int unit);
	/* The i-th (file, sequence) an event on the router's sequence s
	 * (default track seq_track) on track (0: the default) goes to. */
	bool (*route_event)(struct pfsplit *sp, const struct pfseq *s, uint64_t seq_track,
			    uint64_t track, uint64_t ts, size_t i, struct pftrace **pt,
			    struct pfseq **cs);
	/* The i-th file (NULL: its process's file could not be created) and
	 * how many there are. */
	struct pftrace *(*file)(struct pfsplit *sp, size_t i);
	size_t (*nfiles)(const struct pfsplit *sp);
	/* Closes every file, saying which it wrote; the first error (a file
	 * that could not be created included). discard: remove them instead. */
	int (*close)(struct pfsplit *sp, bool discard);
	/* The first error of a file, 0 if none. */
	int (*error)(const struct pfsplit *sp);
};
/* A router for --split-per-process (user/out/pfsplit.h): writes nothing
 * itself, sends each descriptor and event to the file of the process it
 * belongs to, through ops on split; raw packets (pftrace__packet_begin)
 * are refused. NULL on ENOMEM. pftrace__close closes its files. */
struct pftrace *pftrace__router(const struct pf_router_ops *ops, struct pfsplit *split);
/* A writer with no file yet: it buffers every packet in memory until
 * pftrace__set_fd gives it one (the next flush writes them); closed
 * without one, it writes nothing. NULL on ENOMEM. */
struct pftrace *pftrace__pending(void);
void pftrace__set_fd(struct pftrace *pt, int fd);
/* The router's files, NULL for a plain trace. */
struct pfsplit *pftrace__split(const struct pftrace *pt);
/* A writer on fd, open for writing (a file, a pipe, a device); it owns fd
 * from then on, closed by pftrace__close. NULL with errno set (fd open);
 * fd < 0 (a failed open's) gives NULL with errno as that open left it. */
struct pftrace *pftrace__fdopen(int fd);
/* Writes buffered packets; 0 or the first write error (-errno). After a
 * write error the file is cut back to its last whole packet and every
 * later call is a no-op. */
int pftrace__flush(struct pftrace *pt);
/* Flushes, closes and frees; returns the first error seen. Accepts NULL. */
int pftrace__close(struct pftrace *pt);
/* Closes and frees without writing what is buffered, and removes path if
 * it still names the file pt wrote (outfile__discard). Accepts NULL. */
void pftrace__discard(struct pftrace *pt, const char *path);
/* First error seen (-errno), 0 if none. */
int pftrace__error(const struct pftrace *pt);
/* Bytes written to the file so far plus bytes buffered. */
uint64_t pftrace__bytes(const struct pftrace *pt);

/*
 * Capture windows: one writer, several files. keep_descriptors makes it
 * remember every track descriptor; pause ends the file (a last clock
 * snapshot, or, with discard_path, the file removed) and drops every
 * packet until resume, which starts the file at path with a clock
 * snapshot, the system info and every descriptor remembered, and makes
 * every sequence start over; the generation counts resumes, for writers
 * with interning of their own. pause and resume return 0 or -errno.
 */
void pftrace__keep_descriptors(struct pftrace *pt);
int pftrace__pause(struct pftrace *pt, const char *discard_path);
/* replace: an existing regular file at path may be replaced (--force);
 * else -EEXIST, and the trace stays paused. */
int pftrace__resume(struct pftrace *pt, const char *path, bool replace);
bool pftrace__paused(const struct pftrace *pt);
uint32_t pftrace__generation(const struct pftrace *pt);

/* A ClockSnapshot of BOOTTIME, MONOTONIC and REALTIME taken now. */
void pftrace__clock_snapshot(struct pftrace *pt);
/* SystemInfo with the kernel's utsname. */
void pftrace__system_info(struct pftrace *pt);
/* A TraceAttributes packet with one string attribute: what `cgbpf stats`
 * needs beyond the events (docs/design.md, "Summary from a trace"). */
void pftrace__attribute(struct pftrace *pt, const char *key, const char *value);
/* Track descriptors. Re-emitting one with the same uuid renames it. */
void pftrace__process(struct pftrace *pt, uint64_t uuid, int pid, const char *name,
		      const char *cmdline);
/* The same with a process label ("container=3fa2b1c4d5e6"; NULL: none). */
void pftrace__process_labeled(struct pftrace *pt, uint64_t uuid, int pid, const char *name,
			      const char *cmdline, const char *label);
void pftrace__thread(struct pftrace *pt, uint64_t uuid, uint64_t parent, int pid, int tid,
		     const char *name);
void pftrace__counter_track(struct pftrace *pt, uint64_t uuid, uint64_t parent,
			    const char *name, enum pf_unit unit);
void pftrace__track(struct pftrace *pt, uint64_t uuid, uint64_t parent, const char *name);
/* The same with a description (TrackDescriptor.description; NULL: none),
 * shown with the track's details. */
void pftrace__track_desc(struct pftrace *pt, uint64_t uuid, uint64_t parent, const char *name,
			 const char *description);

/* A new packet sequence whose events go to default_track unless told
 * otherwise; ts0 is the first timestamp it will carry. NULL on ENOMEM. */
struct pfseq *pftrace__seq(struct pftrace *pt, uint64_t default_track, uint64_t ts0);

/* Slice begin / end on the sequence's default track. */
void pftrace__begin(struct pftrace *pt, struct pfseq *s, uint64_t ts, const char *name,
		    const struct pf_annot *a, int n);
void pftrace__end(struct pftrace *pt, struct pfseq *s, uint64_t ts,
		  const struct pf_annot *a, int n);
/* Slice end carrying the inline callstack of the call site (TrackEvent
 * field callstack): frames[] are function names, outermost first. */
void pftrace__end_stack(struct pftrace *pt, struct pfseq *s, uint64_t ts,
			const struct pf_annot *a, int n, const char *const *frames, int nframes);
/* Slice begin with a category (interned), e.g. "syscall". */
void pftrace__begin_cat(struct pftrace *pt, struct pfseq *s, uint64_t ts, const char *cat,
			const char *name, const struct pf_annot *a, int n);
/* Slice begin / end on another track than the sequence's default (a
 * communicator's track, an async range); cat may be NULL. Slices on one
 * track must nest: each track needs a single writer or strictly nested
 * use. */
void pftrace__begin_on(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		       const char *cat, const char *name, const struct pf_annot *a, int n);
void pftrace__end_on(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		     const struct pf_annot *a, int n);
/* Slice begin with flows (struct pf_flow) on track (0: the sequence's
 * default track); cat may be NULL. */
void pftrace__begin_flow(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
			 const char *cat, const char *name, const struct pf_annot *a, int n,
			 const struct pf_flow *f);
/* Instant event on track (0: the default track). */
void pftrace__instant(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		      const char *name, const struct pf_annot *a, int n);
/*
 * Raw packets, for writers of other packet kinds (scheduler bundles, stack
 * samples): opens a TracePacket in the output buffer and returns the
 * encoder, or NULL after a write error. The caller writes its fields with
 * pb.h and must close it with pftrace__packet_end() before any other call.
 */
struct pb *pftrace__packet_begin(struct pftrace *pt);
void pftrace__packet_end(struct pftrace *pt);
/* A trusted_packet_sequence_id no other writer uses. */
uint32_t pftrace__new_seq_id(struct pftrace *pt);

/* Counter value on a counter track. */
void pftrace__counter(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		      int64_t value);

#endif
