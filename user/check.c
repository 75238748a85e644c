// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "attach.h"
#include "check.h"
#include "cuda.h"
#include "elfsym.h"
#include "log.h"

int check__run(const char *path, char **names, int n, bool attach)
{
	struct cgbpf_bpf *skel = NULL;
	struct attach *a = NULL;
	uint64_t *offs = NULL, *cookies = NULL;
	bool multi = false;
	struct elfsym *es = elfsym__open(path);
	int found = 0, missing = 0, attached = 0, failed = 0;
	int total = n ? n : CU_FN__COUNT;

	if (!es) {
		err("%s: %s", path, strerror(errno));
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
		a = attach__new(skel, multi);
		offs = calloc(total, sizeof(*offs));
		cookies = calloc(total, sizeof(*cookies));
	}
	printf("# %s: %zu function symbols, build id %s\n", path, elfsym__count(es),
	       *elfsym__build_id(es) ? elfsym__build_id(es) : "(none)");
	for (int i = 0; i < total; i++) {
		const char *name = n ? names[i] : cuda_funcs[i].name;
		uint64_t off;

		if (elfsym__offset(es, name, &off)) {
			printf("%-36s missing\n", name);
			missing++;
			continue;
		}
		found++;
		printf("%-36s 0x%" PRIx64, name, off);
		if (offs && cookies) {
			offs[found - 1] = off;
			cookies[found - 1] = n ? 0 : cuda__cookie(i);
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
	printf("# %d resolved, %d missing%s", found, missing, skel ? "" : "\n");
	if (skel)
		printf(", %d attached, %d failed to attach\n", attached, failed);
	attach__free(a);
	free(offs);
	free(cookies);
	cgbpf_bpf__destroy(skel);
	elfsym__close(es);
	return failed || (n && missing) ? 1 : 0;
}
