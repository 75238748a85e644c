// SPDX-License-Identifier: MIT
/*
 * The trace reader (user/trace/tread.c) that `cgbpf stats` and `cgbpf export`
 * run on saved traces (files from other hosts, or anyone's): one input is
 * one trace, read from memory. The callbacks read every string and arg
 * they are given, so ASan sees any that points outside its copy. Then
 * `cgbpf stats`' own reading of it (user/trace/tstats.c: args, labels,
 * attributes) with every table printed, in the format the input's
 * length picks.
 */
#include "fuzz.h"
#include "trace/tread.h"
#include "trace/tstats.h"

static volatile size_t sink;
static FILE *devnull;

static void touch_args(const struct tread_arg *a, int n)
{
	for (int i = 0; i < n; i++) {
		sink += strlen(a[i].name);
		if (a[i].type == TREAD_A_STR)
			sink += strlen(a[i].s);
	}
}

static int on_track(void *ctx, const struct tread_track *t)
{
	sink += strlen(t->name) + strlen(t->description) + strlen(t->cmdline) + strlen(t->labels);
	return 0;
}

static int on_event(void *ctx, const struct tread_event *e)
{
	sink += strlen(e->name) + strlen(e->category);
	touch_args(e->args, e->nargs);
	for (int i = 0; i < e->nframes; i++)
		sink += strlen(e->frames[i]);
	return 0;
}

static int on_slice(void *ctx, const struct tread_slice *s)
{
	sink += strlen(s->name) + strlen(s->category);
	touch_args(s->args, s->nargs);
	touch_args(s->end_args, s->nend_args);
	for (int i = 0; i < s->nframes; i++)
		sink += strlen(s->frames[i]);
	return 0;
}

static int on_attr(void *ctx, uint32_t machine, const char *key, const char *value)
{
	sink += strlen(key) + strlen(value);
	return 0;
}

static int on_other(void *ctx, uint32_t machine, uint32_t seq, uint32_t field,
		    const uint8_t *data, size_t len)
{
	if (len)
		sink += data[len - 1];
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	devnull = fopen("/dev/null", "we");
	if (!devnull)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct tread_ops ops = {
		.track = on_track,
		.event = on_event,
		.slice = on_slice,
		.attr = on_attr,
		.other = on_other,
	};
	struct tread_stats st;
	/* A copy of exactly the input's size: a read past it is ASan's. */
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		abort();
	memcpy(copy, data, size);
	tread__run_mem(copy, size, "fuzz.perfetto-trace", &ops, NULL, &st);
	tstats__mem(copy, size, (int)(size % 3), devnull);
	free(copy);
	return 0;
}
