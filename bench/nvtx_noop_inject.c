/* SPDX-License-Identifier: MIT */
/*
 * The NVTX benchmark's floor: an injection library whose push and pop do
 * nothing (return 0), so that the cost of any injection (NVTX's indirect
 * call into a shared library) is told apart from libcgbpf-nvtx.so's own.
 */
#include "nvtx_abi.h"

static int push_a(const char *msg)
{
	return 0;
}

static int pop(void)
{
	return 0;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(nvtxabi_get_export_table get)
{
	const struct nvtxabi_etbl_callbacks *cb = get(NVTXABI_ETID_CALLBACKS);
	nvtxabi_fnptr **t = 0;
	unsigned int n = 0;

	if (!cb || !cb->get_module_function_table(NVTXABI_MODULE_CORE, &t, &n) || !t ||
	    n <= NVTXABI_CORE_RangePop)
		return 0;
	*t[NVTXABI_CORE_RangePushA] = (nvtxabi_fnptr)push_a;
	*t[NVTXABI_CORE_RangePop] = (nvtxabi_fnptr)pop;
	return 1;
}
