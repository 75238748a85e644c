// SPDX-License-Identifier: MIT
/*
 * The stacks are read the way the BPF frame readers read them (bpf/py_rec.h):
 * _PyRuntime -> interpreters -> thread states -> innermost frame -> back,
 * with the same offsets row, so what this prints is what record can see.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "sources/python/pycheck.h"
#include "sources/python/pycode.h"
#include "sources/python/pyfind.h"

#define MAX_INTERPS 64
#define MAX_THREADS 4096
#define MAX_DEPTH 1024

static uint64_t rd64(int pid, uint64_t addr, int *err)
{
	uint64_t v = 0;

	if (!*err)
		*err = pyfind__read(pid, addr, &v, sizeof(v));
	return *err ? 0 : v;
}

static void print_stack(int pid, const struct py_proc *pp, struct pycode *pc, uint64_t f)
{
	int depth = 0, n = 0, err;

	for (; f && depth < MAX_DEPTH; depth++) {
		struct py_frame fr;
		struct py_sym sym;

		if ((err = pyfind__frame(pid, &pp->off, f, &fr))) {
			printf("    (frame at 0x%" PRIx64 " unreadable: %s)\n", f, strerror(-err));
			return;
		}
		f = fr.back;
		if (fr.skip)
			continue;
		err = pycode__resolve(pc, pid, pp, fr.code, fr.lasti, &sym);
		if (err) {
			printf("    #%d (code object 0x%" PRIx64 ": %s)\n", n++, fr.code,
			       strerror(-err));
			continue;
		}
		printf("    #%d %s %s:%d%s\n", n++, sym.func, sym.file, sym.line,
		       sym.user ? "" : " [not user code]");
	}
	if (f)
		printf("    (deeper than %d frames: stopped)\n", MAX_DEPTH);
}

int pycheck__run(int pid)
{
	struct py_proc pp;
	struct py_info info;
	struct pycode *pc;
	char why[512];
	uint64_t interp;
	uint32_t tid_off = 0;
	bool have_tid_off;
	int err, ni = 0;

	err = pyfind__probe(pid, &pp, &info, why, sizeof(why));
	if (err) {
		printf("pid %d: %s\n", pid, why);
		return 1;
	}
	printf("pid %d: %s\n", pid, why);
	printf("  _PyRuntime 0x%" PRIx64 ", PyCode_Type 0x%" PRIx64 ", offsets row 3.%u "
	       "(from %u.%u.%u)%s\n", (uint64_t)pp.runtime, (uint64_t)pp.code_type, pp.off.version >> 16 & 0xff,
	       pp.off.version >> 24, pp.off.version >> 16 & 0xff, pp.off.version >> 8 & 0xff,
	       info.debug_offsets ? ", checked against _Py_DebugOffsets" : "");
	if (!info.initialized) {
		printf("  not initialized yet: no interpreter, no threads\n");
		return 0;
	}
	{
		unsigned n = 0;

		if (!pyfind__interpreters(pid, &pp, MAX_INTERPS, &n) && n > 1)
			printf("  %u interpreters (%u subinterpreter%s): %s\n", n, n - 1,
			       n > 2 ? "s" : "", PYFIND_SUBINTERP_NOTE);
	}
	have_tid_off = pp.off.ts_native_thread_id == PY_OFF_NONE &&
		       pyfind__pthread_tid_offset(pid, &tid_off) == 0;
	if (!(pc = pycode__new())) {
		fprintf(stderr, "cgbpf: out of memory\n");
		return 1;
	}
	err = 0;
	interp = rd64(pid, pp.runtime + pp.off.runtime_interp_head, &err);
	for (; interp && !err && ni < MAX_INTERPS; ni++) {
		uint64_t ts = rd64(pid, interp + pp.off.interp_threads_head, &err);

		for (int nt = 0; ts && !err && nt < MAX_THREADS; nt++) {
			uint64_t pthread = rd64(pid, ts + pp.off.ts_thread_id, &err), tid = 0;
			uint64_t f;

			if (pp.off.ts_native_thread_id != PY_OFF_NONE) {
				tid = rd64(pid, ts + pp.off.ts_native_thread_id, &err) & 0xffffffff;
			} else if (have_tid_off) {
				uint32_t t = 0;

				if (!pyfind__read(pid, pthread + tid_off, &t, sizeof(t)))
					tid = t;
			}
			if (err)
				break;
			if (tid)
				printf("  thread %" PRIu64 " (pthread 0x%" PRIx64 ", interpreter %d):\n",
				       tid, pthread, ni);
			else
				printf("  thread ? (pthread 0x%" PRIx64 ", interpreter %d):\n",
				       pthread, ni);
			if ((err = pyfind__first_frame(pid, &pp.off, ts, &f)))
				break;
			if (!f)
				printf("    (no Python frame)\n");
			print_stack(pid, &pp, pc, f);
			ts = rd64(pid, ts + pp.off.ts_next, &err);
		}
		interp = rd64(pid, interp + pp.off.interp_next, &err);
	}
	pycode__free(pc);
	if (err) {
		printf("  (reading the thread list stopped: %s)\n", strerror(-err));
		return 1;
	}
	return 0;
}
