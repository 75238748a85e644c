/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the rank matching behind nccl_stragglers
 * (user/lib/straggle.c) on hand-made operations: lateness and the waiting
 * each rank caused against sums computed here, sends matched with their
 * receives, operations arriving file by file (one rank's all, then the
 * next's), what is not matched and why, two processes claiming a rank,
 * nobody named when the lateness is spread, and the CSV row.
 * No root, no BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/stragalign.h"
#include "lib/straggle.h"
#include "tap.h"

static struct straggle_op op(const char *comm, int rank, int n, uint64_t seq, uint64_t ts)
{
	return (struct straggle_op){ .host = "h", .comm = comm, .rank = rank, .nranks = n,
				     .pid = 100 + rank, .name = "ncclAllReduce", .seq = seq,
				     .peer = -1, .ts = ts, .end = ts + 50 };
}

static char *print(struct straggle *s, enum sumtab_fmt fmt)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	straggle__print(s, fmt, f);
	fclose(f);
	return text;
}

/* Three ranks, rank 2 always 1000 ns after rank 1, which is 100 ns after
 * rank 0: rank 2 last every time, late 1100 ns; the others waited
 * 1100 + 1000 per instance for it, 100 for rank 1. */
static void test_late_rank(void)
{
	struct straggle *s = straggle__new();
	struct straggle_named n;
	char *text;

	for (uint64_t i = 1; i <= 12; i++) {
		uint64_t t = i * 1000000;
		struct straggle_op o[3] = { op("abcd", 1, 3, i, t + 100), op("abcd", 2, 3, i, t + 1100),
					    op("abcd", 0, 3, i, t) };

		for (int k = 0; k < 3; k++)
			straggle__add(s, &o[k]);
	}
	check(straggle__any(s), "three ranks: the report is shown");
	check(straggle__finish(s, &n), "a rank named");
	check(n.rank == 2 && n.nranks == 3 && !strcmp(n.comm, "abcd") && n.pid == 102,
	      "rank 2 of abcd named (rank %d, pid %u)", n.rank, n.pid);
	check(n.ops == 12 && n.last == 12, "last in 12 of 12 (%lu of %lu)",
	      (unsigned long)n.last, (unsigned long)n.ops);
	check(n.late_med_ns == 1100, "late by 1100 ns (%lu)", (unsigned long)n.late_med_ns);
	check(n.waited_ns == 12 * (1100 + 1000), "waited 12 x 2100 ns (%lu)",
	      (unsigned long)n.waited_ns);
	/* The stretch before each late entry: from its previous return. */
	check(n.ngaps == 11 && n.gaps[0].from == 1000000 + 1100 + 50 &&
		      n.gaps[0].to == 2000000 + 1100,
	      "gaps from the previous return to the late entry (%zu)", n.ngaps);
	text = print(s, SUMTAB_CSV);
	check(strstr(text, "abcd,2,102,h,12,12,100,1100,1100,25200,1,seq\n") != NULL,
	      "rank 2's CSV row:\n%s", text);
	check(strstr(text, "abcd,1,101,h,12,0,0,100,100,1200,0,seq\n") != NULL,
	      "rank 1's CSV row:\n%s", text);
	free(text);
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "Rank 2 of communicator abcd (3 ranks; pid 102 on h)") != NULL,
	      "the named line:\n%s", text);
	free(text);
	straggle__free(s);
}

/* File by file (rank 0's operations, then rank 1's): matched all the
 * same; sends matched with receives by (sender, receiver, seq). */
static void test_files_and_p2p(void)
{
	struct straggle *s = straggle__new();
	char *text;

	for (int r = 0; r < 2; r++)
		for (uint64_t i = 1; i <= 20; i++) {
			struct straggle_op o = op("beef", r, 2, i, i * 1000 + (r ? 0 : 10));

			straggle__add(s, &o);
			/* rank 0 sends to 1, rank 1 receives from 0, later */
			o.name = r ? "ncclRecv" : "ncclSend";
			o.recv = r == 1;
			o.peer = !r;
			o.ts = i * 1000 + 500 + (r ? 300 : 0);
			straggle__add(s, &o);
		}
	straggle__finish(s, NULL);
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "20 collective(s), 20 send/receive pair(s)") != NULL,
	      "every instance matched:\n%s", text);
	check(strstr(text, "Rank 0 of communicator beef") == NULL &&
		      strstr(text, "No rank holds the others back") != NULL,
	      "rank 0 last in the collectives, rank 1 in the pairs: 50%%, nobody named:\n%s",
	      text);
	free(text);
	straggle__free(s);
}

