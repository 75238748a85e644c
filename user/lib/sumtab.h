/* SPDX-License-Identifier: MIT */
/*
 * The summary's tables, printed one way for `cgbpf record` (at its end)
 * and `cgbpf stats` (from saved traces): rows of online statistics
 * (user/lib/stats.h) in nsys stats' layout as text, or as CSV or JSON with the
 * same column names. Both commands print every table through here, so the
 * same rows give the same text.
 */
#ifndef CGBPF_SUMTAB_H
#define CGBPF_SUMTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "lib/stats.h"

struct ncclbw_fn;

enum sumtab_fmt { SUMTAB_TEXT, SUMTAB_CSV, SUMTAB_JSON };

/* A row of a time table: a name (and, for NVTX, a style) and its series. */
struct sumtab_row {
	const char *name;
	const char *style;	/* NULL: the table has no Style column */
	struct stats *st;
};

/* The column labels of a time table that vary. */
struct sumtab_time {
	const char *count;	/* "Num Calls", "Instances", "Count" */
	const char *name;	/* "Name", "Range", "Operation" */
	bool style;		/* a Style column before the name (nvtx_sum) */
	uint64_t total;		/* Time (%) is of this; 0: of the rows' sum */
};

/* Sorts rows by total time, longest first (ties by name, then style). */
void sumtab__sort(struct sumtab_row *rows, int n);
/* A time table: Time (%), Total, count, Avg, Med, Min, Max, StdDev [,
 * Style], name; rows sorted first. Medians sort the series' samples. */
void sumtab__time(FILE *f, enum sumtab_fmt fmt, const struct sumtab_time *t,
		  struct sumtab_row *rows, int n);
/* cuda_gpu_mem_size_sum: the series are sizes in bytes, shown in MB
 * (10^6 bytes, as nsys). */
void sumtab__size(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n);

/* A table of other columns, for the few that are not time tables: CSV and
 * JSON write cells by type; text is the caller's. */
enum sumtab_ctype { SC_U64, SC_DOUBLE, SC_STR };
struct sumtab_cell {
	enum sumtab_ctype type;
	union {
		uint64_t u;
		double d;
		const char *s;
	};
};
/* Starts / writes a row of / ends a CSV or JSON table with these columns. */
void sumtab__begin(FILE *f, enum sumtab_fmt fmt, const char *const *cols, int ncols);
void sumtab__row(FILE *f, enum sumtab_fmt fmt, const char *const *cols,
		 const struct sumtab_cell *cells, int ncols, bool first);
void sumtab__end(FILE *f, enum sumtab_fmt fmt);

/*
 * The summary's sections. In text, each prints its heading, notes and
 * table exactly as `cgbpf record` shows it; in CSV and JSON only the
 * table (a header line and rows / an array of row objects).
 */
/* cuda_api_sum: rows of outermost calls; inner: calls made inside another
 * CUDA API call (text: below the table; CSV / JSON: cuda_api_inner_sum,
 * printed by sumtab__api_inner). */
void sumtab__api(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n,
		 struct sumtab_row *inner, int ninner);
void sumtab__api_inner(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n,
		       struct sumtab_row *inner, int ninner);

/* A kernel's launches (the "Top kernels by launches" table). */
struct sumtab_kernel {
	const char *name;
	uint64_t launches;
	double avg_api;		/* mean launch call time, ns */
};
/* cuda_kern_launch_sum: sorts ks by launches (ties by name), prints the
 * first 15 in text, all in CSV / JSON. */
void sumtab__kernels(FILE *f, enum sumtab_fmt fmt, struct sumtab_kernel *ks, size_t n,
		     uint64_t launches, uint64_t unnamed);

/* b bytes in words: "512 B", "1.5 KiB", ... "2.0 TiB". */
void sumtab__human_bytes(uint64_t b, char *buf, size_t len);

/* cuda_api_mem_size_sum: copies per direction (index: enum copy_dir,
 * user/core/model.h; 0 unused) and memsets, by the API calls. */
