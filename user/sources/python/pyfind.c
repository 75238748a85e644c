// SPDX-License-Identifier: MIT
/*
 * CPython discovery: the interpreter's file from /proc/PID/maps, its
 * symbols from the file itself (read through /proc/PID/root, so a
 * container's interpreter is found), its version from the process's memory
 * (Py_Version, 3.11+) or the file (the soname and the version literal,
 * 3.8-3.10), then the offsets row, checked against what the process
 * publishes (3.13's _Py_DebugOffsets) and against its own thread list.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "lib/procfs.h"
#include "sources/python/pyfind.h"
#include "sources/python/pyoffsets.h"

#define NROWS (sizeof(py_offsets_table) / sizeof(py_offsets_table[0]))
#define FIRST_MINOR 8

const struct py_offsets *pyfind__row(int minor)
{
	if (minor < FIRST_MINOR || minor >= FIRST_MINOR + (int)NROWS)
		return NULL;
	return &py_offsets_table[minor - FIRST_MINOR];
}

int pyfind__read(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (!addr)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* One mapped file: its name in the process and its first mapping. */
struct mapped {
	char path[PATH_MAX];
	uint64_t start, end, offset;
	bool found;
};

struct scan {
	uint64_t exe_ino;
	struct mapped exe, lib, libc;
	int lib_major, lib_minor;	/* from the soname: libpython3.<minor>... */
	bool lib_t, lib_d;	/* 't' (free-threaded), 'd' (debug) ABI flags */
	int maps;		/* lines read */
};

/*
 * libpython<major>.<minor>[t][d][m].so*: the minor (*major set), and the
 * ABI flags; -1 for any other name.
 */
static int soname_minor(const char *base, int *major, bool *t, bool *d)
{
	const char *p = base + strlen("libpython");
	int minor = 0, digits = 0;

	if (strncmp(base, "libpython", strlen("libpython")) || (p[0] != '2' && p[0] != '3') ||
	    p[1] != '.')
		return -1;
	*major = p[0] - '0';
	for (p += 2; *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
		minor = minor * 10 + (*p - '0');
	if (!digits)
		return -1;
	*t = *d = false;
	if (*p == 't')
		*t = true, p++;
	if (*p == 'd')
		*d = true, p++;
	if (*p == 'm')	/* pymalloc, 3.7 and older */
		p++;
	return strncmp(p, ".so", 3) ? -1 : minor;
}

static void keep(struct mapped *m, const struct map_entry *e)
{
	if (m->found)
		return;
	snprintf(m->path, sizeof(m->path), "%s", e->path);
	m->start = e->start;
	m->end = e->end;
	m->offset = e->offset;
	m->found = true;
}

static int scan_map(const struct map_entry *e, void *ctx)
{
	struct scan *s = ctx;
	const char *base;
	bool t, d;
	int minor, major;

	s->maps++;
	if (e->path[0] != '/')
		return 0;
	base = strrchr(e->path, '/') + 1;
	if (s->exe_ino && e->inode == s->exe_ino && !s->exe.found)
		keep(&s->exe, e);
	if (!s->lib.found && (minor = soname_minor(base, &major, &t, &d)) >= 0) {
		keep(&s->lib, e);
		s->lib_major = major;
		s->lib_minor = minor;
		s->lib_t = t;
		s->lib_d = d;
	}
	if (!s->libc.found && !strncmp(base, "libc.so", 7))
		keep(&s->libc, e);
	return 0;
}

/* Reads pid's maps into s, against its executable as exe names it now. */
static int scan_maps(int pid, const char *exe, struct scan *s)
{
	struct stat st;

	memset(s, 0, sizeof(*s));
	s->lib_minor = -1;
	if (stat(exe, &st) == 0)
		s->exe_ino = st.st_ino;
	return procfs__for_each_map(pid, scan_map, s);
}

/* What the interpreter's file says about itself. */
struct elfinfo {
	uint64_t bias;		/* filled by elf_read from the mapping */
	uint64_t runtime, code_type, py_version, negative_refcount, tid_desc;
	uint64_t py_initialize;	/* Py_Initialize: the file is a Python at all */
	int str_major, str_minor, str_patch;	/* the version literal, -1 if none */
};

/* Sets the named symbols' st_value (first definition wins: .dynsym first). */
static void read_syms(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct elfinfo *ei)
{
	static const struct { const char *name; size_t off; } want[] = {
		{ "_PyRuntime", offsetof(struct elfinfo, runtime) },
		{ "PyCode_Type", offsetof(struct elfinfo, code_type) },
		{ "Py_Version", offsetof(struct elfinfo, py_version) },
		{ "_Py_NegativeRefcount", offsetof(struct elfinfo, negative_refcount) },
		{ "_thread_db_pthread_tid", offsetof(struct elfinfo, tid_desc) },
		{ "Py_Initialize", offsetof(struct elfinfo, py_initialize) },
	};
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || name[0] == 0)
			continue;
		for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			uint64_t *v = (uint64_t *)((char *)ei + want[k].off);

			if (!*v && !strcmp(name, want[k].name))
				*v = sym.st_value;
		}
	}
}

