// SPDX-License-Identifier: MIT
/*
 * Prints one row of user/sources/python/pyoffsets.h: the offsets of every struct
 * py_offsets field (bpf/py_rec.h) for the CPython whose headers it is
 * compiled against. Built and run by scripts/gen-pyoffsets.sh, once per
 * installed version, with -DPy_BUILD_CORE and that version's Include and
 * Include/internal; never part of cgbpf itself.
 *
 * Output, one line each:
 *   row <C initializer of struct py_offsets>
 *   unicode <kind shift> <kind bits> <compact bit> <ascii bit>
 *   typename <offsetof(PyTypeObject, tp_name)> <offsetof(PyTypeObject, tp_dealloc)>
 *   dbg <name> <offset>     (3.13+: where _Py_DebugOffsets keeps a field)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if PY_VERSION_HEX < 0x03080000 || PY_VERSION_HEX >= 0x030e0000
#error "cgbpf knows CPython 3.8 to 3.13"
#endif
#if PY_VERSION_HEX < 0x03090000
#include "internal/pycore_pystate.h"
#else
#include "pycore_runtime.h"
#include "pycore_interp.h"
#endif
#if PY_VERSION_HEX >= 0x030b0000
#include "pycore_frame.h"
#endif
#ifdef Py_GIL_DISABLED
#error "free-threaded build: cgbpf has no offsets for it"
#endif

#define SZ(type, m) sizeof(((type *)0)->m)
#define END(type, m) (offsetof(type, m) + SZ(type, m))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#if PY_VERSION_HEX < 0x030b0000
typedef PyFrameObject frame_t;
#define FRAME_BACK f_back
#define FRAME_CODE f_code
#define FRAME_LASTI f_lasti
#else
typedef _PyInterpreterFrame frame_t;
#define FRAME_BACK previous
#if PY_VERSION_HEX < 0x030d0000
#define FRAME_CODE f_code
#define FRAME_LASTI prev_instr
#else
#define FRAME_CODE f_executable
#define FRAME_LASTI instr_ptr
#endif
#endif
#if PY_VERSION_HEX < 0x030a0000
#define CODE_LINETABLE co_lnotab
#else
#define CODE_LINETABLE co_linetable
#endif

static void field(const char *name, unsigned long off)
{
	if (off >= 0xffff) {
		fprintf(stderr, "pyoffsets: %s at %lu does not fit 16 bits\n", name, off);
		exit(1);
	}
	printf(" .%s = %lu,", name, off);
}

/* The bit positions of PyASCIIObject.state's kind, compact and ascii. */
static void unicode_bits(void)
{
	PyASCIIObject o;
	unsigned int w, kind, compact, ascii;

	memset(&o, 0, sizeof(o));
	o.state.kind = 7;
	memcpy(&w, &o.state, sizeof(w));
	kind = w;
	memset(&o, 0, sizeof(o));
	o.state.compact = 1;
	memcpy(&w, &o.state, sizeof(w));
	compact = w;
	memset(&o, 0, sizeof(o));
	o.state.ascii = 1;
	memcpy(&w, &o.state, sizeof(w));
	ascii = w;
	printf("unicode %d %d %d %d\n", __builtin_ctz(kind), __builtin_popcount(kind),
	       __builtin_ctz(compact), __builtin_ctz(ascii));
}

