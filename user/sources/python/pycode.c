// SPDX-License-Identifier: MIT
/*
 * Code objects -> (file, function, line). Types are recognized by address:
 * PyCode_Type is given (pyfind), str and bytes are learnt per process from
 * the first object that claims to be one, whose type must itself be a
 * type (its ob_type is PyCode_Type's ob_type, PyType_Type) named "str" or
 * "bytes". From then on every string and table must have exactly that type.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pycode_rec.h"
#include "lib/hmap.h"
#include "sources/python/pycode.h"
#include "sources/python/pyfind.h"
#include "sources/python/pyoffsets.h"

/* BPF's copy of the str state bits and tp_name's offset (bpf/pycode_rec.h). */
_Static_assert(PYC_KIND_SHIFT == PY_UNICODE_KIND_SHIFT && PYC_KIND_BITS == PY_UNICODE_KIND_BITS &&
	       PYC_COMPACT_BIT == PY_UNICODE_COMPACT_BIT && PYC_ASCII_BIT == PY_UNICODE_ASCII_BIT &&
	       PYC_TYPE_NAME == PY_TYPE_NAME_OFFSET, "bpf/pycode_rec.h disagrees with pyoffsets.h");

/*
 * What one address held. An address keeps its descriptions newest first,
 * each from its time on (since: the REC_PY_CODE record's time; 0 for one
 * read from the process or seeded without a time), so that a record names
 * the code object that was there at its own time: the samples ring is
 * drained after the events ring, and a sample may come from before a code
 * object was freed and another took its address.
 */
struct code_entry {
	uint64_t name_ptr;	/* co_name when read: tells a reused address */
	uint64_t since;
	struct code_entry *older;
	char *file, *func;
	bool user;
	struct py_lines lines;
};

#define VERSIONS_MAX 4		/* descriptions kept per address */

/* What is known about one process. */
struct proc_entry {
	uint64_t runtime;	/* the interpreter it was learnt for */
	uint64_t type_type, str_type, bytes_type;
	struct hmap codes;	/* code address -> struct code_entry * */
};

struct pycode {
	struct hmap procs;	/* pid -> struct proc_entry * */
};

struct pycode *pycode__new(void)
{
	return calloc(1, sizeof(struct pycode));
}

static void code_free(struct code_entry *c)
{
	if (!c)
		return;
	free(c->file);
	free(c->func);
	pycode__lines_free(&c->lines);
	free(c);
}

/* c and every older description of its address. */
static void chain_free(struct code_entry *c)
{
	while (c) {
		struct code_entry *older = c->older;

		code_free(c);
		c = older;
	}
}

static void proc_free(struct proc_entry *p)
{
	uint64_t k, v;

	if (!p)
		return;
	for (size_t it = 0; hmap__next(&p->codes, &it, &k, &v);)
		chain_free((struct code_entry *)(uintptr_t)v);
	hmap__free(&p->codes);
	free(p);
}

void pycode__forget(struct pycode *pc, int pid)
{
	uint64_t old;

	if (pc && hmap__del(&pc->procs, (uint64_t)pid, &old))
		proc_free((struct proc_entry *)(uintptr_t)old);
}

void pycode__free(struct pycode *pc)
{
	uint64_t k, v;

	if (!pc)
		return;
	for (size_t it = 0; hmap__next(&pc->procs, &it, &k, &v);)
		proc_free((struct proc_entry *)(uintptr_t)v);
	hmap__free(&pc->procs);
	free(pc);
}

bool pycode__is_user(const char *file, int minor)
{
	char ver[16];
	size_t vlen;
	const char *p, *next;

	if (!file || !*file || file[0] == '<')
		return false;
	vlen = (size_t)snprintf(ver, sizeof(ver), "python3.%d", minor);
	/* Walk the components: "lib" then "python3.X", or a packages dir. */
	for (p = file; *p; p = next) {
		size_t len;

		while (*p == '/')
			p++;
		next = strchr(p, '/');
		if (!next)
			break;	/* the file name itself does not count */
		len = (size_t)(next - p);
		if ((len == 13 && !strncmp(p, "site-packages", 13)) ||
		    (len == 13 && !strncmp(p, "dist-packages", 13)))
			return false;
		if (((len == 3 && !strncmp(p, "lib", 3)) || (len == 5 && !strncmp(p, "lib64", 5))) &&
		    !strncmp(next + 1, ver, vlen) && next[1 + vlen] == '/')
			return false;
	}
	return true;
}

