// SPDX-License-Identifier: MIT
/*
 * record --inject (issue 26): cgbpf's injection library into a running
 * process, through ptrace. The sequence (docs/design.md, "Injecting into
 * a running process"):
 *
 *  1. Checks that need no ptrace: the process maps libcuda, not the
 *     library yet; is 64-bit; is not traced; its libc has dlopen and
 *     pthread_create (glibc >= 2.34, the library's own floor); the library
 *     is reachable in its root (else copied into its /dev/shm).
 *  2. A stub (code and data) goes into slack no one executes: the bytes
 *     between the end of an executable segment and the end of its last
 *     page (libc's, ld.so's), written through /proc/PID/mem, which copies
 *     the page for this process alone.
 *  3. One thread, chosen by what it does (asleep in a call the kernel
 *     restarts, or running), is seized and interrupted (PTRACE_SEIZE: its
 *     parent never sees a stop). Its stack is scanned: a thread inside
 *     malloc, the loader, fork or thread creation is let go unchanged and
 *     another tried.
 *  4. Its registers go into a frame below its red zone, on its own stack;
 *     then one PTRACE_SETREGS points it at the stub, and it is detached.
 *     The stub blocks signals, saves the whole XSAVE state, starts a
 *     thread (pthread_create) that does the dlopen and calls
 *     InitializeInjection, restores the vector state, the signal mask and
 *     every register, and jumps back; a system call the stop interrupted
 *     is restarted as the kernel would have.
 *
 * cgbpf can die at any instant: before the SETREGS the thread resumes
 * untouched; after it, the stub needs nobody. The dlopen runs on a fresh
 * thread, never on the interrupted one: a lock the interrupted thread
 * holds is released when it returns, so the new thread waits at worst.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <cpuid.h>
#include <stddef.h>

#include "capture/ptinject.h"
#include "core/inject.h"
#include "lib/elf/elfsym.h"
#include "lib/elf/symbolize.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/scfilter.h"

#define MAPS_MAX 4096
#define SCAN_BYTES (64u << 10)	/* stack scanned above the stopped thread's sp */
#define SCRATCH (32u << 10)	/* stack the stub's calls may use below its frame */
#define STOP_WAIT_NS 2000000000ull	/* a thread that does not stop: let go */
#define LOAD_WAIT_NS 5000000000ull	/* the library must map within this */
#define ROUNDS 20			/* tries over all threads, 5 ms apart */

/* ------------------------------------------------------------ the stub */

/*
 * Position independent: code, then data, copied as one blob. Entered with
 * rsp = F, the frame cgbpf wrote (struct frame). Never run in cgbpf.
 */
__asm__(".pushsection .rodata.ptinj, \"a\"\n"
	".p2align 4\n"
	".globl ptinj_blob\n"
	"ptinj_blob:\n"
	/* rt_sigprocmask(SIG_SETMASK, &all, &F->oldmask, 8) */
	"	movl $14, %eax\n"
	"	movl $2, %edi\n"
	"	leaq ptinj_d_all(%rip), %rsi\n"
	"	leaq 136(%rsp), %rdx\n"
	"	movl $8, %r10d\n"
	"	syscall\n"
	/* the whole vector state (header zeroed by cgbpf) */
	"	movl $-1, %eax\n"
	"	movl $-1, %edx\n"
	"	xsave64 192(%rsp)\n"
	/* pthread_create(&F->thread, NULL, thread_fn, NULL); detached */
	"	leaq 144(%rsp), %rdi\n"
	"	xorl %esi, %esi\n"
	"	leaq ptinj_thread(%rip), %rdx\n"
	"	xorl %ecx, %ecx\n"
	"	call *ptinj_d_create(%rip)\n"
	"	testl %eax, %eax\n"
	"	jnz 1f\n"
	"	movq 144(%rsp), %rdi\n"
	"	call *ptinj_d_detach(%rip)\n"
	"1:\n"
	"	movl $-1, %eax\n"
	"	movl $-1, %edx\n"
	"	xrstor64 192(%rsp)\n"
	/* rt_sigprocmask(SIG_SETMASK, &F->oldmask, NULL, 8) */
	"	movl $14, %eax\n"
	"	movl $2, %edi\n"
	"	leaq 136(%rsp), %rsi\n"
	"	xorl %edx, %edx\n"
	"	movl $8, %r10d\n"
	"	syscall\n"
	"	pushq 128(%rsp)\n"
	"	popfq\n"
	"	movq 0(%rsp), %rax\n"
	"	movq 8(%rsp), %rbx\n"
	"	movq 16(%rsp), %rcx\n"
	"	movq 24(%rsp), %rdx\n"
	"	movq 32(%rsp), %rsi\n"
	"	movq 40(%rsp), %rdi\n"
	"	movq 48(%rsp), %rbp\n"
	"	movq 56(%rsp), %r8\n"
	"	movq 64(%rsp), %r9\n"
	"	movq 72(%rsp), %r10\n"
	"	movq 80(%rsp), %r11\n"
	"	movq 88(%rsp), %r12\n"
	"	movq 96(%rsp), %r13\n"
	"	movq 104(%rsp), %r14\n"
	"	movq 112(%rsp), %r15\n"
	"	movq 120(%rsp), %rsp\n"
	"	jmp *ptinj_d_rip(%rip)\n"
	/* The new thread: dlopen(path, RTLD_NOW), dlsym, InitializeInjection(). */
	"ptinj_thread:\n"
	"	pushq %rbx\n"
	"	leaq ptinj_d_path(%rip), %rdi\n"
	"	movl $2, %esi\n"
	"	call *ptinj_d_dlopen(%rip)\n"
	"	testq %rax, %rax\n"
	"	jz 2f\n"
	"	movq %rax, %rdi\n"
	"	leaq ptinj_d_name(%rip), %rsi\n"
	"	call *ptinj_d_dlsym(%rip)\n"
	"	testq %rax, %rax\n"
	"	jz 2f\n"
	"	call *%rax\n"
	"2:\n"
	"	xorl %eax, %eax\n"
	"	popq %rbx\n"
	"	ret\n"
	".p2align 3\n"
	".globl ptinj_data\n"
	"ptinj_data:\n"
	"ptinj_d_dlopen: .quad 0\n"
	"ptinj_d_dlsym: .quad 0\n"
	"ptinj_d_create: .quad 0\n"
	"ptinj_d_detach: .quad 0\n"
	"ptinj_d_rip: .quad 0\n"
	"ptinj_d_all: .quad -1\n"
	"ptinj_d_name: .asciz \"InitializeInjection\"\n"
	".p2align 3\n"
	".globl ptinj_path\n"
	"ptinj_path:\n"
	"ptinj_d_path:\n"
	".popsection\n");

