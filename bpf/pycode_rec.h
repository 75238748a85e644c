/* SPDX-License-Identifier: MIT */
/*
 * REC_PY_CODE (issue 12): a CPython code object described by BPF the first
 * time a frame walk meets it in a process (bpf/pycode.bpf.c), so that user
 * space (user/sources/python/pycode.c) can name every position of it without reading the
 * process, which a short program has left by the time the consumer takes
 * its records.
 *
 * Sent right BEFORE the REC_PY_FRAMES record whose walk met it, in the
 * same ring (events for calls and backtraces, samples for CPU samples), so
 * user space has it when it resolves that record. What is sent is raw: the
 * objects' addresses and types, each string's state word and data as the
 * process holds them, the line table's bytes; user space checks all of it
 * as it checks what it reads itself (types, kinds, lengths, the table's
 * format for the version). Each part is bounded; a string or table longer
 * than its bound is sent cut (sent < its length) and user space reads the
 * rest from the process if it still lives.
 */
#ifndef CGBPF_PYCODE_REC_H
#define CGBPF_PYCODE_REC_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "events.h"

/* Bounds of what one record carries, in bytes of the objects' data. */
#define PYC_FILE_MAX	512	/* co_filename */
#define PYC_NAME_MAX	256	/* co_name, co_qualname */
#define PYC_TABLE_MAX	4096	/* co_lnotab / co_linetable */
#define PYC_DATA_MAX	(PYC_FILE_MAX + 2 * PYC_NAME_MAX + PYC_TABLE_MAX)

/*
 * PyASCIIObject.state, as user/sources/python/pyoffsets.h has it for every supported
 * version (user/sources/python/pycode.c checks the two agree at compile time): BPF needs
 * the kind and the ascii bit to know where a compact string's data is and
 * how many bytes it has.
 */
#define PYC_KIND_SHIFT	2
#define PYC_KIND_BITS	3
#define PYC_COMPACT_BIT	5
#define PYC_ASCII_BIT	6
#define PYC_TYPE_NAME	24	/* offsetof(PyTypeObject, tp_name) */

/* rec_py_code.str[] */
enum { PYC_FILE = 0, PYC_NAME, PYC_QUAL, PYC__STR };

/* A str object of the code object. */
struct pyc_str {
	__u64 addr;		/* the object; 0: the version has no such field (co_qualname < 3.11) */
	__u64 type;		/* its ob_type */
	__s64 length;		/* in characters, as the object says */
	__u32 state;		/* the state bit field's word */
	__u16 sent;		/* bytes of its data in rec_py_code.data; 0 for co_name when
				 * co_qualname is sent (only its address is needed) */
	__u16 pad;
};

struct rec_py_code {
	struct rec_hdr hdr;
	__u64 code;		/* the code object */
	__u64 code_type;	/* its ob_type: PyCode_Type (else nothing is sent) */
	__u64 type_type;	/* PyCode_Type's ob_type: PyType_Type */
	/* What user space needs to learn the str and bytes types of a process
	 * it cannot read any more: each type's ob_type (PyType_Type for a
	 * real type) and the start of its tp_name ("str", "bytes"). */
	__u64 str_type_type;
	__u64 bytes_type_type;
	char str_type_name[8];
	char bytes_type_name[8];
	__s32 firstlineno;
	__u16 table_sent;	/* bytes of the table in data, after the strings */
	__u16 pad;
	__u64 table_addr;	/* the bytes object of co_lnotab / co_linetable */
	__u64 table_type;	/* its ob_type */
	__s64 table_len;	/* its ob_size */
	struct pyc_str str[PYC__STR];
	/* The strings' data (file, name, qualname) then the table, back to
	 * back; only the sent bytes are in the record. */
	__u8 data[PYC_DATA_MAX];
};

#endif
