/* SPDX-License-Identifier: MIT */
/* `cgbpf record`: one bounded capture into a trace file and a summary. */
#ifndef CGBPF_RECORD_H
#define CGBPF_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct record_opts {
	pid_t *pids;		/* -p */
	size_t npids;
	char **cmd;		/* -- CMD ARGS (NULL-terminated), or NULL */
	const char *output;	/* trace path; NULL with summary_only */
	uint64_t duration_ns;	/* 0: until the targets exit or Ctrl-C */
	bool summary_only;
	bool no_summary;
	bool follow;		/* forks of targets become targets */
	bool stop_on_load;	/* stop a target mapping libcuda until probed */
	uint32_t ring_mib;
	const char *summary_path; /* also write the summary here (tests) */
};

/* Runs a capture; returns the process exit code (0 success; with -- CMD,
 * the command's own exit code when the capture itself succeeded). */
int record__run(const struct record_opts *o);

#endif
