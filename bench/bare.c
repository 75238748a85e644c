// SPDX-License-Identifier: MIT
/*
 * bare: attaches bench/bare.bpf.c's empty programs as entry and return
 * uprobes on one function, in every process (pid -1), until SIGINT or
 * SIGTERM. It is the baseline bench/run.sh measures cgbpf against.
 *
 * Usage: bare [--multi | --floor[=MASK]] [--pid PID] LIBRARY OFFSET[,OFFSET...]
 *
 * OFFSET is the function's file offset (as `cgbpf check LIBRARY FUNC`
 * prints it). --multi attaches through a uprobe_multi link, as cgbpf does
 * on kernels that have them; without it, through perf-event uprobes.
 * With --multi, several offsets (every function cgbpf probes in the
 * library, say) go into the one link, and --pid PID limits it to that
 * process, as cgbpf's links for -p are: the kernel's cost of many probes
 * on one file and of its pid filter, without any program's work.
 * --floor attaches the "floor" pair through uprobe_multi: two timestamps
 * and one 32-byte ring record per call, drained by a thread here; MASK
 * picks parts of that work (1 clock reads, 2 task storage, 4 the record;
 * default 7) to see what each costs, and adds what cgbpf does beyond it
 * (8 a 120-byte entry record, 16 with three stack arguments read from
 * user memory, 32 the ring's fill read at each record, 64 with 16: read
 * 8 bytes instead of 24). Prints
 * "bare: attached" on stdout once both probes are live; exits 3 when the
 * kernel has no uprobe_multi links.
 *
 * --sys=MODE (before the other options) also attaches no-op syscall hooks
 * (bare.bpf.c): tp (sys_enter and sys_exit tracepoints), tpexit (sys_exit
 * alone), fentry (fentry and fexit on x64_sys_call), fexit (fexit alone).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "bare.skel.h"
#include "core/uprobe_multi.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static int drain_one(void *ctx, void *data, size_t size)
{
	(*(uint64_t *)ctx)++;
	return 0;
}

/* The consumer of --floor: polls like cgbpf (50 ms timeout, no wakeups). */
static void *drain(void *arg)
{
	struct ring_buffer *rb = arg;

	while (!stop)
		ring_buffer__poll(rb, 50);
	return NULL;
}

