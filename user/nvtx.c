// SPDX-License-Identifier: MIT
/* Placeholder until the NVTX ranges decoder lands: no functions, no probes. */
#include "apilib.h"
#include "model.h"

static const char *func_name(uint16_t func)
{
	return "?";
}

static uint64_t cookie(uint16_t func)
{
	return CK_MAKE(LIB_NVTX, func, PK_REGS, 0, 0);
}

static void nop(struct model *m, struct thread *t, struct call *c)
{
}

static const struct lib_ops ops = {
	.name = "nvtx",
	.func_name = func_name,
	.enter = nop,
	.exit = nop,
};

static const char *const watch[] = { "libnvToolsExt.so", NULL };

const struct api_lib nvtx_lib = {
	.id = LIB_NVTX,
	.name = "nvtx",
	.title = "NVTX",
	.watch = watch,
	.nfuncs = 0,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
};