/*
 * The PY_VERSION literal ("3.8.18") in .rodata: a NUL-terminated string,
 * or the tail of one after '/' or '-' (the linker merges "3.8.18" into
 * "/prefix/3.8.18" when that string exists too). minor < 0: 3.8 to 3.10.
 */
static void read_version_literal(Elf_Data *d, int minor, struct elfinfo *ei)
{
	const char *b = d->d_buf;
	size_t n = d->d_size;

	for (size_t i = 0; i + 5 < n; i++) {
		int v[3] = { 0, 0, 0 }, part = 0, digits = 0;
		size_t j;

		if (b[i] != '3' || b[i + 1] != '.' ||
		    (i && b[i - 1] && b[i - 1] != '/' && b[i - 1] != '-'))
			continue;
		for (j = i; j < n && j < i + 12; j++) {
			if (b[j] >= '0' && b[j] <= '9') {
				v[part] = v[part] * 10 + (b[j] - '0');
				digits++;
			} else if (b[j] == '.' && digits && part < 2) {
				part++;
				digits = 0;
			} else {
				break;
			}
		}
		if (j == n || b[j] || part != 2 || !digits || (minor >= 0 && v[1] != minor))
			continue;
		/* Without a soname to agree with, only a version that has no
		 * Py_Version (3.8-3.10) is believed: other "3.x.y" strings
		 * (OpenSSL's "3.0.11") live in big static executables too. */
		if (minor < 0 && (v[1] < 8 || v[1] > 10))
			continue;
		ei->str_major = v[0];
		ei->str_minor = v[1];
		ei->str_patch = v[2];
		return;
	}
}

/* Reads the file of mapping m (through the process's root) into *ei. */
static int elf_read(int pid, const struct mapped *m, int minor, struct elfinfo *ei)
{
	char path[PATH_MAX + 32];
	Elf *elf = NULL;
	Elf_Scn *scn;
	size_t nph, shstrndx;
	bool biased = false;
	int fd, err = 0;

	memset(ei, 0, sizeof(*ei));
	ei->str_major = ei->str_minor = ei->str_patch = -1;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* A deleted or replaced file: the mapping itself still has it. */
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid,
			 m->start, m->end);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph) ||
	    elf_getshdrstrndx(elf, &shstrndx)) {
		err = -ENOEXEC;
		goto cleanup;
	}
	/* The segment holding the first mapping's file offset gives the bias. */
	for (size_t i = 0; i < nph && !biased; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (m->offset >= (ph.p_offset & ~0xfffULL) && m->offset < ph.p_offset + ph.p_filesz) {
			ei->bias = m->start - ((ph.p_vaddr - ph.p_offset) + m->offset);
			biased = true;
		}
	}
	if (!biased) {
		err = -ENOEXEC;
		goto cleanup;
	}
	/*
	 * .dynsym, then .symtab only for a Python (it exports its C API) that
	 * hides _PyRuntime or PyCode_Type there: every traced process's
	 * executable is read, and most are not Pythons.
	 */
	for (int pass = 0; pass < 2; pass++) {
		if (pass && !(ei->py_initialize && (!ei->runtime || !ei->code_type)))
			break;
		scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) && sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				read_syms(elf, scn, &sh, ei);
		}
	}
	/* The version literal: only where there is no Py_Version (3.8-3.10). */
	scn = NULL;
	while (minor != -2 && (ei->runtime || ei->py_initialize) && !ei->py_version &&
	       (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".rodata") && (d = elf_getdata(scn, NULL)) && d->d_buf)
			read_version_literal(d, minor, ei);
	}
cleanup:
	if (elf)
		elf_end(elf);
	close(fd);
	return err;
}