extern const char ptinj_blob[], ptinj_data[], ptinj_path[];

/* ptinj_data's first words, filled per injection. */
struct stub_data {
	uint64_t dlopen, dlsym, create, detach, rip, all;
};

/* What cgbpf writes at F, below the thread's red zone. */
struct frame {
	uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rsp, rflags;
	uint64_t oldmask, thread;
	uint64_t pad[5];
	uint8_t xsave_legacy[512];	/* XSAVE area at F + 192 */
	uint8_t xsave_header[64];	/* must be zero for XRSTOR: written so */
};

_Static_assert(offsetof(struct frame, rsp) == 120, "frame layout");
_Static_assert(offsetof(struct frame, rflags) == 128, "frame layout");
_Static_assert(offsetof(struct frame, oldmask) == 136, "frame layout");
_Static_assert(offsetof(struct frame, thread) == 144, "frame layout");
_Static_assert(offsetof(struct frame, xsave_legacy) == 192, "frame layout");

/* ------------------------------------------------------------ helpers */

struct map {
	uint64_t start, end, offset, inode;
	char perms[5];
	char *path;
};

struct maps {
	struct map *m;
	size_t n;
};

static int add_map(const struct map_entry *e, void *ctx)
{
	struct maps *ms = ctx;
	struct map *m;

	if (ms->n >= MAPS_MAX)
		return 1;
	m = realloc(ms->m, (ms->n + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	ms->m = m;
	m = &ms->m[ms->n];
	*m = (struct map){ .start = e->start, .end = e->end, .offset = e->offset,
			   .inode = e->inode };
	memcpy(m->perms, e->perms, sizeof(m->perms));
	m->path = strdup(e->path ? e->path : "");
	if (!m->path)
		return -ENOMEM;
	ms->n++;
	return 0;
}

static void maps_free(struct maps *ms)
{
	for (size_t i = 0; i < ms->n; i++)
		free(ms->m[i].path);
	free(ms->m);
	*ms = (struct maps){ 0 };
}

static int maps_read(pid_t pid, struct maps *ms)
{
	int err;

	*ms = (struct maps){ 0 };
	err = procfs__for_each_map(pid, add_map, ms);
	if (err < 0)
		maps_free(ms);
	return err < 0 ? err : 0;
}

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static bool is_libc(const char *path)
{
	const char *b = base(path);

	return !strcmp(b, "libc.so.6") || (!strncmp(b, "libc-2.", 7) && strstr(b, ".so"));
}

static bool is_ldso(const char *path)
{
	const char *b = base(path);

	return !strncmp(b, "ld-linux-x86-64.so", 18) || (!strncmp(b, "ld-2.", 5) && strstr(b, ".so"));
}

static bool is_allocator(const char *path)
{
	const char *b = base(path);

	return !strncmp(b, "libjemalloc", 11) || !strncmp(b, "libtcmalloc", 11) ||
	       !strncmp(b, "libmimalloc", 11) || !strncmp(b, "libhoard", 8);
}

static const struct map *find_map(const struct maps *ms, bool (*is)(const char *))
{
	for (size_t i = 0; i < ms->n; i++)
		if (ms->m[i].path[0] == '/' && is(ms->m[i].path))
			return &ms->m[i];
	return NULL;
}

/* The address in pid of file offset off of path, from its mappings. */
static uint64_t addr_of(const struct maps *ms, const char *path, uint64_t off)
{
	for (size_t i = 0; i < ms->n; i++) {
		const struct map *m = &ms->m[i];

		if (!strcmp(m->path, path) && off >= m->offset &&
		    off < m->offset + (m->end - m->start))
			return m->start + (off - m->offset);
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Test hooks (tests/integration/test_inject.py): CGBPF_INJECT_DIE_AT=STEP
 * kills cgbpf with SIGKILL at that step, to prove that no instant of the
 * sequence can hurt the process; CGBPF_INJECT_PAUSE_AT=STEP waits 300 ms
 * there (a signal sent during the hold). */
static void step(const char *name)
{
	const char *at = getenv("CGBPF_INJECT_DIE_AT");

	dbg("inject: %s", name);
	if (at && !strcmp(at, name))
		kill(getpid(), SIGKILL);
	at = getenv("CGBPF_INJECT_PAUSE_AT");
	if (at && !strcmp(at, name))
		nanosleep(&(struct timespec){ 0, 300000000 }, NULL);
}

/* ------------------------------------------------------------ preflight */

struct target {
	pid_t pid;
	struct maps ms;
	char libc[PATH_MAX], ldso[PATH_MAX];
	struct stub_data d;
	uint64_t deny_lo[64], deny_hi[64];	/* code no stopped thread may be in */
	size_t ndeny;
	uint64_t slack;			/* where the stub goes */
	size_t xsave_size;
	int seccomp;			/* its Seccomp: mode (2: filters, checked when held) */
};

static int status_field(pid_t pid, const char *key, char *out, size_t len)
{
	char path[64], line[256];
	size_t kl = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			char *v = line + kl + 1;

			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = 0;
			snprintf(out, len, "%s", v);
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	return -ENOENT;
}

static void deny(struct target *t, uint64_t lo, uint64_t hi)
{
	if (lo && hi > lo && t->ndeny < sizeof(t->deny_lo) / sizeof(t->deny_lo[0])) {
		t->deny_lo[t->ndeny] = lo;
		t->deny_hi[t->ndeny] = hi;
		t->ndeny++;
	}
}

/* libc's functions a stopped thread must not be inside: what the stub's
 * pthread_create needs (malloc's locks, the stack cache, TLS setup) and
 * whatever holds the loader's or fork's state. */
static const char *const deny_funcs[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "malloc_trim", "malloc_usable_size", "mallopt",
	"mallinfo", "mallinfo2", "malloc_stats", "malloc_info", "__libc_malloc", "__libc_free",
	"__libc_calloc", "__libc_realloc", "__libc_memalign", "pthread_create", "pthread_exit",
	"pthread_join", "pthread_detach", "pthread_tryjoin_np", "pthread_timedjoin_np",
	"fork", "_Fork", "vfork", "posix_spawn", "posix_spawnp", "system", "exit", "_exit",
	"__cxa_atexit", "__cxa_finalize", "__cxa_thread_atexit_impl", "dlopen", "dlclose",
	"dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo", "dlmopen", "dlerror",
	"dl_iterate_phdr", "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlclose",
};

static int resolve_libc(struct target *t, char *why, size_t wl)
{
	char root[PATH_MAX + 32];
	struct elfsym *es;
	uint64_t off, size;
	static const char *const need[] = { "dlopen", "dlsym", "pthread_create",
					    "pthread_detach" };
	uint64_t *slot[] = { &t->d.dlopen, &t->d.dlsym, &t->d.create, &t->d.detach };

	snprintf(root, sizeof(root), "/proc/%d/root%s", t->pid, t->libc);
	es = elfsym__open(root);
	if (!es) {
		snprintf(why, wl, "cannot read its libc (%.300s): %s", t->libc, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (elfsym__offset(es, need[i], &off) || !(*slot[i] = addr_of(&t->ms, t->libc, off))) {
			elfsym__close(es);
			snprintf(why, wl, "glibc too old: its libc (%.300s) has no %s; the injection "
				 "library needs glibc 2.34 or later (build/portable/BUILD-INFO)",
				 t->libc, need[i]);
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof(deny_funcs) / sizeof(deny_funcs[0]); i++) {
		uint64_t a;

		if (elfsym__range(es, deny_funcs[i], &off, &size) || !size)
			continue;
		a = addr_of(&t->ms, t->libc, off);
		deny(t, a, a + size);
	}
	elfsym__close(es);
	t->d.all = ~0ull;
	return 0;
}

/* The end in memory of the executable segment m maps, from the file's
 * program headers; 0 if not found. */
static uint64_t exec_segment_end(pid_t pid, const struct map *m)
{
	char root[PATH_MAX + 32];
	uint64_t end = 0;
	size_t nph;
	Elf *elf;
	int fd;

	snprintf(root, sizeof(root), "/proc/%d/root%s", pid, m->path);
	fd = open(root, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && !elf_getphdrnum(elf, &nph)) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X) || (ph.p_offset & ~0xfffull) != m->offset)
				continue;
			end = m->start + (ph.p_offset - m->offset) + ph.p_memsz;
			break;
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return end;
}

/* Slack of need bytes after an executable segment: libc's, ld.so's, then
 * any file's. 0 if none. */
static uint64_t find_slack(const struct target *t, size_t need)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < t->ms.n; i++) {
			const struct map *m = &t->ms.m[i];
			uint64_t end;

			if (m->perms[2] != 'x' || m->path[0] != '/')
				continue;
			if (!pass && !is_libc(m->path) && !is_ldso(m->path))
				continue;
			end = exec_segment_end(t->pid, m);
			if (!end || end > m->end)
				continue;
			end = (end + 15) & ~15ull;
			if (m->end - end >= need)
				return end;
		}
	}
	return 0;
}

/* The XSAVE area's size for the features this kernel enabled. */
static size_t xsave_size(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d) || b < 576)
		return 0;
	return (b + 63) & ~63u;
}