static int quiet(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	return lvl == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_uprobe_opts, eopts, .retprobe = false);
	LIBBPF_OPTS(bpf_uprobe_opts, ropts, .retprobe = true);
	struct sigaction sa = { .sa_handler = on_signal };
	struct bpf_link *el = NULL, *rl = NULL;
	struct bare_bpf *skel;
	sigset_t block, old;
	int efd = -1, rfd = -1, ret = 1;
	const char *path;
	bool multi = false, floor_ = false;
	struct ring_buffer *rb = NULL;
	uint64_t offs[256], cookies[256] = { 0 }, drained = 0;
	size_t noff = 0;
	int pid = -1;
	unsigned long parts = 7;
	pthread_t drainer;
	bool draining = false;
	char *end;
	int ai = 1;
	const char *sys = NULL;
	struct bpf_link *sl[4];
	int nsl = 0;

	if (argc > 1 && !strncmp(argv[1], "--sys=", 6)) {
		sys = argv[1] + 6;
		if (strcmp(sys, "tp") && strcmp(sys, "tpexit") && strcmp(sys, "fentry") &&
		    strcmp(sys, "fexit") && strncmp(sys, "perf:", 5)) {
			fprintf(stderr, "bare: --sys= takes tp, tpexit, fentry, fexit or perf:SYSCALL\n");
			return 2;
		}
		ai++;
	}
	if (argc > ai && !strcmp(argv[ai], "--multi")) {
		multi = true;
		ai++;
	} else if (argc > ai && !strncmp(argv[ai], "--floor", 7) &&
		   (!argv[ai][7] || argv[ai][7] == '=')) {
		multi = floor_ = true;
		parts = argv[ai][7] ? strtoul(argv[ai] + 8, NULL, 0) : 7;
		ai++;
	}
	if (argc - ai > 2 && !strcmp(argv[ai], "--pid")) {
		pid = atoi(argv[ai + 1]);
		ai += 2;
	}
	if (argc - ai != 2 || (pid != -1 && (pid <= 0 || !multi))) {
		fprintf(stderr, "usage: bare [--sys=MODE] [--multi | --floor[=MASK]] [--pid PID] LIBRARY "
			"OFFSET[,OFFSET...]\n(--pid and several offsets: with --multi)\n");
		return 2;
	}
	path = argv[ai];
	for (char *p = argv[ai + 1];; p = end + 1) {
		errno = 0;
		offs[noff] = strtoull(p, &end, 0);
		if (errno || end == p || (*end && *end != ',') || noff == 256) {
			fprintf(stderr, "bare: bad offset list %s\n", argv[ai + 1]);
			return 2;
		}
		noff++;
		if (!*end)
			break;
	}
	if (noff > 1 && !multi) {
		fprintf(stderr, "bare: several offsets need --multi\n");
		return 2;
	}
	if (multi && !uprobe_multi__supported()) {
		fprintf(stderr, "bare: this kernel has no uprobe_multi links\n");
		return 3;
	}
	libbpf_set_print(quiet);
	skel = bare_bpf__open();
	if (!skel) {
		fprintf(stderr, "bare: opening the BPF object: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->floor_parts = parts;
	/* Load only the pair in use: the other pairs' attach type may not exist. */
	bpf_program__set_autoload(skel->progs.bare_enter, !multi);
	bpf_program__set_autoload(skel->progs.bare_exit, !multi);
	bpf_program__set_autoload(skel->progs.bare_enter_multi, multi && !floor_);
	bpf_program__set_autoload(skel->progs.bare_exit_multi, multi && !floor_);
	bpf_program__set_autoload(skel->progs.floor_enter_multi, floor_);
	bpf_program__set_autoload(skel->progs.floor_exit_multi, floor_);
	bpf_program__set_autoload(skel->progs.noop_sys_enter, sys && !strcmp(sys, "tp"));
	bpf_program__set_autoload(skel->progs.noop_sys_exit, sys && !strncmp(sys, "tp", 2));
	bpf_program__set_autoload(skel->progs.noop_call_enter, sys && !strcmp(sys, "fentry"));
	bpf_program__set_autoload(skel->progs.noop_call_exit, sys && sys[0] == 'f');
	bpf_program__set_autoload(skel->progs.noop_perf_enter, sys && !strncmp(sys, "perf:", 5));
	bpf_program__set_autoload(skel->progs.noop_perf_exit, sys && !strncmp(sys, "perf:", 5));
	if (multi) {
		bpf_program__set_expected_attach_type(floor_ ? skel->progs.floor_enter_multi :
						      skel->progs.bare_enter_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(floor_ ? skel->progs.floor_exit_multi :
						      skel->progs.bare_exit_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
	}
	if (bare_bpf__load(skel)) {
		fprintf(stderr, "bare: loading BPF programs: %s (root needed)\n", strerror(errno));
		goto out;
	}
	if (multi) {
		efd = uprobe_multi__link(bpf_program__fd(floor_ ? skel->progs.floor_enter_multi :
							  skel->progs.bare_enter_multi),
					 path, offs, cookies, noff, false, pid > 0 ? pid : 0);
		rfd = efd < 0 ? -1 :
		      uprobe_multi__link(bpf_program__fd(floor_ ? skel->progs.floor_exit_multi :
							 skel->progs.bare_exit_multi),
					 path, offs, cookies, noff, true, pid > 0 ? pid : 0);
		if (efd < 0 || rfd < 0) {
			fprintf(stderr, "bare: uprobe_multi link on %s+%#llx (%zu offsets): %s\n",
				path, (unsigned long long)offs[0], noff, strerror(errno));
			goto out;
		}
	} else {
		el = bpf_program__attach_uprobe_opts(skel->progs.bare_enter, -1, path, offs[0],
						     &eopts);
		rl = el ? bpf_program__attach_uprobe_opts(skel->progs.bare_exit, -1, path, offs[0],
							  &ropts) : NULL;
		if (!el || !rl) {
			fprintf(stderr, "bare: uprobe on %s+%#llx: %s\n", path,
				(unsigned long long)offs[0], strerror(errno));
			goto out;
		}
	}
	if (sys && !strncmp(sys, "perf:", 5)) {
		char tp[2][64];

		snprintf(tp[0], sizeof(tp[0]), "sys_enter_%s", sys + 5);
		snprintf(tp[1], sizeof(tp[1]), "sys_exit_%s", sys + 5);
		for (int i = 0; i < 2; i++) {
			sl[nsl] = bpf_program__attach_tracepoint(i ? skel->progs.noop_perf_exit :
								 skel->progs.noop_perf_enter,
								 "syscalls", tp[i]);
			if (!sl[nsl]) {
				fprintf(stderr, "bare: syscalls:%s: %s\n", tp[i], strerror(errno));
				goto out;
			}
			nsl++;
		}
	} else if (sys) {
		struct bpf_program *sp[] = { skel->progs.noop_sys_enter, skel->progs.noop_sys_exit,
					     skel->progs.noop_call_enter, skel->progs.noop_call_exit };

		for (int i = 0; i < 4; i++) {
			if (!bpf_program__autoload(sp[i]))
				continue;
			sl[nsl] = bpf_program__attach(sp[i]);
			if (!sl[nsl]) {
				fprintf(stderr, "bare: syscall hook %s: %s\n",
					bpf_program__name(sp[i]), strerror(errno));
				goto out;
			}
			nsl++;
		}
	}
	/* Blocked until sigsuspend: a signal between the test and the wait is not lost. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* Created with the signals blocked: only this thread takes them. */
	if (floor_) {
		rb = ring_buffer__new(bpf_map__fd(skel->maps.floor_ring), drain_one, &drained, NULL);
		if (!rb || pthread_create(&drainer, NULL, drain, rb)) {
			fprintf(stderr, "bare: ring consumer: %s\n", strerror(errno));
			goto out;
		}
		draining = true;
	}
	printf("bare: attached (%s)\n", floor_ ? "uprobe_multi, floor programs" :
	       multi ? "uprobe_multi" : "perf-event uprobes");
	fflush(stdout);
	while (!stop)
		sigsuspend(&old);
	ret = 0;
out:
	if (draining) {
		stop = 1;
		pthread_join(drainer, NULL);
		ring_buffer__consume(rb);
		printf("bare: %llu records drained\n", (unsigned long long)drained);
	}
	ring_buffer__free(rb);
	if (efd >= 0)
		close(efd);
	if (rfd >= 0)
		close(rfd);
	bpf_link__destroy(el);
	bpf_link__destroy(rl);
	while (nsl > 0)
		bpf_link__destroy(sl[--nsl]);
	bare_bpf__destroy(skel);
	return ret;
}
