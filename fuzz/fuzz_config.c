// SPDX-License-Identifier: MIT
/*
 * The monitor's config file (`cgbpf monitor --config FILE`; whoever can
 * write the file chooses the options of a daemon running as root):
 * config__parse, then the same option parser the command line goes
 * through (monitor_args, with the value parsers: durations, sizes,
 * --trace lists, --comm and --cgroup lists). main.c is compiled into this
 * harness to reach its static parsers; its main() is renamed away.
 */
#include <stdio.h>
#include "fuzz.h"

#define main cgbpf_main
#include "../user/cli/main.c"
#undef main

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	devnull = fopen("/dev/null", "we");
	if (!devnull)
		abort();
	return 0;
}

static void free_list(char **l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i]);
	free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct monitor_opts mo = { .listen = MONITOR_DEFAULT_LISTEN };
	struct record_opts o = { .trace_mask = TRACE_ALL };
	char **av, msg[256];
	FILE *saved = stderr;
	int ac;

	if (config__parse((const char *)data, size, &av, &ac, msg, sizeof(msg)))
		return 0;
	/* Its usage messages: what a user sees, not a finding. */
	stderr = devnull;
	monitor_args(ac, av, &o, &mo, true);
	stderr = saved;
	fuzz_quiet();
	sources__init();	/* -v in the file raised it */
	free_list(o.comms, o.ncomm);
	free_list(o.cgroups, o.ncgroup);
	config__free(av, ac);
	return 0;
}