/* Where the library is in the process's root: the same file as cgbpf's,
 * or a copy in its /dev/shm (a container's own filesystem). */
static int place_library(pid_t pid, const char *lib, char *out, size_t len, char *why, size_t wl)
{
	char there[PATH_MAX + 64], tmp[PATH_MAX + 80], buf[65536];
	struct stat a, b;
	ssize_t n;
	int in, fd;

	if (stat(lib, &a)) {
		snprintf(why, wl, "the injection library %.300s: %s", lib, strerror(errno));
		return -1;
	}
	snprintf(there, sizeof(there), "/proc/%d/root%s", pid, lib);
	if (!stat(there, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		snprintf(out, len, "%s", lib);
		return 0;
	}
	/* Its own folder: the file keeps the library's name, which is how
	 * cgbpf knows the library in a process's maps. */
	snprintf(out, len, "/dev/shm/cgbpf-inject-%llx-%llx", (unsigned long long)a.st_size,
		 (unsigned long long)a.st_mtime);
	snprintf(there, sizeof(there), "/proc/%d/root%s", pid, out);
	if (mkdir(there, 0755) && errno != EEXIST) {
		snprintf(why, wl, "the library is not in the process's root and %.300s cannot be "
			 "made there: %s", out, strerror(errno));
		return -1;
	}
	snprintf(out + strlen(out), len - strlen(out), "/libcgbpf-inject.so");
	snprintf(there, sizeof(there), "/proc/%d/root%s", pid, out);
	if (!stat(there, &b) && b.st_size == a.st_size)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.%d", there, getpid());
	in = open(lib, O_RDONLY | O_CLOEXEC);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (in < 0 || fd < 0) {
		snprintf(why, wl, "the library is not in the process's root and cannot be copied "
			 "to its /dev/shm (%.300s): %s", out, strerror(errno));
		if (in >= 0)
			close(in);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (fsync(fd) || close(fd) || n < 0 || rename(tmp, there)) {
		snprintf(why, wl, "copying the library to the process's %.300s: %s", out, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int preflight(struct target *t, const char *lib, struct ptinject_result *res)
{
	char v[64], exe[64];
	unsigned char ident[EI_NIDENT];
	const struct map *m;
	bool cuda = false;
	int fd;

	if (maps_read(t->pid, &t->ms)) {
		snprintf(res->why, sizeof(res->why), "cannot read /proc/%d/maps: %s", t->pid,
			 strerror(errno));
		return -1;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", t->pid);
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, ident, sizeof(ident)) != sizeof(ident) ||
	    ident[EI_CLASS] != ELFCLASS64) {
		snprintf(res->why, sizeof(res->why), fd < 0 ? "cannot read its executable: %s" :
			 "a 32-bit process: the injection library is x86-64 only",
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	for (size_t i = 0; i < t->ms.n; i++) {
		const char *b = base(t->ms.m[i].path);

		if (inject__is_lib(b)) {
			res->outcome = PTINJ_PRESENT;
			snprintf(res->lib, sizeof(res->lib), "%s", t->ms.m[i].path);
			return 1;
		}
		if (!strncmp(b, "libcuda.so", 10))
			cuda = true;
	}
	if (!cuda) {
		snprintf(res->why, sizeof(res->why), "no libcuda mapped: it runs no CUDA (yet)");
		return -1;
	}
	if (!status_field(t->pid, "TracerPid", v, sizeof(v)) && strcmp(v, "0")) {
		snprintf(res->why, sizeof(res->why), "it is traced already (TracerPid %s: a "
			 "debugger or strace); a process has one tracer", v);
		return -1;
	}
	if (!status_field(t->pid, "Seccomp", v, sizeof(v)))
		t->seccomp = atoi(v);
	if (t->seccomp == 1) {
		snprintf(res->why, sizeof(res->why), "it runs in seccomp strict mode: no call but "
			 "read, write and exit is allowed to it");
		return -1;
	}
	if (!(m = find_map(&t->ms, is_libc))) {
		snprintf(res->why, sizeof(res->why), "no glibc libc mapped (static or musl)");
		return -1;
	}
	snprintf(t->libc, sizeof(t->libc), "%s", m->path);
	if ((m = find_map(&t->ms, is_ldso)))
		snprintf(t->ldso, sizeof(t->ldso), "%s", m->path);
	if (resolve_libc(t, res->why, sizeof(res->why)))
		return -1;
	/* ld.so and allocators, whole: any frame in them holds their state. */
	for (size_t i = 0; i < t->ms.n; i++) {
		m = &t->ms.m[i];
		if (m->perms[2] == 'x' && m->path[0] == '/' &&
		    (is_ldso(m->path) || is_allocator(m->path)))
			deny(t, m->start, m->end);
	}
	if (!(t->xsave_size = xsave_size())) {
		snprintf(res->why, sizeof(res->why), "this CPU has no XSAVE");
		return -1;
	}
	if (place_library(t->pid, lib, res->lib, sizeof(res->lib), res->why, sizeof(res->why)))
		return -1;
	return 0;
}

/* ------------------------------------------------------------ threads */

struct cand {
	pid_t tid;
	int rank;		/* 0: asleep in a restarted call, 1: running, 2: EINTR */
	char what[32];
};

static const struct {
	long nr;
	const char *name;
	int rank;
} calls[] = {
	{ 0, "read", 0 }, { 7, "poll", 0 }, { 17, "pread64", 0 }, { 19, "readv", 0 },
	{ 23, "select", 0 }, { 34, "pause", 0 }, { 35, "nanosleep", 0 }, { 61, "wait4", 0 },
	{ 130, "rt_sigsuspend", 0 }, { 202, "futex", 0 }, { 230, "clock_nanosleep", 0 },
	{ 270, "pselect6", 0 }, { 271, "ppoll", 0 },
	{ 232, "epoll_wait", 2 }, { 281, "epoll_pwait", 2 }, { 441, "epoll_pwait2", 2 },
	{ 65, "semop", 2 }, { 220, "semtimedop", 2 }, { 128, "rt_sigtimedwait", 2 },
	{ 42, "connect", 2 }, { 43, "accept", 2 }, { 288, "accept4", 2 },
	{ 44, "sendto", 2 }, { 45, "recvfrom", 2 }, { 46, "sendmsg", 2 }, { 47, "recvmsg", 2 },
};

/* What tid is doing, ranked; -1 to leave it alone (stopped, in D, ...). */
static int rank_thread(pid_t pid, pid_t tid, struct cand *c)
{
	char path[96], buf[512], state = 0, comm[32] = "";
	long nr = -1;
	FILE *f;

	c->tid = tid;
	if (procfs__comm(pid, tid, comm, sizeof(comm)) == 0 && !strncmp(comm, "cgbpf-inj", 9))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f)) {
		char *p = strrchr(buf, ')');

		if (p && p[1] == ' ')
			state = p[2];
	}
	fclose(f);
	if (state == 'R') {
		c->rank = 1;
		snprintf(c->what, sizeof(c->what), "running");
		return 0;
	}
	if (state != 'S')
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f) && !strncmp(buf, "running", 7)) {
		fclose(f);
		c->rank = 1;
		snprintf(c->what, sizeof(c->what), "running");
		return 0;
	}
	fclose(f);
	nr = strtol(buf, NULL, 10);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		if (calls[i].nr == nr) {
			c->rank = calls[i].rank;
			snprintf(c->what, sizeof(c->what), "%s", calls[i].name);
			return 0;
		}
	}
	/* Another call: the kernel may return EINTR from it. */
	c->rank = 2;
	snprintf(c->what, sizeof(c->what), "syscall %ld", nr);
	return 0;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->rank != y->rank ? x->rank - y->rank : x->tid - y->tid;
}

static size_t list_threads(pid_t pid, struct cand *out, size_t max)
{
	/* Test hook: only this thread. */
	const char *only = getenv("CGBPF_INJECT_TID");
	char path[64];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (only && max) {
		out[0] = (struct cand){ .tid = (pid_t)strtol(only, NULL, 10), .rank = 0 };
		snprintf(out[0].what, sizeof(out[0].what), "chosen");
		if (!rank_thread(pid, out[0].tid, &out[0]))
			return 1;
		/* Held even so (a thread in D would be waited for). */
		return 1;
	}

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);

		if (tid > 0 && !rank_thread(pid, tid, &out[n]))
			n++;
	}
	closedir(d);
	qsort(out, n, sizeof(*out), cand_cmp);
	return n;
}

