// SPDX-License-Identifier: MIT
/*
 * Does a perf-event uprobe opened with attr.inherit follow a process into
 * its forked children, with a BPF program attached, on this kernel (issue
 * 27)? And does it cost the child anything it would notice?
 *
 *   inherit_probe [--children N] [--user UID] [--no-inherit]
 *
 * Forks a target that waits for a go, then calls probe_me() once, forks N
 * children (each calls probe_me() once and exits 0) and waits for them,
 * counting the forks that failed (and their errno). Meanwhile this
 * program opens a uprobe on probe_me through the uprobe PMU (perf_event_open,
 * pid = the target, cpu = -1, inherit = 1 unless --no-inherit), attaches
 * a BPF program that counts hits per process (tests/bpf/inherit_probe.bpf.c),
 * enables it and sends the go. With --user the target drops to UID first
 * (as an unprivileged training process would be).
 *
 * Prints one JSON line: {"inherit": B, "uid": U, "children": N,
 * "forks_failed": F, "fork_errno": E, "target_hits": H, "children_hit":
 * C, "child_hits": S, "fork_us": M}, where fork_us is the target's mean
 * fork+wait time in µs. Exit 0 when it ran (whatever it found), 1 on its
 * own errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "inherit_probe.skel.h"

static volatile int sink;

__attribute__((noinline)) void probe_me(void)
{
	sink++;
	__asm__ volatile("" ::: "memory");
}

/* The file offset of addr in this program's own mapping of path. */
static long file_offset(const void *addr, char *path, size_t n)
{
	unsigned long lo, hi, off, a = (unsigned long)addr;
	char line[4096], file[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	long ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		file[0] = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &off, file) < 3)
			continue;
		if (a >= lo && a < hi && file[0] == '/') {
			snprintf(path, n, "%s", file);
			ret = (long)(a - lo + off);
			break;
		}
	}
	fclose(f);
	return ret;
}

static int uprobe_type(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	int t = -1;

	if (f) {
		if (fscanf(f, "%d", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The target: waits for the go on gofd, then probe_me(), then n children
 * that call it once each. Reports "failed errno total_ns" on repfd. */
static void target(int gofd, int repfd, int n, int uid)
{
	int failed = 0, err = 0;
	uint64_t t0;
	char c, rep[64];

	if (uid >= 0 && (setgid((gid_t)uid) || setuid((uid_t)uid)))
		_exit(3);
	if (read(gofd, &c, 1) != 1)
		_exit(4);
	probe_me();
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		pid_t p = fork();

		if (p == 0) {
			probe_me();
			_exit(0);
		}
		if (p < 0) {
			failed++;
			err = errno;
			continue;
		}
		waitpid(p, NULL, 0);
	}
	snprintf(rep, sizeof(rep), "%d %d %" PRIu64 "\n", failed, err, now_ns() - t0);
	if (write(repfd, rep, strlen(rep)) < 0)
		_exit(5);
	_exit(0);
}

int main(int argc, char **argv)
{
	int n = 10, uid = -1, inherit = 1, go[2], rep[2], pfd, type, children_hit = 0, status;
	struct perf_event_attr attr;
	struct inherit_probe_bpf *skel;
	uint64_t target_hits = 0, child_hits = 0, total_ns = 0;
	int failed = -1, ferr = 0;
	char path[4096], buf[128];
	long off;
	pid_t t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--children") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--user") && i + 1 < argc)
			uid = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-inherit"))
			inherit = 0;
		else {
			fprintf(stderr, "usage: inherit_probe [--children N] [--user UID] "
					"[--no-inherit]\n");
			return 1;
		}
	}
	off = file_offset((const void *)probe_me, path, sizeof(path));
	type = uprobe_type();
	if (off < 0 || type < 0) {
		fprintf(stderr, "inherit_probe: no offset (%ld) or no uprobe PMU (%d)\n", off, type);
		return 1;
	}
	if (pipe(go) || pipe(rep))
		return 1;
	t = fork();
	if (t == 0) {
		close(go[1]);
		close(rep[0]);
		target(go[0], rep[1], n, uid);
	}
	close(go[0]);
	close(rep[1]);
	skel = inherit_probe_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "inherit_probe: loading the BPF program failed\n");
		kill(t, SIGKILL);
		return 1;
	}
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = (uint32_t)type;
	attr.config1 = (uint64_t)(uintptr_t)path;	/* uprobe_path */
	attr.config2 = (uint64_t)off;			/* probe_offset */
	attr.inherit = inherit;
	attr.sample_period = 1;
	attr.wakeup_events = 1;
	pfd = (int)syscall(SYS_perf_event_open, &attr, t, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0 || ioctl(pfd, PERF_EVENT_IOC_SET_BPF, bpf_program__fd(skel->progs.hit)) ||
	    ioctl(pfd, PERF_EVENT_IOC_ENABLE, 0)) {
		fprintf(stderr, "inherit_probe: the perf-event uprobe: %s\n", strerror(errno));
		kill(t, SIGKILL);
		return 1;
	}
	if (write(go[1], "g", 1) != 1)
		return 1;
	{
		ssize_t r = read(rep[0], buf, sizeof(buf) - 1);

		if (r > 0) {
			buf[r] = 0;
			sscanf(buf, "%d %d %" SCNu64, &failed, &ferr, &total_ns);
		}
	}
	waitpid(t, &status, 0);
	{
		int fd = bpf_map__fd(skel->maps.hits);
		uint32_t k, *prev = NULL;
		uint64_t v;

		while (!bpf_map_get_next_key(fd, prev, &k)) {
			if (!bpf_map_lookup_elem(fd, &k, &v)) {
				if ((pid_t)k == t) {
					target_hits += v;
				} else {
					children_hit++;
					child_hits += v;
				}
			}
			prev = &k;
		}
	}
	printf("{\"inherit\": %s, \"uid\": %d, \"children\": %d, \"forks_failed\": %d, "
	       "\"fork_errno\": %d, \"target_hits\": %" PRIu64 ", \"children_hit\": %d, "
	       "\"child_hits\": %" PRIu64 ", \"fork_us\": %.1f, \"target_status\": %d}\n",
	       inherit ? "true" : "false", uid, n, failed, ferr, target_hits, children_hit,
	       child_hits, n ? (double)total_ns / n / 1e3 : 0.0, status);
	close(pfd);
	inherit_probe_bpf__destroy(skel);
	return 0;
}
