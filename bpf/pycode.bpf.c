// SPDX-License-Identifier: MIT
/*
 * REC_PY_CODE (bpf/pycode_rec.h): what user space needs to name every
 * position of a code object, read once per code object and process when a
 * frame walk first meets it (bpf/python.bpf.c calls py_code_describe()).
 * Raw reads only: the strings' state words and data, the line table's
 * bytes, the types' addresses; user/sources/python/pycode.c checks and decodes them.
 *
 * The record is built in a per-CPU scratch (its own, with a lock word:
 * the walk that calls this holds py_scratch) and sent with its variable
 * size. Every part is cut at its bound (PYC_*_MAX).
 */
#include "pymaps.bpf.h"
#include "stacks.bpf.h"
#include "pycode.bpf.h"
#include "pycode_rec.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define PYC_OBJ 256		/* head of an object read at once (code_read <= 200) */

struct pyc_scratch_v {
	__u64 busy;		/* scratch_take() */
	__u8 obj[PYC_OBJ + 16];
	struct rec_py_code r;
	/* Room for the verifier: a part's offset is masked to 2047 and its
	 * length to PYC_TABLE_MAX, wider than where they really end. */
	__u8 slack[2048 + PYC_TABLE_MAX - PYC_DATA_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct pyc_scratch_v);
} pyc_scratch SEC(".maps");

static __always_inline __u64 obj64(const struct pyc_scratch_v *v, __u32 off)
{
	return *(const __u64 *)(v->obj + (off & (PYC_OBJ - 1)));
}

static __always_inline __u32 obj32(const struct pyc_scratch_v *v, __u32 off)
{
	return *(const __u32 *)(v->obj + (off & (PYC_OBJ - 1)));
}

/*
 * Puts the str object at addr into str[i] and, at most max bytes of its
 * data, into data at off. Returns the offset after it. A string that is
 * not compact (code objects hold compact ones) or unreadable is sent
 * without data: user space then refuses or reads it.
 */
static __always_inline __u32 put_str(struct pyc_scratch_v *v, const struct py_proc *pp, int i,
				     __u64 addr, __u32 off, __u32 max)
{
	struct pyc_str *s = &v->r.str[i];
	__u32 hl = pp->off.unicode_compact_data, state, kind;
	__s64 len;
	__u64 n;

	s->addr = addr;
	s->type = 0;
	s->length = 0;
	s->state = 0;
	s->sent = 0;
	s->pad = 0;
	if (!addr || hl < 8 || hl > PYC_OBJ)
		return off;
	if (bpf_probe_read_user(v->obj, hl, (const void *)addr))
		return off;
	s->type = obj64(v, pp->off.obj_type);
	len = (__s64)obj64(v, pp->off.unicode_length);
	state = obj32(v, pp->off.unicode_state);
	s->length = len;
	s->state = state;
	kind = (state >> PYC_KIND_SHIFT) & ((1u << PYC_KIND_BITS) - 1);
	if (!max || !((state >> PYC_COMPACT_BIT) & 1) || (kind != 1 && kind != 2 && kind != 4) ||
	    len <= 0 || len > (1 << 20))
		return off;
	n = (__u64)len * kind;
	if (n > max)
		n = max & ~(kind - 1);
	addr += (state >> PYC_ASCII_BIT) & 1 ? pp->off.unicode_ascii_data :
					       pp->off.unicode_compact_data;
	off &= 2047;
	n &= PYC_TABLE_MAX - 1;
	if (!n || bpf_probe_read_user(v->r.data + off, n, (const void *)addr))
		return off;
	s->sent = n;
	return off + n;
}

/* The ob_type of type and the first len bytes of its tp_name. */
static __always_inline void type_info(const struct py_proc *pp, __u64 type, __u64 *tt,
				      char *name, __u32 len)
{
	__u64 np = 0;

	*tt = 0;
	if (!type)
		return;
	bpf_probe_read_user(tt, sizeof(*tt), (const void *)(type + pp->off.obj_type));
	if (!bpf_probe_read_user(&np, sizeof(np), (const void *)(type + PYC_TYPE_NAME)) && np)
		bpf_probe_read_user(name, len & 7, (const void *)np);
}

