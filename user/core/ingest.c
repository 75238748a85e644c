// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include "agg.h"
#include "events.h"
#include "nvtx_rec.h"
#include "pycode_rec.h"
#include "pyframes_rec.h"
#include "pysites_rec.h"
#include "stack_rec.h"
#include "syscalls_rec.h"
#include "core/apilib.h"
#include "core/ingest.h"

size_t ingest__min_size(unsigned type)
{
	switch (type) {
	case REC_CALL_ENTER:
		return sizeof(struct rec_call_enter);
	case REC_CALL_EXIT:
		return sizeof(struct rec_call_exit);
	case REC_OUT_ARRAY:
		return sizeof(struct rec_out_array);
	case REC_STRING:
		return offsetof(struct rec_string, str) + 1;
	case REC_PROC_FORK:
	case REC_PROC_EXEC:
	case REC_PROC_EXIT:
	case REC_THREAD_EXIT:
		return sizeof(struct rec_proc);
	case REC_MMAP:
		return sizeof(struct rec_mmap);
	case REC_STACK_SAMPLE:
	case REC_STACK_BT:
		return offsetof(struct rec_stack, data);
	case REC_SYSCALL:
		return REC_SYSCALL_BASE_SIZE;
	case REC_TRIGGER:
		return sizeof(struct rec_trigger);
	case REC_NVTX:
		return offsetof(struct rec_nvtx, str) + 1;
	case REC_GPU_BATCH:
		return sizeof(struct rec_gpu_batch) + 4;	/* one entry header */
	case REC_PY_FRAMES:
		return offsetof(struct rec_py_frames, frames) + sizeof(struct py_rec_frame);
	case REC_PY_CODE:
		return offsetof(struct rec_py_code, data);
	case REC_PY_SITE:
		return sizeof(struct rec_py_site);
	}
	return 0;
}

/* A (library, function) pair the decoders have a table entry for. The
 * attach cookie sets them, not the traced process, but a decoder indexes
 * its function table with them: never trust an index. */
static bool known_call(unsigned lib, unsigned func)
{
	const struct api_lib *l = lib < LIB__COUNT ? apilib__get(lib) : NULL;

	return l && func < l->nfuncs;
}

int ingest__check(const void *data, size_t size)
{
	const struct rec_hdr *h = data;
	size_t need;

	if (size < sizeof(*h) || h->size != size || !(need = ingest__min_size(h->type)) || size < need)
		return -EINVAL;
	switch (h->type) {
	case REC_CALL_ENTER: {
		const struct rec_call_enter *c = data;

		/* Plain, or with its Python leaf frame (bpf/pyframes_rec.h). */
		if ((size != sizeof(*c) && size != sizeof(struct rec_call_enter_py)) ||
		    !known_call(c->lib, c->func))
			return -EINVAL;
		break;
	}
	case REC_CALL_EXIT: {
		const struct rec_call_exit *c = data;

		if (!known_call(c->lib, c->func))
			return -EINVAL;
		break;
	}
	case REC_OUT_ARRAY: {
		const struct rec_out_array *o = data;

		if (size != sizeof(*o) || !known_call(o->lib, o->func) || o->n > OUT_ARRAY_MAX ||
		    o->n > o->len)
			return -EINVAL;
		break;
	}
	case REC_TRIGGER: {
		const struct rec_trigger *t = data;

		if (!known_call(t->lib, t->func))
			return -EINVAL;
		break;
	}
	case REC_NVTX: {
		const struct rec_nvtx *nv = data;

		/* The message and its NUL inside the record. */
		if (nv->len > size - offsetof(struct rec_nvtx, str) - 1 || nv->str[nv->len] ||
		    nv->probe >= NV__COUNT)
			return -EINVAL;
		break;
	}
	case REC_STRING: {
		const struct rec_string *s = data;

		/* len bytes inside the record, none of them a NUL. */
		if (!known_call(s->lib, s->func) || s->len > size - offsetof(struct rec_string, str) || memchr(s->str, 0, s->len))
			return -EINVAL;
		break;
	}
	case REC_PY_FRAMES: {
		const struct rec_py_frames *py = data;

		/* nframes frames, exactly; the call's ids as a call's. */
		if (!py->nframes || py->nframes > PY_FRAMES_MAX ||
		    size != offsetof(struct rec_py_frames, frames) +
				    (size_t)py->nframes * sizeof(struct py_rec_frame) ||
		    py->what > PYR_SITE || (py->what != PYR_SAMPLE && !known_call(py->lib, py->func)))
			return -EINVAL;
		break;
	}
	case REC_PY_SITE: {
		const struct rec_py_site *ps = data;

		if (size != sizeof(*ps) || !ps->weight || !known_call(ps->lib, ps->func))
			return -EINVAL;
		break;
	}
	case REC_PY_CODE: {
		const struct rec_py_code *pc = data;

		/* Each part within its bound, the parts exactly the data. */
		if (pc->str[PYC_FILE].sent > PYC_FILE_MAX || pc->str[PYC_NAME].sent > PYC_NAME_MAX ||
		    pc->str[PYC_QUAL].sent > PYC_NAME_MAX || pc->table_sent > PYC_TABLE_MAX ||
		    size != offsetof(struct rec_py_code, data) + (size_t)pc->str[PYC_FILE].sent +
				    pc->str[PYC_NAME].sent + pc->str[PYC_QUAL].sent + pc->table_sent)
			return -EINVAL;
		break;
	}
	case REC_SYSCALL:
		/* Two sizes: without and with the fd description. */
		if (size != REC_SYSCALL_BASE_SIZE && size != sizeof(struct rec_syscall))
			return -EINVAL;
		break;
	}
	return 0;
}
