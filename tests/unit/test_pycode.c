// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/sources/python/pycode.c: the line-table decoders of 3.8-3.13 against
 * the line CPython itself gives every instruction of real code objects
 * (tests/unit/pycode_fixtures.h, made by tests/unit/pycode/gen.py with
 * each version), damaged tables, the user-code rule, and pycode__resolve
 * on code, str and bytes objects laid out in this process's own memory
 * with the 3.12 row (process_vm_readv of oneself needs no privilege):
 * names, lines, caching, and every validation that must refuse; and
 * pycode__seed on REC_PY_CODE records as BPF makes them, for a process
 * that has exited (cut tables and names, UCS2/UCS4, refusals).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/ingest.h"
#include "sources/python/pycode.h"
#include "pycode_rec.h"
#include "sources/python/pyfind.h"
#include "sources/python/pyoffsets.h"
#include "pycode_fixtures.h"
#include "tap.h"
#include "sources/sources.h"

static void test_fixtures(void)
{
	size_t n = sizeof(pyfixes) / sizeof(pyfixes[0]);
	uint32_t seen[16];
	size_t nseen = 0;

	for (size_t i = 0; i < n; i++) {
		const struct pyfix *fx = &pyfixes[i];
		struct py_lines l;
		size_t bad = SIZE_MAX;
		int err, got = 0;

		err = pycode__decode_lines(fx->hexversion, fx->table, fx->tlen, fx->firstlineno, &l);
		for (size_t k = 0; !err && k < fx->nlines && bad == SIZE_MAX; k++)
			if ((got = pycode__addr2line(&l, (int64_t)k * 2)) != fx->lines[k])
				bad = k;
		if (!check(!err && bad == SIZE_MAX && pycode__addr2line(&l, -2) == fx->firstlineno,
			   "%s: %zu instructions, line table of %zu bytes", fx->name, fx->nlines,
			   fx->tlen))
			printf("#   decode %d; offset %zu: got line %d, CPython says %d\n", err,
			       bad * 2, got, bad == SIZE_MAX ? 0 : fx->lines[bad]);
		pycode__lines_free(&l);
		if (nseen < 16 && (!nseen || seen[nseen - 1] != fx->hexversion))
			seen[nseen++] = fx->hexversion;
	}
	/* Every encoding is covered: 3.8/3.9, 3.10, 3.11+. */
	for (uint32_t mm = 0x0308; mm <= 0x030d; mm++) {
		bool have = false;

		for (size_t k = 0; k < nseen; k++)
			have |= seen[k] >> 16 == mm;
		check(have, "fixtures include CPython 3.%u", mm & 0xff);
	}
}

