// SPDX-License-Identifier: MIT
/*
 * sources/syscalls/: syscalls of targets over --syscall-threshold: the
 * `syscalls` source, its records to model events and the osrt_sum table
 * (syscall_names.h: the generated x86_64 name table).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "lib/stats.h"
#include "lib/sumtab.h"
#include "sources/syscalls/syscall_names.h"
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "core/opts.h"
#include "core/session.h"
#include "core/source.h"
#include "lib/log.h"
#include "out/summary.h"
#include "sources/syscalls/syscalls.h"

#define NSYSCALLS (sizeof(syscall_names) / sizeof(syscall_names[0]))
#define NR_ioctl 16
#define NR_futex 202

/* super_block.s_magic of the pseudo filesystems (linux/magic.h). */
#define PIPEFS_MAGIC 0x50495045
#define SOCKFS_MAGIC 0x534F434B
#define ANON_INODE_FS_MAGIC 0x09041934

const char *syscalls__name(uint32_t nr, char *buf, size_t len)
{
	if (nr < NSYSCALLS && syscall_names[nr])
		return syscall_names[nr];
	snprintf(buf, len, "syscall_%u", nr);
	return buf;
}

const char *syscalls__futex_op(uint64_t op, char *buf, size_t len)
{
	static const char *const cmds[] = {
		"FUTEX_WAIT", "FUTEX_WAKE", "FUTEX_FD", "FUTEX_REQUEUE", "FUTEX_CMP_REQUEUE",
		"FUTEX_WAKE_OP", "FUTEX_LOCK_PI", "FUTEX_UNLOCK_PI", "FUTEX_TRYLOCK_PI",
		"FUTEX_WAIT_BITSET", "FUTEX_WAKE_BITSET", "FUTEX_WAIT_REQUEUE_PI",
		"FUTEX_CMP_REQUEUE_PI", "FUTEX_LOCK_PI2",
	};
	uint32_t o = (uint32_t)op, cmd = o & 127;
	char c[24];

	if (cmd < sizeof(cmds) / sizeof(cmds[0]))
		snprintf(c, sizeof(c), "%s", cmds[cmd]);
	else
		snprintf(c, sizeof(c), "%u", cmd);
	snprintf(buf, len, "%s%s%s", c, o & 128 ? "_PRIVATE" : "",
		 o & 256 ? "|FUTEX_CLOCK_REALTIME" : "");
	return buf;
}

/* Appends part (at most SYS_PATH_PART bytes, maybe unterminated) to buf. */
static size_t append(char *buf, size_t len, size_t at, const char *s, size_t n)
{
	size_t l = strnlen(s, n);

	if (at >= len)
		return at;
	if (l > len - at - 1)
		l = len - at - 1;
	memcpy(buf + at, s, l);
	buf[at + l] = 0;
	return at + l;
}

const char *syscalls__fd_name(const struct sys_fd *fd, char *buf, size_t len)
{
	size_t at = 0;
	int n = fd->nparts < SYS_PATH_PARTS ? fd->nparts : SYS_PATH_PARTS;

	buf[0] = 0;
	if (!fd->found) {
		snprintf(buf, len, "(not open)");
		return buf;
	}
	if (!fd->pseudo && fd->rooted && !n) {
		snprintf(buf, len, "/");	/* the root directory itself */
		return buf;
	}
	if (fd->pseudo || !n) {
		if (fd->magic == PIPEFS_MAGIC)
			snprintf(buf, len, "pipe:[%" PRIu64 "]", (uint64_t)fd->ino);
		else if (fd->magic == SOCKFS_MAGIC)
			snprintf(buf, len, "socket:[%" PRIu64 "]", (uint64_t)fd->ino);
		else if (fd->magic == ANON_INODE_FS_MAGIC && n)
			at = append(buf, len, append(buf, len, 0, "anon_inode:", 16),
				    fd->part[0], SYS_PATH_PART);
		else if (n)
			append(buf, len, 0, fd->part[0], SYS_PATH_PART);
		else
			snprintf(buf, len, "inode %" PRIu64 " (fs magic 0x%x)", (uint64_t)fd->ino, fd->magic);
		return buf;
	}
	if (!fd->rooted)
		at = append(buf, len, at, "...", 3);
	for (int i = n - 1; i >= 0; i--) {
		at = append(buf, len, at, "/", 1);
		at = append(buf, len, at, fd->part[i], SYS_PATH_PART);
	}
	return buf;
}

