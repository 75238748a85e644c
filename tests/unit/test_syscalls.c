// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/sources/syscalls/syscalls.c: the name table, futex op and fd
 * decoding, record -> model event (annotations), and the summary table.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/model.h"
#include "sources/syscalls/syscalls.h"
#include "tap.h"
#include "sources/sources.h"

static struct syscall_ev last;
static int nev;

static char pool[2 * SYS_ANNOTS][96];

/* Keeps a copy: the event's strings live in the caller's frame. */
static void on_syscall(void *ctx, struct thread *t, const struct syscall_ev *e)
{
	int k = 0;

	last = *e;
	for (int i = 0; i < last.nbegin; i++)
		if (last.begin[i].type == PA_STR)
			last.begin[i].s = strncpy(pool[k++], last.begin[i].s, 95);
	for (int i = 0; i < last.nend; i++)
		if (last.end[i].type == PA_STR)
			last.end[i].s = strncpy(pool[k++], last.end[i].s, 95);
	nev++;
}

static const struct pf_annot *annot(const struct pf_annot *a, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(a[i].name, name))
			return &a[i];
	return NULL;
}

static void test_names(void)
{
	char b[24];

	check(!strcmp(syscalls__name(0, b, sizeof(b)), "read"), "nr 0 is read");
	check(!strcmp(syscalls__name(16, b, sizeof(b)), "ioctl"), "nr 16 is ioctl (NR_ioctl in BPF)");
	check(!strcmp(syscalls__name(202, b, sizeof(b)), "futex"), "nr 202 is futex");
	check(!strcmp(syscalls__name(335, b, sizeof(b)), "uretprobe"),
	      "nr 335 is uretprobe (skipped in BPF)");
	check(!strcmp(syscalls__name(336, b, sizeof(b)), "uprobe"), "nr 336 is uprobe");
	check(!strcmp(syscalls__name(469, b, sizeof(b)), "file_setattr"), "6.17's file_setattr");
	check(!strcmp(syscalls__name(999, b, sizeof(b)), "syscall_999"), "unknown: syscall_999");
	check(!strcmp(syscalls__name(400, b, sizeof(b)), "syscall_400"), "a hole in the table");
}

static void test_futex(void)
{
	char b[64];

	check(!strcmp(syscalls__futex_op(0, b, sizeof(b)), "FUTEX_WAIT"), "op 0");
	check(!strcmp(syscalls__futex_op(128, b, sizeof(b)), "FUTEX_WAIT_PRIVATE"), "op 128");
	check(!strcmp(syscalls__futex_op(129, b, sizeof(b)), "FUTEX_WAKE_PRIVATE"), "op 129");
	check(!strcmp(syscalls__futex_op(9 | 128 | 256, b, sizeof(b)),
		      "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"), "bitset, realtime");
	check(!strcmp(syscalls__futex_op(99, b, sizeof(b)), "99"), "unknown op as a number");
}

static void test_fd_names(void)
{
	struct sys_fd fd = { .found = 1, .rooted = 1, .nparts = 2 };
	char b[96];

	strcpy(fd.part[0], "nvidiactl");
	strcpy(fd.part[1], "dev");
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), "/dev/nvidiactl"), "/dev/nvidiactl");
	fd.rooted = 0;
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), ".../dev/nvidiactl"),
	      "walk cut short: ...");
	memset(fd.part, 'a', sizeof(fd.part));	/* unterminated components */
	fd.nparts = 3;
	fd.rooted = 1;
	syscalls__fd_name(&fd, b, 20);
	check(strlen(b) == 19 && b[0] == '/', "unterminated parts cut to the buffer (%s)", b);
	memset(&fd, 0, sizeof(fd));
	fd.found = fd.rooted = 1;
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), "/"), "the root directory");
	memset(&fd, 0, sizeof(fd));
	fd.found = 1;
	fd.pseudo = 1;
	fd.nparts = 1;
	fd.magic = 0x50495045;
	fd.ino = 1234;
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), "pipe:[1234]"), "pipe");
	fd.magic = 0x534F434B;
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), "socket:[1234]"), "socket");
	fd.magic = 0x09041934;
	strcpy(fd.part[0], "[eventfd]");
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), "anon_inode:[eventfd]"), "anon inode");
	fd.found = 0;
	check(!strcmp(syscalls__fd_name(&fd, b, sizeof(b)), "(not open)"), "closed fd");
}

