// SPDX-License-Identifier: MIT
/*
 * REC_PY_CODE records (bpf/pycode_rec.h): bytes a traced process controls
 * (its code objects' strings and line tables, as BPF copied them), through
 * ingest__check and, when they pass, pycode__seed() for a process that has
 * exited (nothing read back from memory), then lookups of positions.
 *
 * Input: one byte choosing the version's row (3.8 + byte % 6), one byte of
 * flags (bit 0: the record's code_type is taken as PyCode_Type, so the
 * checks after it are reached), then the record from its header on; its
 * type and size are set from the input. The record is copied into an
 * 8-byte aligned buffer of its own length, as in the ring.
 */
#include <stdalign.h>
#include "events.h"
#include "fuzz.h"
#include "core/ingest.h"
#include "sources/python/pycode.h"
#include "pycode_rec.h"
#include "sources/python/pyfind.h"

#define GONE_PID 0x3ffffff0	/* above any pid_max */

static struct pycode *pc;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	pc = pycode__new();
	if (!pc)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static alignas(8) uint8_t buf[sizeof(struct rec_py_code)];
	struct rec_py_code *r = (struct rec_py_code *)buf;
	const struct py_offsets *row;
	struct py_proc pp = { .runtime = 0x1000, .code_type = 0x2000 };
	struct py_sym s;
	size_t len;

	if (size < 2)
		return 0;
	row = pyfind__row(8 + data[0] % 6);
	if (!row)
		abort();
	pp.off = *row;
	len = size - 2;
	if (len < sizeof(struct rec_hdr) || len > sizeof(buf))
		return 0;
	memcpy(buf, data + 2, len);
	r->hdr.type = REC_PY_CODE;
	r->hdr.size = (uint16_t)len;
	if (ingest__check(buf, len))
		return 0;
	if (data[1] & 1)
		pp.code_type = r->code_type;
	if (pycode__seed(pc, GONE_PID, &pp, r, len) >= 0) {
		/* Positions before, inside and past the table, whatever the
		 * version's kind of position. */
		static const int64_t offs[] = { -2, 0, 2, 6, 64, 4096, 1 << 20 };

		for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
			uint64_t lasti = pp.off.lasti_kind >= PY_LASTI_PREV_INSTR ?
					 r->code + pp.off.code_adaptive + (uint64_t)offs[i] :
					 (uint64_t)offs[i] / (pp.off.lasti_kind == PY_LASTI_UNITS ? 2 : 1);

			if (!pycode__resolve(pc, GONE_PID, &pp, r->code, lasti, &s) &&
			    (!s.file || !s.func || s.line < 0))
				abort();
		}
	}
	pycode__forget(pc, GONE_PID);
	return 0;
}
