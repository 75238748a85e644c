/* SPDX-License-Identifier: MIT */
/* `cgbpf record`: one bounded capture into a trace file and a summary. */
#ifndef CGBPF_RECORD_H
#define CGBPF_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "out/capwin.h"

/* Which scheduler events are recorded (--sched). */
enum sched_scope {
	SCHED_ALL,		/* every CPU's complete switch stream (default) */
	SCHED_TARGETS,		/* only switches and wakeups of target threads */
	SCHED_OFF,
};

#define THRESHOLD_OFF UINT64_MAX

struct monitor_opts;

struct record_opts {
	pid_t *pids;		/* -p */
	size_t npids;
	char **cmd;		/* -- CMD ARGS (NULL-terminated), or NULL */
	const char *output;	/* trace path pattern (user/lib/outname.h); NULL with summary_only */
	bool force;		/* --force: replace existing files */
	bool split;		/* --split-per-process: one trace per process */
	uint64_t duration_ns;	/* 0: until the targets exit or Ctrl-C */
	bool summary_only;
	bool no_summary;
	bool follow;		/* forks of targets become targets */
	uint32_t ring_mib;
	enum sched_scope sched;	/* --sched */
	uint64_t syscall_threshold_ns;	/* --syscall-threshold; UINT64_MAX: off */
	uint32_t sample_hz;	/* --sample-hz; 0: off */
	uint64_t backtrace_threshold_ns;	/* --backtrace-threshold; UINT64_MAX: off */
	uint32_t stack_copy;	/* --stack-copy: bytes of user stack per stack record */
	const char *summary_path; /* also write the summary here (tests) */
	uint32_t trace_mask;	/* --trace: API libraries (TRACE_BIT of enum rec_lib) */
	uint8_t python;		/* --python: enum py_mode (bpf/pyframes_rec.h) */
	bool all;		/* -a: every process that loads a traced library */
	char **comms;		/* -a --comm: process names (main thread's comm) */
	size_t ncomm;
	char **cgroups;		/* -a --cgroup: cgroup v2 paths or container ids */
	size_t ncgroup;
	/* `cgbpf monitor`: aggregate in BPF, serve metrics, keep a flight
	 * recorder; NULL for record. */
	const struct monitor_opts *monitor;
	struct capture_opts cap;	/* --delay, --capture-range, --schedule */
};

/* Runs a capture; returns the process exit code (0 success; with -- CMD,
 * the command's own exit code when the capture itself succeeded). */
int record__run(const struct record_opts *o);

#endif
