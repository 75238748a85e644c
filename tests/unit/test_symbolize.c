// SPDX-License-Identifier: MIT
/*
 * The unwinder and symbolizer on live processes with a known call chain
 * (tests/stacks/chain.c: main -> level_a -> level_b -> level_c), in every
 * flavour the Makefile builds: the copied stack of level_c must unwind and
 * symbolize to level_c, level_b, level_a, main in this order. Also: a
 * short copy is reported truncated, an exited process still symbolizes
 * what was seen, a deleted and a replaced binary symbolize through
 * map_files (root), kernel symbols from /proc/kallsyms (root).
 *
 * With --bench N it prints timings instead (not a test).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../stacks/capture.h"
#include "lib/elf/debugfile.h"
#include "lib/elf/symbolize.h"
#include "tap.h"
#include "sources/sources.h"

#define MAX_FRAMES 64

static char stacks_dir[PATH_MAX];

/* A started chain binary stopped in level_c, and what it sent. */
struct child {
	pid_t pid;
	int in_fd;		/* its stdin: closing it lets it exit */
	int out_fd;		/* its stdout, until the capture is read */
	struct capture_hdr h;
	void *stack;
};

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Starts path and reads its capture; 0 or -1. With ns_dir, the child
 * first enters a new mount namespace with a tmpfs on ns_dir holding a copy
 * of path and its .debug file, invisible from ours, and runs that copy. */
static int copy_file(const char *src, const char *dst);

static int child_spawn(const char *path, const char *ns_dir, struct child *c)
{
	int in[2], out[2];

	memset(c, 0, sizeof(*c));
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		if (ns_dir) {
			char dst[PATH_MAX + 32], dbg[PATH_MAX + 32], dbg_dst[PATH_MAX + 64];

			snprintf(dst, sizeof(dst), "%s/%s", ns_dir, strrchr(path, '/') + 1);
			snprintf(dbg, sizeof(dbg), "%s.debug", path);
			snprintf(dbg_dst, sizeof(dbg_dst), "%s.debug", dst);
			if (unshare(CLONE_NEWNS) ||
			    mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
			    mount("tmpfs", ns_dir, "tmpfs", 0, NULL) || copy_file(path, dst) ||
			    copy_file(dbg, dbg_dst))
				_exit(126);
			execl(dst, dst, (char *)NULL);
			_exit(127);
		}
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	c->out_fd = out[0];
	return 0;
}

/* Reads the capture a spawned child sends from level_c (its stdout stays
 * open: an exec'ed image sends another). */
static int child_capture(struct child *c)
{
	if (read_all(c->out_fd, &c->h, sizeof(c->h)) || c->h.magic != CAPTURE_MAGIC ||
	    c->h.len > (64u << 20))
		return -1;
	c->stack = malloc(c->h.len ? c->h.len : 1);
	if (!c->stack || read_all(c->out_fd, c->stack, c->h.len))
		return -1;
	return 0;
}

static int child_start_ns(const char *path, const char *ns_dir, struct child *c)
{
	return child_spawn(path, ns_dir, c) ? -1 : child_capture(c);
}

static int child_start(const char *path, struct child *c)
{
	return child_start_ns(path, NULL, c);
}

/* Lets the child return from level_c and exit; waits for it. */
static void child_finish(struct child *c)
{
	int st;

	if (c->in_fd > 0)
		close(c->in_fd);
	c->in_fd = -1;
	if (c->out_fd > 0)
		close(c->out_fd);
	c->out_fd = -1;
	if (c->pid > 0)
		waitpid(c->pid, &st, 0);
	c->pid = -1;
	free(c->stack);
	c->stack = NULL;
}

static int unwind(struct symbolizer *s, struct child *c, size_t len, uint64_t *ips,
		  bool *truncated)
{
	struct sym_regs r = { c->h.ip, c->h.sp, c->h.bp };

	return symbolizer__unwind(s, (pid_t)c->h.pid, (pid_t)c->h.pid, &r, c->stack,
				  len, ips, MAX_FRAMES, truncated);
}

static void symbolize(struct symbolizer *s, pid_t pid, const uint64_t *ips, int n,
		      struct sym_frame *fr)
{
	int i;