/* Syscalls whose first argument is a file descriptor worth showing. */
static bool fd_first(uint32_t nr)
{
	switch (nr) {
	case 0: case 1: case 3: case 8: case 16: case 17: case 18: case 19: case 20:
	case 42: case 43: case 44: case 45: case 46: case 47: case 72: case 73: case 74:
	case 75: case 217: case 232: case 281: case 288: case 295: case 296:
		return true;
	}
	return false;
}

static void decode(struct syscall_ev *e, const struct rec_syscall *r, bool has_fd)
{
	struct pf_annot *b = e->begin, *x = e->end;

	memset(e, 0, offsetof(struct syscall_ev, namebuf));
	e->nr = r->nr;
	e->name = syscalls__name(r->nr, e->namebuf, sizeof(e->namebuf));
	e->ts = r->hdr.ts;
	e->end_ts = r->hdr.ts + r->dur;
	e->ret = r->ret;
	memcpy(e->args, r->args, sizeof(e->args));
	if (fd_first(r->nr))
		b[e->nbegin++] = (struct pf_annot){ .name = "fd", .type = PA_INT,
						    .i = (int32_t)r->args[0] };
	if (r->nr == NR_ioctl) {
		if (has_fd) {
			e->target = syscalls__fd_name(&r->fd, e->targetbuf, sizeof(e->targetbuf));
			b[e->nbegin++] = (struct pf_annot){ .name = "target", .type = PA_STR,
							    .s = e->target };
		}
		snprintf(e->opbuf, sizeof(e->opbuf), "0x%" PRIx32, (uint32_t)r->args[1]);
		b[e->nbegin++] = (struct pf_annot){ .name = "request", .type = PA_STR,
						    .s = e->opbuf };
	} else if (r->nr == NR_futex) {
		e->op = syscalls__futex_op(r->args[1], e->opbuf, sizeof(e->opbuf));
		b[e->nbegin++] = (struct pf_annot){ .name = "op", .type = PA_STR, .s = e->op };
		b[e->nbegin++] = (struct pf_annot){ .name = "uaddr", .type = PA_PTR,
						    .u = r->args[0] };
	}
	x[e->nend++] = (struct pf_annot){ .name = "ret", .type = PA_INT, .i = r->ret };
	if (r->ret < 0 && r->ret >= -4095) {
		/* Kernel-internal codes a syscall interrupted by a signal
		 * returns to the tracepoint before it is restarted. */
		static const char *const restart[] = { "ERESTARTSYS", "ERESTARTNOINTR",
						       "ERESTARTNOHAND", "ENOIOCTLCMD",
						       "ERESTART_RESTARTBLOCK" };
		int err = (int)-r->ret;
		const char *en = err >= 512 && err <= 516 ? restart[err - 512] :
				 strerrorname_np(err);

		x[e->nend++] = (struct pf_annot){ .name = "errno", .type = PA_STR,
						  .s = en ? en : "?" };
	}
}

void model__syscall(struct model *m, const struct rec_syscall *r)
{
	struct thread *t = model__thread(m, r->hdr.pid, r->hdr.tid);
	struct syscall_ev e;

	/* Outside a capture window (a syscall that began inside one). */
	if (!t || model__muted(m, t))
		return;
	decode(&e, r, r->hdr.size >= sizeof(*r));
	for (int i = 0; i < m->nsinks; i++)
		if (m->sinks[i].syscall)
			m->sinks[i].syscall(m->sinks[i].ctx, t, &e);
}

/* ---------------------------------------------------------------- summary */

struct syssum {
	struct stats *by_nr;	/* NSYSCALLS + 1 series; the last: numbers beyond the table */
	uint64_t total_calls;
};

struct syssum *syssum__new(void)
{
	struct syssum *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->by_nr = calloc(NSYSCALLS + 1, sizeof(*s->by_nr));
	if (!s->by_nr) {
		free(s);
		return NULL;
	}
	return s;
}

void syssum__free(struct syssum *s)
{
	if (!s)
		return;
	for (size_t i = 0; i <= NSYSCALLS; i++)
		stats__free(&s->by_nr[i]);
	free(s->by_nr);
	free(s);
}