static void test_damaged(void)
{
	static const uint8_t odd[] = { 2, 1, 4 };
	static const uint8_t no_start[] = { 0x10, 0x01 };		/* bit 7 clear */
	static const uint8_t cut_varint[] = { 0x80 | 13 << 3, 0x41 };	/* continues, ends */
	static const uint8_t cut_short[] = { 0x80 | 1 << 3 };		/* short form needs a byte */
	static const uint8_t cut_long[] = { 0x80 | 14 << 3, 0x02, 0x00 };	/* 4 varints */
	static const uint8_t huge[] = { 0x80 | 13 << 3, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x01 };
	static const uint8_t none_line[] = { 0x80 | 15 << 3 | 1, 0x80 | 13 << 3, 0x04 };
	struct py_lines l;

	check(pycode__decode_lines(0x030812f0, odd, sizeof(odd), 1, &l) == -EINVAL,
	      "3.8 lnotab of odd length: -EINVAL");
	check(pycode__decode_lines(0x030a0df0, odd, sizeof(odd), 1, &l) == -EINVAL,
	      "3.10 linetable of odd length: -EINVAL");
	check(pycode__decode_lines(0x030b07f0, no_start, sizeof(no_start), 1, &l) == -EINVAL,
	      "3.11 location table not starting an entry: -EINVAL");
	check(pycode__decode_lines(0x030c01f0, cut_varint, sizeof(cut_varint), 1, &l) == -EINVAL,
	      "3.12 location table ending inside a varint: -EINVAL");
	check(pycode__decode_lines(0x030d00f0, cut_short, sizeof(cut_short), 1, &l) == -EINVAL,
	      "3.13 short form without its column byte: -EINVAL");
	check(pycode__decode_lines(0x030d00f0, cut_long, sizeof(cut_long), 1, &l) == -EINVAL,
	      "3.13 long form missing varints: -EINVAL");
	check(pycode__decode_lines(0x030d00f0, huge, sizeof(huge), 1, &l) == -EINVAL,
	      "3.13 varint longer than 30 bits: -EINVAL");
	check(pycode__decode_lines(0x030e00f0, none_line, sizeof(none_line), 1, &l) == -ENOTSUP,
	      "3.14: -ENOTSUP");
	check(pycode__decode_lines(0x030710f0, odd, 2, 1, &l) == -ENOTSUP, "3.7: -ENOTSUP");
	{
		static const uint8_t up[] = { 2, 100, 2, 100 };	/* +100 lines twice */

		check(pycode__decode_lines(0x030a0df0, up, sizeof(up), INT32_MAX - 150, &l) == -EINVAL,
		      "3.10 lines driven past INT32_MAX: -EINVAL (fuzz_pytable found the overflow)");
	}
	if (check(pycode__decode_lines(0x030b07f0, none_line, sizeof(none_line), 10, &l) == 0,
		  "3.11 table: a no-line entry, then a no-column entry +2")) {
		check(pycode__addr2line(&l, 0) == -1 && pycode__addr2line(&l, 2) == -1 &&
		      pycode__addr2line(&l, 4) == 12 && pycode__addr2line(&l, 6) == -1 &&
		      pycode__addr2line(&l, -2) == 10,
		      "no line for units 0-1, line 12 for unit 2, none past the end, "
		      "the first line before the start");
		pycode__lines_free(&l);
	}
}