/* ------------------------------------------------------------ line tables */

static int push(struct py_lines *l, size_t *cap, uint32_t start, uint32_t end, int64_t line)
{
	/* A table can drive the line anywhere: beyond an int it is no line. */
	if (line < INT32_MIN + 1 || line > INT32_MAX)
		return -EINVAL;
	if (start == end)
		return 0;	/* an empty range never matches */
	if (l->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 32;
		struct py_range *v = realloc(l->v, nc * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		*cap = nc;
	}
	l->v[l->n++] = (struct py_range){ start, end, (int32_t)line };
	return 0;
}

/* 3.8, 3.9 co_lnotab: (byte delta, signed line delta) pairs. A cut table
 * (the start of a longer one) has no open range at its end. */
static int decode_lnotab(const uint8_t *t, size_t len, struct py_lines *l, size_t *cap, bool cut)
{
	uint32_t addr = 0;
	int64_t line = l->firstlineno;
	int err;

	if (len & 1)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 2) {
		if ((err = push(l, cap, addr, addr + t[i], line)))
			return err;
		addr += t[i];
		line += (int8_t)t[i + 1];
	}
	return cut ? 0 : push(l, cap, addr, UINT32_MAX, line);
}

/* 3.10 co_linetable: (byte delta, signed line delta, -128: no line) pairs. */
static int decode_310(const uint8_t *t, size_t len, struct py_lines *l, size_t *cap)
{
	uint32_t addr = 0;
	int64_t line = l->firstlineno;
	int err;

	if (len & 1)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 2) {
		int8_t ld = (int8_t)t[i + 1];

		if (ld != -128)
			line += ld;
		if ((err = push(l, cap, addr, addr + t[i], ld == -128 ? -1 : line)))
			return err;
		addr += t[i];
	}
	return 0;
}

static int varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v, shift = 0;
	uint8_t b;

	if (*i >= len)
		return -EINVAL;
	b = t[(*i)++];
	v = b & 63;
	while (b & 64) {
		if (*i >= len || (shift += 6) > 24)
			return -EINVAL;
		b = t[(*i)++];
		v |= (uint32_t)(b & 63) << shift;
	}
	*out = v;
	return 0;
}

static int svarint(const uint8_t *t, size_t len, size_t *i, int32_t *out)
{
	uint32_t u;
	int err = varint(t, len, i, &u);

	if (!err)
		*out = (u & 1) ? -(int32_t)(u >> 1) : (int32_t)(u >> 1);
	return err;
}

/*
 * 3.11+ location table: entries of a first byte 1CCCCLLL (code C, length
 * L + 1 code units) and code-dependent varints; the line moves by the
 * entry's delta: 15 none (no line), 14 long form and 13 no-columns a
 * signed varint, 10-12 one-line forms C - 10, 0-9 short forms 0.
 */
static int decode_311(const uint8_t *t, size_t len, struct py_lines *l, size_t *cap)
{
	uint32_t addr = 0, skip;
	int64_t line = l->firstlineno;
	int32_t delta;
	size_t i = 0;
	int err;

	while (i < len) {
		uint8_t b = t[i++];
		int code = (b >> 3) & 15;
		uint32_t units = (b & 7) + 1;

		if (!(b & 128))
			return -EINVAL;
		delta = 0;
		switch (code) {
		case 15:
			break;
		case 14:	/* line, end line, column, end column */
			err = svarint(t, len, &i, &delta);
			for (int k = 0; k < 3 && !err; k++)
				err = varint(t, len, &i, &skip);
			if (err)
				return err;
			break;
		case 13:
			if ((err = svarint(t, len, &i, &delta)))
				return err;
			break;
		case 10: case 11: case 12:
			delta = code - 10;
			if (i + 2 > len)
				return -EINVAL;
			i += 2;
			break;
		default:
			if (i + 1 > len)
				return -EINVAL;
			i += 1;
			break;
		}
		/* Anything left of the entry (there should be none) is skipped. */
		while (i < len && !(t[i] & 128))
			i++;
		line += delta;
		if ((err = push(l, cap, addr, addr + units * 2, code == 15 ? -1 : line)))
			return err;
		addr += units * 2;
	}
	return 0;
}

