/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of string arguments BPF could not read at a call's entry
 * (user/core/ustr.c, model__string): reading them from a live process (this
 * one), a string that ends just before an unreadable page, the
 * "(unreadable at 0x...)" placeholder and its count, and the model's
 * order of events when the string comes with the return: the call
 * begins at once (what it calls nests in it) and its name shows at its
 * end and names the handle it returns. No root, no BPF.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/apilib.h"
#include "sources/cuda/cuda.h"
#include "core/model.h"
#include "tap.h"
#include "core/ustr.h"
#include "sources/sources.h"

#define PAGE 4096

static struct model m;
static uint64_t now = 1000000;
static uint32_t pid, tid;

/* Two pages, the second PROT_NONE: strings that end at the boundary. */
static char *edge;

/* Events the model emitted, in order: "B:name", "E:name". */
static char events[16][64];
static int nevents;
static char end_name[REC_STRING_MAX];	/* the "name" / "path" annotation at the last end */
static char begin_name[REC_STRING_MAX];	/* the same at the last begin */
static char launch_kernel[REC_STRING_MAX];

static const char *annot(const struct pf_annot *a, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(a[i].name, key) && a[i].type == PA_STR)
			return a[i].s;
	return NULL;
}

static void note(char kind, const struct call *c)
{
	if (nevents < 16)
		snprintf(events[nevents++], sizeof(events[0]), "%c:%s", kind, c->name);
}

static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	const char *s = annot(c->begin, c->nbegin, "name");

	note('B', c);
	snprintf(begin_name, sizeof(begin_name), "%s", s ? s : annot(c->begin, c->nbegin, "path") ?
		 annot(c->begin, c->nbegin, "path") : "");
	s = annot(c->begin, c->nbegin, "kernel");
	if (s)
		snprintf(launch_kernel, sizeof(launch_kernel), "%s", s);
}

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	const char *s = annot(c->end, c->nend, "name");

	note('E', c);
	if (!s)
		s = annot(c->end, c->nend, "path");
	snprintf(end_name, sizeof(end_name), "%s", s ? s : "");
}

static void reset(void)
{
	nevents = 0;
	end_name[0] = begin_name[0] = launch_kernel[0] = 0;
}

static void enter(int func, uint64_t a0, uint64_t a1, uint64_t a2)
{
	struct rec_call_enter r = { .hdr = { .type = REC_CALL_ENTER, .size = sizeof(r), .pid = pid,
					     .tid = tid, .ts = now++ } };

	r.lib = LIB_CUDA;
	r.func = func;
	r.args[0] = a0;
	r.args[1] = a1;
	r.args[2] = a2;
	model__call_enter(&m, &r);
}

static void leave(int func, bool has_out, uint64_t out)
{
	struct rec_call_exit r = { .hdr = { .type = REC_CALL_EXIT, .size = sizeof(r), .pid = pid,
					    .tid = tid, .ts = now++ } };

	r.lib = LIB_CUDA;
	r.func = func;
	r.has_out = has_out;
	r.out = out;
	model__call_exit(&m, &r);
}

/* A string record as BPF sends it, through ustr__resolve as ingest does. */
static void string(int func, uint8_t flags, uint64_t addr, const char *text)
{
	struct rec_string r = { .hdr = { .type = REC_STRING, .pid = pid, .tid = tid, .ts = now++ } },
			  buf;
	const struct rec_string *use;
	size_t size;

	r.lib = LIB_CUDA;
	r.func = func;
	r.arg = 2;
	r.flags = flags;
	r.addr = addr;
	r.len = strlen(text);
	memcpy(r.str, text, r.len + 1);
	size = offsetof(struct rec_string, str) + r.len + 1;
	r.hdr.size = size;
	use = ustr__resolve(&r, &size, &buf);
	if (use != &r)
		check(size == use->hdr.size && use->len == strlen(use->str),
		      "resolved record: size %zu = header's %u, len %u", size, use->hdr.size, use->len);
	model__string(&m, use);
}