void syssum__add(struct syssum *s, const struct syscall_ev *e)
{
	size_t i = e->nr < NSYSCALLS ? e->nr : NSYSCALLS;

	stats__add(&s->by_nr[i], e->end_ts - e->ts);
	s->total_calls++;
}

static void on_syscall(void *ctx, struct thread *t, const struct syscall_ev *e)
{
	(void)t;
	syssum__add(ctx, e);
}

struct sink syssum__sink(struct syssum *s)
{
	return (struct sink){ .ctx = s, .syscall = on_syscall };
}

uint64_t syssum__calls(const struct syssum *s, uint32_t nr)
{
	return s->by_nr[nr < NSYSCALLS ? nr : NSYSCALLS].n;
}

void syssum__print(struct syssum *s, uint64_t threshold_ns, FILE *f)
{
	struct sumtab_row *rows;
	char (*names)[24];
	int n = 0;

	rows = calloc(NSYSCALLS + 1, sizeof(*rows));
	names = calloc(NSYSCALLS + 1, sizeof(*names));
	if (!rows || !names) {
		free(rows);
		free(names);
		return;
	}
	for (size_t i = 0; i <= NSYSCALLS; i++)
		if (s->by_nr[i].n) {
			rows[n].name = i < NSYSCALLS ? syscalls__name(i, names[n], sizeof(names[n])) :
						       "(numbers beyond the table)";
			rows[n].st = &s->by_nr[i];
			n++;
		}
	sumtab__osrt(f, SUMTAB_TEXT, rows, n, threshold_ns);
	free(rows);
	free(names);
}

/* ---------------------------------------------------------------- source */

static bool sys_traced(const struct record_opts *o)
{
	return o->syscall_threshold_ns != THRESHOLD_OFF;
}

/* Always on, tracepoints or not: with --syscall-threshold off the
 * summary's table says that syscalls were not traced. */
static int sys_init(struct session *s, void **state)
{
	struct syssum *sum = syssum__new();
	struct sink sk;

	if (!sum) {
		err("out of memory");
		return -ENOMEM;
	}
	sk = syssum__sink(sum);
	if (model__add_sink(&s->model, &sk)) {
		err("too many model sinks for the syscall summary");
		syssum__free(sum);
		return -E2BIG;
	}
	*state = sum;
	return 0;
}

static int sys_prepare(struct session *s, void *state)
{
	(void)state;
	if (sys_traced(s->o))
		s->skel->rodata->syscall_threshold_ns = s->o->syscall_threshold_ns;
	return 0;
}

/* Syscall tracepoints cost every syscall on the machine a detour
 * (docs/performance.md): attached only when asked for. */
static int sys_start(struct session *s, void *state)
{
	struct cgbpf_bpf *skel = s->skel;
	int err;

	(void)state;
	if (!sys_traced(s->o))
		return 0;
	skel->links.syscall_enter = bpf_program__attach(skel->progs.syscall_enter);
	skel->links.syscall_exit = bpf_program__attach(skel->progs.syscall_exit);
	if (!skel->links.syscall_enter || !skel->links.syscall_exit) {
		err = -errno;
		err("attaching the syscall tracepoints: %s (--syscall-threshold off "
		    "runs without them)", strerror(-err));
		return err;
	}
	return 0;
}

static int sys_rec(struct session *s, void *state, const void *data, size_t size)
{
	(void)state;
	(void)size;
	model__syscall(&s->model, data);
	return 0;
}

/* The table; ctx is the session. */
static void sys_print(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct session *s = ctx;

	(void)drops;
	syssum__print(session__source(s, &src_syscalls), s->o->syscall_threshold_ns, f);
}

static void sys_finish(struct session *s, void *state, struct capture_info *ci)
{
	(void)state;
	summary__add_section(ci, SUMMARY_OS, sys_print, s);
}

static void sys_fini(struct session *s, void *state)
{
	(void)s;
	syssum__free(state);
}

const struct source src_syscalls = {
	.name = "syscalls",
	.types = { REC_SYSCALL },
	.init = sys_init,
	.prepare = sys_prepare,
	.start = sys_start,
	.record = sys_rec,
	.finish = sys_finish,
	.fini = sys_fini,
};