/*
 * pycode__decode_lines(); cut: table is the start of a longer table (BPF's
 * bound), decoded up to its last whole entry, with no line past it.
 */
static int decode_lines(uint32_t hexversion, const uint8_t *table, size_t len, int firstlineno,
			bool cut, struct py_lines *out)
{
	uint32_t mm = hexversion >> 16;
	size_t cap = 0;
	int err;

	memset(out, 0, sizeof(*out));
	out->firstlineno = firstlineno;
	if (len > PYCODE_MAX_TABLE)
		return -EINVAL;
	if (cut && mm <= 0x030a) {
		len &= ~(size_t)1;	/* pairs */
	} else if (cut) {
		/* The entry that starts last may lack its varints: drop it. */
		while (len && !(table[len - 1] & 128))
			len--;
		if (len)
			len--;
	}
	if (mm == 0x0308 || mm == 0x0309)
		err = decode_lnotab(table, len, out, &cap, cut);
	else if (mm == 0x030a)
		err = decode_310(table, len, out, &cap);
	else if (mm >= 0x030b && mm <= 0x030d)
		err = decode_311(table, len, out, &cap);
	else
		err = -ENOTSUP;
	if (err)
		pycode__lines_free(out);
	out->firstlineno = firstlineno;
	return err;
}

int pycode__decode_lines(uint32_t hexversion, const uint8_t *table, size_t len,
			 int firstlineno, struct py_lines *out)
{
	return decode_lines(hexversion, table, len, firstlineno, false, out);
}

int pycode__addr2line(const struct py_lines *l, int64_t off)
{
	size_t lo = 0, hi = l->n;

	if (off < 0)
		return l->firstlineno;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((uint64_t)off < l->v[mid].start)
			hi = mid;
		else if ((uint64_t)off >= l->v[mid].end)
			lo = mid + 1;
		else
			return l->v[mid].line;
	}
	return -1;
}

void pycode__lines_free(struct py_lines *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* ------------------------------------------------------------ objects */

static uint64_t u64_at(const uint8_t *b, unsigned int off)
{
	uint64_t v;

	memcpy(&v, b + off, 8);
	return v;
}

/*
 * Is type the type named name ("str", "bytes"), given what BPF read of it
 * (its ob_type tt, the start of its tp_name)? Learnt into *known as
 * check_type() learns it; pe->type_type must be known.
 */
static int learn_type(const struct proc_entry *pe, uint64_t type, uint64_t tt, const char *tname,
		      size_t tlen, uint64_t *known, const char *name)
{
	size_t n = strlen(name) + 1;

	if (*known)
		return type == *known ? 0 : -EINVAL;
	if (!type || !pe->type_type || n > tlen || tt != pe->type_type || memcmp(tname, name, n))
		return -EINVAL;
	*known = type;
	return 0;
}

/*
 * Is type (an object's ob_type) the type named name ("str", "bytes")?
 * Learnt once per process into *known; later calls compare addresses.
 */
static int check_type(int pid, const struct py_proc *pp, struct proc_entry *pe,
		      uint64_t type, uint64_t *known, const char *name)
{
	uint64_t tt = 0, np = 0;
	char buf[8];
	size_t n = strlen(name) + 1;
	int err;

	if (*known)
		return type == *known ? 0 : -EINVAL;
	if (!pe->type_type &&
	    (err = pyfind__read(pid, pp->code_type + pp->off.obj_type, &pe->type_type, 8)))
		return err;
	if ((err = pyfind__read(pid, type + pp->off.obj_type, &tt, 8)) ||
	    (err = pyfind__read(pid, type + PY_TYPE_NAME_OFFSET, &np, 8)) ||
	    (err = pyfind__read(pid, np, buf, n)))
		return err == -EFAULT ? -EINVAL : err;
	if (tt != pe->type_type || memcmp(buf, name, n))
		return -EINVAL;
	*known = type;
	return 0;
}

static size_t utf8_put(char *o, uint32_t c)
{
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xc0 | c >> 6);
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xe0 | c >> 12);
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | c >> 18);
	o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/*
 * len characters of kind bytes each at data, as a malloc'ed UTF-8 string
 * (with "..." after them when cut); NULL with *err set: -EINVAL for a NUL
 * or a code point beyond Unicode, -ENOMEM.
 */