#define SUMTAB_DIRS 6
void sumtab__api_mem(FILE *f, enum sumtab_fmt fmt, const uint64_t copies[SUMTAB_DIRS],
		     const uint64_t bytes[SUMTAB_DIRS], uint64_t memsets, uint64_t memset_bytes);

/* A process's peak memory (cuda_mem_peak). */
struct sumtab_peak {
	uint32_t pid;
	const char *comm;
	uint64_t gpu, pinned;
};
/* Sorts ps by pid and prints them; in text at most SUMTAB_PROC_ROWS (those
 * of largest peaks) and a count of the others. */
#define SUMTAB_PROC_ROWS 20
void sumtab__peak(FILE *f, enum sumtab_fmt fmt, struct sumtab_peak *ps, size_t n);

/* nvtx_sum; rows have a style. marks and unmatched make its last line
 * (text only; unmatched < 0: not known). */
void sumtab__nvtx(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n, uint64_t marks,
		  int64_t unmatched);

/* osrt_sum; threshold_ns: the recording threshold (UINT64_MAX: syscalls
 * were not traced; SUMTAB_UNKNOWN: not known). */
#define SUMTAB_UNKNOWN (UINT64_MAX - 1)
void sumtab__osrt(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n,
		  uint64_t threshold_ns);

/* cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum. */
void sumtab__gpu_kern(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n);
void sumtab__gpu_mem_time(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n);
void sumtab__gpu_mem_size(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n);

/* One NCCL function's row of nccl_sum (user/sources/nccl/ncclsum.c says what each
 * number is). */
struct sumtab_nccl_op {
	const char *name;
	bool transfer;		/* a collective or point-to-point call (else "Other calls") */
	uint64_t calls, errors, grouped, bytes;
	struct stats *time;	/* successful calls outside groups */
	uint64_t bw_time, unknown_size;
	double size, bus_size;
	/* The GPU-side times of its operations (NCCL's profiler plugin);
	 * NULL or none timed: the row is timed on the host. */
	const struct ncclbw_fn *gpu;
};
/* A communicator as one process sees it. */
struct sumtab_nccl_comm {
	uint64_t id;		/* 0: unknown */
	uint64_t handle;
	int32_t rank, nranks;	/* -1: unknown */
	uint32_t pid;
};
struct sumtab_nccl {
	struct sumtab_nccl_op *ops;
	int nops;
	struct stats *groups;
	uint64_t group_ops, group_bytes, nested;
	struct sumtab_nccl_comm *comms;	/* sorted here */
	size_t ncomms;
};
/* nccl_sum: nothing in text when no NCCL call was seen; CSV / JSON: the
 * transfer functions' rows. */
void sumtab__nccl(FILE *f, enum sumtab_fmt fmt, struct sumtab_nccl *s);

/* python_sites: API time, calls and launches per Python call site (the
 * innermost Python frame of outermost API calls: their `py` arg). */
struct sumtab_pysite {
	const char *site;
	uint64_t calls, ns, launches;
};
/* Text: the first 15 by API time, then the first 15 by launches (those
 * with any); CSV / JSON: every row, by API time. Sorts s; nothing when
 * n is 0. */
void sumtab__pysites(FILE *f, enum sumtab_fmt fmt, struct sumtab_pysite *s, size_t n);

/* cpu_samples: CPU samples per innermost function (self). */
struct sumtab_self {
	const char *name;
	uint64_t n;
};
/* The Self table: text, the first 10 (record's "CPU samples" section
 * prints its header lines first); CSV / JSON, every row. By count, then
 * name; percentages of samples. Sorts s. */
void sumtab__cpu_self(FILE *f, enum sumtab_fmt fmt, struct sumtab_self *s, size_t n,
		      uint64_t samples);

/* A string as a JSON string literal / as a CSV field. */
void sumtab__json_str(FILE *f, const char *s);
void sumtab__csv_str(FILE *f, const char *s);

#endif