/* Waits for tid's interrupt stop; signals that come first are passed on.
 * 0: stopped; -EAGAIN: a job-control stop (the process is being stopped);
 * -ETIMEDOUT: still running after STOP_WAIT_NS. */
static int wait_stop(pid_t tid)
{
	uint64_t t0 = now_ns();
	int st;

	for (;;) {
		pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

		if (r < 0)
			return -errno;
		if (r == 0) {
			if (now_ns() - t0 > STOP_WAIT_NS)
				return -ETIMEDOUT;
			nanosleep(&(struct timespec){ 0, 20000 }, NULL);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		if ((st >> 16) == PTRACE_EVENT_STOP) {
			int sig = WSTOPSIG(st);

			if (sig == SIGTRAP)
				return 0;
			/* A group stop (SIGSTOP, SIGTSTP...): the process is
			 * being stopped by someone; leave it so. */
			return -EAGAIN;
		}
		/* A signal for the thread: delivered as it would have been;
		 * the interrupt stays pending and stops it next. */
		if (ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(st)))
			return -errno;
	}
}

static bool in_uprobes_area(const struct target *t, uint64_t a)
{
	for (size_t i = 0; i < t->ms.n; i++)
		if (!strcmp(t->ms.m[i].path, "[uprobes]") && a >= t->ms.m[i].start &&
		    a < t->ms.m[i].end)
			return true;
	return false;
}