static char *decode_str(const uint8_t *data, size_t len, uint32_t kind, bool cut, int *err)
{
	char *s = malloc(len * 4 + 4);
	size_t at = 0;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < len; i++) {
		uint32_t c;

		if (kind == 1) {
			c = data[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, data + 2 * i, 2);
			c = u;
		} else {
			memcpy(&c, data + 4 * i, 4);
		}
		/* NUL or beyond Unicode: not a name CPython would make. */
		if (!c || c > 0x10ffff) {
			free(s);
			*err = -EINVAL;
			return NULL;
		}
		at += utf8_put(s + at, c);
	}
	if (cut) {
		memcpy(s + at, "...", 3);
		at += 3;
	}
	s[at] = 0;
	return s;
}

/* A str object as a malloc'ed UTF-8 string; NULL with *err set. */
static char *read_str(int pid, const struct py_proc *pp, struct proc_entry *pe, uint64_t addr,
		      int *err)
{
	const struct py_offsets *o = &pp->off;
	uint8_t head[128], *data = NULL;
	uint32_t state, kind;
	int64_t len;
	char *s = NULL;

	if (o->unicode_compact_data > sizeof(head) || !addr) {
		*err = -EINVAL;
		return NULL;
	}
	if ((*err = pyfind__read(pid, addr, head, o->unicode_compact_data)))
		return NULL;
	if ((*err = check_type(pid, pp, pe, u64_at(head, o->obj_type), &pe->str_type, "str")))
		return NULL;
	memcpy(&len, head + o->unicode_length, 8);
	memcpy(&state, head + o->unicode_state, 4);
	kind = (state >> PY_UNICODE_KIND_SHIFT) & ((1u << PY_UNICODE_KIND_BITS) - 1);
	if (len < 0 || len > PYCODE_MAX_STR || !(state >> PY_UNICODE_COMPACT_BIT & 1) ||
	    (kind != 1 && kind != 2 && kind != 4) ||
	    ((state >> PY_UNICODE_ASCII_BIT & 1) && kind != 1)) {
		*err = -EINVAL;
		return NULL;
	}
	data = malloc((size_t)len * kind + 1);
	if (!data) {
		*err = -ENOMEM;
		return NULL;
	}
	if (len && (*err = pyfind__read(pid, addr + ((state >> PY_UNICODE_ASCII_BIT & 1) ?
					o->unicode_ascii_data : o->unicode_compact_data),
					data, (size_t)len * kind)))
		goto fail;
	s = decode_str(data, (size_t)len, kind, false, err);
fail:
	free(data);
	return s;
}

/* A bytes object's contents, malloc'ed, in *out and *len. */
static int read_bytes(int pid, const struct py_proc *pp, struct proc_entry *pe, uint64_t addr,
		      uint8_t **out, size_t *len)
{
	const struct py_offsets *o = &pp->off;
	uint8_t head[64];
	int64_t size;
	int err;

	if (o->bytes_data > sizeof(head) || !addr)
		return -EINVAL;
	if ((err = pyfind__read(pid, addr, head, o->bytes_data)))
		return err;
	if ((err = check_type(pid, pp, pe, u64_at(head, o->obj_type), &pe->bytes_type, "bytes")))
		return err;
	memcpy(&size, head + o->bytes_size, 8);
	if (size < 0 || size > PYCODE_MAX_TABLE)
		return -EINVAL;
	if (!(*out = malloc((size_t)size + 1)))
		return -ENOMEM;
	if (size && (err = pyfind__read(pid, addr + o->bytes_data, *out, (size_t)size))) {
		free(*out);
		*out = NULL;
		return err;
	}
	*len = (size_t)size;
	return 0;
}

