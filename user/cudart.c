// SPDX-License-Identifier: MIT
/* Placeholder until the CUDA runtime API (libcudart) decoder lands: no functions, no probes. */
#include "apilib.h"
#include "model.h"

static const char *func_name(uint16_t func)
{
	return "?";
}

static uint64_t cookie(uint16_t func)
{
	return CK_MAKE(LIB_CUDART, func, PK_REGS, 0, 0);
}

static void nop(struct model *m, struct thread *t, struct call *c)
{
}

static const struct lib_ops ops = {
	.name = "cudart",
	.func_name = func_name,
	.enter = nop,
	.exit = nop,
};

static const char *const watch[] = { "libcudart.so", NULL };

const struct api_lib cudart_lib = {
	.id = LIB_CUDART,
	.name = "cudart",
	.title = "CUDA runtime",
	.watch = watch,
	.nfuncs = 0,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
};
