// SPDX-License-Identifier: MIT
/* Placeholder until the NCCL (libnccl) decoder lands: no functions, no probes. */
#include "apilib.h"
#include "model.h"

static const char *func_name(uint16_t func)
{
	return "?";
}

static uint64_t cookie(uint16_t func)
{
	return CK_MAKE(LIB_NCCL, func, PK_REGS, 0, 0);
}

static void nop(struct model *m, struct thread *t, struct call *c)
{
}

static const struct lib_ops ops = {
	.name = "nccl",
	.func_name = func_name,
	.enter = nop,
	.exit = nop,
};

static const char *const watch[] = { "libnccl.so", NULL };

const struct api_lib nccl_lib = {
	.id = LIB_NCCL,
	.name = "nccl",
	.title = "NCCL",
	.watch = watch,
	.nfuncs = 0,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
};