static void test_user_rule(void)
{
	static const struct { const char *file; int minor; bool user; } cases[] = {
		{ "/home/me/train.py", 11, true },
		{ "train.py", 8, true },
		{ "/usr/lib/python3.11/threading.py", 11, false },
		{ "/root/.pyenv/versions/3.12.1/lib/python3.12/asyncio/events.py", 12, false },
		{ "/opt/venv/lib64/python3.10/json/decoder.py", 10, false },
		{ "/opt/venv/lib/python3.10/site-packages/torch/nn/module.py", 10, false },
		{ "/usr/lib/python3/dist-packages/numpy/core.py", 11, false },
		{ "/home/me/site-packages/x.py", 11, false },
		{ "<frozen importlib._bootstrap>", 13, false },
		{ "<string>", 13, false },
		{ "", 13, false },
		/* Another version's library, or a directory only named like one. */
		{ "/usr/lib/python3.9/os.py", 11, true },
		{ "/home/me/lib/python3.111/x.py", 11, true },
		{ "/home/me/mylib/python3.11/x.py", 11, true },
		{ "/home/me/site-packages-notes/x.py", 11, true },
		{ "/home/me/lib/python3.11", 11, true },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(pycode__is_user(cases[i].file, cases[i].minor) == cases[i].user,
		      "user code(\"%s\", 3.%d) is %s", cases[i].file, cases[i].minor,
		      cases[i].user ? "true" : "false");
}

/* ------------------------------------------------ objects in our own memory */

struct fake {
	uint8_t type_type[64], code_type[64], str_type[64], bytes_type[64];
	uint8_t code[256], other_code[256];
	uint8_t file[128], name[128], qualname[128], wide[128], long_str[64], fake_str[128];
	uint8_t table[64];
};

static const struct py_offsets *O;

static void put64(uint8_t *at, uint64_t v)
{
	memcpy(at, &v, 8);
}

static void obj(uint8_t *o, const void *type)
{
	put64(o + O->obj_type, (uint64_t)(uintptr_t)type);
}

static void type(uint8_t *t, uint8_t *meta, const char *name)
{
	obj(t, meta);
	put64(t + PY_TYPE_NAME_OFFSET, (uint64_t)(uintptr_t)name);
}

static void ascii_str(uint8_t *s, uint8_t *str_type, const char *text)
{
	uint32_t state = 1u << PY_UNICODE_KIND_SHIFT | 1u << PY_UNICODE_COMPACT_BIT |
			 1u << PY_UNICODE_ASCII_BIT;

	obj(s, str_type);
	put64(s + O->unicode_length, strlen(text));
	memcpy(s + O->unicode_state, &state, 4);
	memcpy(s + O->unicode_ascii_data, text, strlen(text) + 1);
}

static void code(uint8_t *c, struct fake *f, uint8_t *file, uint8_t *qual, int first)
{
	obj(c, f->code_type);
	put64(c + O->code_filename, (uint64_t)(uintptr_t)file);
	put64(c + O->code_name, (uint64_t)(uintptr_t)f->name);
	put64(c + O->code_qualname, (uint64_t)(uintptr_t)qual);
	memcpy(c + O->code_firstlineno, &first, 4);
	put64(c + O->code_linetable, (uint64_t)(uintptr_t)f->table);
}

static uint64_t at(uint8_t *c, int unit)
{
	return (uint64_t)(uintptr_t)c + O->code_adaptive + 2 * (uint64_t)unit;
}

static void test_resolve(void)
{
	static struct fake f;
	/* 3.12: RESUME on line 8 (a short form), then 3 units on line 9 (one-line +1). */
	static const uint8_t table[] = { 0x80 | 0 << 3 | 0, 0x00, 0x80 | 11 << 3 | 2, 0x04, 0x0a };
	struct pycode *pc = pycode__new();
	struct py_proc pp = { .runtime = 0x1000 };
	uint16_t wide_text[] = { 'f', 0xe9, 'e', 0x263a };	/* "fée☺": UCS2 */
	uint32_t wide_state = 2u << PY_UNICODE_KIND_SHIFT | 1u << PY_UNICODE_COMPACT_BIT;
	struct py_sym s;
	int pid = getpid(), err;

	O = pyfind__row(12);
	if (!check(O && pc, "3.12 row and a cache"))
		return;
	pp.off = *O;
	pp.code_type = (uint64_t)(uintptr_t)f.code_type;
	type(f.code_type, f.type_type, "code");
	type(f.str_type, f.type_type, "str");
	type(f.bytes_type, f.type_type, "bytes");
	ascii_str(f.file, f.str_type, "/home/me/train.py");
	ascii_str(f.name, f.str_type, "forward");
	ascii_str(f.qualname, f.str_type, "Model.forward");
	obj(f.wide, f.str_type);
	put64(f.wide + O->unicode_length, 4);
	memcpy(f.wide + O->unicode_state, &wide_state, 4);
	memcpy(f.wide + O->unicode_compact_data, wide_text, sizeof(wide_text));
	obj(f.table, f.bytes_type);
	put64(f.table + O->bytes_size, sizeof(table));
	memcpy(f.table + O->bytes_data, table, sizeof(table));
	code(f.code, &f, f.file, f.qualname, 8);

	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, 2), &s);
	check(err == 0 && !strcmp(s.file, "/home/me/train.py") && !strcmp(s.func, "Model.forward") &&
	      s.line == 9 && s.user, "resolve: file, qualname, line 9, user code (err %d)", err);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, 0), &s);
	check(err == 0 && s.line == 8, "RESUME's unit: line 8");
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, -1), &s);
	check(err == 0 && s.line == 8, "prev_instr one unit before the code: the first line");
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, 9), &s);
	check(err == 0 && s.line == 0, "past the table: line 0 (none)");
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, 2) + 1, &s);
	check(err == -ERANGE, "odd instruction pointer: -ERANGE (%d)", err);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, -2), &s);
	check(err == -ERANGE, "pointer before the code: -ERANGE (%d)", err);

	/* Cached: what the process changes later is not read again... */
	ascii_str(f.qualname, f.str_type, "Changed.name");
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, 2), &s);
	check(err == 0 && !strcmp(s.func, "Model.forward"), "second resolve: from the cache");
	/* ...until the pid is forgotten. */
	pycode__forget(pc, pid);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.code, at(f.code, 2), &s);
	check(err == 0 && !strcmp(s.func, "Changed.name"), "after forget: read again");

	/* A co_name pointer that differs: the address was reused, read again. */
	ascii_str(f.qualname, f.str_type, "Reused.code");
	err = pycode__resolve_checked(pc, pid, &pp, (uint64_t)(uintptr_t)f.code,
				      (uint64_t)(uintptr_t)f.name, at(f.code, 2), &s);
	check(err == 0 && !strcmp(s.func, "Changed.name"), "checked, same co_name: the cache");
	err = pycode__resolve_checked(pc, pid, &pp, (uint64_t)(uintptr_t)f.code,
				      (uint64_t)(uintptr_t)f.name + 8, at(f.code, 2), &s);
	check(err == -ESTALE, "checked, co_name the process no longer has: -ESTALE (%d)", err);
	err = pycode__resolve_checked(pc, pid, &pp, (uint64_t)(uintptr_t)f.code,
				      (uint64_t)(uintptr_t)f.name, at(f.code, 2), &s);
	check(err == 0 && !strcmp(s.func, "Reused.code"), "checked again: read anew (%d)", err);

	code(f.other_code, &f, f.wide, f.qualname, 8);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code, at(f.other_code, 2),
			      &s);
	check(err == 0 && !strcmp(s.file, "f\xc3\xa9" "e\xe2\x98\xba"),
	      "a UCS2 file name comes out as UTF-8 (err %d)", err);

	/* Refusals: each on a code object not cached yet. */
	pycode__forget(pc, pid);
	code(f.other_code, &f, f.file, f.qualname, 8);
	obj(f.other_code, f.str_type);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code, at(f.other_code, 2),
			      &s);
	check(err == -EINVAL, "an object that is not a code object: -EINVAL (%d)", err);

	code(f.other_code, &f, f.table, f.qualname, 8);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code, at(f.other_code, 2),
			      &s);
	check(err == -EINVAL, "a file name that is a bytes object: -EINVAL (%d)", err);

	/* A str whose type only claims the name "str" but is not PyType_Type's. */
	pycode__forget(pc, pid);
	{
		static uint8_t liar[64], liar_meta[64];

		type(liar, liar_meta, "str");
		ascii_str(f.fake_str, liar, "/home/me/x.py");
		code(f.other_code, &f, f.fake_str, f.qualname, 8);
		err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code,
				      at(f.other_code, 2), &s);
		check(err == -EINVAL, "a str whose type is not a type: -EINVAL (%d)", err);
	}

	ascii_str(f.long_str, f.str_type, "x");
	put64(f.long_str + O->unicode_length, PYCODE_MAX_STR + 1);
	code(f.other_code, &f, f.long_str, f.qualname, 8);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code, at(f.other_code, 2),
			      &s);
	check(err == -EINVAL, "a file name longer than PYCODE_MAX_STR: -EINVAL (%d)", err);

	{
		uint32_t legacy = 1u << PY_UNICODE_KIND_SHIFT;	/* not compact */

		ascii_str(f.long_str, f.str_type, "x");
		memcpy(f.long_str + O->unicode_state, &legacy, 4);
		err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code,
				      at(f.other_code, 2), &s);
		check(err == -EINVAL, "a string that is not compact: -EINVAL (%d)", err);
	}

	code(f.other_code, &f, f.file, f.qualname, -1);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code, at(f.other_code, 2),
			      &s);
	check(err == -EINVAL, "a negative co_firstlineno: -EINVAL (%d)", err);

	code(f.other_code, &f, f.file, f.qualname, 8);
	put64(f.table + O->bytes_size, PYCODE_MAX_TABLE + 1);
	err = pycode__resolve(pc, pid, &pp, (uint64_t)(uintptr_t)f.other_code, at(f.other_code, 2),
			      &s);
	check(err == -EINVAL, "a line table larger than PYCODE_MAX_TABLE: -EINVAL (%d)", err);
	put64(f.table + O->bytes_size, sizeof(table));

	err = pycode__resolve(pc, pid, &pp, 4096, 4096, &s);
	check(err == -EFAULT, "unmapped memory: -EFAULT (%d)", err);

	pycode__free(pc);
	pycode__free(NULL);
}

