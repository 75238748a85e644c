// SPDX-License-Identifier: MIT
/*
 * Record ingest: arbitrary ring-buffer records through the validation
 * (ingest__check, the scheduler ring's own) and, when they pass, every
 * decoder record.c hands them to (the model and its library decoders,
 * strings, NVTX, stacks and the unwinder, syscalls, the scheduler), with
 * the Perfetto writer, the summary and the NCCL sinks attached, then the
 * summary printed. A traced process controls most of these bytes.
 *
 * Input: a flags byte, then records framed as [u16 LE length][bytes]:
 * the length is what the ring would report, so it may disagree with the
 * record's own header. Each record is copied into a buffer of exactly its
 * length, 8-byte aligned as in the ring. Pids and tids are mapped into a
 * range no process has, except those whose low byte is 0, which become
 * this process: stacks then unwind and symbolize against live mappings,
 * and nothing depends on which processes the machine runs.
 *
 * The symbolizer (inside stacks) lives across inputs: it caches what it
 * read from files, and rebuilding it per input (kallsyms, this binary's
 * symbols) would cost more than the input.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "events.h"
#include "fuzz.h"
#include "sources/gpu/gpu.h"
#include "core/ingest.h"
#include "core/model.h"
#include "sources/nccl/ncclpf.h"
#include "sources/nccl/ncclsum.h"
#include "sources/nvtx/nvtx.h"
#include "nvtx_rec.h"
#include "out/perfetto.h"
#include "out/pfsink.h"
#include "sources/stacks/pfstacks.h"
#include "sched_rec.h"
#include "sources/sched/schedtrace.h"
#include "sources/stacks/stacks.h"
#include "out/summary.h"
#include "sources/syscalls/syscalls.h"

enum {
	F_SCHED_TARGETS = 1,	/* --sched targets instead of all */
	F_MONITOR = 2,		/* forget processes at exit, as the monitor does */
	F_SUMMARY_ONLY = 4,	/* no Perfetto writer */
};

static struct model model;	/* one address: stacks keeps a pointer to it */
static struct stacks *stacks;
static FILE *devnull;
static uint32_t self;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	self = getpid();
	devnull = fopen("/dev/null", "we");
	stacks = stacks__new(&model);
	if (!devnull || !stacks)
		abort();
	return 0;
}

/* The stacks and syscalls sources' summary sections (their finish hooks
 * in a capture), with the thresholds this harness runs with. */
static void stacks_section(const void *ctx, const uint64_t *drops, FILE *f)
{
	(void)drops;
	stacks__summary((struct stacks *)ctx, 100000, f);
}

static void syscalls_section(const void *ctx, const uint64_t *drops, FILE *f)
{
	(void)drops;
	syssum__print((struct syssum *)ctx, 1000, f);
}

static uint32_t map_id(uint32_t id)
{
	/* Above PID_MAX_LIMIT (4194304): never a live process. */
	return (id & 0xff) ? 0x40000000u | (id & 0xffff) : self;
}

static void map_ids(uint8_t *rec, size_t size)
{
	struct rec_hdr *h = (void *)rec;

	h->pid = map_id(h->pid);
	h->tid = map_id(h->tid);
	switch (h->type) {
	case REC_SCHED_SWITCH:
		if (size >= sizeof(struct rec_switch)) {
			struct rec_switch *s = (void *)rec;

			s->next_tid = s->next_tid ? map_id(s->next_tid) : 0;
			s->next_pid = s->next_pid ? map_id(s->next_pid) : 0;
		}
		break;
	case REC_SCHED_WAKING:
		if (size >= sizeof(struct rec_waking)) {
			struct rec_waking *w = (void *)rec;

			w->tid = map_id(w->tid);
			w->pid = map_id(w->pid);
		}
		break;
	case REC_SCHED_NEWTASK:
	case REC_SCHED_RENAME:
	case REC_SCHED_EXIT:
		if (size >= sizeof(struct rec_task)) {
			struct rec_task *t = (void *)rec;

			t->tid = map_id(t->tid);
			t->pid = map_id(t->pid);
		}
		break;
	}
}