static void test_model_events(void)
{
	struct model m;
	struct sink sk = { .syscall = on_syscall };
	struct rec_syscall r = { 0 };
	const struct pf_annot *a;

	model__init(&m);
	model__add_sink(&m, &sk);
	r.hdr.type = REC_SYSCALL;
	r.hdr.size = sizeof(r);
	r.hdr.pid = r.hdr.tid = getpid();
	r.hdr.ts = 1000;
	r.dur = 500;
	r.nr = 16;
	r.ret = -25;
	r.args[0] = 7;
	r.args[1] = 0x541b;
	r.fd.found = r.fd.rooted = 1;
	r.fd.nparts = 2;
	strcpy(r.fd.part[0], "null");
	strcpy(r.fd.part[1], "dev");
	model__syscall(&m, &r);
	check(nev == 1 && !strcmp(last.name, "ioctl"), "ioctl event");
	check(last.ts == 1000 && last.end_ts == 1500, "entry and exit times");
	a = annot(last.begin, last.nbegin, "target");
	check(a && a->type == PA_STR && !strcmp(a->s, "/dev/null"), "target /dev/null");
	a = annot(last.begin, last.nbegin, "fd");
	check(a && a->i == 7, "fd 7");
	a = annot(last.begin, last.nbegin, "request");
	check(a && !strcmp(a->s, "0x541b"), "request");
	a = annot(last.end, last.nend, "errno");
	check(a && !strcmp(a->s, "ENOTTY"), "errno ENOTTY");
	a = annot(last.end, last.nend, "ret");
	check(a && a->i == -25, "ret -25");

	r.ret = -512;
	model__syscall(&m, &r);
	a = annot(last.end, last.nend, "errno");
	check(a && !strcmp(a->s, "ERESTARTSYS"), "kernel-internal ERESTARTSYS named");
	r.ret = -25;

	r.hdr.size = REC_SYSCALL_BASE_SIZE;	/* an ioctl record without its fd part */
	model__syscall(&m, &r);
	check(!annot(last.begin, last.nbegin, "target"), "no target without the fd part");

	memset(&r.fd, 0, sizeof(r.fd));
	r.nr = 202;
	r.args[0] = 0x1000;
	r.args[1] = 128;
	r.ret = 0;
	model__syscall(&m, &r);
	a = annot(last.begin, last.nbegin, "op");
	check(a && !strcmp(a->s, "FUTEX_WAIT_PRIVATE"), "futex op");
	check(!annot(last.end, last.nend, "errno"), "no errno on success");
	check(!annot(last.begin, last.nbegin, "fd"), "futex has no fd");
	model__free(&m);
}

static void test_summary(void)
{
	struct syssum *s = syssum__new();
	struct syscall_ev e = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	e.nr = 35;	/* nanosleep */
	for (int i = 1; i <= 3; i++) {
		e.ts = 0;
		e.end_ts = i * 1000000;
		syssum__add(s, &e);
	}
	e.nr = 39;	/* getpid */
	e.end_ts = 2000;
	syssum__add(s, &e);
	e.nr = 5000;	/* beyond the table */
	syssum__add(s, &e);
	check(syssum__calls(s, 35) == 3 && syssum__calls(s, 39) == 1, "counts per syscall");
	f = open_memstream(&buf, &len);
	syssum__print(s, 1000, f);
	fclose(f);
	check(strstr(buf, "only syscalls lasting >= 1000 ns") != NULL, "threshold stated");
	check(strstr(buf, "StdDev (ns)  Name") != NULL, "columns");
	{
		const char *ln = strstr(buf, "\n ");
		double pct, avg, sd;
		unsigned long tot, n, med, mn, mx;
		char name[32];

		/* The first row after the header: the biggest total. */
		ln = ln ? strstr(strstr(buf, "Name\n"), "\n") : NULL;
		check(ln && sscanf(ln, " %lf %lu %lu %lf %lu %lu %lu %lf %31s", &pct, &tot, &n, &avg,
				   &med, &mn, &mx, &sd, name) == 9 && !strcmp(name, "nanosleep") &&
		      tot == 6000000 && n == 3 && avg == 2000000.0 && med == 2000000 &&
		      mn == 1000000 && mx == 3000000 && sd == 1000000.0,
		      "nanosleep row: total, calls, avg, median, min, max, stddev");
	}
	check(strstr(buf, "nanosleep") < strstr(buf, "getpid"), "sorted by total time");
	check(strstr(buf, "(numbers beyond the table)") != NULL, "unknown numbers kept");
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	syssum__print(s, UINT64_MAX, f);
	fclose(f);
	check(strstr(buf, "not traced") != NULL, "off");
	free(buf);
	syssum__free(s);
	syssum__free(NULL);
}

int main(void)
{
	sources__init();
	test_names();
	test_futex();
	test_fd_names();
	test_model_events();
	test_summary();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