static bool denied(const struct target *t, uint64_t a)
{
	for (size_t k = 0; k < t->ndeny; k++)
		if (a >= t->deny_lo[k] && a < t->deny_hi[k])
			return true;
	return false;
}

/* The stopped thread is inside denied code: at its pc, or in a frame of
 * its stack, unwound with CFI (symbolize.c) from a copy. A stack that
 * does not unwind to its end counts as inside. */
static bool busy_inside(const struct target *t, struct symbolizer *sym, int memfd, pid_t tid,
			const struct user_regs_struct *r)
{
	static uint8_t stack[SCAN_BYTES];
	struct sym_regs sr = { .ip = r->rip, .sp = r->rsp, .bp = r->rbp };
	uint64_t ips[128];
	bool truncated = false, trampoline = false;
	ssize_t len = -1;
	int n;

	if (denied(t, r->rip)) {
		dbg("inject: thread %d: pc 0x%llx in denied code", tid, r->rip);
		return true;
	}
	/* Reads stop at the end of the stack's mapping. */
	for (size_t l = SCAN_BYTES; l >= 4096 && len <= 0; l /= 2)
		len = pread(memfd, stack, l, (off_t)r->rsp);
	if (len <= 0)
		return true;
	n = symbolizer__unwind(sym, t->pid, tid, &sr, stack, (size_t)len, ips, 128, &truncated);
	for (int i = 0; i < n && log_verbosity >= LOG_DEBUG; i++) {
		struct sym_frame fr = { 0 };

		if (i ? symbolizer__user_ret(sym, t->pid, ips[i], &fr) :
			symbolizer__user(sym, t->pid, ips[i], &fr))
			fr.function = NULL;
		dbg("inject: thread %d: #%d 0x%" PRIx64 " %s (%s)", tid, i, ips[i],
		    fr.function ? fr.function : "?", fr.module ? fr.module : "?");
	}
	/* A return into the kernel's uretprobe trampoline (or the thread in
	 * it): the frames above are the application's, which called a traced
	 * API (cgbpf's own return probe hides the real return address). No
	 * allocator, loader or thread creation calls those APIs, so the
	 * frames below the trampoline are the ones that can hold their
	 * locks. */
	for (int i = 0; i < n; i++) {
		if (in_uprobes_area(t, ips[i])) {
			/* What the unwinder made of the frames above is a guess. */
			n = i;
			truncated = false;
			trampoline = true;
			break;
		}
	}
	if ((n <= 0 && !trampoline) || truncated) {
		dbg("inject: thread %d: its stack does not unwind (%d frames)", tid, n);
		return true;
	}
	for (int i = 1; i < n; i++) {
		/* A return address: the call is the byte before it. */
		if (denied(t, ips[i] - 1)) {
			dbg("inject: thread %d: frame %d (0x%" PRIx64 ") in denied code", tid, i,
			    ips[i]);
			return true;
		}
	}
	return false;
}

