/* SPDX-License-Identifier: MIT */
/*
 * record --inject: loads cgbpf's injection library into a running process
 * and calls its InitializeInjection, through ptrace, holding one thread
 * for a few milliseconds. docs/design.md ("Injecting into a running
 * process") has the sequence and why it is safe at every instant.
 */
#ifndef CGBPF_PTINJECT_H
#define CGBPF_PTINJECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum ptinject_outcome {
	PTINJ_INJECTED,		/* the library is mapped now; its watcher runs */
	PTINJ_PRESENT,		/* it was mapped already: nothing entered the process */
	PTINJ_REFUSED,		/* nothing was changed; why says why */
	PTINJ_FAILED,		/* the stub ran, but the library did not appear */
};

struct ptinject_result {
	enum ptinject_outcome outcome;
	pid_t tid;		/* the thread held */
	char tid_syscall[32];	/* what it was doing: "running", "futex", ... */
	double hold_ms;		/* from its stop to its release */
	double load_ms;		/* from its release to the library's mapping */
	bool eintr;		/* its blocking call returns EINTR (epoll_wait...) */
	bool busy;		/* refused: every thread was busy (try again later) */
	char lib[4096];		/* the library's path in the process's root */
	char why[512];
};

/*
 * Injects lib (an absolute path in cgbpf's root) into pid. Never leaves
 * a thread stopped or traced; on refusal nothing in the process changed.
 */
void ptinject__run(pid_t pid, const char *lib, struct ptinject_result *res);

/* "injected", "already loaded", ...: for the summary. */
const char *ptinject__outcome_name(enum ptinject_outcome o);

#endif