/* What is not matched, and a rank in two processes. */
static void test_unmatched(void)
{
	struct straggle *s = straggle__new();
	struct straggle_op o = op("c0de", 0, 4, 1, 1000);
	char *text;

	straggle__add(s, &o);
	o.rank = 1;
	straggle__add(s, &o);			/* 2 of 4 ranks: never complete */
	straggle__add(s, &o);			/* twice */
	o.rank = -1;
	straggle__add(s, &o);			/* unknown rank */
	o.rank = 7;
	straggle__add(s, &o);			/* out of range */
	o = op("c0de", 0, 4, 0, 5);
	straggle__add(s, &o);			/* no seq */
	o = op("dead", 0, 2, 1, 10);
	straggle__add(s, &o);
	o.pid = 999;
	o.seq = 2;
	straggle__add(s, &o);			/* rank 0 of dead in another process */
	straggle__finish(s, NULL);
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "4 operation(s) of 3 instance(s) some rank never entered") != NULL,
	      "incomplete instances counted:\n%s", text);
	check(strstr(text, "1 operation(s) on communicators whose rank or size is unknown"),
	      "unknown rank counted:\n%s", text);
	check(strstr(text, "1 operation(s) without a sequence number"), "no seq counted");
	check(strstr(text, "1 operation(s) with a rank or peer out of range, 1 entering"),
	      "out of range and twice counted:\n%s", text);
	check(strstr(text, "communicator dead of 2 ranks: one rank in two processes"),
	      "the conflict said:\n%s", text);
	free(text);
	straggle__free(s);
}

/* A rank whose numbers skip some: the holes said with an example; a
 * rank with NCCL's per-function series (the GPU side) is not looked at. */
static void test_seq_holes(void)
{
	struct straggle *s = straggle__new();
	struct straggle_op o;
	char *text;

	for (uint64_t k = 1; k <= 10; k++) {
		o = op("cafe", 0, 2, k, k * 1000);
		straggle__add(s, &o);
		if (k == 4 || k == 5)
			continue;
		o = op("cafe", 1, 2, k, k * 1000 + 10);
		straggle__add(s, &o);
	}
	for (uint64_t f = 1; f <= 3; f++) {
		for (int rank = 0; rank < 2; rank++) {
			o = op("f00d", rank, 2, f << 48 | (f == 2 ? 7 : 1), f * 1000 + rank);
			straggle__add(s, &o);
		}
	}
	straggle__finish(s, NULL);
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "sequence numbers missing: 2 collective(s) of 1 rank(s)") != NULL &&
		      strstr(text, "e.g. rank 1 of communicator cafe: 2 of #1-#10") != NULL,
	      "the holes said:\n%s", text);
	check(strstr(text, "2 operation(s) of 2 instance(s) some rank never entered") != NULL,
	      "their instances not compared:\n%s", text);
	free(text);
	straggle__free(s);
}

/* Communicators of one rank: nothing to compare, no row, said. */
static void test_one_rank(void)
{
	struct straggle *s = straggle__new();
	char *text;

	for (uint64_t i = 1; i <= 20; i++) {
		struct straggle_op o = op("0001", 0, 1, i, 1000 * i);

		check(!straggle__add(s, &o), "one-rank op %lu taken", (unsigned long)i);
	}
	check(!straggle__any(s), "no communicator to show");
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "no communicator of two ranks or more: nothing to compare") &&
		      strstr(text, "not compared: 20 operation(s) on communicators of one rank") &&
		      !strstr(text, "100.0") && !strstr(text, "is the one the others wait for"),
	      "one rank: no row, nobody named, said:\n%s", text);
	free(text);
	straggle__free(s);
}

static void count_row(void *ctx, const struct straggle_row *r)
{
	int *n = ctx;

	(*n)++;
	check(r->rank == 1 && r->ops == 0, "the live row: rank 1, nothing matched (%d, %lu)",
	      r->rank, (unsigned long)r->ops);
}

/* A monitor's use: instances left open expire, an exited process's rows
 * go and a new process takes its rank afresh. */