/* The calls the injection makes on the held thread and on the thread it
 * starts (the stub, pthread_create, dlopen, the library's start), with
 * the arguments glibc gives them, for a seccomp filter to answer. */
static const struct {
	int nr;
	const char *name;
	uint64_t a[6];
} inj_calls[] = {
	{ 14, "rt_sigprocmask", { 2, 1, 1, 8 } },
	{ 9, "mmap", { 0, 1 << 20, 3, 0x20022, (uint64_t)-1, 0 } },		/* a stack */
	{ 9, "mmap", { 0, 1 << 20, 0, 0x20022, (uint64_t)-1, 0 } },
	{ 9, "mmap", { 0, 1 << 20, 1, 0x802, 3, 0 } },				/* dlopen */
	{ 9, "mmap", { 1 << 20, 1 << 20, 5, 0x812, 3, 1 << 12 } },
	{ 9, "mmap", { 1 << 20, 1 << 20, 3, 0x812, 3, 1 << 12 } },
	{ 9, "mmap", { 1 << 20, 1 << 12, 3, 0x32, (uint64_t)-1, 0 } },
	{ 10, "mprotect", { 1 << 20, 1 << 12, 0 } },
	{ 10, "mprotect", { 1 << 20, 1 << 12, 1 } },
	{ 10, "mprotect", { 1 << 20, 1 << 12, 3 } },
	{ 11, "munmap", { 1 << 20, 1 << 12 } },
	{ 28, "madvise", { 1 << 20, 1 << 12, 4 } },
	{ 435, "clone3", { 1, 88 } },
	{ 56, "clone", { 0x3d0f00, 1, 1, 1, 1 } },
	{ 273, "set_robust_list", { 1, 24 } },
	{ 334, "rseq", { 1, 32, 0, 0x53053053 } },
	{ 202, "futex", { 1, 128, 0 } },
	{ 202, "futex", { 1, 129, 1 } },
	{ 257, "openat", { (uint64_t)-100, 1, 0x80000 } },
	{ 0, "read", { 3, 1, 832 } },
	{ 17, "pread64", { 3, 1, 784, 64 } },
	{ 262, "newfstatat", { 3, 1, 1, 0x1000 } },
	{ 5, "fstat", { 3, 1 } },
	{ 3, "close", { 3 } },
	{ 12, "brk", { 0 } },
	{ 318, "getrandom", { 1, 8, 1 } },
	{ 157, "prctl", { 15, 1 } },
	{ 186, "gettid", { 0 } },
	{ 39, "getpid", { 0 } },
	{ 230, "clock_nanosleep", { 1, 0, 1, 0 } },
	{ 35, "nanosleep", { 1, 0 } },
	{ 60, "exit", { 0 } },
};

/* The held thread's seccomp filters, asked about every call above: 0 if
 * none would hurt or stop the process (ERRNO only fails the injection);
 * else why. */
static int seccomp_ok(pid_t tid, uint64_t ip, char *why, size_t wl)
{
	struct sock_filter *f[64] = { 0 };
	size_t len[64];
	int nf = 0, ret = 0;

	for (; nf < 64; nf++) {
		long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)(long)nf, NULL);

		if (n < 0 && errno == ENOENT)
			break;
		if (n <= 0 || !(f[nf] = calloc((size_t)n, sizeof(**f))) ||
		    ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)(long)nf, f[nf]) != n) {
			snprintf(why, wl, "it runs under a seccomp filter cgbpf cannot read "
				 "(PTRACE_SECCOMP_GET_FILTER: %s): whether it allows the calls the "
				 "injection makes is unknown", strerror(n < 0 ? errno : EIO));
			ret = -1;
			nf++;
			goto out;
		}
		len[nf] = (size_t)n;
	}
	for (size_t c = 0; c < sizeof(inj_calls) / sizeof(inj_calls[0]) && !ret; c++) {
		struct seccomp_data d = { .nr = inj_calls[c].nr, .arch = AUDIT_ARCH_X86_64,
					  .instruction_pointer = ip };
		uint32_t act = SECCOMP_RET_ALLOW;

		memcpy(d.args, inj_calls[c].a, sizeof(d.args));
		for (int i = 0; i < nf; i++) {
			int64_t r = scfilter__run(f[i], len[i], &d);

			act = scfilter__stricter(act, r < 0 ? SECCOMP_RET_KILL_PROCESS : (uint32_t)r);
		}
		if (scfilter__harmful(act)) {
			snprintf(why, wl, "its seccomp filter would answer %s to %s, a call the "
				 "injection makes", scfilter__name(act), inj_calls[c].name);
			ret = -1;
		}
	}