static void test_read(void)
{
	static const char text[] = "a kernel name";
	char buf[64], small[6], unread[40];
	ssize_t n;

	n = ustr__read(pid, (uintptr_t)text, buf, sizeof(buf));
	check(n == (ssize_t)strlen(text) && !strcmp(buf, text), "reads a string: %zd %s", n, buf);
	n = ustr__read(pid, (uintptr_t)text, small, sizeof(small));
	check(n == 5 && !strcmp(small, "a ker"), "truncates at the buffer, terminated: %zd %s", n,
	      small);
	/* "edge" ends exactly at the end of the readable page. */
	memcpy(edge + PAGE - 5, "edge", 5);
	n = ustr__read(pid, (uintptr_t)(edge + PAGE - 5), buf, sizeof(buf));
	check(n == 4 && !strcmp(buf, "edge"), "a string ending before an unreadable page: %zd", n);
	memcpy(edge + PAGE - 4, "cut!", 4);
	n = ustr__read(pid, (uintptr_t)(edge + PAGE - 4), buf, sizeof(buf));
	check(n == 4 && !strcmp(buf, "cut!"), "one running into an unreadable page keeps its "
	      "readable part, terminated: %zd", n);
	n = ustr__read(pid, (uintptr_t)(edge + PAGE + 8), buf, sizeof(buf));
	check(n == -EFAULT, "a PROT_NONE page: -EFAULT (%zd)", n);
	n = ustr__read(0x7ffffff0, (uintptr_t)text, buf, sizeof(buf));
	check(n == -ESRCH, "a process that is gone: -ESRCH (%zd)", n);
	ustr__unreadable(0x7f00dead0040ull, unread, sizeof(unread));
	check(!strcmp(unread, "(unreadable at 0x7f00dead0040)"), "placeholder: %s", unread);
}

static void test_resolve(void)
{
	static const char text[] = "from the process";
	struct rec_string r = { .hdr = { .type = REC_STRING, .pid = pid, .tid = tid } }, buf;
	const struct rec_string *out;
	size_t size = offsetof(struct rec_string, str) + 1;
	char want[64];

	r.hdr.size = size;
	out = ustr__resolve(&r, &size, &buf);
	check(out == &r, "a string BPF read is handed on as it is");
	r.flags = STR_PENDING;
	r.addr = (uintptr_t)text;
	check(ustr__resolve(&r, &size, &buf) == &r, "a pending one too (its return brings it)");
	r.flags = STR_LATE | STR_UNREAD;
	out = ustr__resolve(&r, &size, &buf);
	check(out == &buf && !strcmp(buf.str, text) && buf.len == strlen(text) &&
		      buf.flags == (STR_LATE | STR_UNREAD) && buf.addr == r.addr &&
		      size == offsetof(struct rec_string, str) + strlen(text) + 1,
	      "unread: read from the process (%s, flags %#x, size %zu)", buf.str, buf.flags, size);
	r.addr = 0;
	out = ustr__resolve(&r, &size, &buf);
	check(out == &buf && !strcmp(buf.str, "(null)") && !(buf.flags & STR_UNREADABLE),
	      "a NULL argument reads (null): %s", buf.str);
	r.addr = (uintptr_t)(edge + PAGE + 16);
	out = ustr__resolve(&r, &size, &buf);
	snprintf(want, sizeof(want), "(unreadable at 0x%" PRIxPTR ")", (uintptr_t)(edge + PAGE + 16));
	check(out == &buf && !strcmp(buf.str, want) && (buf.flags & STR_UNREADABLE),
	      "unreadable memory: %s, flags %#x", buf.str, buf.flags);
}

static void test_model_order(void)
{
	static const char name[] = "late_kernel";
	int get = CU_FN_cuModuleGetFunction, launch = CU_FN_cuLaunchKernel;
	int sync = CU_FN_cuCtxSynchronize;
	uint64_t late = m.strings_late;

	/* The name read at the entry: begin carries it, as before. */
	reset();
	enter(get, 0x1000, 0xabc, (uintptr_t)name);
	check(nevents == 0, "a string call waits for its string before it begins");
	string(get, 0, (uintptr_t)name, name);
	leave(get, true, 0xf1);
	check(nevents == 2 && !strcmp(begin_name, name) && !end_name[0],
	      "read at entry: the name on the begin event (%s / %s)", begin_name, end_name);

	/* Not resident at the entry: begins at once, a nested call nests in
	 * it, the name comes with the return and shows at the end. */
	reset();
	enter(get, 0x1000, 0xabc, (uintptr_t)name);
	string(get, STR_PENDING, (uintptr_t)name, "");
	enter(sync, 0, 0, 0);
	leave(sync, false, 0);
	string(get, STR_LATE, (uintptr_t)name, name);
	leave(get, true, 0xf2);
	check(nevents == 4 && !strcmp(events[0], "B:cuModuleGetFunction") &&
		      !strcmp(events[1], "B:cuCtxSynchronize") &&
		      !strcmp(events[3], "E:cuModuleGetFunction"),
	      "pending: begins before what it calls (%s %s %s %s)", events[0], events[1], events[2],
	      events[3]);
	check(!begin_name[0] && !strcmp(end_name, name), "pending: the name at the end (%s)",
	      end_name);
	check(m.strings_late == late + 1, "counted as read late");
	reset();
	enter(launch, 0xf2, 1, 1);
	leave(launch, false, 0);
	check(!strcmp(launch_kernel, name), "the handle it returned launches %s", launch_kernel);

	/* The entry's record lost: the late one begins the call with its name. */
	reset();
	enter(get, 0x1000, 0xabc, (uintptr_t)name);
	string(get, STR_LATE, (uintptr_t)name, name);
	leave(get, true, 0xf3);
	check(nevents == 2 && !strcmp(begin_name, name), "entry's record lost: begins with the "
	      "late name (%s)", begin_name);

	/* A stale late record (its call's return was missed long ago) for a
	 * call that read its string at the entry: not this call's. */
	reset();
	enter(get, 0x1000, 0xabc, (uintptr_t)name);
	string(get, 0, (uintptr_t)name, name);
	{
		uint64_t orphaned = m.strings_orphaned;

		string(get, STR_LATE, 0x1234, "other");
		check(m.strings_orphaned == orphaned + 1, "a late string for a call that has one "
		      "is an orphan");
	}
	leave(get, true, 0xf4);
	check(!strcmp(begin_name, name) && !end_name[0], "and leaves the call alone");
}

