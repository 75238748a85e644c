/* SPDX-License-Identifier: MIT */
/*
 * Trace reader: decodes a Perfetto protobuf trace (cgbpf's own, merged
 * ones too: one Perfetto machine per input) in one streaming pass and
 * hands what it finds to callbacks, so each user (cgbpf stats, cgbpf
 * export) keeps only what it needs.
 *
 * The reader applies the semantics user/out/perfetto.c writes (docs/design.md,
 * "Perfetto mapping"): per (machine, trusted_packet_sequence_id) incremental
 * state (interned event names, categories, annotation names and string
 * values; TracePacketDefaults' clock and track), sequence-scoped
 * incremental clocks defined by a ClockSnapshot, absolute BOOTTIME
 * timestamps, compressed_packets (inflated, their packets read in turn).
 * Every timestamp given to a callback is in nanoseconds of its machine's
 * BOOTTIME, the trace's clock.
 *
 * Memory is bounded by the largest packet, the interning tables of the
 * live sequences and the slices open at once (begin without end yet),
 * never by the trace's length.
 *
 * Strings given to callbacks are NUL-terminated and valid only during the
 * callback. A callback returns 0 to go on; anything else stops the read
 * and tread__run returns it.
 */
#ifndef CGBPF_TREAD_H
#define CGBPF_TREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tread_track_kind {
	TREAD_TRACK_PLAIN,	/* a named track (a GPU stream, a communicator) */
	TREAD_TRACK_PROCESS,
	TREAD_TRACK_THREAD,
	TREAD_TRACK_COUNTER,
};

/* A TrackDescriptor. The same uuid again renames (or re-describes) it. */
struct tread_track {
	uint32_t machine;
	uint64_t uuid;
	uint64_t parent;	/* 0: none */
	enum tread_track_kind kind;
	const char *name;	/* TrackDescriptor.name, or the process / thread name; "" if none */
	const char *description;	/* "" if none */
	int32_t pid, tid;	/* process and thread tracks (pid of a thread's process) */
	const char *cmdline;	/* process tracks; "" if none */
	const char *labels;	/* process labels joined by ','; "" if none */
	uint32_t unit;		/* counter tracks: CounterDescriptor.unit (3: bytes) */
	uint64_t ts;		/* the descriptor packet's time; 0 if it has none */
};

enum tread_atype {
	TREAD_A_UINT,
	TREAD_A_INT,
	TREAD_A_BOOL,
	TREAD_A_DOUBLE,
	TREAD_A_PTR,
	TREAD_A_STR,
	TREAD_A_OTHER,		/* nested, JSON or proto values: not decoded */
};

/* A debug annotation (an argument) with its name and value resolved. */
struct tread_arg {
	const char *name;
	enum tread_atype type;
	union {
		uint64_t u;	/* UINT, PTR, BOOL (0 or 1) */
		int64_t i;
		double d;
		const char *s;	/* STR */
	};
};

enum tread_etype {
	TREAD_SLICE_BEGIN = 1,
	TREAD_SLICE_END = 2,
	TREAD_INSTANT = 3,
	TREAD_COUNTER = 4,
};

#define TREAD_MAX_ARGS 32
#define TREAD_MAX_FLOWS 8

/* A PerfSample (a CPU sample of cgbpf's sampler). */
struct tread_sample {
	uint32_t machine;
	uint64_t ts;
	uint32_t cpu, pid, tid;
	bool has_stack;		/* its callstack was found */
	const char *leaf;	/* the innermost frame's function (or file, or "[unknown]") */
};

/* A TrackEvent. */
struct tread_event {
	uint32_t machine;
	uint32_t seq;		/* trusted_packet_sequence_id */
	enum tread_etype type;
	uint64_t ts;
	uint64_t track;		/* the event's track, or its sequence's default */
	const char *name;	/* "" if none (slice ends, counters) */
	const char *category;	/* the first category; "" if none */
	const struct tread_arg *args;
	int nargs;		/* beyond TREAD_MAX_ARGS are dropped (counted) */
	bool is_double;		/* counters: the value is in dvalue */
	int64_t value;		/* counters */
	double dvalue;
	/* Flow ids: started here (flow_ids), ended and closed here
	 * (terminating_flow_ids), ended here without closing (legacy bind_id,
	 * FLOW_IN). */
	uint64_t flow_out[TREAD_MAX_FLOWS], flow_end[TREAD_MAX_FLOWS], flow_in;
	int nflow_out, nflow_end;
	/* Inline callstack (TrackEvent.callstack) frames, outermost first. */
	const char *const *frames;
	int nframes;
};