__attribute__((format(printf, 3, 4)))
static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* The row's fields that 3.13's _Py_DebugOffsets also publishes. */
#define DBG_FIELDS(X) \
	X(runtime_interp_head, RUNTIME_INTERP_HEAD, "runtime_state.interpreters_head") \
	X(interp_next, INTERP_NEXT, "interpreter_state.next") \
	X(interp_threads_head, INTERP_THREADS_HEAD, "interpreter_state.threads_head") \
	X(ts_next, TS_NEXT, "thread_state.next") \
	X(ts_interp, TS_INTERP, "thread_state.interp") \
	X(ts_thread_id, TS_THREAD_ID, "thread_state.thread_id") \
	X(ts_native_thread_id, TS_NATIVE_THREAD_ID, "thread_state.native_thread_id") \
	X(ts_frame, TS_FRAME, "thread_state.current_frame") \
	X(frame_back, FRAME_BACK, "interpreter_frame.previous") \
	X(frame_code, FRAME_CODE, "interpreter_frame.executable") \
	X(frame_lasti, FRAME_LASTI, "interpreter_frame.instr_ptr") \
	X(frame_owner, FRAME_OWNER, "interpreter_frame.owner") \
	X(code_filename, CODE_FILENAME, "code_object.filename") \
	X(code_name, CODE_NAME, "code_object.name") \
	X(code_qualname, CODE_QUALNAME, "code_object.qualname") \
	X(code_firstlineno, CODE_FIRSTLINENO, "code_object.firstlineno") \
	X(code_linetable, CODE_LINETABLE, "code_object.linetable") \
	X(code_adaptive, CODE_ADAPTIVE, "code_object.co_code_adaptive") \
	X(obj_type, OBJ_TYPE, "pyobject.ob_type") \
	X(bytes_size, BYTES_SIZE, "bytes_object.ob_size") \
	X(bytes_data, BYTES_DATA, "bytes_object.ob_sval") \
	X(unicode_state, UNICODE_STATE, "unicode_object.state") \
	X(unicode_length, UNICODE_LENGTH, "unicode_object.length") \
	X(unicode_ascii_data, UNICODE_ASCII_DATA, "unicode_object.asciiobject_size")

#define DBG_SPAN (PYDBG313_UNICODE_ASCII_DATA + 8)

/*
 * 3.13: the process's own _Py_DebugOffsets must say what the row says.
 * 0, or -ENOTSUP with why set; -EAGAIN when the cookie is not there yet
 * (read while the loader was still mapping libpython's segments: seen
 * under load in CI), so the caller looks again later.
 */
static int check_debug_offsets(int pid, uint64_t runtime, const struct py_offsets *row,
			       struct py_info *info, char *why, size_t whylen)
{
	uint8_t buf[DBG_SPAN];
	uint64_t v;
	int err;

