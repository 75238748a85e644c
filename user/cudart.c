// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime API: its table, probed in libcudart.so.* and in
 * executables that link the runtime statically; calls are decoded by the
 * driver's decoder (user/cuda.c), whose classes cover both.
 */
#include <stdlib.h>
#include <string.h>
#include "agg.h"
#include "apilib.h"
#include "cuda.h"
#include "cudart_funcs.h"
#include "model.h"

#define CR_FUNC_DESC(sym, cls_, flags_) [CR_FN_##sym] = { #sym, cls_, flags_ },
const struct func_desc cudart_funcs[CR_FN__COUNT] = { CUDART_FUNCS(CR_FUNC_DESC) };
#undef CR_FUNC_DESC

static const char *func_name(uint16_t func)
{
	return func < CR_FN__COUNT ? cudart_funcs[func].name : "cuda?";
}

static uint64_t cookie(uint16_t func)
{
	return cuda__cookie_of(LIB_CUDART, func, &cudart_funcs[func]);
}

static void enter(struct model *m, struct thread *t, struct call *c)
{
	cuda__decode_enter(m, t, c, &cudart_funcs[c->func]);
}

static void exit_(struct model *m, struct thread *t, struct call *c)
{
	cuda__decode_exit(m, t, c, &cudart_funcs[c->func]);
}

static void agg_cfg(uint16_t func, struct agg_cfg *c)
{
	cuda__agg_cfg_of(&cudart_funcs[func], c);
	c->ok_ret2 = 600;	/* cudaErrorNotReady */
}

static const struct lib_ops ops = {
	.name = "cudart",
	.func_name = func_name,
	.enter = enter,
	.exit = exit_,
};

static const char *const watch[] = { "libcudart.so", NULL };

const struct api_lib cudart_lib = {
	.id = LIB_CUDART,
	.name = "cudart",
	.title = "CUDA runtime",
	.watch = watch,
	.nfuncs = CR_FN__COUNT,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
	.agg_cfg = agg_cfg,
};