	for (i = 0; i < n; i++) {
		if (i == 0)
			symbolizer__user(s, pid, ips[i], &fr[i]);
		else
			symbolizer__user_ret(s, pid, ips[i], &fr[i]);
	}
}

static void print_frames(const struct sym_frame *fr, int n)
{
	int i;

	for (i = 0; i < n; i++)
		printf("#   #%d %#" PRIx64 " %s+%#" PRIx64 " (%s+%#" PRIx64 ")\n", i, fr[i].ip,
		       fr[i].function ? fr[i].function : "?", fr[i].function_off,
		       fr[i].module ? fr[i].module : "?", fr[i].module_off);
}

static const char *base(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	return b ? b + 1 : path ? path : "";
}

/* The four frames of the chain in order, in the expected modules. */
static bool chain_ok(const struct sym_frame *fr, int n, const char *const names[4],
		     const char *exe, const char *lib)
{
	int i;

	if (n < 5)	/* and something above main (libc, _start) */
		return false;
	for (i = 0; i < 4; i++) {
		const char *want_mod = i < 3 && lib ? lib : exe;

		if (!fr[i].function || strcmp(fr[i].function, names[i]))
			return false;
		if (strcmp(base(fr[i].module), want_mod) || !fr[i].build_id)
			return false;
	}
	return true;
}

static const char *const c_names[4] = { "level_c", "level_b", "level_a", "main" };
static const char *const cxx_names[4] = { "level_c(int)", "level_b(int)", "level_a(int)", "main" };

struct flavour {
	const char *bin;
	const char *what;
	const char *const *names;
	const char *lib;
	bool pie;
};

static const struct flavour flavours[] = {
	{ "chain_fp", "frame pointers, PIE", c_names, NULL, true },
	{ "chain_nofp", "no frame pointers (CFI), PIE", c_names, NULL, true },
	{ "chain_nopie", "no frame pointers, non-PIE", c_names, NULL, false },
	{ "chain_nopie_fp", "frame pointers, non-PIE", c_names, NULL, false },
	{ "chain_fp_nocfi", "frame pointers, no CFI at all", c_names, NULL, true },
	{ "chain_cxx", "C++, demangled", cxx_names, NULL, true },
	{ "chain_lib", "levels in a shared library", c_names, "libchain.so", true },
	{ "chain_stripped", "stripped, symbols from the .gnu_debuglink file", c_names, NULL, true },
};

static void test_flavour(const struct flavour *fl)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame fr[MAX_FRAMES], again[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES], short_ips[MAX_FRAMES];
	char path[PATH_MAX + 32];
	bool truncated = true, short_trunc = false, same = true;
	struct child c;
	int n, ns, i;

	snprintf(path, sizeof(path), "%s/%s", stacks_dir, fl->bin);
	if (!check(s && !child_start(path, &c), "%s: started, captured its stack", fl->bin)) {
		symbolizer__free(s);
		return;
	}
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	if (!check(n > 0 && chain_ok(fr, n, fl->names, fl->bin, fl->lib),
		   "%s (%s): level_c, level_b, level_a, main in order (%d frames)", fl->bin,
		   fl->what, n))
		print_frames(fr, n > 0 ? n : 0);
	check(n > 0 && !truncated, "%s: whole stack copied, unwind reached the outermost frame",
	      fl->bin);
	if (n >= 4) {
		bool rel_ok = fl->pie ? fr[0].module_off < fr[0].module_start
				      : fr[0].module_off == fr[0].ip;

		check(rel_ok && fr[0].module_start <= fr[0].ip && fr[0].ip < fr[0].module_end,
		      "%s: module offset %#" PRIx64 " is %s", fl->bin, fr[0].module_off,
		      fl->pie ? "relative to the load bias" : "the address (non-PIE)");
	}

	/* No room for more than 3 frames. */
	if (n >= 4) {
		struct sym_regs r = { c.h.ip, c.h.sp, c.h.bp };
		uint64_t few[3];
		bool tr = false;
		int nf = symbolizer__unwind(s, (pid_t)c.h.pid, (pid_t)c.h.pid, &r, c.stack, c.h.len,
					    few, 3, &tr);

		check(nf == 3 && tr && few[0] == ips[0] && few[2] == ips[2],
		      "%s: max 3 gives the first 3 frames, marked truncated", fl->bin);
	}

	/* 64 bytes of stack: not enough for level_b's caller frames. */
	ns = unwind(s, &c, c.h.len < 64 ? c.h.len : 64, short_ips, &short_trunc);
	check(ns > 0 && ns < n && short_trunc && short_ips[0] == c.h.ip,
	      "%s: a 64-byte copy gives %d frames, marked truncated", fl->bin, ns);

	/* The process exits: what was seen still resolves, from the cache. */
	child_finish(&c);
	symbolizer__proc_exit(s, (pid_t)c.h.pid);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, again);
	for (i = 0; i < n && i < 4; i++)
		same = same && again[i].function && fr[i].function &&
		       !strcmp(again[i].function, fr[i].function) &&
		       again[i].module_off == fr[i].module_off;
	check(n >= 4 && same, "%s: after exit the same frames symbolize from the cache", fl->bin);
	/* Never asked before the exit: the file's symbol table still has it. */
	if (n >= 4) {
		struct sym_frame f;
		uint64_t start = fr[1].ip - fr[1].function_off;
		int rc = symbolizer__user(s, (pid_t)c.h.pid, start, &f);

		check(!rc && f.function && !strcmp(f.function, fl->names[1]) && !f.function_off,
		      "%s: after exit an address never asked before (%s+0) still resolves",
		      fl->bin, fl->names[1]);
	}
	symbolizer__free(s);
}

