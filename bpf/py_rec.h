/* SPDX-License-Identifier: MIT */
/*
 * Python frames (issue 12): what user space tells the BPF programs about a
 * target's CPython interpreter, shared by BPF and user space.
 *
 * User space (user/sources/python/pyfind.c) finds the interpreter in a target (a
 * libpython3.X.so mapping or a python binary that exports _PyRuntime),
 * identifies its version and picks its row of the offsets table
 * (user/sources/python/pyoffsets.h, generated from each version's own headers), checks
 * it against what the process itself publishes where it can (3.13's
 * _Py_DebugOffsets), and only then puts a struct py_proc in the BPF map
 * keyed by tgid. No entry: the BPF side reads no Python frames. A version
 * or build cgbpf does not know gets no entry and one line in the summary.
 *
 * Every offset is a byte offset; PY_OFF_NONE marks a field the version
 * does not have. Fixed-width fields, naturally aligned: the same layout
 * for BPF and x86-64 user space.
 */
#ifndef CGBPF_PY_REC_H
#define CGBPF_PY_REC_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define PY_OFF_NONE 0xffff

/* How a frame says where it is in its code object. */
enum py_lasti_kind {
	PY_LASTI_BYTES = 0,	/* 3.8, 3.9: int f_lasti, a byte offset into co_code */
	PY_LASTI_UNITS,		/* 3.10: int f_lasti, in 2-byte code units */
	PY_LASTI_PREV_INSTR,	/* 3.11, 3.12: _Py_CODEUNIT *prev_instr */
	PY_LASTI_INSTR_PTR,	/* 3.13: _Py_CODEUNIT *instr_ptr (next instruction) */
};

/* How the thread state reaches its innermost frame. */
enum py_frame_kind {
	PY_FRAME_OBJECT = 0,	/* 3.8-3.10: tstate->frame, a PyFrameObject *, f_back */
	PY_FRAME_CFRAME,	/* 3.11, 3.12: tstate->cframe->current_frame, _PyInterpreterFrame * */
	PY_FRAME_CURRENT,	/* 3.13: tstate->current_frame, _PyInterpreterFrame * */
};

struct py_offsets {
	__u32 version;		/* PY_VERSION_HEX of the row: 0x030b07f0 for 3.11.7 final */
	__u8 frame_kind;	/* enum py_frame_kind */
	__u8 lasti_kind;	/* enum py_lasti_kind */
	__u8 owner_kind;	/* 0: none (3.8-3.10); 1: is_entry byte (3.11); 2: owner byte (3.12+) */
	__u8 pad;

	/* _PyRuntime */
	__u16 runtime_interp_head;	/* interpreters.head */
	/* PyInterpreterState */
	__u16 interp_next;
	__u16 interp_threads_head;	/* tstate_head (<= 3.11), threads.head (3.12+) */
	/* PyThreadState */
	__u16 ts_next;
	__u16 ts_interp;
	__u16 ts_thread_id;		/* pthread_self() of the thread: its fs base on x86-64 */
	__u16 ts_native_thread_id;	/* 3.11+: the kernel tid; PY_OFF_NONE before */
	__u16 ts_frame;			/* frame (3.8-3.10), current_frame (3.13) */
	__u16 ts_cframe;		/* cframe (3.11, 3.12) */
	__u16 cframe_current_frame;	/* _PyCFrame.current_frame (3.11, 3.12) */
	/* PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+) */
	__u16 frame_back;		/* f_back / previous */
	__u16 frame_code;		/* f_code / f_executable */
	__u16 frame_lasti;		/* f_lasti / prev_instr / instr_ptr, per lasti_kind */
	__u16 frame_owner;		/* is_entry (3.11) or owner (3.12+), per owner_kind */
	__u16 frame_read;		/* bytes covering every frame field above */
	/* PyCodeObject */
	__u16 code_filename;
	__u16 code_name;
	__u16 code_qualname;		/* 3.11+ */
	__u16 code_firstlineno;		/* int */
	__u16 code_linetable;		/* co_lnotab (3.8, 3.9), co_linetable (3.10+) */
	__u16 code_code;		/* co_code (<= 3.10): the bytes object of the bytecode */
	__u16 code_adaptive;		/* co_code_adaptive (3.11+): bytecode inline in the code object */
	__u16 code_read;		/* bytes covering every code field above */
	/* PyObject, PyUnicodeObject, PyBytesObject */
	__u16 obj_type;			/* ob_type */
	__u16 unicode_state;		/* the state bit field (kind, compact, ascii) */
	__u16 unicode_length;
	__u16 unicode_ascii_data;	/* sizeof(PyASCIIObject): data of a compact ASCII string */
	__u16 unicode_compact_data;	/* sizeof(PyCompactUnicodeObject): data of other compact strings */
	__u16 bytes_size;		/* ob_size */
	__u16 bytes_data;		/* ob_sval */
	__u16 pad2;
};

/* BPF map py_procs: tgid -> what the probes need to read its frames. */
struct py_proc {
	__u64 runtime;		/* address of _PyRuntime in the process */
	__u64 code_type;	/* address of PyCode_Type: a frame's code object is one */
	struct py_offsets off;
};

#endif