static int load_code(int pid, const struct py_proc *pp, struct proc_entry *pe, uint64_t code,
		     struct code_entry **out)
{
	const struct py_offsets *o = &pp->off;
	uint8_t head[512], *table = NULL;
	size_t tlen = 0;
	struct code_entry *c;
	int32_t first;
	int err;

	if (o->code_read > sizeof(head) || o->code_read < 8)
		return -EINVAL;
	if ((err = pyfind__read(pid, code, head, o->code_read)))
		return err;
	if (u64_at(head, o->obj_type) != pp->code_type)
		return -EINVAL;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	memcpy(&first, head + o->code_firstlineno, 4);
	c->name_ptr = u64_at(head, o->code_name);
	if (first < 0) {
		err = -EINVAL;
		goto fail;
	}
	if (!(c->file = read_str(pid, pp, pe, u64_at(head, o->code_filename), &err)))
		goto fail;
	c->func = read_str(pid, pp, pe, u64_at(head, o->code_qualname != PY_OFF_NONE ?
						o->code_qualname : o->code_name), &err);
	if (!c->func)
		goto fail;
	if ((err = read_bytes(pid, pp, pe, u64_at(head, o->code_linetable), &table, &tlen)))
		goto fail;
	err = pycode__decode_lines(o->version, table, tlen, first, &c->lines);
	free(table);
	if (err)
		goto fail;
	c->user = pycode__is_user(c->file, (int)(o->version >> 16 & 0xff));
	*out = c;
	return 0;
fail:
	code_free(c);
	return err;
}

/* What is known of pid for interpreter pp, made when new. 0 or -errno. */
static int proc_get(struct pycode *pc, int pid, const struct py_proc *pp, struct proc_entry **out)
{
	uint64_t *v = hmap__get(&pc->procs, (uint64_t)pid);
	struct proc_entry *pe = v ? (struct proc_entry *)(uintptr_t)*v : NULL;
	int err;

	if (pe && pe->runtime != pp->runtime) {
		/* Another interpreter under this pid (exec): nothing carries over. */
		pycode__forget(pc, pid);
		pe = NULL;
	}
	if (!pe) {
		if (!(pe = calloc(1, sizeof(*pe))))
			return -ENOMEM;
		pe->runtime = pp->runtime;
		if ((err = hmap__put(&pc->procs, (uint64_t)pid, (uint64_t)(uintptr_t)pe))) {
			free(pe);
			return err;
		}
	}
	*out = pe;
	return 0;
}

/*
 * String i of a REC_PY_CODE record, whose data is the sent bytes at d, as
 * a malloc'ed UTF-8 string: the whole string from the record, or from the
 * process when BPF cut it, else the cut one with "...". NULL with *err.
 */
static char *seed_str(int pid, const struct py_proc *pp, struct proc_entry *pe,
		      const struct pyc_str *st, const uint8_t *d, int *err)
{
	uint32_t kind = (st->state >> PY_UNICODE_KIND_SHIFT) & ((1u << PY_UNICODE_KIND_BITS) - 1);
	char *s;

	*err = -EINVAL;
	if (learn_type(pe, st->type, 0, "", 0, &pe->str_type, "str"))
		return NULL;
	if (st->length < 0 || st->length > PYCODE_MAX_STR ||
	    !(st->state >> PY_UNICODE_COMPACT_BIT & 1) || (kind != 1 && kind != 2 && kind != 4) ||
	    ((st->state >> PY_UNICODE_ASCII_BIT & 1) && kind != 1) ||
	    st->sent % kind || st->sent > (uint64_t)st->length * kind)
		return NULL;
	if (st->sent == (uint64_t)st->length * kind)
		return decode_str(d, st->sent / kind, kind, false, err);
	/* Cut by BPF (or unread there): the process may still have it. */
	s = read_str(pid, pp, pe, st->addr, err);
	if (s || !st->sent)
		return s;
	return decode_str(d, st->sent / kind, kind, true, err);
}

