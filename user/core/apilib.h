/* SPDX-License-Identifier: MIT */
/*
 * The API libraries cgbpf probes, one descriptor each: which files are
 * theirs (by name prefix), which functions to probe, how (the attach
 * cookie), and the model's decoder for their calls. The attach manager,
 * `cgbpf check`, the model and --trace all work from this one table, so a
 * new library is a new descriptor, not changes all over.
 */
#ifndef CGBPF_APILIB_H
#define CGBPF_APILIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "events.h"

struct lib_ops;
struct agg_cfg;
struct attach;

struct api_lib {
	uint8_t id;			/* enum rec_lib */
	const char *name;		/* --trace name: "cuda" */
	const char *title;		/* "CUDA driver" */
	const char *const *watch;	/* file name prefixes, NULL-ended */
	uint16_t nfuncs;		/* function ids are 0 .. nfuncs - 1 */
	/* Exported symbol of a function id (also its name in the trace). */
	const char *(*symbol)(uint16_t func);
	/* Attach cookie of a function id (bpf/events.h CK_MAKE). */
	uint64_t (*cookie)(uint16_t func);
	const struct lib_ops *ops;	/* the model's decoder */
	/* `cgbpf monitor`: how a function's bytes are counted and whether it
	 * may trigger a dump (bpf/agg.h); NULL: calls and time only. */
	void (*agg_cfg)(uint16_t func, struct agg_cfg *c);
	/* A file probed otherwise than by the function table (USDT): returns
	 * the probes attached, -errno, or -ENOSYS to use the table. */
	int (*attach_file)(struct attach *a, const char *path, const char *display);
	/* Whether a file is probed once for every process that maps it, even
	 * when targets have probes of their own (NULL: never). */
	bool (*shared_file)(const char *display);
	/* Whether a function sets memory (cuMemset*, cudaMemset*), counted
	 * as a memset in the summary (NULL: none does). */
	bool (*is_memset)(uint16_t func);
	/* A function of the file probed after all others, with a program
	 * that does nothing, so that a process can tell when every probe of
	 * the file is live in it (NULL: none; bpf/gpu_rec.h). */
	const char *probed_last;
};

/* Bit of a library in a --trace mask. */
#define TRACE_BIT(lib)	(1u << (lib))
#define TRACE_ALL	((1u << LIB__COUNT) - 1)

/* Makes lib the descriptor of its id (called for each library by
 * sources__init(), user/sources/sources.h, before any other call here). */
void apilib__register(const struct api_lib *lib);
/* The descriptor of a library id; NULL when this build has none. */
const struct api_lib *apilib__get(unsigned id);
/* The enabled library whose watch prefixes match path's file name, or
 * NULL. */
const struct api_lib *apilib__for_path(const char *path, uint32_t mask);
/* Parses a --trace list ("cuda,nccl", "all", "none"); 0 or -EINVAL with a
 * message for the user in err. */
int apilib__parse_trace(const char *list, uint32_t *mask, char *err, size_t len);
/* "cuda,cudart,nccl,nvtx": the names of a mask, for messages. */
void apilib__mask_names(uint32_t mask, char *buf, size_t len);

/* What a call does to capture windows (user/out/capwin.h): CAP_PASS, its
 * return reaches the model outside windows too (it creates or frees what
 * later calls name); CAP_ON / CAP_OFF, it opens / closes a
 * cudaProfilerApi range. */
enum { CAP_NONE = 0, CAP_PASS = 1, CAP_ON = 2, CAP_OFF = 4 };
int apilib__capture_class(uint8_t lib, uint16_t func);
/* The attach cookie's capture bits of a function (bpf/events.h CK_PASS,
 * CK_TRIG_*). */
uint64_t apilib__capture_cookie(uint8_t lib, uint16_t func);

#endif