static void test_expire_forget(void)
{
	struct straggle *s = straggle__new();
	struct straggle_op o = op("f00d", 0, 2, 1, 1000);
	int n = 0;
	char *text;

	straggle__no_gaps(s);
	straggle__add(s, &o);			/* rank 1 never comes */
	o = op("f00d", 1, 2, 2, 5000);
	straggle__add(s, &o);
	straggle__expire(s, 2000);		/* the first goes, the second stays */
	straggle__forget_pid(s, 100);		/* rank 0's process exited */
	straggle__each(s, count_row, &n);
	check(n == 1, "one live row (%d)", n);
	o = op("f00d", 0, 2, 2, 5100);
	o.pid = 555;				/* rank 0 again, a new process */
	straggle__add(s, &o);
	straggle__finish(s, NULL);
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "1 operation(s) of 1 instance(s) some rank never entered") != NULL,
	      "the expired instance counted:\n%s", text);
	check(strstr(text, "one rank in two processes") == NULL && strstr(text, "555") != NULL,
	      "the new process took the rank, no conflict:\n%s", text);
	free(text);
	straggle__free(s);
}

static void test_empty(void)
{
	struct straggle *s = straggle__new();
	char *text;

	check(!straggle__any(s) && !straggle__finish(s, NULL), "empty: nothing shown or named");
	text = print(s, SUMTAB_TEXT);
	check(strstr(text, "no NCCL operation with a known rank") != NULL, "a clear line:\n%s",
	      text);
	free(text);
	text = print(s, SUMTAB_JSON);
	check(strstr(text, "[") != NULL, "JSON: an empty array (%s)", text);
	free(text);
	straggle__free(s);
}

/*
 * Communicators older than the capture (user/lib/stragalign.c): three
 * processes of one job whose captures start at different operations
 * (rank 0 at the job's 4th, rank 1 at its 1st, rank 2 at its 6th), each
 * operation blocking until all entered, rank 1 late by 2 ms every time.
 * Aligned by operation and time, rank 1 is named. A fourth process
 * without RANK, and one with two such communicators, are said.
 */
/* An environment as "NAME=value\0..." for stragalign__read_env. */
static int env_get(void *ctx, pid_t pid, const char *name, char *buf, size_t n)
{
	size_t l = strlen(name);

	(void)pid;
	for (const char *e = ctx; *e; e += strlen(e) + 1)
		if (!strncmp(e, name, l) && e[l] == '=') {
			snprintf(buf, n, "%s", e + l + 1);
			return 0;
		}
	return -ENOENT;
}

