/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the NCCL decoder and summary (user/sources/nccl/nccl.c,
 * user/sources/nccl/ncclsum.c)
 * on hand-made call records: attach cookies against nccl.h's argument
 * positions (written out here from the toolkit's header), communicator
 * ids shared across processes, groups, nested calls, results, and the
 * summary's bandwidths against nccl-tests' formulas computed here.
 * No root, no BPF.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/apilib.h"
#include "core/model.h"
#include "lib/ncclbw.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclsum.h"
#include "tap.h"
#include "sources/sources.h"

/* Pids and tids no live process has: the model names them "pid N". */
#define PID_A 4100001
#define PID_B 4100002

static struct model m;
static struct ncclsum *sum;
static uint64_t now = 1000000;

static int func_id(const char *name)
{
	for (int i = 0; i < NC_FN__COUNT; i++)
		if (!strcmp(nccl_funcs[i].name, name))
			return i;
	return -1;
}

static struct thread *enter(uint32_t pid, uint32_t tid, const char *fn, const uint64_t *args,
			    int n)
{
	struct rec_call_enter r = { .hdr = { .type = REC_CALL_ENTER, .size = sizeof(r), .pid = pid,
					     .tid = tid, .ts = now } };

	r.lib = LIB_NCCL;
	r.func = func_id(fn);
	if (n)
		memcpy(r.args, args, n * sizeof(args[0]));
	model__call_enter(&m, &r);
	return model__thread(&m, pid, tid);
}

static void leave(uint32_t pid, uint32_t tid, const char *fn, uint64_t dur, int64_t ret,
		  bool has_out, uint64_t out)
{
	struct rec_call_exit r = { .hdr = { .type = REC_CALL_EXIT, .size = sizeof(r), .pid = pid,
					    .tid = tid } };

	now += dur;
	r.hdr.ts = now;
	r.lib = LIB_NCCL;
	r.func = func_id(fn);
	r.ret = ret;
	r.has_out = has_out;
	r.out = out;
	model__call_exit(&m, &r);
	now += 100;
}

/* What the last call_end of a thread saw, captured by a sink. */
static struct {
	struct nccl_call nc;
	bool have;
	char comm[64];
	char begin_comm[64];
	int nested_annots;
} last;

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = nccl__call(t, c);

	last.have = nc != NULL;
	if (nc)
		last.nc = *nc;
	last.comm[0] = 0;
	last.nested_annots = 0;
	if (nc && nc->comm)
		snprintf(last.comm, sizeof(last.comm), "%s", nc->comm->label);
	for (int i = 0; i < c->nbegin; i++)
		if (!strcmp(c->begin[i].name, "nested"))
			last.nested_annots++;
}

/* The comm annotation as the begin event carries it. */
static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	last.begin_comm[0] = 0;
	for (int i = 0; i < c->nbegin; i++)
		if (!strcmp(c->begin[i].name, "comm"))
			snprintf(last.begin_comm, sizeof(last.begin_comm), "%s", c->begin[i].s);
}

