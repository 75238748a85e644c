// SPDX-License-Identifier: MIT
/*
 * LD_PRELOAD shim for a dynamically linked cgbpf (make asan's): every
 * record the ring buffers deliver is also appended to $CGBPF_RECORDS_TAP
 * in fuzz_records' input format (a flags byte, then [u16 LE length][record]
 * per record), so real captures become fuzzing seeds (fuzz/make-seeds.sh).
 * A test tool: never part of cgbpf.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <bpf/libbpf.h>

struct tap {
	ring_buffer_sample_fn fn;
	void *ctx;
};

static FILE *out;
/* ring_buffer__new adds its first ring with ring_buffer__add, which this
 * shim interposes too: that one is wrapped already. */
static __thread int in_new;

static void open_out(void)
{
	const char *path = getenv("CGBPF_RECORDS_TAP");

	if (out || !path)
		return;
	out = fopen(path, "we");
	if (out)
		fputc(0, out);	/* flags: --sched all, record, with a trace */
}

static int tee(void *ctx, void *data, size_t size)
{
	struct tap *t = ctx;

	if (out && size <= UINT16_MAX) {
		uint16_t len = (uint16_t)size;

		fwrite(&len, sizeof(len), 1, out);
		fwrite(data, 1, size, out);
		fflush(out);
	}
	return t->fn(t->ctx, data, size);
}

static struct tap *wrap(ring_buffer_sample_fn fn, void *ctx)
{
	struct tap *t = malloc(sizeof(*t));

	if (t) {
		t->fn = fn;
		t->ctx = ctx;
	}
	open_out();
	return t;
}

struct ring_buffer *ring_buffer__new(int map_fd, ring_buffer_sample_fn sample_cb, void *ctx,
				     const struct ring_buffer_opts *opts)
{
	struct ring_buffer *(*real)(int, ring_buffer_sample_fn, void *,
				    const struct ring_buffer_opts *) =
		(struct ring_buffer *(*)(int, ring_buffer_sample_fn, void *,
					 const struct ring_buffer_opts *))dlsym(RTLD_NEXT,
										"ring_buffer__new");
	struct tap *t = wrap(sample_cb, ctx);
	struct ring_buffer *rb;

	in_new = 1;
	rb = t ? real(map_fd, tee, t, opts) : real(map_fd, sample_cb, ctx, opts);
	in_new = 0;
	return rb;
}

int ring_buffer__add(struct ring_buffer *rb, int map_fd, ring_buffer_sample_fn sample_cb,
		     void *ctx)
{
	int (*real)(struct ring_buffer *, int, ring_buffer_sample_fn, void *) =
		(int (*)(struct ring_buffer *, int, ring_buffer_sample_fn, void *))dlsym(
			RTLD_NEXT, "ring_buffer__add");
	struct tap *t = in_new ? NULL : wrap(sample_cb, ctx);

	return t ? real(rb, map_fd, tee, t) : real(rb, map_fd, sample_cb, ctx);
}
