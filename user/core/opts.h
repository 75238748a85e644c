/* SPDX-License-Identifier: MIT */
/*
 * The options of a capture (`record`, `monitor`), as the command line set
 * them: read by the capture runner, the sources and the outputs, written
 * only by user/cli.
 */
#ifndef CGBPF_OPTS_H
#define CGBPF_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "capture_rec.h"	/* CAPTURE_NAME_MAX */

struct straggle_named;

/* Which scheduler events are recorded (--sched). */
enum sched_scope {
	SCHED_ALL,		/* every CPU's complete switch stream (default) */
	SCHED_TARGETS,		/* only switches and wakeups of target threads */
	SCHED_OFF,
};

#define THRESHOLD_OFF UINT64_MAX

/* --capture-range and the capture windows' other options
 * (user/out/capwin.h). */
enum capture_range {
	CAPTURE_RANGE_NONE = 0,
	CAPTURE_RANGE_PROFILER,	/* cudaProfilerApi */
	CAPTURE_RANGE_NVTX,
};

struct capture_opts {
	uint64_t delay_ns;		/* --delay */
	enum capture_range range;	/* --capture-range */
	char nvtx_name[CAPTURE_NAME_MAX];	/* --nvtx-capture RANGE */
	char nvtx_domain[CAPTURE_NAME_MAX];	/* @DOMAIN; "" = any */
	bool nvtx_given;
	bool end_given;			/* --capture-range-end */
	bool repeat;			/* repeat[:N]; else stop */
	uint32_t repeat_max;		/* N; 0: no limit */
	bool schedule;			/* --schedule */
	uint32_t wait, warmup, active, cycles;	/* cycles 0: no limit */
	uint32_t skip_first;		/* steps before the first cycle */
};

/* `cgbpf monitor`'s own options (user/capture/monitor.h). */
struct monitor_opts {
	const char *listen;		/* ADDR:PORT of the metrics endpoint */
	uint64_t interval_ns;		/* housekeeping of the aggregates */
	const char *dump_dir;		/* where dumps go; NULL: the default */
	uint64_t flight_ns;		/* keep this much history; 0: no flight recorder */
	uint64_t flight_bytes;		/* memory for it (ring + one dump's snapshot) */
	uint64_t trigger_slow_ns;	/* NCCL/sync calls at least this long dump; 0: off */
	bool trigger_errors;		/* a call returning an error dumps */
	bool trigger_exit;		/* a traced process dying abnormally dumps */
	uint64_t nccl_hang_ns;		/* --nccl-hang-after; 0: off */
	unsigned python_sites;		/* --python-sites N: top N call sites per process; 0: off */
	unsigned python_site_sample;	/* --python-site-sample K: one call in K is sampled */
};

struct record_opts {
	pid_t *pids;		/* -p */
	size_t npids;
	char **cmd;		/* -- CMD ARGS (NULL-terminated), or NULL */
	/* trace path pattern (user/lib/outname.h); NULL with summary_only */
	const char *output;
	bool force;		/* --force: replace existing files */
	bool inject;		/* --inject: load the injection library into targets */
	bool inject_all;	/* --inject=all: with -a and no filter, without asking */
	bool split;		/* --split-per-process: one trace per process */
	uint64_t duration_ns;	/* 0: until the targets exit or Ctrl-C */
	uint64_t nccl_hang_ns;	/* --nccl-hang-after: say NCCL operations waiting this long; 0: off */
	/* The summary's nccl_stragglers: what the named rank did before its
	 * late entries, read back from the trace file written (paths); set
	 * by the command line, which sees user/trace/stragact.c; NULL: the
	 * summary names the report that gives it. 0 or -errno. */
	int (*nccl_activity)(const struct straggle_named *who, char *const *paths, int npaths,
			     FILE *f);
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

#endif