static void test_cookies(void)
{
	/* (name, kind, stash, out argument, 32-bit out) from nccl.h: a
	 * needed argument past the sixth needs the stack slots. */
	static const struct {
		const char *name;
		int kind, stash, arg, is32;
	} want[] = {
		{ "ncclAllReduce", PK_STACK3, 0, 0, 0 },	/* stream is the 7th */
		{ "ncclBroadcast", PK_STACK3, 0, 0, 0 },	/* stream 7th */
		{ "ncclBcast", PK_REGS, 0, 0, 0 },		/* 6 arguments */
		{ "ncclReduce", PK_STACK3, 0, 0, 0 },		/* comm 7th, stream 8th */
		{ "ncclAllGather", PK_REGS, 0, 0, 0 },
		{ "ncclReduceScatter", PK_STACK3, 0, 0, 0 },	/* stream 7th */
		{ "ncclAlltoAll", PK_REGS, 0, 0, 0 },
		{ "ncclSend", PK_REGS, 0, 0, 0 },
		{ "ncclRecv", PK_REGS, 0, 0, 0 },
		{ "ncclCommInitRank", PK_NCCL_UID, 1, 0, 0 },	/* id by value on the stack */
		{ "ncclCommInitRankConfig", PK_NCCL_UID, 1, 0, 0 },
		{ "ncclCommInitAll", PK_REGS, 1, 0, 0 },
		{ "ncclCommSplit", PK_REGS, 1, 3, 0 },		/* newcomm is the 4th */
		{ "ncclCommCount", PK_REGS, 1, 1, 1 },		/* int *count */
		{ "ncclCommUserRank", PK_REGS, 1, 1, 1 },
		{ "ncclCommDestroy", PK_REGS, 0, 0, 0 },
		{ "ncclGroupStart", PK_REGS, 0, 0, 0 },
	};
	const struct api_lib *lib = apilib__get(LIB_NCCL);

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int f = func_id(want[i].name);
		uint64_t c = f >= 0 ? lib->cookie(f) : 0;

		check(f >= 0 && CK_LIB(c) == LIB_NCCL && CK_FUNC(c) == (unsigned)f &&
			      (int)CK_KIND(c) == want[i].kind && !!(c & CK_STASH) == want[i].stash &&
			      (int)CK_OUT_ARG(c) == want[i].arg && !!(c & CK_OUT32) == want[i].is32 &&
			      !CK_STR(c) && !strcmp(lib->symbol(f), want[i].name),
		      "cookie of %s", want[i].name);
	}
	/* nccl.h: ncclReduce(send, recv, count, datatype, op, root, comm, stream). */
	{
		const struct nccl_func *f = &nccl_funcs[func_id("ncclReduce")];

		check(f->count == 2 && f->dtype == 3 && f->redop == 4 && f->root == 5 &&
			      f->comm == 6 && f->stream == 7,
		      "ncclReduce argument positions");
	}
	check(nccl__dtype_size(7) == 4 && nccl__dtype_size(9) == 2 && nccl__dtype_size(12) == 0 &&
		      !strcmp(nccl__dtype_name(9), "bfloat16"),
	      "datatype sizes and names (nccl.h: ncclFloat32 = 7, ncclBfloat16 = 9)");
	check(!strcmp(nccl__result_name(5), "ncclInvalidUsage") && !nccl__result_name(8),
	      "result names");
}

