/* SPDX-License-Identifier: MIT */
/* The CUDA driver API domain: its function table and call decoding. */
#ifndef CGBPF_CUDA_H
#define CGBPF_CUDA_H

#include <stdint.h>
#include "cuda_funcs.h"
#include "model.h"

struct func_desc {
	const char *name;
	uint8_t cls;		/* enum cu_class */
	uint32_t flags;
};

extern const struct func_desc cuda_funcs[CU_FN__COUNT];
extern const struct lib_ops cuda_ops;

/* Attach cookie for function id (see bpf/events.h). */
uint64_t cuda__cookie(uint16_t func);
/* The same for any table of func_desc (the runtime's too). */
uint64_t cuda__cookie_of(uint8_t lib, uint16_t func, const struct func_desc *f);
struct agg_cfg;
/* The monitor's aggregate configuration of a call described by f. */
void cuda__agg_cfg_of(const struct func_desc *f, struct agg_cfg *c);
/* Decoding of a call described by f into its begin / end annotations,
 * shared by the driver and runtime tables. */
void cuda__decode_enter(struct model *m, struct thread *t, struct call *c,
			const struct func_desc *f);
void cuda__decode_exit(struct model *m, struct thread *t, struct call *c,
		       const struct func_desc *f);
/* "CUDA_ERROR_INVALID_VALUE" or NULL when the code is not known. */
const char *cuda__result_name(int64_t code);
/* Demangled C++ name (malloc'ed) or a copy of name; NULL on ENOMEM. */
char *cuda__demangle(const char *name);

#endif
