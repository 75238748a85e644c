/* SPDX-License-Identifier: MIT */
/*
 * Capture windows (docs/design.md, "Capture windows"): --delay,
 * --capture-range cudaProfilerApi|nvtx, --capture-range-end and
 * --schedule. Probes stay attached; BPF's gate (bpf/capture.bpf.h) drops
 * records early between windows, and this module decides, from the
 * records in ring order, exactly which calls each file holds: it mutes
 * the model's sinks outside windows and opens and closes the trace file.
 */
#ifndef CGBPF_CAPWIN_H
#define CGBPF_CAPWIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "capture_rec.h"
#include "core/opts.h"

/* Option parsers: 0, or -EINVAL with a message for the user in msg. */
int capture__parse_range(const char *s, struct capture_opts *c, char *msg, size_t len);
int capture__parse_nvtx(const char *s, struct capture_opts *c, char *msg, size_t len);
int capture__parse_end(const char *s, struct capture_opts *c, char *msg, size_t len);
int capture__parse_schedule(const char *s, struct capture_opts *c, char *msg, size_t len);
/* Conflicts between the capture options; 0 or -EINVAL with a message. */
int capture__check(const struct capture_opts *c, char *msg, size_t len);
/* Whether records wait for a window (a range or a delay). */
bool capture__gated(const struct capture_opts *c);
/* Whether each window (or schedule cycle) gets a file of its own. */
bool capture__numbered(const struct capture_opts *c);
/* The path of file seq (1, 2, ...): pattern expanded by outname__expand
 * (user/lib/outname.h) for pid and seq; a numbered capture whose pattern has
 * no %n gets "-%n" before ".perfetto-trace" (or at the end). 0, or
 * -EINVAL / -ENAMETOOLONG with why in msg. */
/* pid < 0: the -- COMMAND -pid, whose %q variables are cgbpf's own. */
int capture__file_name(const char *pattern, bool numbered, unsigned seq, int pid, char *buf,
		       size_t len, char *msg, size_t msglen);

struct capture;
struct model;
struct pftrace;
struct capture_info;
struct rec_call_enter;
struct rec_call_exit;

struct capture_env {
	const struct capture_opts *o;
	struct model *m;
	struct pftrace *pt;		/* NULL with --summary-only */
	const char *pattern;		/* -o */
	const char *made;		/* the file record created for -o, removed until a window */
	int pid;			/* the first target (%p); 0: cgbpf's own; < 0: see capture__set_pid */
	bool force;			/* --force: a window's file may replace one */
	bool split;			/* --split-per-process: pt is its router; windows per process */
	int gate_fd;			/* the BPF gate map */
	void (*flush)(void *ctx);	/* writes what sources hold, before a file closes */
	void *flush_ctx;		/* the context of every hook here */
	/* A file's window ended (pid: its process with split, else 0): ask
	 * sources for what they still hold of it; true: something was asked
	 * and the file waits for window_settled (a bounded time). NULL: none. */
	bool (*window_close)(void *ctx, uint32_t pid);
	bool (*window_settled)(void *ctx, uint32_t pid);
	/* The file closes now: sources write what they held for it. */
	void (*window_end)(void *ctx, uint32_t pid);
};

/* Whether something of pid that happened at ts belongs in a file. */
enum capture_keep {
	CAPTURE_KEEP,		/* in the open file's window: write it */
	CAPTURE_OUTSIDE,	/* outside every window: not written */
	CAPTURE_LATE,		/* in a window whose file closed before it came: lost */
};

/* NULL on ENOMEM. The model is muted and the trace paused until the
 * first window; the file -o names is removed until then. */
struct capture *capture__new(const struct capture_env *env, uint64_t t0);
void capture__free(struct capture *c);
/* A call record of the core, before (entry) or after (return) the model took it. */
void capture__call_enter(struct capture *c, const struct rec_call_enter *r);
void capture__call_exit(struct capture *c, const struct rec_call_exit *r);
/* Tracing starts (the probes are attached, a -- COMMAND released): --delay
 * counts from now. */
void capture__start(struct capture *c, uint64_t now);
/* A target exited: the capture ranges it had open end at ts. */
void capture__proc_exit(struct capture *c, uint32_t pid, uint64_t ts);
/* Time passes (--delay). */
void capture__tick(struct capture *c, uint64_t now);
/* Whether the capture is over (--capture-range-end stop, repeat:N, the
 * schedule's last cycle). */
bool capture__done(const struct capture *c);
/* The -- COMMAND is forked as pid: %p in file names, and %q read from the
 * environment it inherited (cgbpf's). */
void capture__set_pid(struct capture *c, int pid);
/* Whether a window's file could not be named or created (said already). */
bool capture__failed(const struct capture *c);
/* The path of the i-th file written (0 first), NULL past the last. */
const char *capture__file_path(const struct capture *c, size_t i);
/* Files written, for messages; the "Capture windows" summary section. */
size_t capture__files(const struct capture *c);
const char *capture__file(const struct capture *c, size_t i);
void capture__finish(struct capture *c, uint64_t ts, struct capture_info *ci);
/* What becomes of something of pid that happened at ts (a GPU operation:
 * the time its launch call began). */
enum capture_keep capture__keeps(const struct capture *c, uint32_t pid, uint64_t ts);
/* Whether what happened at ts on any CPU (scheduler events) is written:
 * inside the open file's window; with --split-per-process, always (the
 * router decides); NULL c: always. */
bool capture__keeps_any(const struct capture *c, uint64_t ts);
/* capture__keeps for a GPU operation of pid launched at ts, counted per
 * file for the summary (written: KEEP, lost: LATE). */
enum capture_keep capture__gpu_op(struct capture *c, uint32_t pid, uint64_t ts);
/* A GPU operation launched at ts came in (not yet written): kernels that
 * belong to an open file are counted against its launches. */
void capture__gpu_arrived(struct capture *c, uint32_t pid, uint64_t ts, bool kernel);
/* Whether the closing file of pid's scope (0: every target's) has as
 * many kernels in as its window had launch calls (true when none is
 * closing): a kernel still running at the window's end comes later, in
 * CUPTI's next completed buffer. */
bool capture__gpu_caught_up(const struct capture *c, uint32_t pid);

#endif
