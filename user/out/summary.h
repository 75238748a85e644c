/* SPDX-License-Identifier: MIT */
/* The nsys-stats-like summary, computed online from model events. */
#ifndef CGBPF_SUMMARY_H
#define CGBPF_SUMMARY_H

#include <stdint.h>
#include <stdio.h>
#include "events.h"
#include "core/model.h"

struct summary;
struct stacks;

/* What the capture itself knows, printed with the tables. */
/* A library file probed only after a process had mapped it: calls the
 * process made in between may be missing. */
struct late_attach {
	uint32_t pid;
	char comm[16];
	char file[64];
	uint64_t window_ns;	/* from the mapping's return to the probes in place */
};

struct capture_info {
	uint64_t drops[REC__COUNT];	/* records lost in the ring buffer */
	uint64_t records;		/* records received */
	uint64_t invalid;		/* records rejected by validation */
	uint64_t duration_ns;
	uint64_t trace_bytes;		/* 0 with --summary-only */
	const char *trace_path;		/* NULL with --summary-only */
	size_t lib_files, probes;
	const struct late_attach *late;	/* mappings that came before their probes */
	size_t nlate;
	uint64_t forks_unprobed;	/* forked children that exited before their probes */
	struct stacks *stacks;		/* CPU samples and backtraces, or NULL */
	uint64_t backtrace_ns;		/* --backtrace-threshold; UINT64_MAX: off */
	/* The sources' sections (user/core/source.h), printed before "Capture". */
	struct {
		void (*print)(const void *ctx, const uint64_t *drops, FILE *f);
		const void *ctx;
	} sections[8];
	size_t nsections;
	/* Sections of the API libraries (user/sources/nccl/ncclsum.c), printed after the
	 * memory tables; NULL where a library has none. */
	void (*lib_section[LIB__COUNT])(const void *ctx, FILE *f);
	const void *lib_section_ctx[LIB__COUNT];
};

struct summary *summary__new(void);
/* Frees; accepts NULL. */
void summary__free(struct summary *s);
/* The sink feeding s. */
struct sink summary__sink(struct summary *s);
/* Prints the tables; model gives processes (peak memory) and counts of
 * unmatched events. */
void summary__print(struct summary *s, const struct model *m, const struct capture_info *ci,
		    FILE *f);
/* The --syscall-threshold in force (UINT64_MAX: off), for the syscall table. */
void summary__set_syscall_threshold(struct summary *s, uint64_t ns);
/* Adds a source's section to ci (at most 8; more are dropped, loudly). */
void summary__add_section(struct capture_info *ci,
			  void (*print)(const void *ctx, const uint64_t *drops, FILE *f),
			  const void *ctx);
/* Calls counted for (lib, func) (for tests). */
uint64_t summary__calls(const struct summary *s, uint8_t lib, uint16_t func);

#endif