/* A slice: its begin and end events paired on their track (ends close
 * the innermost open slice of the track, as trace processor does). */
struct tread_slice {
	uint32_t machine;
	uint64_t track;
	uint64_t ts, end_ts;	/* end_ts == ts for a slice that never ended */
	bool ended;		/* false: still open when the trace ended */
	int depth;		/* open slices around it on its track */
	const char *name;
	const char *category;
	const struct tread_arg *args;	/* the begin event's */
	int nargs;
	const struct tread_arg *end_args;	/* the end event's */
	int nend_args;
	uint64_t flow_out[TREAD_MAX_FLOWS], flow_end[TREAD_MAX_FLOWS], flow_in;
	int nflow_out, nflow_end;
	const char *const *frames;	/* the end event's inline callstack */
	int nframes;
};

/* A clock of a ClockSnapshot that is not sequence-scoped. */
struct tread_clock {
	uint32_t id;		/* 1 REALTIME, 3 MONOTONIC, 6 BOOTTIME, ... */
	uint64_t ts;
};

/* Callbacks; any may be NULL. */
struct tread_ops {
	int (*track)(void *ctx, const struct tread_track *t);
	/* Every TrackEvent as it comes, in file order. */
	int (*event)(void *ctx, const struct tread_event *e);
	/* Each slice at its end (or at the end of the trace if it never
	 * ended), with its begin's name, category and args: what a summary
	 * needs. Slices come in end order. */
	int (*slice)(void *ctx, const struct tread_slice *s);
	/* Trace-wide ClockSnapshots (sequence-scoped clocks left out). */
	int (*clock)(void *ctx, uint32_t machine, const struct tread_clock *c, int n);
	/* Metadata: TraceAttributes (key "cgbpf.version" ...) and SystemInfo
	 * ("system_info.machine_name", "system_info.utsname.release" ...). */
	int (*attr)(void *ctx, uint32_t machine, const char *key, const char *value);
	/* A top-level TracePacket field the reader does not interpret
	 * (RemoteClockSync, ftrace bundles, perf samples ...): its field
	 * number and payload (LEN fields) or value (others, in *data as a
	 * little-endian uint64). */
	int (*other)(void *ctx, uint32_t machine, uint32_t seq, uint32_t field, const uint8_t *data,
		     size_t len);
	/* Each PerfSample, resolved (with it set, perf samples no longer go
	 * to other). */
	int (*sample)(void *ctx, const struct tread_sample *s);
};

/* What the read found that a caller may want to report. */
struct tread_stats {
	uint64_t bytes;			/* bytes read */
	uint64_t packets;		/* packets, those inside compressed_packets too */
	uint64_t events;		/* TrackEvents */
	uint64_t slices;		/* slices paired (ended) */
	uint64_t unended;		/* slices open at the end */
	uint64_t unmatched_ends;	/* ends on a track with no open slice */
	uint64_t dropped_args;		/* args beyond TREAD_MAX_ARGS */
	uint64_t no_state;		/* packets needing incremental state before any was set (skipped) */
	bool truncated_tail;		/* the file ends inside a packet at a page boundary (a SIGKILLed capture): that packet is dropped */
};

/* Reads the trace at path ("-": standard input). 0, a callback's non-zero
 * return, or -errno after an error message naming path and the byte
 * offset (-EINVAL: not a trace, or a malformed one). stats may be NULL. */
int tread__run(const char *path, const struct tread_ops *ops, void *ctx,
	       struct tread_stats *stats);
/* The same on a trace in memory; name is for messages. */
int tread__run_mem(const void *buf, size_t len, const char *name, const struct tread_ops *ops,
		   void *ctx, struct tread_stats *stats);

#endif