static bool same_code(const struct code_entry *a, const struct code_entry *b)
{
	return a->name_ptr == b->name_ptr && !strcmp(a->file, b->file) &&
	       !strcmp(a->func, b->func) && a->lines.firstlineno == b->lines.firstlineno &&
	       a->lines.n == b->lines.n &&
	       (!a->lines.n || !memcmp(a->lines.v, b->lines.v, a->lines.n * sizeof(*a->lines.v)));
}

/*
 * Puts c among the descriptions of its address (*head, newest first).
 * 0: the address held the same object then already (c is freed, or its
 * time moves the same object's earlier); 1: c is another object.
 */
static int add_version(uint64_t *head, struct code_entry *c)
{
	struct code_entry *first = (struct code_entry *)(uintptr_t)*head, **at = &first,
			  *newer = NULL, *e;
	int n = 0;

	while (*at && (*at)->since > c->since) {
		newer = *at;
		at = &newer->older;
	}
	if (*at && same_code(*at, c)) {
		code_free(c);
		return 0;
	}
	if (newer && same_code(newer, c)) {
		newer->since = c->since;
		code_free(c);
		return 0;
	}
	c->older = *at;
	*at = c;
	for (e = first; e; e = e->older)
		if (++n == VERSIONS_MAX) {
			chain_free(e->older);
			e->older = NULL;
			break;
		}
	*head = (uint64_t)(uintptr_t)first;
	return 1;
}

int pycode__seed(struct pycode *pc, int pid, const struct py_proc *pp,
		 const struct rec_py_code *r, size_t size)
{
	const struct py_offsets *o = &pp->off;
	size_t at = 0, avail, need = 0;
	const uint8_t *d = r->data;
	const struct pyc_str *fn, *nm, *qn;
	struct proc_entry *pe;
	struct code_entry *c;
	uint8_t *whole = NULL;
	uint64_t *v;
	int err, ret = 0;
	bool cut;

	if (size < offsetof(struct rec_py_code, data) || size > sizeof(*r))
		return -EINVAL;
	avail = size - offsetof(struct rec_py_code, data);
	for (int i = 0; i < PYC__STR; i++)
		need += r->str[i].sent;
	need += r->table_sent;
	fn = &r->str[PYC_FILE];
	nm = &r->str[PYC_NAME];
	qn = &r->str[PYC_QUAL];
	if (need != avail || !r->code || r->code_type != pp->code_type || r->firstlineno < 0 ||
	    !r->type_type || !fn->addr || !nm->addr ||
	    !qn->addr != (o->code_qualname == PY_OFF_NONE) ||
	    (qn->addr && nm->sent))
		return -EINVAL;
	if ((err = proc_get(pc, pid, pp, &pe)))
		return err;
	/* PyType_Type, as BPF read it from PyCode_Type; then str and bytes
	 * from the types of co_filename and the table. */
	if (!pe->type_type)
		pe->type_type = r->type_type;
	if (pe->type_type != r->type_type ||
	    learn_type(pe, fn->type, r->str_type_type, r->str_type_name,
		       sizeof(r->str_type_name), &pe->str_type, "str") ||
	    learn_type(pe, r->table_type, r->bytes_type_type, r->bytes_type_name,
		       sizeof(r->bytes_type_name), &pe->bytes_type, "bytes") ||
	    r->table_len < 0 || r->table_len > PYCODE_MAX_TABLE ||
	    r->table_sent > r->table_len)
		return -EINVAL;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->name_ptr = nm->addr;
	if (!(c->file = seed_str(pid, pp, pe, fn, d, &err)))
		goto fail;
	at = fn->sent;
	if (qn->addr) {
		/* co_name: its address only (checked as a str all the same). */
		if (learn_type(pe, nm->type, 0, "", 0, &pe->str_type, "str")) {
			err = -EINVAL;
			goto fail;
		}
		c->func = seed_str(pid, pp, pe, qn, d + at + nm->sent, &err);
	} else {
		c->func = seed_str(pid, pp, pe, nm, d + at, &err);
	}
	if (!c->func)
		goto fail;
	at += nm->sent + qn->sent;
	cut = r->table_sent < r->table_len;
	if (cut) {
		size_t len = 0;

		/* The whole table from the process, if it still lives and
		 * still holds what BPF saw. */
		if (!read_bytes(pid, pp, pe, r->table_addr, &whole, &len) &&
		    len == (size_t)r->table_len && !memcmp(whole, d + at, r->table_sent))
			cut = false;
	}
	err = cut || !whole ? decode_lines(o->version, d + at, r->table_sent, r->firstlineno, cut,
					   &c->lines) :
			      decode_lines(o->version, whole, (size_t)r->table_len, r->firstlineno,
					   false, &c->lines);
	free(whole);
	if (err)
		goto fail;
	c->user = pycode__is_user(c->file, (int)(o->version >> 16 & 0xff));
	c->since = r->hdr.ts;
	v = hmap__get(&pe->codes, r->code);
	if (v)
		ret = add_version(v, c);
	else if ((err = hmap__put(&pe->codes, r->code, (uint64_t)(uintptr_t)c)))
		goto fail;
	return ret;
fail:
	code_free(c);
	return err;
}