out:
	for (int i = 0; i < nf; i++)
		free(f[i]);
	return ret;
}

/* The mapping that holds the thread's stack has room for the frame and
 * the stub's calls below sp - 128. */
static bool stack_room(const struct target *t, uint64_t sp, uint64_t lo)
{
	for (size_t i = 0; i < t->ms.n; i++) {
		const struct map *m = &t->ms.m[i];

		if (sp > m->start && sp <= m->end)
			return m->perms[0] == 'r' && m->perms[1] == 'w' && lo >= m->start;
	}
	return false;
}

/* The registers the interrupted code resumes with: a system call the
 * stop interrupted is restarted, as the kernel would on the way out
 * (arch_do_signal_or_restart), since the stub runs with orig_rax -1. */
static bool restart_regs(struct user_regs_struct *r)
{
	long rax = (long)r->rax;

	if ((long)r->orig_rax < 0)
		return false;
	if (rax == -512 || rax == -513 || rax == -514) {	/* ERESTARTSYS, NOINTR, NOHAND */
		r->rax = r->orig_rax;
		r->rip -= 2;
		return false;
	}
	if (rax == -516) {					/* ERESTART_RESTARTBLOCK */
		r->rax = 219;					/* __NR_restart_syscall */
		r->rip -= 2;
		return false;
	}
	return rax == -EINTR;
}

/* ------------------------------------------------------------ the sequence */

/* Holds tid, and if it may, sends it through the stub. 1: let go unchanged
 * (busy inside denied code, no room, a job-control stop); 0: sent; < 0:
 * error, let go unchanged. */
static int hold(struct target *t, struct symbolizer *sym, int memfd, const struct cand *c,
		struct ptinject_result *res)
{
	struct user_regs_struct r, s;
	struct frame f;
	uint64_t t0, fp, size, sp;
	int err;

	if (ptrace(PTRACE_SEIZE, c->tid, 0, 0)) {
		err = -errno;
		snprintf(res->why, sizeof(res->why), "ptrace(PTRACE_SEIZE) of thread %d: %s%s",
			 c->tid, strerror(-err), err == -EPERM ?
			 " (needs CAP_SYS_PTRACE; Yama's ptrace_scope 3 forbids it; a "
			 "non-dumpable process needs CAP_SYS_PTRACE in its user namespace)" : "");
		return err;
	}
	step("seized");
	if (ptrace(PTRACE_INTERRUPT, c->tid, 0, 0)) {
		err = -errno;
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return err;
	}
	err = wait_stop(c->tid);
	t0 = now_ns();
	if (err == -ETIMEDOUT) {
		/* It stops when it next leaves the kernel: wait for that
		 * (never leave it stopped), without changing anything. */
		warn("inject: pid %d: thread %d does not stop (state D?); waiting for it", t->pid,
		     c->tid);
		while ((err = wait_stop(c->tid)) == -ETIMEDOUT)
			;
		if (!err)
			ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return 1;
	}
	if (err) {
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return err == -EAGAIN ? 1 : err;
	}
	step("stopped");
	if (ptrace(PTRACE_GETREGS, c->tid, 0, &r)) {
		err = -errno;
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return err;
	}
	size = (sizeof(struct frame) - 576 + t->xsave_size + 63) & ~63ull;
	fp = (r.rsp - 128 - size) & ~63ull;
	dbg("inject: thread %d (%s): pc 0x%llx sp 0x%llx cs 0x%llx", c->tid, c->what, r.rip, r.rsp,
	    r.cs);
	if (t->seccomp == 2 && seccomp_ok(c->tid, r.rip, res->why, sizeof(res->why))) {
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return -EPERM;
	}
	if (r.cs != 0x33 || busy_inside(t, sym, memfd, c->tid, &r) ||
	    !stack_room(t, r.rsp, fp - SCRATCH)) {
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return 1;
	}
	step("checked");
	s = r;
	res->eintr = restart_regs(&r);
	memset(&f, 0, sizeof(f));
	f.rax = r.rax, f.rbx = r.rbx, f.rcx = r.rcx, f.rdx = r.rdx, f.rsi = r.rsi;
	f.rdi = r.rdi, f.rbp = r.rbp, f.r8 = r.r8, f.r9 = r.r9, f.r10 = r.r10;
	f.r11 = r.r11, f.r12 = r.r12, f.r13 = r.r13, f.r14 = r.r14, f.r15 = r.r15;
	f.rsp = r.rsp, f.rflags = r.eflags;
	t->d.rip = r.rip;
	/* The frame, then the stub's data word for the way back. */
	if (pwrite(memfd, &f, sizeof(f), (off_t)fp) != (ssize_t)sizeof(f) ||
	    pwrite(memfd, &t->d, sizeof(t->d),
		   (off_t)(t->slack + (uint64_t)(ptinj_data - ptinj_blob))) != (ssize_t)sizeof(t->d)) {
		err = -errno;
		snprintf(res->why, sizeof(res->why), "writing the frame: %s", strerror(-err));
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return err;
	}
	step("frame");
	sp = fp;
	s.rip = t->slack;
	s.rsp = sp;
	s.orig_rax = (unsigned long long)-1;
	s.eflags &= ~0x400ull;	/* DF clear, as the ABI wants at a call */
	if (ptrace(PTRACE_SETREGS, c->tid, 0, &s)) {
		err = -errno;
		snprintf(res->why, sizeof(res->why), "ptrace(PTRACE_SETREGS): %s", strerror(-err));
		ptrace(PTRACE_DETACH, c->tid, 0, 0);
		return err;
	}
	step("regs");
	ptrace(PTRACE_DETACH, c->tid, 0, 0);
	res->hold_ms = (double)(now_ns() - t0) / 1e6;
	res->tid = c->tid;
	snprintf(res->tid_syscall, sizeof(res->tid_syscall), "%s", c->what);
	step("detached");
	return 0;
}

