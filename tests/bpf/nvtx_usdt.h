/* SPDX-License-Identifier: MIT */
/* Records of the test-only USDT checker for libcgbpf-nvtx.so. */
#ifndef NVTX_USDT_H
#define NVTX_USDT_H

enum nvtx_usdt_probe {
	NU_PUSH, NU_POP, NU_START, NU_END, NU_MARK, NU_NAME_THREAD,
	NU_NAME_CATEGORY, NU_DOMAIN_CREATE, NU_DOMAIN_DESTROY,
	NU_REGISTER_STRING, NU__COUNT
};

#define NU_MAX_ARGS 9
#define NU_STR 128

struct nvtx_usdt_rec {
	unsigned int probe;
	unsigned int tid;
	unsigned int nargs;
	unsigned int pad;
	unsigned long long args[NU_MAX_ARGS];
	char str[NU_STR];	/* the probe's string argument, if any */
	char domain[NU_STR];	/* read through the domain handle, if not 0 */
};

#endif