	err = pyfind__read(pid, runtime + PYDBG313_RUNTIME_DEBUG_OFFSETS, buf, sizeof(buf));
	if (err) {
		say(why, whylen, "Python %s: cannot read its _Py_DebugOffsets (%s); no Python frames",
		    info->version, strerror(-err));
		return err;
	}
	if (memcmp(buf + PYDBG313_COOKIE, "xdebugpy", 8)) {
		say(why, whylen, "Python %s: no _Py_DebugOffsets cookie at _PyRuntime (yet); "
		    "no Python frames", info->version);
		return -EAGAIN;
	}
	info->debug_offsets = true;
	memcpy(&v, buf + PYDBG313_VERSION, 8);
	if (v != info->hexversion) {
		say(why, whylen, "Python %s: _Py_DebugOffsets says version 0x%08" PRIx64
		    ", Py_Version 0x%08x; no Python frames", info->version, v, info->hexversion);
		return -ENOTSUP;
	}
	memcpy(&v, buf + PYDBG313_FREE_THREADED, 8);
	if (v) {
		info->free_threaded = true;
		say(why, whylen, "Python %s: a free-threaded build: not supported; "
		    "no Python frames", info->version);
		return -ENOTSUP;
	}
#define DBG_CHECK(f, F, s) \
	memcpy(&v, buf + PYDBG313_##F, 8); \
	if (v != row->f) { \
		say(why, whylen, "Python %s: _Py_DebugOffsets puts %s at %" PRIu64 \
		    ", cgbpf's table at %u; no Python frames", info->version, s, v, \
		    (unsigned int)row->f); \
		return -ENOTSUP; \
	}
	DBG_FIELDS(DBG_CHECK)
#undef DBG_CHECK
	return 0;
}

/* 3.12+ _PyInterpreterFrame.owner: a C entry shim, not Python code. */
#define FRAME_OWNED_BY_CSTACK 3

int pyfind__first_frame(int pid, const struct py_offsets *o, uint64_t ts, uint64_t *frame)
{
	uint64_t cf = 0;
	int err;

	*frame = 0;
	switch (o->frame_kind) {
	case PY_FRAME_OBJECT:
	case PY_FRAME_CURRENT:
		return pyfind__read(pid, ts + o->ts_frame, frame, 8);
	case PY_FRAME_CFRAME:
		if ((err = pyfind__read(pid, ts + o->ts_cframe, &cf, 8)) || !cf)
			return err;
		return pyfind__read(pid, cf + o->cframe_current_frame, frame, 8);
	}
	return -EINVAL;
}

int pyfind__frame(int pid, const struct py_offsets *o, uint64_t frame, struct py_frame *out)
{
	uint8_t buf[256];
	int err;

	memset(out, 0, sizeof(*out));
	if (o->frame_read > sizeof(buf))
		return -EINVAL;
	if ((err = pyfind__read(pid, frame, buf, o->frame_read)))
		return err;
	memcpy(&out->code, buf + o->frame_code, 8);
	memcpy(&out->back, buf + o->frame_back, 8);
	memcpy(&out->lasti, buf + o->frame_lasti, o->lasti_kind <= PY_LASTI_UNITS ? 4 : 8);
	out->skip = o->owner_kind == 2 && buf[o->frame_owner] == FRAME_OWNED_BY_CSTACK;
	return 0;
}

/*
 * The frames the thread states lead to must hold code objects: proof of
 * the frame and code offsets. The process runs meanwhile, so a frame can
 * be popped under the reader: it refuses only when three looks in a row
 * find frames and not one code object among them.
 */
static int check_frames(int pid, const struct py_offsets *o, struct py_info *info,
			uint64_t interp, char *why, size_t whylen)
{
	int good = 0, bad = 0;

	for (int look = 0; look < 3; look++) {
		uint64_t ts = 0;
		int n = 0;

		good = bad = 0;
		if (pyfind__read(pid, interp + o->interp_threads_head, &ts, 8))
			return 0;	/* check_threads just read it: the process is going */
		for (; ts && n < 256; n++) {
			uint64_t f = 0, type = 0;
			struct py_frame fr;

			if (pyfind__first_frame(pid, o, ts, &f) == 0) {
				for (int depth = 0; f && depth < 16; depth++) {
					if (pyfind__frame(pid, o, f, &fr)) {
						bad++;
						break;
					}
					f = fr.back;
					if (fr.skip)
						continue;
					if (!pyfind__read(pid, fr.code + o->obj_type, &type, 8) &&
					    type == info->code_type)
						good++;
					else
						bad++;
				}
			}
			if (pyfind__read(pid, ts + o->ts_next, &ts, 8))
				break;
		}
		if (good || !bad)
			return 0;
	}
	say(why, whylen, "Python %s: its frames do not hold code objects where cgbpf's table "
	    "says (%d frames looked at); no Python frames", info->version, bad);
	return -ENOTSUP;
}

/*
 * Every thread state on the first interpreter's list must point back at
 * it: a cheap proof that the list offsets are right. Not initialized yet
 * (no interpreter): nothing to check, and no error.
 */
static int check_threads(int pid, const struct py_offsets *o, struct py_info *info,
			 char *why, size_t whylen)
{
	uint64_t interp = 0, ts = 0, back = 0;
	int n = 0, err;

	err = pyfind__read(pid, info->runtime + o->runtime_interp_head, &interp, 8);
	if (err) {
		say(why, whylen, "Python %s: cannot read _PyRuntime at 0x%" PRIx64 " (%s)",
		    info->version, info->runtime, strerror(-err));
		return err;
	}
	if (!interp)
		return 0;
	info->initialized = true;
	if ((err = pyfind__read(pid, interp + o->interp_threads_head, &ts, 8)))
		goto bad;
	for (; ts && n < 4096; n++) {
		if ((err = pyfind__read(pid, ts + o->ts_interp, &back, 8)))
			goto bad;
		if (back != interp) {
			err = -EINVAL;
			goto bad;
		}
		if ((err = pyfind__read(pid, ts + o->ts_next, &ts, 8)))
			goto bad;
	}
	return check_frames(pid, o, info, interp, why, whylen);
bad:
	/* A read that fails is not a wrong table: the memory changed under
	 * it (an exec replacing the image: a pid reused by a fork of a
	 * Python that then execs one; a thread exiting) or the process went;
	 * the caller looks again. */
	if (err != -EINVAL) {
		say(why, whylen, "Python %s: its thread list could not be read (%s)",
		    info->version, strerror(-err));
		return err;
	}
	say(why, whylen, "Python %s: its thread list does not match cgbpf's table (a thread "
	    "state names another interpreter); no Python frames", info->version);
	return -ENOTSUP;
}

int pyfind__probe(int pid, struct py_proc *out, struct py_info *info, char *why, size_t whylen)
{
	struct py_info local;
	struct scan s;
	struct elfinfo ei;
	const struct mapped *m = NULL;
	const struct py_offsets *row;
	char exe[64];
	struct stat st;
	int err, exe_err = 0, minor = -1;

	if (!info)
		info = &local;
	memset(info, 0, sizeof(*info));
	say(why, whylen, "no Python");
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	err = scan_maps(pid, exe, &s);
	/* An exec between the two reads (a launcher, a pyenv shim, exec'ing
	 * the interpreter): the executable read is not the one mapped. Once
	 * more, after it. */
	if (!err && !s.exe.found && stat(exe, &st) == 0 && st.st_ino != s.exe_ino)
		err = scan_maps(pid, exe, &s);
	if (err < 0) {
		say(why, whylen, "cannot read /proc/%d/maps: %s", pid, strerror(-err));
		return err == -ENOENT ? -ESRCH : err;
	}
	/* An executable that defines _PyRuntime wins: its symbols come first. */
	if (s.exe.found && (exe_err = elf_read(pid, &s.exe, -1, &ei)) == 0 && ei.runtime) {
		m = &s.exe;
		info->shared = false;
	} else if (s.lib.found && s.lib_major != 3) {
		snprintf(info->path, sizeof(info->path), "%s", s.lib.path);
		say(why, whylen, "Python %d.%d (%s): no offsets for this version; no Python frames",
		    s.lib_major, s.lib_minor, s.lib.path);
		return -ENOTSUP;
	} else if (s.lib.found) {
		m = &s.lib;
		minor = s.lib_minor;
		info->shared = true;
		err = elf_read(pid, m, minor, &ei);
		if (err) {
			say(why, whylen, "%s: cannot read it (%s); no Python frames", m->path,
			    strerror(-err));
			snprintf(info->path, sizeof(info->path), "%s", m->path);
			return err == -ENOENT ? -ENOTSUP : err;
		}
	} else {
		/* Which part failed, for the -v log: a flaky "no Python" is
		 * then told from a real one. */
		char st = '?';
		long threads = -1;

		/* No memory map at all: a process that exited and was not
		 * reaped yet (a zombie: what ran in it is gone), or one whose
		 * leader thread exited while others live on. */
		if (!s.exe.found && s.maps == 0 && !procfs__state(pid, &st, &threads) &&
		    (st == 'Z' || st == 'X') && threads <= 1) {
			say(why, whylen, "the process has exited (a zombie: its memory is gone)");
			return -ESRCH;
		}
		if (!s.exe.found && s.maps == 0)
			say(why, whylen, "no Python interpreter (no memory map: /proc/%d/maps "
			    "empty; its leader thread is in state %c, %ld threads)", pid, st,
			    threads);
		else if (!s.exe.found)
			say(why, whylen, "no Python interpreter (no libpython3.X.so mapped; the "
			    "executable (inode %lu) is not in the %d maps read)",
			    (unsigned long)s.exe_ino, s.maps);
		else if (exe_err)
			say(why, whylen, "no Python interpreter (no libpython3.X.so mapped; "
			    "reading the executable %s failed: %s)", s.exe.path, strerror(-exe_err));
		else
			say(why, whylen, "no Python interpreter (no libpython3.X.so mapped, "
			    "the executable does not define _PyRuntime)");
		return -ENOENT;
	}
	snprintf(info->path, sizeof(info->path), "%s", m->path);
	info->bias = ei.bias;

	/* The version: Py_Version (3.11+) as the process has it, else the literal. */
	if (ei.py_version) {
		uint64_t v = 0;

		err = pyfind__read(pid, ei.bias + ei.py_version, &v, sizeof(v));
		if (err) {
			say(why, whylen, "%s: cannot read Py_Version (%s)", m->path, strerror(-err));
			return err;
		}
		info->hexversion = (uint32_t)v;
		info->patch_known = true;
		snprintf(info->version, sizeof(info->version), "%u.%u.%u", (unsigned int)(v >> 24),
			 (unsigned int)(v >> 16) & 0xff, (unsigned int)(v >> 8) & 0xff);
		if ((v >> 24) != 3 || (minor >= 0 && (int)((v >> 16) & 0xff) != minor)) {
			say(why, whylen, "%s: Py_Version 0x%08" PRIx64 " does not match the file name; "
			    "no Python frames", m->path, v);
			return -ENOTSUP;
		}
		minor = (int)((v >> 16) & 0xff);
	} else if (ei.str_minor >= 0 && (minor < 0 || ei.str_minor == minor)) {
		minor = ei.str_minor;
		info->hexversion = 3u << 24 | (uint32_t)minor << 16 | (uint32_t)ei.str_patch << 8 | 0xf0;
		info->patch_known = true;
		snprintf(info->version, sizeof(info->version), "3.%d.%d", minor, ei.str_patch);
	} else if (minor >= 0) {
		info->hexversion = 3u << 24 | (uint32_t)minor << 16;
		snprintf(info->version, sizeof(info->version), "3.%d", minor);
	} else {
		say(why, whylen, "%s: defines _PyRuntime but its version is unknown; "
		    "no Python frames", m->path);
		return -ENOTSUP;
	}
	info->runtime = ei.runtime ? ei.bias + ei.runtime : 0;
	info->code_type = ei.code_type ? ei.bias + ei.code_type : 0;

	if (info->shared && s.lib_t) {
		info->free_threaded = true;
		say(why, whylen, "Python %s: a free-threaded build (%s): not supported; "
		    "no Python frames", info->version, strrchr(m->path, '/') + 1);
		return -ENOTSUP;
	}
	if ((info->shared && s.lib_d) || ei.negative_refcount) {
		say(why, whylen, "Python %s: a debug build (Py_DEBUG): not supported; "
		    "no Python frames", info->version);
		return -ENOTSUP;
	}
	if (!(row = pyfind__row(minor))) {
		say(why, whylen, "Python %s: no offsets for this version; no Python frames",
		    info->version);
		return -ENOTSUP;
	}
	if (!ei.runtime || !info->code_type) {
		say(why, whylen, "Python %s (%s): no %s symbol; no Python frames", info->version,
		    m->path, ei.runtime ? "PyCode_Type" : "_PyRuntime");
		return -ENOTSUP;
	}
	if (minor >= 13 && (err = check_debug_offsets(pid, info->runtime, row, info, why, whylen)))
		return err;
	if ((err = check_threads(pid, row, info, why, whylen)))
		return err;
	say(why, whylen, "Python %s (%s, %s)", info->version, m->path,
	    info->shared ? "shared library" : "executable");
	if (out) {
		memset(out, 0, sizeof(*out));
		out->runtime = info->runtime;
		out->code_type = info->code_type;
		out->off = *row;
	}
	return 0;
}

int pyfind__pthread_tid_offset(int pid, uint32_t *off)
{
	struct scan s;
	struct elfinfo ei;
	uint32_t desc[3];

	memset(&s, 0, sizeof(s));
	if (procfs__for_each_map(pid, scan_map, &s) < 0 || !s.libc.found)
		return -ENOENT;
	if (elf_read(pid, &s.libc, -2, &ei) || !ei.tid_desc)
		return -ENOENT;
	/* DB_STRUCT_FIELD: { size in bits, element count, offset }. */
	if (pyfind__read(pid, ei.bias + ei.tid_desc, desc, sizeof(desc)) || desc[0] != 32)
		return -ENOENT;
	*off = desc[2];
	return 0;
}

int pyfind__interpreters(int pid, const struct py_proc *pp, unsigned max, unsigned *n)
{
	uint64_t interp = 0;
	unsigned k = 0;
	int err;

	*n = 0;
	if ((err = pyfind__read(pid, pp->runtime + pp->off.runtime_interp_head, &interp, 8)))
		return err;
	for (; interp && k < max; k++)
		if ((err = pyfind__read(pid, interp + pp->off.interp_next, &interp, 8)))
			return err;
	*n = k;
	return 0;
}
