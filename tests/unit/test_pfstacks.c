/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the CPU sample writer (user/sources/stacks/pfstacks.c) and of backtraces
 * on slice ends (pftrace__end_stack).
 *
 * Usage: test_pfstacks DIR
 * Writes DIR/pfstacks.perfetto-trace with known content; check_pfstacks.sh
 * decodes it with protoc and tests/lib/ptrace.py (check_pfstacks.py knows
 * the content below and compares). Here only what the API says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/model.h"
#include "sources/stacks/pfstacks.h"
#include "out/perfetto.h"
#include "tap.h"
#include "sources/sources.h"

#define T0 1000000000ull
#define NUNIQUE 70000	/* distinct frames: more than one interning generation */

static struct sym_frame frame(const char *fn, const char *mod, uint64_t start, uint64_t off,
			      bool kernel)
{
	return (struct sym_frame){
		.ip = start + off, .function = fn, .module = mod, .module_off = off,
		.module_start = start, .module_end = start + 0x100000,
		.build_id = mod && !kernel ? "0123456789abcdef0123456789abcdef01234567" : NULL,
		.kernel = kernel,
	};
}

int main(int argc, char **argv)
{
	sources__init();
	char path[4096];
	struct proc p = { .pid = 100 };
	struct thread t = { .tid = 101, .proc = &p };
	struct pftrace *pt;
	struct pfstacks *ps;
	struct sink sk;
	uint64_t ts = T0, before;
	/* Innermost first, as the model hands them over. */
	struct sym_frame chain[4] = {
		frame("level_c", "/opt/app/bin/chain", 0x400000, 0x1130, false),
		frame("level_b", "/opt/app/bin/chain", 0x400000, 0x1150, false),
		frame("level_a", "/opt/app/bin/chain", 0x400000, 0x1170, false),
		frame("main", "/opt/app/bin/chain", 0x400000, 0x1190, false),
	};
	struct sym_frame mixed[3] = {
		frame("do_syscall_64", "[kernel.kallsyms]", 0, 0, true),
		frame(NULL, "/lib/libfoo.so", 0x7f0000000000, 0x2222, false),
		frame("main", "/opt/app/bin/chain", 0x400000, 0x1190, false),
	};
	struct stack st = { .cpu = 1 };

	if (argc != 2) {
		fprintf(stderr, "usage: test_pfstacks DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/pfstacks.perfetto-trace", argv[1]);
	pt = pftrace__create(path);
	check(pt != NULL, "trace created");
	if (!pt)
		return 1;
	ps = pfstacks__new(pt);
	check(ps != NULL, "writer created");
	sk = pfstacks__sink(ps);
	check(sk.sample != NULL && sk.call_begin == NULL, "the sink handles samples only");
	pftrace__clock_snapshot(pt);

	/* Three samples of one stack: interned once, referenced thrice. */
	st.frames = chain;
	st.n = 4;
	for (int i = 0; i < 3; i++) {
		st.ts = ts += 1000;
		before = pfstacks__bytes(ps);
		sk.sample(sk.ctx, &t, &st);
		check(pfstacks__bytes(ps) > before, "sample %d written", i);
	}
	/* A sample in the kernel with an unsymbolized user frame. */
	st.frames = mixed;
	st.n = 3;
	st.nkernel = 1;
	st.kernel_mode = true;
	st.ts = ts += 1000;
	sk.sample(sk.ctx, &t, &st);
	/* Many distinct frames: the interning tables must start over. */
	st.nkernel = 0;
	st.kernel_mode = false;
	for (int i = 0; i < NUNIQUE; i++) {
		char name[32];
		struct sym_frame f[2];

		snprintf(name, sizeof(name), "fn_%d", i);
		f[0] = frame(name, "/opt/app/bin/chain", 0x400000, 0x10000 + 16 * i, false);
		f[1] = chain[3];
		st.frames = f;
		st.n = 2;
		st.ts = ts += 1000;
		sk.sample(sk.ctx, &t, &st);
	}
	/* The same first stack again, after the reset: interned anew. */
	st.frames = chain;
	st.n = 4;
	st.ts = ts += 1000;
	sk.sample(sk.ctx, &t, &st);
	/* An empty stack writes nothing. */
	before = pfstacks__bytes(ps);
	st.n = 0;
	sk.sample(sk.ctx, &t, &st);
	check(pfstacks__bytes(ps) == before, "an empty stack writes nothing");

	/* A slice whose end carries a backtrace. */
	{
		struct pfseq *s = pftrace__seq(pt, 7, ts);
		const char *names[] = { "main", "level_a", "level_b", "level_c" };

		pftrace__track(pt, 7, 0, "bt track");
		pftrace__begin(pt, s, ts + 10, "cuStreamSynchronize", NULL, 0);
		pftrace__end_stack(pt, s, ts + 5000, NULL, 0, names, 4);
		pftrace__begin(pt, s, ts + 6000, "cuLaunchKernel", NULL, 0);
		pftrace__end(pt, s, ts + 7000, NULL, 0);
	}
	check(pfstacks__bytes(ps) < pftrace__bytes(pt), "sample bytes are part of the trace's");
	pfstacks__free(ps);
	pfstacks__free(NULL);
	check(pftrace__close(pt) == 0, "trace closed");
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
