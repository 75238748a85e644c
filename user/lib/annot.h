/* SPDX-License-Identifier: MIT */
/*
 * Debug annotations: the typed name = value pairs the model's calls carry
 * (user/core/model.h) and the trace writer encodes (user/out/perfetto.h).
 * Here, below both, so that the model need not include the writer.
 */
#ifndef CGBPF_ANNOT_H
#define CGBPF_ANNOT_H

#include <stdint.h>

enum pf_atype { PA_UINT, PA_INT, PA_STR, PA_PTR, PA_BOOL, PA_DOUBLE };

/* A debug annotation: name and typed value. Strings are interned. */
struct pf_annot {
	const char *name;
	enum pf_atype type;
	union {
		uint64_t u;
		int64_t i;
		const char *s;
		double d;
	};
};

#endif
