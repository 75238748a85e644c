// SPDX-License-Identifier: MIT
#include "sources/sources.h"

/*
 * The event sources of a capture, in the order record.c calls them
 * (user/core/source.h). NCCL comes first, with no programs: its trace
 * sinks must go around the trace writer's, the only sink when its init runs
 * (user/sources/nccl/ncclsrc.c). The scheduler comes first of those with
 * programs: they share a tracepoint (sched_process_exit) with the core's
 * and must see a target before the core forgets it. Stacks come before
 * NVTX so that a process's maps are read before anything else that exits
 * it. Python comes before stacks: a backtrace's or sample's Python frames
 * arrive first and the stacks source takes them (the model's stack_py
 * hook, user/core/model.h).
 */
const struct source *const sources[] = {
	&src_nccl,
	&src_sched,
	&src_python,
	&src_stacks,
	&src_syscalls,
	&src_nvtx,
	&src_gpu,
	NULL,
};

void sources__init(void)
{
	static const struct api_lib *const libs[] = { &cuda_lib, &cudart_lib, &nccl_lib, &nvtx_lib };

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		apilib__register(libs[i]);
}