static int write_stub(const struct target *t, int memfd, const char *path)
{
	size_t code = (size_t)(ptinj_path - ptinj_blob), plen = strlen(path) + 1;
	char *blob = malloc(code + plen);
	ssize_t n;

	if (!blob)
		return -ENOMEM;
	memcpy(blob, ptinj_blob, code);
	memcpy(blob + (ptinj_data - ptinj_blob), &t->d, sizeof(t->d));
	memcpy(blob + code, path, plen);
	n = pwrite(memfd, blob, code + plen, (off_t)t->slack);
	free(blob);
	return n == (ssize_t)(code + plen) ? 0 : -errno;
}

static bool lib_mapped(pid_t pid)
{
	struct maps ms;
	bool yes = false;

	if (maps_read(pid, &ms))
		return false;
	for (size_t i = 0; i < ms.n && !yes; i++)
		yes = inject__is_lib(base(ms.m[i].path));
	maps_free(&ms);
	return yes;
}

void ptinject__run(pid_t pid, const char *lib, struct ptinject_result *res)
{
	struct target t = { .pid = pid };
	struct symbolizer *sym = NULL;
	struct cand c[256];
	char mem[64];
	size_t n, need;
	int memfd = -1, err = 0;
	uint64_t t1;

	memset(res, 0, sizeof(*res));
	res->outcome = PTINJ_REFUSED;
	err = preflight(&t, lib, res);
	if (err)
		goto out;
	need = (size_t)(ptinj_path - ptinj_blob) + strlen(res->lib) + 1;
	if (!(t.slack = find_slack(&t, need))) {
		snprintf(res->why, sizeof(res->why), "no room for the %zu-byte stub after any "
			 "executable segment", need);
		goto out;
	}
	snprintf(mem, sizeof(mem), "/proc/%d/mem", pid);
	memfd = open(mem, O_RDWR | O_CLOEXEC);
	if (memfd < 0 || write_stub(&t, memfd, res->lib)) {
		snprintf(res->why, sizeof(res->why), "writing the stub into %s: %s", mem,
			 strerror(errno));
		goto out;
	}
	step("stub");
	/* Its modules read now, not while a thread is held. */
	sym = symbolizer__new();
	if (!sym) {
		snprintf(res->why, sizeof(res->why), "out of memory");
		goto out;
	}
	symbolizer__user(sym, pid, t.d.dlopen, &(struct sym_frame){ 0 });
	err = 1;
	for (int round = 0; round < ROUNDS && err == 1; round++) {
		if (round)
			nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
		n = list_threads(pid, c, sizeof(c) / sizeof(c[0]));
		for (size_t i = 0; i < n && err == 1; i++)
			err = hold(&t, sym, memfd, &c[i], res);
	}
	if (err == 1) {
		res->busy = true;
		snprintf(res->why, sizeof(res->why), "every thread was inside malloc, the loader or "
			 "thread creation, or without stack room, for %d tries", ROUNDS);
		goto out;
	}
	if (err < 0) {
		if (!res->why[0])
			snprintf(res->why, sizeof(res->why), "ptrace: %s", strerror(-err));
		goto out;
	}
	t1 = now_ns();
	while (!lib_mapped(pid) && now_ns() - t1 < LOAD_WAIT_NS && procfs__alive(pid))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	res->load_ms = (double)(now_ns() - t1) / 1e6;
	if (lib_mapped(pid)) {
		res->outcome = PTINJ_INJECTED;
	} else {
		res->outcome = PTINJ_FAILED;
		snprintf(res->why, sizeof(res->why), "the stub ran, but %.300s was not mapped within "
			 "%.0f s (dlopen failed in the process: a missing dependency?)", res->lib,
			 LOAD_WAIT_NS / 1e9);
	}
out:
	symbolizer__free(sym);
	if (memfd >= 0)
		close(memfd);
	maps_free(&t.ms);
}

const char *ptinject__outcome_name(enum ptinject_outcome o)
{
	switch (o) {
	case PTINJ_INJECTED:
		return "injected";
	case PTINJ_PRESENT:
		return "already loaded";
	case PTINJ_REFUSED:
		return "refused";
	case PTINJ_FAILED:
		return "failed";
	}
	return "?";
}
