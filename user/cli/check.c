// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "cli/check.h"
#include "core/apilib.h"
#include "core/attach.h"
#include "lib/elf/elfsym.h"
#include "lib/hmap.h"
#include "lib/log.h"

int check__run(const char *path, char **names, int n, bool attach)
{
	struct cgbpf_bpf *skel = NULL;
	struct attach *a = NULL;
	uint64_t *offs = NULL, *cookies = NULL;
	bool multi = false;
	struct elfsym *es = elfsym__open(path);
	/* The library is told by file name; the driver API when none matches. */
	const struct api_lib *lib = apilib__for_path(path, TRACE_ALL);
	struct hmap seen = { 0 };	/* offset -> index + 1 of the first name there */
	int found = 0, missing = 0, attached = 0, failed = 0, aliases = 0;
	int total;

	if (!lib)
		lib = apilib__get(LIB_CUDA);
	total = n ? n : lib->nfuncs;

	if (!es) {
		int e = errno;

		err("%s: %s%s", path, strerror(e), e == ENOENT ? " (ldconfig -p lists the "
		    "libraries on this host, /proc/PID/maps those a process uses)" : "");
		return 1;
	}
	if (attach) {
		log__hook_libbpf();
		skel = cgbpf_bpf__open();
		if (skel)
			multi = attach__prepare(skel);
		if (!skel || cgbpf_bpf__load(skel)) {
			err("loading BPF programs: %s (root needed)", strerror(errno));
			cgbpf_bpf__destroy(skel);
			elfsym__close(es);
			return 1;
		}
		a = attach__new(skel, multi, TRACE_ALL, false);
		offs = calloc(total, sizeof(*offs));
		cookies = calloc(total, sizeof(*cookies));
	}
	printf("# %s: %s, %zu function symbols, build id %s\n", path, lib->title,
	       elfsym__count(es), *elfsym__build_id(es) ? elfsym__build_id(es) : "(none)");
	for (int i = 0; i < total; i++) {
		const char *name = n ? names[i] : lib->symbol(i);
		uint64_t off, *first;

		if (elfsym__offset(es, name, &off)) {
			printf("%-36s missing\n", name);
			missing++;
			continue;
		}
		printf("%-36s 0x%" PRIx64, name, off);
		/* Aliases share an address: one probe, as record attaches. */
		first = hmap__get(&seen, off);
		if (first) {
			printf("  same address as %s (one probe)\n",
			       n ? names[*first - 1] : lib->symbol(*first - 1));
			aliases++;
			continue;
		}
		hmap__put(&seen, off, i + 1);
		found++;
		if (offs && cookies) {
			offs[found - 1] = off;
			cookies[found - 1] = n ? 0 : lib->cookie(i);
		}
		putchar('\n');
	}
	if (a && offs && cookies && found) {
		/* All at once, as record does; one by one only to name a culprit. */
		int e = attach__offsets(a, path, offs, cookies, found);

		if (!e) {
			attached = found;
		} else {
			warn("attaching %d probes at once: %s; trying one by one", found, strerror(-e));
			for (int i = 0; i < found; i++) {
				if (attach__offsets(a, path, &offs[i], &cookies[i], 1))
					failed++;
				else
					attached++;
			}
		}
	}
	printf("# %d resolved, %d missing, %d aliases%s", found, missing, aliases,
	       skel ? "" : "\n");
	if (skel)
		printf(", %d attached, %d failed to attach\n", attached, failed);
	attach__free(a);
	hmap__free(&seen);
	free(offs);
	free(cookies);
	cgbpf_bpf__destroy(skel);
	elfsym__close(es);
	return failed || (n && missing) ? 1 : 0;
}