__noinline int py_code_describe(__u32 slot, __u32 tgid, __u64 code)
{
	struct py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	__u64 pid_tgid = bpf_get_current_pid_tgid(), table, size, n;
	struct pyc_scratch_v *v;
	struct rec_py_code *r;
	__u32 hl, off;
	int ret = -1;

	slot = slot ? 1 : 0;
	v = bpf_map_lookup_elem(&pyc_scratch, &slot);
	if (!pp || !v)
		return -1;
	if (!scratch_take(&v->busy)) {
		py_count(PYS_CODE_FAIL);
		return -1;
	}
	r = &v->r;
	hl = pp->off.code_read;
	if (hl < 8 || hl > PYC_OBJ || bpf_probe_read_user(v->obj, hl, (const void *)code))
		goto out;
	r->code_type = obj64(v, pp->off.obj_type);
	if (r->code_type != pp->code_type)
		goto out;
	r->code = code;
	r->firstlineno = (__s32)obj32(v, pp->off.code_firstlineno);
	table = obj64(v, pp->off.code_linetable);
	{
		/* Read out of obj before put_str() reuses it. */
		__u64 file = obj64(v, pp->off.code_filename);
		__u64 name = obj64(v, pp->off.code_name);
		__u64 qual = pp->off.code_qualname != PY_OFF_NONE ?
			     obj64(v, pp->off.code_qualname) : 0;

		off = put_str(v, pp, PYC_FILE, file, 0, PYC_FILE_MAX);
		/* co_name's data only when it is the name shown. */
		off = put_str(v, pp, PYC_NAME, name, off, qual ? 0 : PYC_NAME_MAX);
		off = put_str(v, pp, PYC_QUAL, qual, off, PYC_NAME_MAX);
	}
	r->table_addr = table;
	r->table_type = 0;
	r->table_len = 0;
	r->table_sent = 0;
	r->pad = 0;
	hl = pp->off.bytes_data;
	if (table && hl >= 8 && hl <= PYC_OBJ &&
	    !bpf_probe_read_user(v->obj, hl, (const void *)table)) {
		r->table_type = obj64(v, pp->off.obj_type);
		r->table_len = (__s64)obj64(v, pp->off.bytes_size);
		n = r->table_len > 0 ? (__u64)r->table_len : 0;
		if (n > PYC_TABLE_MAX)
			n = PYC_TABLE_MAX;
		off &= 2047;
		n &= 2 * PYC_TABLE_MAX - 1;
		if (n > PYC_TABLE_MAX)
			n = PYC_TABLE_MAX;
		if (n && !bpf_probe_read_user(r->data + off, n,
					      (const void *)(table + pp->off.bytes_data))) {
			r->table_sent = n;
			off += n;
		}
	}
	bpf_probe_read_user(&r->type_type, sizeof(r->type_type),
			    (const void *)(pp->code_type + pp->off.obj_type));
	__builtin_memset(r->str_type_name, 0, sizeof(r->str_type_name));
	__builtin_memset(r->bytes_type_name, 0, sizeof(r->bytes_type_name));
	type_info(pp, r->str[PYC_FILE].type, &r->str_type_type, r->str_type_name, 4);
	type_info(pp, r->table_type, &r->bytes_type_type, r->bytes_type_name, 6);
	size = offsetof(struct rec_py_code, data) + (off & 8191);
	if (size > sizeof(*r))
		goto out;
	fill_hdr(&r->hdr, REC_PY_CODE, size, pid_tgid);
	/* No wakeup: the frames record right after asks for one. */
	if (slot ? bpf_ringbuf_output(&samples, r, size, BPF_RB_NO_WAKEUP) :
		   bpf_ringbuf_output(&events, r, size, BPF_RB_NO_WAKEUP)) {
		count_drop(REC_PY_CODE);
		goto out;
	}
	py_count(PYS_CODES);
	if (!slot) {
		struct py_code_key k = { .tgid = tgid, .code = code };
		__u8 sent = PY_CODE_SENT, *cur = bpf_map_lookup_elem(&py_codes, &k);

		/* Not over user space's class, should it have come first (a
		 * freed object's entry is gone: py_code_free). */
		if (!cur)
			bpf_map_update_elem(&py_codes, &k, &sent, BPF_NOEXIST);
	}
	ret = 0;
out:
	if (ret)
		py_count(PYS_CODE_FAIL);
	scratch_give(&v->busy);
	return ret;
}