static void test_comms_groups_nested(void)
{
	uint64_t id[3] = { 0x1234567890abcdefull, 0x2222, 0x3333 };
	uint64_t a[9] = { 0x7000, 4, 1, 0, 0, 0, id[0], id[1], id[2] };
	char comm_a[64], comm_b[64];

	/* Rank 1 in process A and rank 2 in process B of one unique id. */
	enter(PID_A, PID_A, "ncclCommInitRank", a, 9);
	leave(PID_A, PID_A, "ncclCommInitRank", 5000, 0, true, 0xa000);
	snprintf(comm_a, sizeof(comm_a), "%s", last.comm);
	a[2] = 2;
	enter(PID_B, PID_B, "ncclCommInitRank", a, 9);
	leave(PID_B, PID_B, "ncclCommInitRank", 5000, 0, true, 0xb000);
	snprintf(comm_b, sizeof(comm_b), "%s", last.comm);
	check(strlen(comm_a) == 13 && !strncmp(comm_a, comm_b, 4) &&
		      !strcmp(comm_a + 4, " rank 1/4") && !strcmp(comm_b + 4, " rank 2/4"),
	      "one id across processes: %s / %s", comm_a, comm_b);
	/* A different unique id: a different communicator (a[6] is the
	 * commHash BPF made of it; its top 16 bits are the short id). */
	a[6] ^= 1ull << 60;
	enter(PID_A, PID_A, "ncclCommInitRank", a, 9);
	leave(PID_A, PID_A, "ncclCommInitRank", 5000, 0, true, 0xa100);
	check(strncmp(last.comm, comm_a, 4) != 0, "another unique id, another id (%s)", last.comm);

	/* An all-reduce: count 1000 float32 (7), sum, comm at a5, stream a6. */
	{
		uint64_t ar[7] = { 1, 2, 1000, 7, 0, 0xa000, 0x55 };

		enter(PID_A, PID_A, "ncclAllReduce", ar, 7);
		leave(PID_A, PID_A, "ncclAllReduce", 1000, 0, false, 0);
		check(last.have && last.nc.bytes == 4000 && last.nc.dtype == 7 && last.nc.redop == 0 &&
			      !last.nc.grouped && !strcmp(last.comm, comm_a),
		      "all-reduce decoded (bytes %" PRIu64 ")", last.nc.bytes);
	}
	/* An all-gather of 250 int32 (2) per rank. */
	{
		uint64_t ag[6] = { 1, 2, 250, 2, 0xa000, 0x55 };

		enter(PID_A, PID_A, "ncclAllGather", ag, 6);
		leave(PID_A, PID_A, "ncclAllGather", 2000, 0, false, 0);
	}
	/* A group of two all-reduces; a nested group inside changes nothing. */
	{
		uint64_t ar[7] = { 1, 2, 16, 8, 2, 0xa000, 0 };

		enter(PID_A, PID_A, "ncclGroupStart", NULL, 0);
		leave(PID_A, PID_A, "ncclGroupStart", 100, 0, false, 0);
		check(last.nc.group_open, "outermost ncclGroupStart opens the group");
		enter(PID_A, PID_A, "ncclGroupStart", NULL, 0);
		leave(PID_A, PID_A, "ncclGroupStart", 100, 0, false, 0);
		check(!last.nc.group_open, "an inner ncclGroupStart does not");
		enter(PID_A, PID_A, "ncclAllReduce", ar, 7);
		leave(PID_A, PID_A, "ncclAllReduce", 300, 0, false, 0);
		check(last.nc.grouped && last.nc.bytes == 128, "grouped call marked");
		enter(PID_A, PID_A, "ncclAllReduce", ar, 7);
		leave(PID_A, PID_A, "ncclAllReduce", 300, 0, false, 0);
		enter(PID_A, PID_A, "ncclGroupEnd", NULL, 0);
		leave(PID_A, PID_A, "ncclGroupEnd", 100, 0, false, 0);
		check(!last.nc.group_close, "inner ncclGroupEnd does not close it");
		enter(PID_A, PID_A, "ncclGroupEnd", NULL, 0);
		leave(PID_A, PID_A, "ncclGroupEnd", 7000, 0, false, 0);
		check(last.nc.group_close && last.nc.group_ops == 2 && last.nc.group_bytes == 256,
		      "outermost ncclGroupEnd closes it: %u ops, %" PRIu64 " bytes",
		      last.nc.group_ops, last.nc.group_bytes);
		enter(PID_A, PID_A, "ncclGroupEnd", NULL, 0);
		leave(PID_A, PID_A, "ncclGroupEnd", 100, 5, false, 0);
		check(!last.nc.group_close, "ncclGroupEnd outside a group closes nothing");
	}
	/* ncclBcast calling ncclBroadcast: the inner call is nested. */
	{
		uint64_t bc[6] = { 1, 64, 4, 3, 0xa000, 0x55 };
		uint64_t br[7] = { 1, 1, 64, 4, 3, 0xa000, 0x55 };

		enter(PID_A, PID_A, "ncclBcast", bc, 6);
		enter(PID_A, PID_A, "ncclBroadcast", br, 7);
		leave(PID_A, PID_A, "ncclBroadcast", 500, 0, false, 0);
		check(last.nc.nested && last.nested_annots == 1 && last.nc.root == 3 &&
			      last.nc.bytes == 512,
		      "nested ncclBroadcast marked");
		leave(PID_A, PID_A, "ncclBcast", 100, 0, false, 0);
		check(!last.nc.nested && last.nested_annots == 0, "the outer ncclBcast is not");
	}
	/* A communicator created before attach, learned from count and rank. */
	enter(PID_B, PID_B, "ncclCommCount", (uint64_t[]){ 0xc000, 0x99 }, 2);
	leave(PID_B, PID_B, "ncclCommCount", 100, 0, true, 8);
	check(!strcmp(last.begin_comm, "(0xc000) rank ?/?") && !strcmp(last.comm, "(0xc000) rank ?/8"),
	      "unknown comm learns its size: %s -> %s", last.begin_comm, last.comm);
	enter(PID_B, PID_B, "ncclCommUserRank", (uint64_t[]){ 0xc000, 0x99 }, 2);
	leave(PID_B, PID_B, "ncclCommUserRank", 100, 0, true, 5);
	check(!strcmp(last.comm, "(0xc000) rank 5/8"), "and its rank: %s", last.comm);
	/* Destroy drops the handle: a new comm behind it is another one. */
	enter(PID_B, PID_B, "ncclCommDestroy", (uint64_t[]){ 0xc000 }, 1);
	leave(PID_B, PID_B, "ncclCommDestroy", 100, 0, false, 0);
	enter(PID_B, PID_B, "ncclCommCount", (uint64_t[]){ 0xc000, 0x99 }, 2);
	leave(PID_B, PID_B, "ncclCommCount", 100, 0, true, 2);
	check(!strcmp(last.comm, "(0xc000) rank ?/2"), "a reused handle is a new comm: %s",
	      last.comm);
}