/* ------------------------------------------------ REC_PY_CODE records */

#define GONE_PID 0x3ffffff0	/* above any pid_max: "the process has exited" */

/* Appends text (kind bytes per character, from UCS4 cps) as string i. */
static void rec_str(struct rec_py_code *r, size_t *at, int i, uint64_t addr, uint64_t type,
		    const uint32_t *cps, size_t n, uint32_t kind, bool ascii, size_t sent_chars)
{
	struct pyc_str *st = &r->str[i];

	st->addr = addr;
	st->type = type;
	st->length = (int64_t)n;
	st->state = kind << PY_UNICODE_KIND_SHIFT | 1u << PY_UNICODE_COMPACT_BIT |
		    (ascii ? 1u << PY_UNICODE_ASCII_BIT : 0);
	for (size_t k = 0; k < sent_chars; k++) {
		uint16_t u = (uint16_t)cps[k];

		if (kind == 1)
			r->data[*at] = (uint8_t)cps[k];
		else if (kind == 2)
			memcpy(r->data + *at, &u, 2);
		else
			memcpy(r->data + *at, &cps[k], 4);
		*at += kind;
	}
	st->sent = (uint16_t)(sent_chars * kind);
}

static void cps_of(const char *text, uint32_t *cps, size_t *n)
{
	for (*n = 0; text[*n]; (*n)++)
		cps[*n] = (uint8_t)text[*n];
}

