// SPDX-License-Identifier: MIT
/*
 * Test-only USDT checker for libcgbpf-nvtx.so: attaches one BPF program to
 * each cgbpf_nvtx probe of LIB in one process and prints every probe hit
 * as a JSON line, or with --count only the number of hits.
 *
 *   nvtx_usdt [--count|--drain] LIB -- CMD [ARG...]   start CMD, trace it to its end
 *   nvtx_usdt [--count|--drain] LIB --pid PID         trace a running process
 *
 * --count: the BPF programs only count hits ("hits N" at the end);
 * --drain: records are made and consumed but not printed ("records N").
 *
 * "attached" goes to stderr once every probe is attached, "lost N" at the
 * end when the ring buffer overflowed. Exits with CMD's exit status, 1 on
 * its own errors.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "nvtx_usdt.h"
#include "nvtx_usdt.skel.h"

static const char *const names[NU__COUNT] = {
	"push", "pop", "start", "end", "mark", "name_thread", "name_category",
	"domain_create", "domain_destroy", "register_string",
};

static void json_str(const char *s, size_t cap)
{
	size_t i;

	putchar('"');
	for (i = 0; i < cap && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int drain_only;
static unsigned long long records;

static int on_event(void *ctx, void *data, size_t size)
{
	const struct nvtx_usdt_rec *r = data;
	unsigned int i;

	if (size < sizeof(*r) || r->probe >= NU__COUNT)
		return 0;
	records++;
	if (drain_only)
		return 0;
	printf("{\"probe\":\"%s\",\"tid\":%u,\"args\":[", names[r->probe], r->tid);
	for (i = 0; i < r->nargs && i < NU_MAX_ARGS; i++)
		printf("%s%llu", i ? "," : "", r->args[i]);
	printf("],\"str\":");
	json_str(r->str, sizeof(r->str));
	printf(",\"domain\":");
	json_str(r->domain, sizeof(r->domain));
	printf("}\n");
	return 0;
}

/* Sum over CPUs of slot key of the hits map. */
static unsigned long long percpu_sum(struct nvtx_usdt_bpf *skel, __u32 key)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	unsigned long long *v = calloc(ncpu > 0 ? ncpu : 1, sizeof(*v)), sum = 0;

	if (v && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.hits), &key, v))
		for (i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	return sum;
}

static int attach_all(struct nvtx_usdt_bpf *skel, pid_t pid, const char *lib)
{
	struct bpf_program *progs[NU__COUNT] = {
		skel->progs.push, skel->progs.pop, skel->progs.start, skel->progs.end,
		skel->progs.mark, skel->progs.name_thread, skel->progs.name_category,
		skel->progs.domain_create, skel->progs.domain_destroy,
		skel->progs.register_string,
	};
	int i;

	for (i = 0; i < NU__COUNT; i++) {
		struct bpf_link *l = bpf_program__attach_usdt(progs[i], pid, lib, "cgbpf_nvtx",
							      names[i], NULL);
		if (!l) {
			int err = -errno;

			fprintf(stderr, "nvtx_usdt: attach %s:cgbpf_nvtx:%s: %s\n", lib, names[i],
				strerror(-err));
			return err;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct nvtx_usdt_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	int count_only = 0, argi = 1, sync[2] = { -1, -1 }, status = 0, rc = 1;
	pid_t pid = -1, child = -1;
	const char *lib;

	if (argi < argc && !strcmp(argv[argi], "--count")) {
		count_only = 1;
		argi++;
	} else if (argi < argc && !strcmp(argv[argi], "--drain")) {
		drain_only = 1;
		argi++;
	}
	if (argc - argi < 3) {
		fprintf(stderr, "usage: nvtx_usdt [--count|--drain] LIB -- CMD [ARG...] | LIB --pid PID\n");
		return 1;
	}
	lib = argv[argi++];
	if (!strcmp(argv[argi], "--pid")) {
		char *end;

		pid = (pid_t)strtol(argv[argi + 1], &end, 10);
		if (*end || pid <= 0) {
			fprintf(stderr, "nvtx_usdt: bad pid %s\n", argv[argi + 1]);
			return 1;
		}
	} else if (strcmp(argv[argi], "--")) {
		fprintf(stderr, "nvtx_usdt: expected -- or --pid, got %s\n", argv[argi]);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	skel = nvtx_usdt_bpf__open();
	if (!skel) {
		fprintf(stderr, "nvtx_usdt: open: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->count_only = count_only;
	if (nvtx_usdt_bpf__load(skel)) {
		fprintf(stderr, "nvtx_usdt: load: %s (root?)\n", strerror(errno));
		goto cleanup;
	}
	if (pid < 0) {
		/* The child waits until every probe is attached, then execs. */
		if (pipe(sync)) {
			perror("nvtx_usdt: pipe");
			goto cleanup;
		}
		child = fork();
		if (child < 0) {
			perror("nvtx_usdt: fork");
			goto cleanup;
		}
		if (child == 0) {
			char c;

			close(sync[1]);
			if (read(sync[0], &c, 1) != 1)
				_exit(127);
			execvp(argv[argi + 1], argv + argi + 1);
			fprintf(stderr, "nvtx_usdt: exec %s: %s\n", argv[argi + 1], strerror(errno));
			_exit(127);
		}
		close(sync[0]);
		pid = child;
	}
	if (attach_all(skel, pid, lib))
		goto cleanup;
	fprintf(stderr, "attached\n");
	if (child > 0) {
		if (write(sync[1], "g", 1) != 1)
			goto cleanup;
		close(sync[1]);
		sync[1] = -1;
	}
	if (!count_only) {
		rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, NULL, NULL);
		if (!rb) {
			fprintf(stderr, "nvtx_usdt: ring buffer: %s\n", strerror(errno));
			goto cleanup;
		}
	}
	for (;;) {
		if (rb)
			ring_buffer__poll(rb, 50);
		else
			usleep(50000);
		if (child > 0) {
			if (waitpid(child, &status, WNOHANG) == child) {
				child = -1;
				break;
			}
		} else if (kill(pid, 0) && errno == ESRCH) {
			break;
		}
	}
	if (rb)
		ring_buffer__consume(rb);
	if (count_only)
		printf("hits %llu\n", percpu_sum(skel, 0));
	if (drain_only)
		printf("records %llu\n", records);
	else if (percpu_sum(skel, 1))
		fprintf(stderr, "lost %llu\n", percpu_sum(skel, 1));
	if (WIFEXITED(status))
		rc = WEXITSTATUS(status);
	else
		rc = 128 + WTERMSIG(status);
cleanup:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	if (sync[1] >= 0)
		close(sync[1]);
	ring_buffer__free(rb);
	nvtx_usdt_bpf__destroy(skel);
	return rc;
}