/* Copies src to dst (mode 0755). */
static int copy_file(const char *src, const char *dst)
{
	char buf[65536];
	int in = open(src, O_RDONLY), out;
	ssize_t r;

	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((r = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)r) != r) {
			r = -1;
			break;
		}
	close(in);
	close(out);
	return r < 0 ? -1 : 0;
}

/* The binary is deleted (or replaced by another build) while it runs:
 * map_files still opens the mapped inode. */
static void test_gone_file(bool replace)
{
	char dir[] = "/tmp/cgbpf-sym-XXXXXX", src[PATH_MAX + 32], path[PATH_MAX + 32];
	const char *what = replace ? "replaced" : "deleted";
	struct symbolizer *s;
	struct sym_frame fr[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	bool truncated;
	struct child c;
	int n;

	if (geteuid() != 0) {
		skip("%s binary: /proc/PID/map_files needs root", what);
		return;
	}
	if (!mkdtemp(dir)) {
		check(false, "%s binary: mkdtemp: %s", what, strerror(errno));
		return;
	}
	snprintf(src, sizeof(src), "%s/chain_nofp", stacks_dir);
	snprintf(path, sizeof(path), "%s/chain_nofp", dir);
	s = symbolizer__new();
	if (!check(s && !copy_file(src, path) && !child_start(path, &c),
		   "%s binary: copy started", what)) {
		unlink(path);
		rmdir(dir);
		symbolizer__free(s);
		return;
	}
	unlink(path);
	/* A different build at the same path: its level_* lie elsewhere. */
	if (replace) {
		snprintf(src, sizeof(src), "%s/chain_fp", stacks_dir);
		copy_file(src, path);
	}
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	if (!check(n > 0 && chain_ok(fr, n, c_names, "chain_nofp", NULL) && !truncated,
		   "%s binary: level_c, level_b, level_a, main from the mapped file", what))
		print_frames(fr, n > 0 ? n : 0);
	child_finish(&c);
	unlink(path);
	rmdir(dir);
	symbolizer__free(s);
}

/* A stripped binary and its debug file that exist only in the target's
 * mount namespace: found through /proc/PID/root. */
static void test_mount_ns(void)
{
	char dir[] = "/tmp/cgbpf-symns-XXXXXX", path[PATH_MAX + 32], hidden[PATH_MAX + 32];
	struct symbolizer *s;
	struct sym_frame fr[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	bool truncated;
	struct child c;
	int n;

	if (geteuid() != 0) {
		skip("mount namespace: unshare(CLONE_NEWNS) needs root");
		return;
	}
	if (!mkdtemp(dir)) {
		check(false, "mount namespace: mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/chain_stripped", stacks_dir);
	snprintf(hidden, sizeof(hidden), "%s/chain_stripped.debug", dir);
	s = symbolizer__new();
	if (!check(s && !child_start_ns(path, dir, &c),
		   "mount namespace: stripped binary started in its own namespace")) {
		rmdir(dir);
		symbolizer__free(s);
		return;
	}
	check(access(hidden, F_OK) != 0, "mount namespace: its debug file is not visible here");
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	if (!check(n > 0 && chain_ok(fr, n, c_names, "chain_stripped", NULL),
		   "mount namespace: level_c, level_b, level_a, main via the target's root"))
		print_frames(fr, n > 0 ? n : 0);
	child_finish(&c);
	rmdir(dir);
	symbolizer__free(s);
}

/* Starts path_in_root in root the way a container runtime does: its own
 * mount namespace whose root is root (pivot_root, the old root detached:
 * its paths in /proc/PID/maps are the container's), the host's /usr and
 * /proc bound in, /lib and /lib64 linked to /usr as images have them;
 * then reads its capture. */
static int child_start_root(const char *root, const char *path_in_root, struct child *c)
{
	int in[2], out[2];

	memset(c, 0, sizeof(*c));
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		char usr[PATH_MAX + 8], proc[PATH_MAX + 8];

		dup2(in[0], 0);
		dup2(out[1], 1);
		snprintf(usr, sizeof(usr), "%s/usr", root);
		snprintf(proc, sizeof(proc), "%s/proc", root);
		if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount(root, root, NULL, MS_BIND, NULL) ||
		    mount("/usr", usr, NULL, MS_BIND | MS_REC, NULL) ||
		    mount("/proc", proc, NULL, MS_BIND | MS_REC, NULL) || chdir(root) ||
		    syscall(SYS_pivot_root, ".", "oldroot") || umount2("/oldroot", MNT_DETACH) ||
		    chdir("/"))
			_exit(126);
		execl(path_in_root, path_in_root, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	c->out_fd = out[0];
	return child_capture(c);
}

/* The build id and .gnu_debuglink of an ELF file. */
static bool debug_ids(const char *path, struct debugfile_req *q, uint8_t *id, size_t idcap,
		      char *link, size_t linkcap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	const void *bits = NULL;
	const char *l;
	ssize_t n;
	GElf_Word crc = 0;
	bool ok = false;

	if (e && (n = dwelf_elf_gnu_build_id(e, &bits)) > 0 && (size_t)n <= idcap &&
	    (l = dwelf_elf_gnu_debuglink(e, &crc))) {
		memcpy(id, bits, n);
		snprintf(link, linkcap, "%s", l);
		q->build_id = id;
		q->build_id_len = n;
		q->link = link;
		q->crc = crc;
		ok = true;
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return ok;
}

static int mkdirs(const char *root, const char *const *dirs)
{
	char p[PATH_MAX + 64];

	for (; *dirs; dirs++) {
		snprintf(p, sizeof(p), "%s/%s", root, *dirs);
		if (mkdir(p, 0755) && errno != EEXIST)
			return -1;
	}
	return 0;
}

static void rm_tree(const char *root)
{
	char cmd[PATH_MAX + 16];
	pid_t pid = fork();

	snprintf(cmd, sizeof(cmd), "%s", root);
	if (pid == 0) {
		execlp("rm", "rm", "-rf", "--one-file-system", cmd, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/*
 * A container's root is untrusted: a symbolic link it plants where a
 * debug file is looked for must resolve inside that root, never in
 * cgbpf's (absolute link targets reached through /proc/PID/root lead to
 * the host's files). debugfile__find on a fake root directory: an
 * absolute link to the host's genuine debug file is not followed out,
 * links inside the root are, a FIFO is never opened, a debug file of
 * another build is refused.
 */
static void test_debugfile_in_root(void)
{
	char root[] = "/tmp/cgbpf-root-XXXXXX", p[PATH_MAX + 64], host_dbg[PATH_MAX + 32],
	     bin[PATH_MAX + 32], found[PATH_MAX], link[256];
	static const char *const dirs[] = { "usr", "usr/lib", "usr/lib/.debug", "usr/lib/debug",
					    "usr/lib/debug/usr", "usr/lib/debug/usr/lib", "real",
					    NULL };
	struct debugfile_req q = { .path = "/usr/lib/chain_stripped" }, crc_only;
	uint8_t id[64];
	int rootfd, fd;

	snprintf(bin, sizeof(bin), "%s/chain_stripped", stacks_dir);
	snprintf(host_dbg, sizeof(host_dbg), "%s/chain_stripped.debug", stacks_dir);
	if (!check(debug_ids(bin, &q, id, sizeof(id), link, sizeof(link)),
		   "debug file in root: chain_stripped has a build id and a debuglink") ||
	    !check(mkdtemp(root) && !mkdirs(root, dirs), "debug file in root: fake root made"))
		return;
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(p, sizeof(p), "%s/usr/lib/chain_stripped", root);
	copy_file(bin, p);
	/* The planted link: absolute, to the host's genuine debug file. */
	snprintf(p, sizeof(p), "%s/usr/lib/%s", root, link);
	check(!symlink(host_dbg, p), "debug file in root: link planted to %s", host_dbg);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	check(fd >= 0 && debugfile__matches(fd, &q),
	      "debug file in root: followed from our root, the link reaches a matching debug "
	      "file on the host (the attack is real)");
	if (fd >= 0)
		close(fd);
	fd = debugfile__find(rootfd, -1, &q, found, sizeof(found));
	check(fd == -ENOENT, "debug file in root: resolved inside the root, the planted link "
	      "leads nowhere (%d, %s)", fd, found);
	if (fd >= 0)
		close(fd);
	/* By build id in the host's root: found there, as cgbpf's own
	 * debug packages would be (the fake root stands for it here). */
	crc_only = q;
	crc_only.build_id = NULL;
	crc_only.build_id_len = 0;
	fd = debugfile__find(rootfd, -1, &crc_only, found, sizeof(found));
	check(fd == -ENOENT, "debug file in root: the same by CRC alone (%d)", fd);
	if (fd >= 0)
		close(fd);
	/* A FIFO where the debug file is looked for: an open for reading
	 * would wait for a writer forever. */
	unlink(p);
	check(!mkfifo(p, 0644), "debug file in root: FIFO planted");
	alarm(20);
	fd = debugfile__find(rootfd, -1, &q, found, sizeof(found));
	alarm(0);
	check(fd == -ENOENT, "debug file in root: the FIFO is not opened (%d)", fd);
	if (fd >= 0)
		close(fd);
	unlink(p);
	/* Another build's debug file: refused by build id. */
	snprintf(p, sizeof(p), "%s/usr/lib/.debug/%s", root, link);
	snprintf(bin, sizeof(bin), "%s/libchain.so", stacks_dir);
	copy_file(bin, p);
	fd = debugfile__find(rootfd, -1, &q, found, sizeof(found));
	check(fd == -ENOENT, "debug file in root: another build's file is refused (%d)", fd);
	if (fd >= 0)
		close(fd);
	/* The genuine one, reached by an absolute link that stays in the
	 * root (as the container itself resolves it). */
	unlink(p);
	snprintf(p, sizeof(p), "%s/real/x.debug", root);
	copy_file(host_dbg, p);
	snprintf(p, sizeof(p), "%s/usr/lib/debug/usr/lib/%s", root, link);
	check(!symlink("/real/x.debug", p), "debug file in root: in-root link made");
	fd = debugfile__find(rootfd, -1, &q, found, sizeof(found));
	check(fd >= 0 && !strcmp(found, "/usr/lib/debug/usr/lib/chain_stripped.debug"),
	      "debug file in root: an absolute link inside the root is followed there (%s)", found);
	if (fd >= 0)
		close(fd);
	/* By build id, in the host's root only when nothing in the target's. */
	check(!debugfile__link_name("../../etc/passwd") && !debugfile__link_name("/etc/shadow") &&
	      !debugfile__link_name("..") && !debugfile__link_name("") &&
	      debugfile__link_name("libx.so.debug"), "debug file in root: debuglink names that "
	      "are paths are refused");
	close(rootfd);
	rm_tree(root);
}

/*
 * The same end to end: a stripped program in a container-like root whose
 * debug file is an absolute link to the host's genuine one. Its frames
 * must stay unnamed (the link resolves inside the root: nothing there);
 * with the debug file inside the root they are named.
 */
static void test_container_debuglink(void)
{
	char root[] = "/tmp/cgbpf-ctr-XXXXXX", p[PATH_MAX + 64], host_dbg[PATH_MAX + 32],
	     bin[PATH_MAX + 32];
	static const char *const dirs[] = { "usr", "proc", "oldroot", "app", "app/.debug", NULL };
	struct symbolizer *s;
	struct sym_frame fr[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	bool truncated;
	struct child c;
	int n;

	if (geteuid() != 0) {
		skip("container root: mount namespaces need root");
		return;
	}
	snprintf(bin, sizeof(bin), "%s/chain_stripped", stacks_dir);
	snprintf(host_dbg, sizeof(host_dbg), "%s/chain_stripped.debug", stacks_dir);
	if (!check(mkdtemp(root) && !mkdirs(root, dirs), "container root: fake root made"))
		return;
	snprintf(p, sizeof(p), "%s/lib", root);
	symlink("usr/lib", p);
	snprintf(p, sizeof(p), "%s/lib64", root);
	symlink("usr/lib64", p);
	snprintf(p, sizeof(p), "%s/app/chain_stripped", root);
	copy_file(bin, p);
	snprintf(p, sizeof(p), "%s/app/chain_stripped.debug", root);
	symlink(host_dbg, p);
	for (int inside = 0; inside < 2; inside++) {
		s = symbolizer__new();
		if (!check(s && !child_start_root(root, "/app/chain_stripped", &c),
			   "container root: stripped program started in it%s",
			   inside ? " (debug file inside)" : " (debug file linked to the host's)")) {
			child_finish(&c);
			symbolizer__free(s);
			break;
		}
		n = unwind(s, &c, c.h.len, ips, &truncated);
		symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
		if (!inside) {
			bool named = false;

			for (int i = 0; i < n; i++)
				named |= fr[i].function && !strncmp(fr[i].function, "level_", 6);
			if (!check(n > 0 && !named, "container root: the link to the host's debug file is not "
				   "followed: level_* stay unnamed"))
				print_frames(fr, n > 0 ? n : 0);
			/* Now the debug file where the container has it. */
			snprintf(p, sizeof(p), "%s/app/.debug/chain_stripped.debug", root);
			copy_file(host_dbg, p);
		} else if (!check(n > 0 && chain_ok(fr, n, c_names, "chain_stripped", NULL),
				  "container root: with the debug file inside it, level_c, level_b, "
				  "level_a, main")) {
			print_frames(fr, n > 0 ? n : 0);
		}
		child_finish(&c);
		symbolizer__free(s);
	}
	rm_tree(root);
}

/* A library dlopened after the maps were first read: found once the
 * process is invalidated (as on an mmap event). */
static void test_dlopen(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame fr[MAX_FRAMES], f;
	uint64_t ips[MAX_FRAMES];
	char path[PATH_MAX + 32];
	bool truncated;
	struct child c;
	int n;

	snprintf(path, sizeof(path), "%s/chain_dl", stacks_dir);
	if (!check(s && !child_spawn(path, NULL, &c), "dlopen: chain_dl started")) {
		symbolizer__free(s);
		return;
	}
	/* First use: maps read before libchain.so is there. */
	symbolizer__user(s, c.pid, 0x1000, &f);
	if (!check(write(c.in_fd, "g", 1) == 1 && !child_capture(&c),
		   "dlopen: libchain.so loaded, stack captured")) {
		child_finish(&c);
		symbolizer__free(s);
		return;
	}
	symbolizer__invalidate(s, c.pid);
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	if (!check(n > 0 && chain_ok(fr, n, c_names, "chain_dl", "libchain.so") && !truncated,
		   "dlopen: level_c, level_b, level_a in the dlopened library, then main"))
		print_frames(fr, n > 0 ? n : 0);
	child_finish(&c);
	symbolizer__free(s);
}

/* The process execs another non-PIE image, loaded where the first one
 * was: after symbolizer__invalidate the new image's symbols are used. */
static void test_exec(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame fr[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	char path[PATH_MAX + 32], next[PATH_MAX + 32];
	bool truncated;
	struct child c;
	int n;

	snprintf(path, sizeof(path), "%s/chain_nopie", stacks_dir);
	snprintf(next, sizeof(next), "%s/chain_nopie_fp", stacks_dir);
	setenv("CHAIN_EXEC", next, 1);
	if (!check(s && !child_start(path, &c), "exec: chain_nopie started")) {
		unsetenv("CHAIN_EXEC");
		symbolizer__free(s);
		return;
	}
	unsetenv("CHAIN_EXEC");
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	check(n > 0 && chain_ok(fr, n, c_names, "chain_nopie", NULL), "exec: first image symbolized");
	free(c.stack);
	c.stack = NULL;
	if (!check(write(c.in_fd, "e", 1) == 1 && !child_capture(&c),
		   "exec: chain_nopie_fp exec'ed in the same process, stack captured")) {
		child_finish(&c);
		symbolizer__free(s);
		return;
	}
	symbolizer__invalidate(s, c.pid);
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	if (!check(n > 0 && chain_ok(fr, n, c_names, "chain_nopie_fp", NULL) && !truncated,
		   "exec: level_c, level_b, level_a, main of the new image"))
		print_frames(fr, n > 0 ? n : 0);
	child_finish(&c);
	symbolizer__free(s);
}

/* The process exits after its maps were read but before any of its
 * files was opened (no proc_exit yet): the files, unchanged at their
 * paths, are opened there, device and inode checked. */
static void test_exit_before_load(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame fr[MAX_FRAMES], f;
	uint64_t ips[MAX_FRAMES];
	char path[PATH_MAX + 32];
	bool truncated;
	struct child c;
	pid_t pid;
	int n;

	snprintf(path, sizeof(path), "%s/chain_nofp", stacks_dir);
	if (!check(s && !child_start(path, &c), "exit before load: chain_nofp started")) {
		symbolizer__free(s);
		return;
	}
	pid = c.pid;
	symbolizer__user(s, pid, 0x1000, &f);	/* maps read, nothing opened */
	close(c.in_fd);
	c.in_fd = -1;
	waitpid(pid, NULL, 0);
	c.pid = -1;
	n = unwind(s, &c, c.h.len, ips, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	if (!check(n > 0 && chain_ok(fr, n, c_names, "chain_nofp", NULL),
		   "exit before load: level_c, level_b, level_a, main from the files at their paths"))
		print_frames(fr, n > 0 ? n : 0);
	child_finish(&c);
	symbolizer__free(s);
}

/* An ip outside every module (JIT code): frame pointers on the copy. */
static void test_fp_fallback(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame fr[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	char path[PATH_MAX + 32];
	struct sym_regs r;
	bool truncated, ok;
	struct child c;
	int n;

	snprintf(path, sizeof(path), "%s/chain_fp", stacks_dir);
	if (!check(s && !child_start(path, &c), "jit fallback: chain_fp started")) {
		symbolizer__free(s);
		return;
	}
	r = (struct sym_regs){ 0x10000, c.h.sp, c.h.bp };
	n = symbolizer__unwind(s, (pid_t)c.h.pid, (pid_t)c.h.pid, &r, c.stack, c.h.len, ips,
			       MAX_FRAMES, &truncated);
	symbolize(s, (pid_t)c.h.pid, ips, n > 0 ? n : 0, fr);
	ok = n >= 4 && ips[0] == 0x10000 && !fr[0].function && !fr[0].module;
	ok = ok && fr[1].function && !strcmp(fr[1].function, "level_b");
	ok = ok && fr[2].function && !strcmp(fr[2].function, "level_a");
	ok = ok && fr[3].function && !strcmp(fr[3].function, "main");
	if (!check(ok, "jit fallback: unknown pc, then level_b, level_a, main by frame pointers"))
		print_frames(fr, n > 0 ? n : 0);
	child_finish(&c);
	symbolizer__free(s);
}

/* The vDSO of a process (clock_gettime lives there) symbolizes. */
static void test_vdso(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t base = getauxval(AT_SYSINFO_EHDR), addr = 0;
	struct sym_frame fr;
	Elf_Scn *scn = NULL;
	Elf *e;
	int rc;

	if (!base || elf_version(EV_CURRENT) == EV_NONE) {
		skip("vdso: none here");
		symbolizer__free(s);
		return;
	}
	/* Our own vDSO image: the address of __vdso_clock_gettime in it. */
	e = elf_memory((char *)(uintptr_t)base, 8192);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym))
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (name && !strcmp(name, "__vdso_clock_gettime"))
				addr = base + sym.st_value;
		}
	}
	elf_end(e);
	if (!addr) {
		skip("vdso: no __vdso_clock_gettime in it");
		symbolizer__free(s);
		return;
	}
	rc = symbolizer__user(s, getpid(), addr + 1, &fr);
	check(!rc && fr.function && strstr(fr.function, "clock_gettime") && fr.function_off == 1 &&
	      fr.module && !strcmp(fr.module, "[vdso]"),
	      "vdso: __vdso_clock_gettime+1 (%s+%#" PRIx64 " in %s)",
	      fr.function ? fr.function : "?", fr.function_off, fr.module ? fr.module : "?");
	symbolizer__free(s);
}

static void test_kernel(void)
{
	struct symbolizer *s = symbolizer__new();
	unsigned long long addr = 0, a;
	char line[512], type, name[256];
	struct sym_frame fr;
	FILE *f = fopen("/proc/kallsyms", "r");
	int rc;

	/* Read independently: the address of a well-known text symbol. */
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, name) == 3 &&
		    (type == 'T' || type == 't') && !strcmp(name, "schedule")) {
			addr = a;
			break;
		}
	}
	if (f)
		fclose(f);
	if (!addr) {
		rc = symbolizer__kernel(s, 0xffffffff81000000ull, &fr);
		check(rc < 0 && !fr.function && fr.kernel,
		      "kernel: without readable kallsyms addresses no name (rc %d)", rc);
		skip("kernel symbols: /proc/kallsyms shows no addresses (needs root)");
		symbolizer__free(s);
		return;
	}
	rc = symbolizer__kernel(s, addr, &fr);
	check(!rc && fr.function && !strcmp(fr.function, "schedule") && fr.function_off == 0 &&
	      fr.kernel, "kernel: schedule's address is schedule+0");
	rc = symbolizer__kernel(s, addr + 3, &fr);
	check(!rc && fr.function && !strcmp(fr.function, "schedule") && fr.function_off == 3,
	      "kernel: schedule+3");
	symbolizer__free(s);
}

/* An unknown, dead pid is an error with only ip filled. */
static void test_unknown_pid(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame fr;
	pid_t pid = fork();
	int rc, st;

	if (pid == 0)
		_exit(0);
	waitpid(pid, &st, 0);
	rc = symbolizer__user(s, pid, 0x401000, &fr);
	check(rc == -ESRCH && fr.ip == 0x401000 && !fr.function && !fr.module,
	      "a process gone before its first use: error %d, ip kept", rc);
	symbolizer__free(s);
}

static double secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	sources__init();
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	size_t i;

	if (n <= 0)
		return 1;
	elf_version(EV_CURRENT);
	/* The dynamically linked libdw of this test would ask debuginfod
	 * servers (cgbpf itself links libdw without its client). */
	unsetenv("DEBUGINFOD_URLS");
	self[n] = 0;
	/* build/unit/test_symbolize -> build/stacks */
	snprintf(stacks_dir, sizeof(stacks_dir), "%s/../stacks", dirname(self));
	signal(SIGPIPE, SIG_IGN);
	(void)secs;

	for (i = 0; i < sizeof(flavours) / sizeof(flavours[0]); i++)
		test_flavour(&flavours[i]);
	test_fp_fallback();
	test_dlopen();
	test_exec();
	test_exit_before_load();
	test_gone_file(false);
	test_gone_file(true);
	test_mount_ns();
	test_debugfile_in_root();
	test_container_debuglink();
	test_vdso();
	test_kernel();
	test_unknown_pid();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