/*
 * A record as bpf/pycode.bpf.c makes it of an ASCII file and qualname, the
 * table tbl of which table_sent bytes are sent; returns its size.
 */
static size_t mkrec(struct rec_py_code *r, const struct py_proc *pp, struct fake *f, uint64_t code,
		    const char *file, const char *qual, const uint8_t *tbl, size_t tlen,
		    size_t table_sent, size_t file_sent)
{
	uint32_t cps[600];
	size_t n, at = 0;

	memset(r, 0, sizeof(*r));
	r->hdr.type = REC_PY_CODE;
	r->code = code;
	r->code_type = pp->code_type;
	r->type_type = (uint64_t)(uintptr_t)f->type_type;
	r->str_type_type = r->type_type;
	r->bytes_type_type = r->type_type;
	memcpy(r->str_type_name, "str", 4);
	memcpy(r->bytes_type_name, "bytes", 6);
	r->firstlineno = 8;
	cps_of(file, cps, &n);
	rec_str(r, &at, PYC_FILE, (uint64_t)(uintptr_t)f->file, (uint64_t)(uintptr_t)f->str_type,
		cps, n, 1, true, file_sent < n ? file_sent : n);
	rec_str(r, &at, PYC_NAME, (uint64_t)(uintptr_t)f->name, (uint64_t)(uintptr_t)f->str_type,
		cps, 7, 1, true, 0);
	cps_of(qual, cps, &n);
	rec_str(r, &at, PYC_QUAL, (uint64_t)(uintptr_t)f->qualname,
		(uint64_t)(uintptr_t)f->str_type, cps, n, 1, true, n);
	r->table_addr = (uint64_t)(uintptr_t)f->table;
	r->table_type = (uint64_t)(uintptr_t)f->bytes_type;
	r->table_len = (int64_t)tlen;
	r->table_sent = (uint16_t)table_sent;
	memcpy(r->data + at, tbl, table_sent);
	at += table_sent;
	r->hdr.size = (uint16_t)(offsetof(struct rec_py_code, data) + at);
	return r->hdr.size;
}