/* What record.c's handler does with a valid events record, minus what
 * needs BPF (attaching, the targets map). */
static bool self_exited;

/* The GPU activity of this input (user/sources/gpu/gpu.c). */
static struct gpu *gpu;

static void dispatch(struct nvtx *nv, bool monitor, const void *data, size_t size,
		     struct hmap *live)
{
	const struct rec_hdr *h = data;

	switch (h->type) {
	case REC_GPU_BATCH:
		gpu__record(gpu, data, size);
		break;
	case REC_NVTX:
		nvtx__record(nv, data, size);
		break;
	case REC_CALL_ENTER:
		stacks__proc_seen(stacks, h->pid);
		model__call_enter(&model, data);
		break;
	case REC_CALL_EXIT:
		model__call_exit(&model, data);
		break;
	case REC_STRING:
		model__string(&model, data);
		break;
	case REC_OUT_ARRAY:
		model__out_array(&model, data);
		break;
	case REC_PROC_FORK:
		hmap__put(live, ((const struct rec_proc *)data)->other, 1);
		break;
	case REC_PROC_EXEC:
		model__proc_refresh(&model, h->pid);
		stacks__proc_changed(stacks, h->pid);
		break;
	case REC_PROC_EXIT:
		model__proc_exit(&model, data);
		nvtx__proc_exit(nv, h->pid, h->ts);
		gpu__proc_exit(gpu, h->pid, h->ts);
		if (monitor)
			gpu__forget(gpu, h->pid);
		hmap__del(live, h->pid, NULL);
		stacks__proc_exit(stacks, h->pid);
		self_exited |= h->pid == self;
		if (monitor)
			model__forget(&model, h->pid);
		break;
	case REC_THREAD_EXIT:
		model__thread_exit(&model, data);
		break;
	case REC_MMAP:
		hmap__put(live, h->pid, 1);
		stacks__proc_changed(stacks, h->pid);
		model__proc_refresh(&model, h->pid);
		break;
	case REC_STACK_SAMPLE:
	case REC_STACK_BT:
		stacks__record(stacks, data, size);
		break;
	case REC_SYSCALL:
		model__syscall(&model, data);
		break;
	}
}

/* Top-level framing of what the writer wrote: Trace.packet fields whose
 * lengths add up to the file. A writer bug is a finding too. */
