// SPDX-License-Identifier: MIT
/*
 * An LD_AUDIT library for test_python's late relocation test: when the
 * loader has mapped libpython (la_objopen: mapped, not yet relocated), it
 * waits SLOWRELOC_MS (default 200) before letting the loader go on, so
 * cgbpf finds an interpreter whose PyCode_Type.tp_dealloc still holds its
 * link-time address, as it can on a busy machine right at a python's exec.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

unsigned int la_version(unsigned int version)
{
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	const char *ms = getenv("SLOWRELOC_MS");
	long n = ms ? atol(ms) : 200;

	(void)lmid;
	(void)cookie;
	if (map->l_name && strstr(map->l_name, "libpython"))
		nanosleep(&(struct timespec){ .tv_sec = n / 1000, .tv_nsec = n % 1000 * 1000000 },
			  NULL);
	return 0;
}
