// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "check.h"
#include "cuda.h"
#include "elfsym.h"
#include "log.h"

int check__run(const char *path, char **names, int n, bool attach)
{
	struct cgbpf_bpf *skel = NULL;
	struct elfsym *es = elfsym__open(path);
	int found = 0, missing = 0, attached = 0, failed = 0;
	int total = n ? n : CU_FN__COUNT;

	if (!es) {
		err("%s: %s", path, strerror(errno));
		return 1;
	}
	if (attach) {
		log__hook_libbpf();
		skel = cgbpf_bpf__open_and_load();
		if (!skel) {
			err("loading BPF programs: %s (root needed)", strerror(errno));
			elfsym__close(es);
			return 1;
		}
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
		if (skel) {
			LIBBPF_OPTS(bpf_uprobe_opts, o);
			struct bpf_link *in, *out;

			in = bpf_program__attach_uprobe_opts(skel->progs.call_enter, -1, path, off, &o);
			o.retprobe = true;
			out = bpf_program__attach_uprobe_opts(skel->progs.call_exit, -1, path, off, &o);
			if (in && out) {
				attached++;
				printf(" attached");
			} else {
				failed++;
				printf(" attach failed: %s", strerror(errno));
			}
			bpf_link__destroy(in);
			bpf_link__destroy(out);
		}
		putchar('\n');
	}
	printf("# %d resolved, %d missing%s", found, missing, skel ? "" : "\n");
	if (skel)
		printf(", %d attached, %d failed to attach\n", attached, failed);
	cgbpf_bpf__destroy(skel);
	elfsym__close(es);
	return failed || (n && missing) ? 1 : 0;
}