static void test_model_unreadable(void)
{
	static const char name[] = "settled_kernel";
	int get = CU_FN_cuModuleGetFunction, load = CU_FN_cuModuleLoad;
	uint64_t bad = (uintptr_t)(edge + PAGE + 32), unreadable = m.strings_unreadable;
	char want[64];

	snprintf(want, sizeof(want), "(unreadable at 0x%" PRIx64 ")", bad);
	/* Neither probe could read it, nor this process's memory. */
	reset();
	enter(load, 0x1000, bad, 0);
	string(load, STR_PENDING, bad, "");
	string(load, STR_LATE | STR_UNREAD, bad, "");
	leave(load, false, 0);
	check(!strcmp(end_name, want), "unreadable: %s", end_name);
	check(m.strings_unreadable == unreadable + 1, "and counted (%" PRIu64 ")",
	      m.strings_unreadable);

	/* The return's record never came (ring full): read at the end. */
	reset();
	enter(get, 0x1000, 0xabc, (uintptr_t)name);
	string(get, STR_PENDING, (uintptr_t)name, "");
	leave(get, true, 0xf5);
	check(!strcmp(end_name, name), "pending at the end: read from the process (%s)", end_name);
	reset();
	enter(get, 0x1000, 0xabc, bad);
	string(get, STR_PENDING, bad, "");
	leave(get, true, 0xf6);
	check(!strcmp(end_name, want) && m.strings_unreadable == unreadable + 2,
	      "pending at the end, unreadable: %s", end_name);
}

/* An exec record names the process when /proc no longer can (it exited
 * before cgbpf read the record): its arguments came with the record. */
static void test_exec_args(void)
{
	/* Above any pid_max: no /proc entry, as after the exit. */
	uint32_t gone = 0x7ffffff0;
	struct rec_exec e = { 0 };
	struct proc *p = model__proc(&m, gone);
	static const char args[] = "/bin/train\0--iters\0" "300\0";

	check(p && !p->cmdline, "no /proc, no cmdline yet");
	e.p.hdr.type = REC_PROC_EXEC;
	e.p.hdr.size = sizeof(e);
	e.p.hdr.pid = e.p.hdr.tid = gone;
	memcpy(e.p.comm, "train", 6);
	memcpy(e.args, args, sizeof(args));
	e.args_len = sizeof(args);
	model__proc_exec(&m, &e.p);
	check(p->cmdline && !strcmp(p->cmdline, "/bin/train --iters 300"), "cmdline from the record: %s",
	      p->cmdline ? p->cmdline : "(none)");
	check(!strcmp(p->comm, "train"), "comm from the record: %s", p->comm);

	/* Longer than the record holds: marked as cut. */
	memset(e.args, 'x', sizeof(e.args));
	e.args_len = sizeof(e.args);
	e.args_cut = 1;
	model__proc_exec(&m, &e.p);
	check(p->cmdline && strlen(p->cmdline) == REC_EXEC_ARGS + 4 &&
	      !strcmp(p->cmdline + REC_EXEC_ARGS, " ..."), "a cut cmdline ends in ' ...'");

	/* An older, shorter exec record (no arguments): no cmdline, no crash. */
	e.p.hdr.size = sizeof(e.p);
	model__proc_exec(&m, &e.p);
	check(!p->cmdline, "a record without arguments leaves none");
}

int main(int argc, char **argv)
{
	sources__init();
	struct sink s = { .call_begin = on_begin, .call_end = on_end };

	pid = getpid();
	tid = pid;
	edge = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (edge == MAP_FAILED || mprotect(edge + PAGE, PAGE, PROT_NONE)) {
		perror("mmap");
		return 1;
	}
	model__init(&m);
	model__add_sink(&m, &s);
	test_read();
	test_resolve();
	test_model_order();
	test_model_unreadable();
	test_exec_args();
	model__free(&m);
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