static int resolve(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
		   const uint64_t *name_ptr, uint64_t lasti, uint64_t ts, struct py_sym *out)
{
	const struct py_offsets *o = &pp->off;
	struct proc_entry *pe;
	struct code_entry *c;
	uint64_t *v;
	int64_t off;
	int line, err;

	if ((err = proc_get(pc, pid, pp, &pe)))
		return err;
	v = hmap__get(&pe->codes, code);
	if (v && name_ptr && ((struct code_entry *)(uintptr_t)*v)->name_ptr != *name_ptr) {
		uint64_t old = *v;

		hmap__del(&pe->codes, code, NULL);
		chain_free((struct code_entry *)(uintptr_t)old);
		v = NULL;
	}
	if (v) {
		/* The newest description from before ts; else the oldest. */
		for (c = (struct code_entry *)(uintptr_t)*v; c->older && c->since > ts;
		     c = c->older)
			;
	} else {
		if ((err = load_code(pid, pp, pe, code, &c)))
			return err;
		if ((err = hmap__put(&pe->codes, code, (uint64_t)(uintptr_t)c))) {
			code_free(c);
			return err;
		}
	}
	/* Memory now holds another code object than the caller saw. */
	if (name_ptr && c->name_ptr != *name_ptr)
		return -ESTALE;

	switch (o->lasti_kind) {
	case PY_LASTI_BYTES:
		off = (int32_t)(uint32_t)lasti;
		break;
	case PY_LASTI_UNITS:
		off = (int64_t)(int32_t)(uint32_t)lasti * 2;
		break;
	case PY_LASTI_PREV_INSTR:
	case PY_LASTI_INSTR_PTR:
		off = (int64_t)(lasti - (code + o->code_adaptive));
		if (off < -2 || off > (int64_t)PYCODE_MAX_TABLE * 16 || (off & 1))
			return -ERANGE;
		break;
	default:
		return -EINVAL;
	}
	line = pycode__addr2line(&c->lines, off);
	out->file = c->file;
	out->func = c->func;
	out->line = line < 0 ? 0 : line;
	out->user = c->user;
	return 0;
}

int pycode__resolve(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
		    uint64_t lasti, struct py_sym *out)
{
	return resolve(pc, pid, pp, code, NULL, lasti, UINT64_MAX, out);
}

int pycode__resolve_at(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
		       uint64_t lasti, uint64_t ts, struct py_sym *out)
{
	return resolve(pc, pid, pp, code, NULL, lasti, ts, out);
}

int pycode__resolve_checked(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
			    uint64_t name_ptr, uint64_t lasti, struct py_sym *out)
{
	return resolve(pc, pid, pp, code, &name_ptr, lasti, UINT64_MAX, out);
}