/* Rank and world size: RANK/WORLD_SIZE, else srun's, else one node's. */
static void test_read_env(void)
{
	static const struct {
		const char *env;
		int rank, world;
		const char *job;
	} c[] = {
		{ "RANK=3\0WORLD_SIZE=8\0MASTER_ADDR=h\0MASTER_PORT=29500\0SLURM_PROCID=1\0", 3, 8,
		  "h:29500" },
		{ "SLURM_PROCID=5\0SLURM_NTASKS=16\0SLURM_JOB_ID=42\0", 5, 16, "slurm 42" },
		{ "LOCAL_RANK=2\0LOCAL_WORLD_SIZE=4\0TORCHELASTIC_RUN_ID=r1\0", 2, 4, "r1" },
		{ "LOCAL_RANK=2\0LOCAL_WORLD_SIZE=4\0WORLD_SIZE=4\0", 2, 4, "" },
		/* Several nodes: a local rank is not the job's rank. */
		{ "LOCAL_RANK=2\0LOCAL_WORLD_SIZE=4\0WORLD_SIZE=8\0", -1, 8, "" },
		{ "RANK=x\0WORLD_SIZE=4\0", -1, 4, "" },
		{ "", -1, -1, "" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char job[64];
		int rank, world;

		stragalign__read_env(env_get, (void *)c[i].env, 1, &rank, &world, job, sizeof(job));
		check(rank == c[i].rank && world == c[i].world && !strcmp(job, c[i].job),
		      "environment %zu: rank %d of %d, job '%s' (want %d of %d, '%s')", i, rank,
		      world, job, c[i].rank, c[i].world, c[i].job);
	}
}

static void test_align(void)
{
	static const int first[3] = { 3, 0, 5 };
	struct stragalign *a = stragalign__new();
	struct straggle *s = straggle__new();
	struct straggle_named n;
	char *text;

	for (int r = 0; r < 3; r++) {
		check(stragalign__env(a, "h", 200 + r, r, 3, "10.0.0.1:29500") == 0, "env %d", r);
		for (int i = first[r]; i < 30; i++) {
			uint64_t t = 1000000000ull + (uint64_t)i * 10000000;
			struct straggle_op o = { .host = "h", .comm = "(0x5000)", .rank = -1,
						 .nranks = -1, .pid = 200 + r, .peer = -1,
						 .name = i % 2 ? "ncclAllReduce" : "ncclBroadcast",
						 .ts = t + (r == 1 ? 2000000 : r * 1000),
						 .end = t + 2500000 };

			check(stragalign__op(a, &o, i % 3 ? 4096 : 64) == 0, "op");
		}
	}
	/* No environment; two communicators in one process. */
	for (int k = 0; k < 3; k++) {
		struct straggle_op o = { .host = "h", .comm = k ? "(0x7000)" : "(0x6000)", .rank = -1,
					 .nranks = -1, .pid = k ? 300 : 301, .peer = -1,
					 .name = "ncclAllReduce", .ts = 5, .end = 6 };

		stragalign__op(a, &o, 8);
	}
	{
		struct straggle_op o = { .host = "h", .comm = "(0x7001)", .rank = -1, .nranks = -1,
					 .pid = 300, .peer = -1, .name = "ncclAllReduce", .ts = 5,
					 .end = 6 };

		stragalign__op(a, &o, 8);
		stragalign__env(a, "h", 300, 0, 2, "");
	}
	check(stragalign__held(a) == 27 + 30 + 25 + 4, "every operation held (%lu)",
	      (unsigned long)stragalign__held(a));
	check(stragalign__feed(a, s) == 0, "fed");
	check(stragalign__feed(a, s) == 0, "a second feed does nothing");
	check(straggle__finish(s, &n), "a rank named");
	check(n.rank == 1 && n.nranks == 3 && n.pid == 201 && !strncmp(n.comm, "env:", 4),
	      "rank 1 of the job named (%s rank %d pid %u)", n.comm, n.rank, n.pid);
	check(n.ops == 25 && n.last == 25, "the 25 operations all three saw, rank 1 last in all "
	      "(%lu, %lu)", (unsigned long)n.ops, (unsigned long)n.last);
	text = print(s, SUMTAB_TEXT);
	check(text && strstr(text, "matched by RANK/WORLD_SIZE and alignment by operation and "
			   "time (communicators older than the capture): 82 operation(s) of 3 "
			   "rank(s)"), "how they were matched, said");
	check(text && strstr(text, "not aligned: 1 operation(s) of communicators of unknown id: no "
			   "RANK and WORLD_SIZE"), "the process without RANK, said");
	check(text && strstr(text, "not aligned: 3 operation(s) of communicators of unknown id: "
			   "several of them in one process"), "the process with two, said");
	check(text && strstr(text, "not matched: 4 operation(s) on communicators whose rank"),
	      "all four counted as not matched");
	free(text);
	straggle__free(s);
	stragalign__free(a);
}

/* A rank whose operations do not meet the reference's in time (a GPU's
 * NCCL calls return at once): not aligned, and why. */
static void test_align_no_anchor(void)
{
	struct stragalign *a = stragalign__new();
	struct straggle *s = straggle__new();
	char *text;

	for (int r = 0; r < 2; r++) {
		stragalign__env(a, "h", 400 + r, r, 2, "job");
		for (int i = 0; i < 10; i++) {
			uint64_t t = (uint64_t)i * 1000000 + (uint64_t)r * 500000;
			struct straggle_op o = { .host = "h", .comm = "(0x9)", .rank = -1,
						 .nranks = -1, .pid = 400 + r, .peer = -1,
						 .name = "ncclAllReduce", .ts = t, .end = t + 1000 };

			stragalign__op(a, &o, 64);
		}
	}
	stragalign__feed(a, s);
	text = print(s, SUMTAB_TEXT);
	check(text && strstr(text, "not aligned: 10 operation(s) of communicators of unknown id: "
			   "no operation overlapping"), "no anchor: said");
	free(text);
	straggle__free(s);
	stragalign__free(a);
}

int main(void)
{
	test_late_rank();
	test_read_env();
	test_align();
	test_align_no_anchor();
	test_files_and_p2p();
	test_unmatched();
	test_one_rank();
	test_seq_holes();
	test_expire_forget();
	test_empty();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