static void test_seed(void)
{
	static struct fake f;
	static struct rec_py_code r;
	/* As test_resolve's: line 8 for unit 0, line 9 for units 1-3. */
	static const uint8_t table[] = { 0x80 | 0 << 3 | 0, 0x00, 0x80 | 11 << 3 | 2, 0x04, 0x0a };
	struct pycode *pc = pycode__new();
	struct py_proc pp = { .runtime = 0x1000 };
	uint64_t code = 0x7f0000001000;
	struct py_sym s;
	size_t size;
	int err;

	O = pyfind__row(12);
	if (!check(O && pc, "3.12 row and a cache"))
		return;
	pp.off = *O;
	pp.code_type = (uint64_t)(uintptr_t)f.code_type;
	type(f.code_type, f.type_type, "code");
	type(f.str_type, f.type_type, "str");
	type(f.bytes_type, f.type_type, "bytes");
	ascii_str(f.file, f.str_type, "/home/me/train.py");
	ascii_str(f.name, f.str_type, "forward");
	ascii_str(f.qualname, f.str_type, "Model.forward");
	obj(f.table, f.bytes_type);
	put64(f.table + O->bytes_size, sizeof(table));
	memcpy(f.table + O->bytes_data, table, sizeof(table));

	/* The process is gone: everything comes from the record. */
	size = mkrec(&r, &pp, &f, code, "/home/me/train.py", "Model.forward", table,
		     sizeof(table), sizeof(table), 999);
	check(ingest__check(&r, size) == 0, "ingest takes the record");
	r.hdr.size = (uint16_t)(size - 1);
	check(ingest__check(&r, size - 1) == -EINVAL, "ingest: data shorter than the parts sent");
	r.hdr.size = (uint16_t)size;
	r.table_sent = PYC_TABLE_MAX + 1;
	check(ingest__check(&r, size) == -EINVAL, "ingest: a table over its bound");
	r.table_sent = sizeof(table);
	r.str[PYC_QUAL].sent = PYC_NAME_MAX + 1;
	check(ingest__check(&r, size) == -EINVAL, "ingest: a name over its bound");
	r.str[PYC_QUAL].sent = (uint16_t)strlen("Model.forward");
	r.hdr.size = (uint16_t)(offsetof(struct rec_py_code, data) - 8);
	check(ingest__check(&r, r.hdr.size) == -EINVAL, "ingest: a record shorter than its fixed part");
	r.hdr.size = (uint16_t)size;
	err = pycode__seed(pc, GONE_PID, &pp, &r, size);
	check(err == 0, "seed (%d)", err);
	err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive + 4, &s);
	check(err == 0 && !strcmp(s.file, "/home/me/train.py") && !strcmp(s.func, "Model.forward") &&
	      s.line == 9 && s.user, "seeded, process gone: file, qualname, line 9 (err %d)", err);
	err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive, &s);
	check(err == 0 && s.line == 8, "seeded: unit 0 on line 8");
	err = pycode__resolve(pc, GONE_PID, &pp, code + 64, code + 64 + O->code_adaptive, &s);
	check(err == -ESRCH, "not seeded, process gone: -ESRCH (%d)", err);
	check(pycode__seed(pc, GONE_PID, &pp, &r, size) == 0, "the same object again: 0");
	size = mkrec(&r, &pp, &f, code, "/home/me/train.py", "Other.fn", table, sizeof(table),
		     sizeof(table), 999);
	check(pycode__seed(pc, GONE_PID, &pp, &r, size) == 1, "another object at the address: 1");
	err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive + 4, &s);
	check(err == 0 && !strcmp(s.func, "Other.fn"), "the new object's name");

	/* An address that held three objects, described out of time order
	 * (the samples ring is drained after the events ring): a frame is
	 * named after the object its address held at the frame's time. */
	pycode__forget(pc, GONE_PID);
	{
		static const char *const names[] = { "first", "second", "third", "fourth",
						     "fifth" };
		/* Each seeded (name, time), in the order user space takes them. */
		static const struct { int name; uint64_t ts; int want; } seeds[] = {
			{ 1, 300, 0 }, { 0, 100, 1 }, { 0, 150, 0 }, { 2, 500, 1 },
			{ 1, 310, 0 }, { 1, 250, 0 },
		};
		static const struct { uint64_t ts; int name; } at[] = {
			{ 50, 0 }, { 100, 0 }, { 249, 0 }, { 250, 1 }, { 499, 1 }, { 500, 2 },
			{ UINT64_MAX, 2 },
		};

		for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
			size = mkrec(&r, &pp, &f, code, "/home/me/gen.py", names[seeds[i].name],
				     table, sizeof(table), sizeof(table), 999);
			r.hdr.ts = seeds[i].ts;
			err = pycode__seed(pc, GONE_PID, &pp, &r, size);
			check(err == seeds[i].want, "seed %s at %" PRIu64 ": %d (want %d)",
			      names[seeds[i].name], seeds[i].ts, err, seeds[i].want);
		}
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			err = pycode__resolve_at(pc, GONE_PID, &pp, code,
						 code + O->code_adaptive + 4, at[i].ts, &s);
			check(err == 0 && !strcmp(s.func, names[at[i].name]),
			      "at %" PRIu64 ": %s (got %s, %d)", at[i].ts, names[at[i].name],
			      err ? "-" : s.func, err);
		}
		/* Past VERSIONS_MAX (4) the oldest go: a frame older than
		 * every one kept gets the oldest kept. */
		for (int i = 3; i < 5; i++) {
			size = mkrec(&r, &pp, &f, code, "/home/me/gen.py", names[i], table,
				     sizeof(table), sizeof(table), 999);
			r.hdr.ts = 600 + 100 * (uint64_t)i;
			check(pycode__seed(pc, GONE_PID, &pp, &r, size) == 1, "seed %s", names[i]);
		}
		err = pycode__resolve_at(pc, GONE_PID, &pp, code, code + O->code_adaptive + 4, 50,
					 &s);
		check(err == 0 && !strcmp(s.func, "second"), "four kept: the oldest is second (%s)",
		      err ? "-" : s.func);
		err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive + 4, &s);
		check(err == 0 && !strcmp(s.func, "fifth"), "pycode__resolve: the newest");
	}

	/* A table cut at 3 bytes: the entry it cuts is dropped, no line past. */
	pycode__forget(pc, GONE_PID);
	size = mkrec(&r, &pp, &f, code, "/home/me/train.py", "Model.forward", table,
		     sizeof(table), 3, 999);
	check(pycode__seed(pc, GONE_PID, &pp, &r, size) == 0, "seed with a cut table");
	err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive, &s);
	check(err == 0 && s.line == 8, "cut table: unit 0 still line 8");
	err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive + 4, &s);
	check(err == 0 && s.line == 0, "cut table: past the cut, no line (%d, %d)", err, s.line);
	/* The process lives: the rest is read from it. */
	err = pycode__seed(pc, getpid(), &pp, &r, size);
	check(err == 0, "seed, live process");
	err = pycode__resolve(pc, getpid(), &pp, code, code + O->code_adaptive + 4, &s);
	check(err == 0 && s.line == 9, "cut table, live process: the whole table (%d)", s.line);
	pycode__forget(pc, getpid());

	/* A cut file name, process gone: the start of it and "...". */
	pycode__forget(pc, GONE_PID);
	size = mkrec(&r, &pp, &f, code, "/home/me/train.py", "Model.forward", table,
		     sizeof(table), sizeof(table), 8);
	check(pycode__seed(pc, GONE_PID, &pp, &r, size) == 0, "seed with a cut file name");
	err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive, &s);
	check(err == 0 && !strcmp(s.file, "/home/me..."), "cut file name: %s", err ? "" : s.file);

	/* UCS2 and UCS4 names. */
	{
		uint32_t wide[] = { 'f', 0xe9, 'e', 0x263a }, astral[] = { 'x', 0x1f600 };
		size_t at;

		pycode__forget(pc, GONE_PID);
		mkrec(&r, &pp, &f, code, "/home/me/train.py", "q", table, sizeof(table), 0, 999);
		/* Rebuilt in order: file (UCS4), qualname (UCS2), table. */
		at = 0;
		rec_str(&r, &at, PYC_FILE, r.str[PYC_FILE].addr, r.str[PYC_FILE].type, astral, 2, 4,
			false, 2);
		rec_str(&r, &at, PYC_QUAL, r.str[PYC_QUAL].addr, r.str[PYC_QUAL].type, wide, 4, 2,
			false, 4);
		memcpy(r.data + at, table, sizeof(table));
		r.table_sent = sizeof(table);
		size = offsetof(struct rec_py_code, data) + at + sizeof(table);
		r.hdr.size = (uint16_t)size;
		err = pycode__seed(pc, GONE_PID, &pp, &r, size);
		check(err == 0, "seed UCS4 file, UCS2 qualname (%d)", err);
		err = pycode__resolve(pc, GONE_PID, &pp, code, code + O->code_adaptive, &s);
		check(err == 0 && !strcmp(s.file, "x\xf0\x9f\x98\x80") &&
		      !strcmp(s.func, "f\xc3\xa9" "e\xe2\x98\xba"), "UTF-8 of UCS4 and UCS2 names");
	}

	/* Refusals, each on a fresh cache entry of a gone process. */
	{
		struct { const char *what; int field; } bad[] = {
			{ "not a code object", 0 }, { "kind 3", 1 }, { "ASCII of kind 2", 2 },
			{ "more data than the string", 3 }, { "a str of another type", 4 },
			{ "a str type named bytes", 5 }, { "a str type not a type", 6 },
			{ "a negative co_firstlineno", 7 }, { "a table over PYCODE_MAX_TABLE", 8 },
			{ "more table sent than it has", 9 }, { "no co_qualname on 3.12", 10 },
			{ "a NUL in a name", 11 }, { "a size that disagrees", 12 },
			{ "a table of bytes not a bytes type", 13 },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			pycode__forget(pc, GONE_PID);
			size = mkrec(&r, &pp, &f, code, "/home/me/train.py", "Model.forward", table,
				     sizeof(table), sizeof(table), 999);
			switch (bad[i].field) {
			case 0: r.code_type = (uint64_t)(uintptr_t)f.str_type; break;
			case 1: r.str[PYC_FILE].state = 3u << PY_UNICODE_KIND_SHIFT |
						1u << PY_UNICODE_COMPACT_BIT; break;
			case 2: r.str[PYC_FILE].state = 2u << PY_UNICODE_KIND_SHIFT |
						1u << PY_UNICODE_COMPACT_BIT |
						1u << PY_UNICODE_ASCII_BIT; break;
			case 3: r.str[PYC_FILE].length = 2; break;
			case 4: r.str[PYC_QUAL].type = (uint64_t)(uintptr_t)f.bytes_type; break;
			case 5: memcpy(r.str_type_name, "byt", 4); break;
			case 6: r.str_type_type = (uint64_t)(uintptr_t)f.str_type; break;
			case 7: r.firstlineno = -1; break;
			case 8: r.table_len = PYCODE_MAX_TABLE + 1; break;
			case 9: r.table_len = 2; break;
			case 10: r.str[PYC_QUAL].addr = 0; break;
			case 11: r.data[3] = 0; break;
			case 12: size--; break;
			case 13: memcpy(r.bytes_type_name, "str\0\0", 6); break;
			}
			err = pycode__seed(pc, GONE_PID, &pp, &r, size);
			check(err == -EINVAL, "refused: %s (%d)", bad[i].what, err);
		}
	}
	pycode__free(pc);
}

int main(void)
{
	sources__init();
	test_fixtures();
	test_damaged();
	test_user_rule();
	test_resolve();
	test_seed();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
