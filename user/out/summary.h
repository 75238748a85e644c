/* SPDX-License-Identifier: MIT */
/* The nsys-stats-like summary, computed online from model events. */
#ifndef CGBPF_SUMMARY_H
#define CGBPF_SUMMARY_H

#include <stdint.h>
#include <stdio.h>
#include "events.h"
#include "core/model.h"

struct summary;

/* What the capture itself knows, printed with the tables. */
/* A library file probed only after a process had mapped it: calls the
 * process made in between may be missing. */
struct late_attach {
	uint32_t pid;
	char comm[16];
	char file[64];
	uint64_t window_ns;	/* from the mapping's return to the probes in place */
};

/* The windows the summary lists one by one; the rest are counted. */
#define LATE_ROWS 20

/* Where a section is printed: after the CUDA API, kernel and memory
 * tables, place by place in this order, the sections of one place in the
 * order they were added; then "Capture". */
enum summary_place {
	SUMMARY_LIB,				/* + enum rec_lib: an API library's */
	SUMMARY_CPU = SUMMARY_LIB + LIB__COUNT,	/* CPU samples and backtraces */
	SUMMARY_OS,				/* syscalls */
	SUMMARY_OTHER,				/* capture windows, then the sources' */
	SUMMARY__PLACES,
};

struct capture_info {
	uint64_t drops[REC__COUNT];	/* records lost in the ring buffer */
	uint64_t records;		/* records received */
	uint64_t invalid;		/* records rejected by validation */
	uint64_t duration_ns;
	uint64_t trace_bytes;		/* 0 with --summary-only */
	const char *trace_path;		/* NULL with --summary-only */
	size_t lib_files, probes;
	const struct late_attach *late;	/* windows before probes: the first nlate_rows */
	size_t nlate, nlate_rows;
	uint64_t late_ns;		/* all nlate windows, summed */
	uint64_t forks_unprobed;	/* forked children that exited before their probes */
	/* The sections of the sources (user/core/source.h, their finish hook)
	 * and of the capture windows (user/out/capwin.c). */
	struct {
		enum summary_place place;
		void (*print)(const void *ctx, const uint64_t *drops, FILE *f);
		const void *ctx;
	} sections[16];
	size_t nsections;
};

struct summary *summary__new(void);
/* Frees; accepts NULL. */
void summary__free(struct summary *s);
/* The sink feeding s. */
struct sink summary__sink(struct summary *s);
/* Prints the tables, ci's sections and the capture's counts; model gives
 * processes (peak memory) and counts of unmatched events. */
void summary__print(struct summary *s, const struct model *m, const struct capture_info *ci,
		    FILE *f);
/* Adds a section to ci, printed at place (at most 16; more are dropped,
 * loudly); print gets ctx and ci's drops. */
void summary__add_section(struct capture_info *ci, enum summary_place place,
			  void (*print)(const void *ctx, const uint64_t *drops, FILE *f),
			  const void *ctx);
/* Calls counted for (lib, func) (for tests). */
uint64_t summary__calls(const struct summary *s, uint8_t lib, uint16_t func);

#endif