/* The summary row of fn: its 10 numbers after the name. */
static bool row(const char *text, const char *fn, char cols[11][32])
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\n %s ", fn);
	p = strstr(text, pat);
	return p && sscanf(p + strlen(pat), "%31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s",
			   cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7],
			   cols[8], cols[9], cols[10]) == 11;
}

static void test_summary(void)
{
	char *text = NULL, c[11][32];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ncclsum__print(sum, NULL, f);
	fclose(f);
	/* All-reduce on 4 ranks: 1 timed call of 4000 B in 1000 ns, two
	 * grouped (128 B each): algbw 4000 / 1000 = 4 GB/s, busbw x 2*3/4. */
	check(row(text, "ncclAllReduce", c) && !strcmp(c[0], "3") && !strcmp(c[1], "2") &&
		      !strcmp(c[2], "4256") && !strcmp(c[3], "1") && !strcmp(c[4], "1000") &&
		      !strcmp(c[8], "4") && !strcmp(c[9], "6") && !strcmp(c[10], "host"),
	      "all-reduce row (algbw %s, busbw %s, time %s)", c[8], c[9], c[10]);
	/* All-gather: 250 int32 per rank x 4 ranks = 4000 B in 2000 ns: algbw
	 * 2, busbw x 3/4 = 1.5. */
	check(row(text, "ncclAllGather", c) && !strcmp(c[2], "1000") && !strcmp(c[8], "2") &&
		      !strcmp(c[9], "1.5"),
	      "all-gather row (algbw %s, busbw %s)", c[8], c[9]);
	check(row(text, "ncclBcast", c) && !strcmp(c[0], "1") && !row(text, "ncclBroadcast", c),
	      "the nested ncclBroadcast is no row");
	check(strstr(text, "1 calls NCCL made to its own API") != NULL, "nested call counted apart");
	check(strstr(text, ": 1 groups, 2 operations, 256 bytes; time total 8400 ns") != NULL,
	      "groups line");
	check(strstr(text, "Time host: from a call's entry to its return") &&
		      strstr(text, "NCCL's profiler plugin times them on the GPU") &&
		      !strstr(text, "Time gpu:"),
	      "the time caveat");
	if (n_fail)
		printf("%s", text);
	free(text);
}