int main(void)
{
	unsigned long fread_ = 0, cread = 0;

	printf("row {");
	printf(" .version = 0x%08lx,", (unsigned long)PY_VERSION_HEX);
#if PY_VERSION_HEX < 0x030a0000
	printf(" .frame_kind = PY_FRAME_OBJECT, .lasti_kind = PY_LASTI_BYTES, .owner_kind = 0,");
#elif PY_VERSION_HEX < 0x030b0000
	printf(" .frame_kind = PY_FRAME_OBJECT, .lasti_kind = PY_LASTI_UNITS, .owner_kind = 0,");
#elif PY_VERSION_HEX < 0x030c0000
	printf(" .frame_kind = PY_FRAME_CFRAME, .lasti_kind = PY_LASTI_PREV_INSTR, .owner_kind = 1,");
#elif PY_VERSION_HEX < 0x030d0000
	printf(" .frame_kind = PY_FRAME_CFRAME, .lasti_kind = PY_LASTI_PREV_INSTR, .owner_kind = 2,");
#else
	printf(" .frame_kind = PY_FRAME_CURRENT, .lasti_kind = PY_LASTI_INSTR_PTR, .owner_kind = 2,");
#endif
	field("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
	field("interp_next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX < 0x030b0000
	field("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#else
	field("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#endif
	field("ts_next", offsetof(PyThreadState, next));
	field("ts_interp", offsetof(PyThreadState, interp));
	field("ts_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030b0000
	field("ts_native_thread_id", offsetof(PyThreadState, native_thread_id));
#else
	printf(" .ts_native_thread_id = PY_OFF_NONE,");
#endif
#if PY_VERSION_HEX < 0x030b0000
	field("ts_frame", offsetof(PyThreadState, frame));
	printf(" .ts_cframe = PY_OFF_NONE, .cframe_current_frame = PY_OFF_NONE,");
#elif PY_VERSION_HEX < 0x030d0000
	printf(" .ts_frame = PY_OFF_NONE,");
	field("ts_cframe", offsetof(PyThreadState, cframe));
	field("cframe_current_frame", offsetof(_PyCFrame, current_frame));
#else
	field("ts_frame", offsetof(PyThreadState, current_frame));
	printf(" .ts_cframe = PY_OFF_NONE, .cframe_current_frame = PY_OFF_NONE,");
#endif
	field("frame_back", offsetof(frame_t, FRAME_BACK));
	field("frame_code", offsetof(frame_t, FRAME_CODE));
	field("frame_lasti", offsetof(frame_t, FRAME_LASTI));
	fread_ = MAX(END(frame_t, FRAME_BACK), END(frame_t, FRAME_CODE));
	fread_ = MAX(fread_, END(frame_t, FRAME_LASTI));
#if PY_VERSION_HEX < 0x030b0000
	printf(" .frame_owner = PY_OFF_NONE,");
#elif PY_VERSION_HEX < 0x030c0000
	field("frame_owner", offsetof(frame_t, is_entry));
	fread_ = MAX(fread_, END(frame_t, is_entry));
#else
	field("frame_owner", offsetof(frame_t, owner));
	fread_ = MAX(fread_, END(frame_t, owner));
#endif
	field("frame_read", fread_);

	field("code_filename", offsetof(PyCodeObject, co_filename));
	field("code_name", offsetof(PyCodeObject, co_name));
	cread = MAX(END(PyCodeObject, co_filename), END(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030b0000
	field("code_qualname", offsetof(PyCodeObject, co_qualname));
	cread = MAX(cread, END(PyCodeObject, co_qualname));
#else
	printf(" .code_qualname = PY_OFF_NONE,");
#endif
	field("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	field("code_linetable", offsetof(PyCodeObject, CODE_LINETABLE));
	cread = MAX(cread, END(PyCodeObject, co_firstlineno));
	cread = MAX(cread, END(PyCodeObject, CODE_LINETABLE));
#if PY_VERSION_HEX < 0x030b0000
	field("code_code", offsetof(PyCodeObject, co_code));
	printf(" .code_adaptive = PY_OFF_NONE,");
	cread = MAX(cread, END(PyCodeObject, co_code));
#else
	printf(" .code_code = PY_OFF_NONE,");
	field("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
	cread = MAX(cread, offsetof(PyCodeObject, co_code_adaptive));
#endif
	field("code_read", cread);

	field("obj_type", offsetof(PyObject, ob_type));
	field("unicode_state", offsetof(PyASCIIObject, state));
	field("unicode_length", offsetof(PyASCIIObject, length));
	field("unicode_ascii_data", sizeof(PyASCIIObject));
	field("unicode_compact_data", sizeof(PyCompactUnicodeObject));
	field("bytes_size", offsetof(PyVarObject, ob_size));
	field("bytes_data", offsetof(PyBytesObject, ob_sval));
	printf(" }\n");
	unicode_bits();
	printf("typename %lu %lu\n", (unsigned long)offsetof(PyTypeObject, tp_name),
	       (unsigned long)offsetof(PyTypeObject, tp_dealloc));

#if PY_VERSION_HEX >= 0x030d0000
#define DBG(name, m) printf("dbg %s %lu\n", name, (unsigned long)offsetof(_Py_DebugOffsets, m))
	printf("dbg runtime_debug_offsets %lu\n",
	       (unsigned long)offsetof(_PyRuntimeState, debug_offsets));
	DBG("cookie", cookie);
	DBG("version", version);
	DBG("free_threaded", free_threaded);
	DBG("runtime_interp_head", runtime_state.interpreters_head);
	DBG("interp_next", interpreter_state.next);
	DBG("interp_threads_head", interpreter_state.threads_head);
	DBG("ts_next", thread_state.next);
	DBG("ts_interp", thread_state.interp);
	DBG("ts_thread_id", thread_state.thread_id);
	DBG("ts_native_thread_id", thread_state.native_thread_id);
	DBG("ts_frame", thread_state.current_frame);
	DBG("frame_back", interpreter_frame.previous);
	DBG("frame_code", interpreter_frame.executable);
	DBG("frame_lasti", interpreter_frame.instr_ptr);
	DBG("frame_owner", interpreter_frame.owner);
	DBG("code_filename", code_object.filename);
	DBG("code_name", code_object.name);
	DBG("code_qualname", code_object.qualname);
	DBG("code_firstlineno", code_object.firstlineno);
	DBG("code_linetable", code_object.linetable);
	DBG("code_adaptive", code_object.co_code_adaptive);
	DBG("obj_type", pyobject.ob_type);
	DBG("bytes_size", bytes_object.ob_size);
	DBG("bytes_data", bytes_object.ob_sval);
	DBG("unicode_state", unicode_object.state);
	DBG("unicode_length", unicode_object.length);
	DBG("unicode_ascii_data", unicode_object.asciiobject_size);
#endif
	return 0;
}
