// SPDX-License-Identifier: MIT
/*
 * GPU activity: arbitrary REC_GPU_BATCH records (bpf/gpu_rec.h, written
 * byte for byte by the traced process's injection library) through
 * gpu__record, interleaved with the CUDA calls, ticks, exits and flushes
 * a capture sees, with the Perfetto writer attached (or not), then the
 * summary printed. Everything user/gpu*.c decodes, orders, links and
 * counts is reachable.
 *
 * Input: a flags byte, then operations framed as [u8 op][u16 LE len][len
 * bytes]; op's low 3 bits say what, its high bits which of 32 processes
 * (pids above PID_MAX_LIMIT: never a live process):
 *   0 a batch: a rec_hdr made here (size consistent) and the bytes;
 *   1 a whole record as the ring would give it, header included;
 *   2 a CUDA call, entered and returned: [u16 func][u32 duration][args];
 *   3 gpu__tick after advancing the clock by a u32;
 *   4 the process exits (F_MONITOR: then forgotten);
 *   5 the flush is asked, and whether it settled;
 *   6 the clock advances by a u32.
 * Each record is copied into a buffer of exactly its length, so a read
 * past it is a report.
 */
#include <stdio.h>
#include <sys/mman.h>
#include "sources/cuda/cuda.h"
#include "cudart_funcs.h"
#include "events.h"
#include "fuzz.h"
#include "core/hangwatch.h"
#include "sources/gpu/gpu.h"
#include "core/model.h"
#include "out/perfetto.h"
#include "out/pfsink.h"

enum {
	F_SUMMARY_ONLY = 1,	/* no Perfetto writer */
	F_MONITOR = 2,		/* forget processes at exit, as the monitor does */
};

static struct model model;
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	devnull = fopen("/dev/null", "we");
	if (!devnull)
		abort();
	return 0;
}

static uint32_t pid_of(uint8_t op)
{
	return 0x40000000u | (op >> 3);
}

static uint64_t u32_of(const uint8_t *p, size_t len)
{
	uint32_t v = 0;

	memcpy(&v, p, len < 4 ? len : 4);
	return v;
}

static void record(struct gpu *g, const uint8_t *data, size_t len, uint32_t pid, uint64_t now,
		   bool whole)
{
	size_t size = whole ? len : sizeof(struct rec_hdr) + len;
	uint8_t *rec = malloc(size ? size : 1);

	if (!rec)
		abort();
	if (whole) {
		memcpy(rec, data, len);
	} else {
		struct rec_hdr h = { .type = REC_GPU_BATCH, .size = (uint16_t)size, .pid = pid,
				     .tid = pid, .ts = now };

		memcpy(rec, &h, sizeof(h));
		memcpy(rec + sizeof(h), data, len);
	}
	gpu__record(g, rec, size);
	free(rec);
}

static void call(const uint8_t *data, size_t len, uint32_t pid, uint64_t *now)
{
	struct rec_call_enter e = { .hdr = { .type = REC_CALL_ENTER, .size = sizeof(e),
					     .pid = pid, .tid = pid, .ts = *now } };
	struct rec_call_exit x = { .hdr = { .type = REC_CALL_EXIT, .size = sizeof(x),
					    .pid = pid, .tid = pid } };
	uint16_t func = 0;

	if (len < 2)
		return;
	memcpy(&func, data, 2);
	/* In range, as ingest__check leaves them. */
	e.lib = x.lib = func & 0x8000 ? LIB_CUDART : LIB_CUDA;
	e.func = x.func = (func & 0x7fff) % (e.lib == LIB_CUDA ? CU_FN__COUNT : CRT_FN__COUNT);
	*now += len >= 6 ? u32_of(data + 2, 4) : 0;
	if (len > 6)
		memcpy(e.args, data + 6, len - 6 < sizeof(e.args) ? len - 6 : sizeof(e.args));
	model__call_enter(&model, &e);
	x.hdr.ts = *now;
	model__call_exit(&model, &x);
	*now += 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pftrace *pt = NULL;
	uint64_t now = 1000000000;
	struct hangwatch *hw;
	struct gpu *g;
	struct sink sk;
	uint8_t flags;

	if (!size)
		return 0;
	flags = *data++;
	size--;
	model__init(&model);
	if (!(flags & F_SUMMARY_ONLY)) {
		/* The writer owns the descriptor from here (pftrace__close). */
		pt = pftrace__fdopen(memfd_create("fuzz-trace", MFD_CLOEXEC));
		if (!pt)
			abort();
		sk = pfsink__sink(pt);
		model__add_sink(&model, &sk);
	}
	g = gpu__new(&model, pt);
	if (!g)
		abort();
	sk = gpu__sink(g);
	model__add_sink(&model, &sk);
	/* NCCL's plugin's task starts feed the hang watcher (1 us limit). */
	hw = hangwatch__new(&model, 1000);
	if (!hw)
		abort();
	gpu__set_hang(g, hw);

	while (size >= 3) {
		uint8_t op = data[0];
		size_t len = data[1] | (size_t)data[2] << 8;
		uint32_t pid = pid_of(op);

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		switch (op & 7) {
		case 0:
			if (len <= UINT16_MAX - sizeof(struct rec_hdr))
				record(g, data, len, pid, now, false);
			break;
		case 1:
			record(g, data, len, pid, now, true);
			break;
		case 2:
			call(data, len, pid, &now);
			break;
		case 3:
			now += u32_of(data, len);
			gpu__tick(g, now);
			hangwatch__tick(hw, now);
			break;
		case 4:
			gpu__proc_exit(g, pid, now);
			if (flags & F_MONITOR)
				gpu__forget(g, pid);
			break;
		case 5:
			gpu__flush_asked(g);
			(void)gpu__settled(g);
			break;
		default:
			now += u32_of(data, len);
			break;
		}
		data += len;
		size -= len;
	}
	gpu__finish(g, now);
	(void)gpu__lost(g);
	gpu__print(g, NULL, devnull);
	gpu__free(g);
	hangwatch__free(hw);
	if (pt)
		pftrace__close(pt);
	model__free(&model);
	return 0;
}
