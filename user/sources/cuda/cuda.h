/* SPDX-License-Identifier: MIT */
/* The CUDA driver API domain: its function table and call decoding. */
#ifndef CGBPF_CUDA_H
#define CGBPF_CUDA_H

#include <stdint.h>
#include "cuda_funcs.h"
#include "core/model.h"

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

/* Helpers shared with the runtime API decoder (user/sources/cuda/cudart.c). */
/* Appends an annotation to a[*n] unless the array is full. */
void cuda__annot_u(struct pf_annot *a, int *n, const char *name, uint64_t v);
void cuda__annot_p(struct pf_annot *a, int *n, const char *name, uint64_t v);
void cuda__annot_s(struct pf_annot *a, int *n, const char *name, const char *v);
/* "<<<(gx,gy,gz), (bx,by,bz), smem, stream>>>", cached per process. */
const char *cuda__launch_fmt(struct proc *p, struct call *c, const uint32_t g[3],
			     const uint32_t b[3], uint32_t smem, uint64_t stream, bool ptsz);
/* The stream a call with stream argument h uses: h, or
 * GPU_STREAM_PER_THREAD for a _ptsz / _ptds entry point's NULL. */
uint64_t cuda__stream_key(uint64_t h, bool ptsz);
/* "HtoD", "DtoH", ... for the "kind" annotation. */
const char *cuda__dir_name(enum copy_dir d);
/* Remembers handle -> demangled name (p->names) for later launches. */
void cuda__remember_name(struct proc *p, uint64_t handle, const char *name);

#endif