static void check_trace(int fd)
{
	off_t len = lseek(fd, 0, SEEK_END);
	uint8_t *buf;
	size_t off = 0;

	if (len <= 0)
		return;
	buf = malloc(len);
	if (!buf || pread(fd, buf, len, 0) != len)
		abort();
	while (off < (size_t)len) {
		uint64_t n = 0;
		int shift = 0;

		if (buf[off++] != 0x0a)
			abort();
		while (off < (size_t)len && shift < 64) {
			uint8_t c = buf[off++];

			n |= (uint64_t)(c & 0x7f) << shift;
			shift += 7;
			if (!(c & 0x80))
				break;
		}
		if (n > (size_t)len - off)
			abort();
		off += n;
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct summary *sum;
	struct ncclsum *ns;
	struct syssum *sys;
	struct nvtx *nv;
	struct pftrace *pt = NULL;
	struct pfstacks *ps = NULL;
	struct schedtrace *st;
	struct capture_info ci = { 0 };
	struct hmap live = { 0 };
	struct sink sk;
	uint64_t last_ts = 0, nrec = 0;
	uint8_t flags;
	int fd = -1;

	if (!size)
		return 0;
	flags = *data++;
	size--;
	model__init(&model);
	if (!(flags & F_SUMMARY_ONLY)) {
		/* The writer gets its own descriptor of the memfd (creating
		 * through /proc/self/fd/N is refused: outfile.c follows no
		 * links); fd stays to read the trace back. */
		fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
		pt = fd >= 0 ? pftrace__fdopen(dup(fd)) : NULL;
		ps = pt ? pfstacks__new(pt) : NULL;
		if (!ps)
			abort();
		sk = ncclpf__sink_before(pt);
		model__add_sink(&model, &sk);
		sk = pfsink__sink(pt);
		model__add_sink(&model, &sk);
		sk = ncclpf__sink_after(pt);
		model__add_sink(&model, &sk);
		sk = pfstacks__sink(ps);
		model__add_sink(&model, &sk);
	}
	sum = summary__new();
	ns = ncclsum__new(&model);
	sys = syssum__new();
	nv = nvtx__new(&model, pt);
	st = schedtrace__new(pt, &model, flags & F_SCHED_TARGETS ? SCHED_TARGETS : SCHED_ALL, &live);
	gpu = gpu__new(&model, pt);
	if (!sum || !ns || !sys || !nv || !st || !gpu)
		abort();
	sk = gpu__sink(gpu);
	model__add_sink(&model, &sk);
	model.sym = stacks__symbolizer(stacks);
	sk = summary__sink(sum);
	model__add_sink(&model, &sk);
	sk = ncclsum__sink(ns);
	model__add_sink(&model, &sk);
	sk = syssum__sink(sys);
	model__add_sink(&model, &sk);

	while (size >= 2) {
		size_t len = data[0] | (size_t)data[1] << 8;
		uint64_t *rec;

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		/* Exactly len bytes: a read past the record is a report. */
		rec = malloc(len ? len : 1);
		if (!rec)
			abort();
		memcpy(rec, data, len);
		data += len;
		size -= len;
		if (len >= sizeof(struct rec_hdr)) {
			map_ids((uint8_t *)rec, len);
			if (((struct rec_hdr *)rec)->ts > last_ts)
				last_ts = ((struct rec_hdr *)rec)->ts;
		}
		ci.records++;
		if (len >= sizeof(struct rec_hdr) &&
		    ((struct rec_hdr *)rec)->type >= REC_SCHED_SWITCH &&
		    ((struct rec_hdr *)rec)->type <= REC_SCHED_EXIT)
			schedtrace__handle(st, rec, len);
		else if (ingest__check(rec, len))
			ci.invalid++;
		else
			dispatch(nv, flags & F_MONITOR, rec, len, &live);
		free(rec);
		if (++nrec % 64 == 0)
			gpu__tick(gpu, last_ts);
		stacks__drained(stacks);
		if (pt && pftrace__bytes(pt) > (1u << 20))
			pftrace__flush(pt);
	}

	gpu__finish(gpu, last_ts + 1);
	summary__add_section(&ci, SUMMARY_LIB + LIB_NCCL, ncclsum__print, ns);
	summary__add_section(&ci, SUMMARY_LIB + LIB_NVTX, nvtx__print, nv);
	summary__add_section(&ci, SUMMARY_CPU, stacks_section, stacks);
	summary__add_section(&ci, SUMMARY_OS, syscalls_section, sys);
	summary__add_section(&ci, SUMMARY_OTHER, schedtrace__print, st);
	summary__add_section(&ci, SUMMARY_OTHER, gpu__print, gpu);
	schedtrace__flush(st);
	summary__print(sum, &model, &ci, devnull);
	if (pt) {
		pftrace__clock_snapshot(pt);
		pftrace__close(pt);
		check_trace(fd);
		close(fd);
	}
	pfstacks__free(ps);
	schedtrace__free(st);
	summary__free(sum);
	ncclsum__free(ns);
	syssum__free(sys);
	nvtx__free(nv);
	gpu__free(gpu);
	model__free(&model);
	hmap__free(&live);
	/* The symbolizer now takes this process for gone: a fresh one, so
	 * later inputs unwind and symbolize it again. */
	if (self_exited) {
		stacks__free(stacks);
		stacks = stacks__new(&model);
		if (!stacks)
			abort();
		self_exited = false;
	}
	return 0;
}