/* The plugin timed some all-reduces on the GPU: that row takes the GPU's
 * numbers and says so; the others stay timed on the host. */
static void test_summary_gpu_times(void)
{
	char *text = NULL, c[11][32];
	size_t len = 0;
	FILE *f;

	/* 4000 B on 4 ranks in 500 and 1500 ns: algbw 8000 / 2000 = 4 GB/s,
	 * busbw x 3/2 = 6; one more without its size, left out of them. */
	check(!ncclbw__gpu_add(&m.nccl_gpu, ncclbw__fn_of_op("AllReduce"), 500, 4000, 4) &&
		      !ncclbw__gpu_add(&m.nccl_gpu, ncclbw__fn_of_op("AllReduce"), 1500, 4000, 4) &&
		      !ncclbw__gpu_add(&m.nccl_gpu, ncclbw__fn_of_op("AllReduce"), 7000, 0, 4),
	      "GPU-side times added");
	check(ncclbw__fn_of_op("AllReduce") == NC_FN_ncclAllReduce &&
		      ncclbw__fn_of_op("Broadcast") == NC_FN_ncclBroadcast &&
		      ncclbw__fn_of_op("Recv") == NC_FN_ncclRecv && ncclbw__fn_of_op("Gather") < 0 &&
		      ncclbw__fn_of_op("GroupStart") < 0 && ncclbw__fn_of_op("") < 0,
	      "NCCL's operation names to API functions");
	f = open_memstream(&text, &len);
	ncclsum__print(sum, NULL, f);
	fclose(f);
	check(row(text, "ncclAllReduce", c) && !strcmp(c[0], "3") && !strcmp(c[2], "4256") &&
		      !strcmp(c[3], "3") && !strcmp(c[4], "9000") && !strcmp(c[6], "1500") &&
		      !strcmp(c[7], "7000") && !strcmp(c[8], "4") && !strcmp(c[9], "6") &&
		      !strcmp(c[10], "gpu"),
	      "all-reduce row timed on the GPU (timed %s, total %s, algbw %s, busbw %s, time %s)",
	      c[3], c[4], c[8], c[9], c[10]);
	check(row(text, "ncclAllGather", c) && !strcmp(c[10], "host"), "all-gather still host");
	check(strstr(text, "Time gpu: on the GPU, from NCCL's profiler plugin") &&
		      strstr(text, "Time host: from a call's entry") &&
		      !strstr(text, "NCCL's profiler plugin times them on the GPU"),
	      "both time sources said");
	check(strstr(text, "   1 timed operations of unknown size") != NULL,
	      "the GPU span without its size left out of the bandwidths");
	if (n_fail)
		printf("%s", text);
	free(text);
}

int main(void)
{
	sources__init();
	struct sink s = { .call_begin = on_begin, .call_end = on_end };
	struct sink ss;

	model__init(&m);
	sum = ncclsum__new(&m);
	ss = ncclsum__sink(sum);
	model__add_sink(&m, &s);
	model__add_sink(&m, &ss);
	test_cookies();
	test_comms_groups_nested();
	test_summary();
	test_summary_gpu_times();
	check(ncclbw__bus_factor(NCOLL_ALLREDUCE, 8) == 2.0 * 7 / 8 &&
		      ncclbw__bus_factor(NCOLL_REDUCESCATTER, 8) == 7.0 / 8 &&
		      ncclbw__bus_factor(NCOLL_SEND, 8) == 1 &&
		      ncclbw__size_factor(NCOLL_ALLGATHER, 8) == 8 &&
		      ncclbw__size_factor(NCOLL_BROADCAST, 8) == 1,
	      "nccl-tests factors");
	ncclsum__free(sum);
	model__free(&m);
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
