// SPDX-License-Identifier: MIT
/*
 * capture/: the capture runner. `record` and `monitor` (record.c: the
 * targets, the BPF object, the ring loop, signals; monitor.c: metrics
 * and the flight recorder; traceout.c: the output files). It runs the
 * sources of user/sources through core/source.h; beside trace/, which it
 * never includes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "agg.h"
#include "cgbpf.skel.h"
#include "capture/monitor.h"
#include "capture/ptinject.h"
#include "capture/record.h"
#include "capture/traceout.h"
#include "core/apilib.h"
#include "core/attach.h"
#include "core/ingest.h"
#include "core/inject.h"
#include "core/model.h"
#include "core/session.h"
#include "core/source.h"
#include "core/ustr.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "lib/procfs.h"
#include "out/capwin.h"
#include "out/pfsink.h"
#include "out/pfsplit.h"
#include "out/summary.h"

#define POLL_MS 50
#define FLUSH_NS (250ull * 1000000)
#define SCAN_NS (1000ull * 1000000)

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t dump_requested;

static void on_usr1(int sig)
{
	dump_requested = 1;
}

static void on_signal(int sig)
{
	if (stop_requested)
		_exit(128 + sig);	/* second Ctrl-C: leave at once */
	stop_requested = sig;
}


/* ---------------------------------------------------------------- checks */

static int check_caps(void)
{
	char line[256];
	uint64_t eff = 0;
	FILE *f;

	if (geteuid() == 0)
		return 0;
	f = fopen("/proc/self/status", "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "CapEff: %" SCNx64, &eff) == 1)
				break;
		fclose(f);
	}
	/* CAP_BPF = 39, CAP_PERFMON = 38, CAP_SYS_ADMIN = 21. */
	if (eff & (1ull << 21))
		return 0;
	if (!(eff & (1ull << 39)) || !(eff & (1ull << 38))) {
		err("not root and missing %s%s%s: run with sudo, or grant them "
		    "(setcap cap_bpf,cap_perfmon+ep cgbpf)",
		    eff & (1ull << 39) ? "" : "CAP_BPF",
		    !(eff & (1ull << 39)) && !(eff & (1ull << 38)) ? " and " : "",
		    eff & (1ull << 38) ? "" : "CAP_PERFMON");
		return -EPERM;
	}
	return 0;
}

static int check_btf(void)
{
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		err("this kernel has no BTF (/sys/kernel/btf/vmlinux): cgbpf needs a kernel "
		    ">= 5.8 built with CONFIG_DEBUG_INFO_BTF=y");
		return -ENOTSUP;
	}
	return 0;
}

/* ---------------------------------------------------------------- targets */

/* pid is a target from now on (user space's view; BPF's is the targets map). */
static void mark_live(struct session *r, uint32_t pid)
{
	hmap__put(&r->live, pid, 1);
	hmap__put(&r->traced, pid, 1);
}

static void add_target(struct session *r, pid_t pid)
{
	uint8_t one = 1;
	uint32_t k = pid;

	mark_live(r, pid);
	if (bpf_map__update_elem(r->skel->maps.targets, &k, sizeof(k), &one, sizeof(one), BPF_ANY))
		warn("pid %d: cannot mark it traced: %s", pid, strerror(errno));
}

/*
 * The mmap watch (bpf/proc.bpf.c): mmap_lock_released where the kernel's
 * prototype matches (attach__prepare loads one of the two), else
 * sys_exit. The first costs traced calls nothing and stays on while any
 * target lives. The second is attached only while it is needed: an
 * enabled syscall tracepoint sends every syscall on the machine through
 * the slow path, the uretprobe return of each traced call included (~100
 * ns a call here).
 */
static void update_mmap_watch(struct session *r)
{
	struct cgbpf_bpf *skel = r->skel;
	bool lock = bpf_program__autoload(skel->progs.mmap_lock_mmap);
	struct bpf_program *prog = lock ? skel->progs.mmap_lock_mmap : skel->progs.sys_exit_mmap;
	struct bpf_link **link = lock ? &skel->links.mmap_lock_mmap : &skel->links.sys_exit_mmap;

	/* Libraries can come late after the first one: NVTX's injection
	 * library is dlopen'ed at the first NVTX call, long after libcuda. The
	 * sys_exit watch stays on while targets live when that matters (NVTX
	 * traced) or costs nothing more (the syscall tracepoint is attached
	 * anyway); otherwise only until every target has mapped libcuda. */
	bool want = r->waiting.count || (r->o->all && !r->o->npids) ||
		    (r->live.count && (lock || r->o->syscall_threshold_ns != THRESHOLD_OFF ||
				       (r->o->trace_mask & TRACE_BIT(LIB_NVTX))));

	if (want && !*link) {
		*link = bpf_program__attach(prog);
		if (!*link)
			warn("watching for libcuda to be loaded: %s; relying on a 1 s rescan",
			     strerror(errno));
		else
			dbg("mmap watch on (%s; %zu process(es) without libcuda)",
			    lock ? "mmap_lock_released" : "sys_exit", r->waiting.count);
	} else if (!want && *link) {
		bpf_link__destroy(*link);
		*link = NULL;
		dbg("mmap watch off");
	}
}

/* Test hook (tests/integration/test_gaps.py): CGBPF_TEST_MMAP_LAG_MS=N
 * makes the consumer wait N ms before every scan of a process's maps for
 * files to probe, as a consumer far behind would. */
static void mmap_lag(void)
{
	static long ms = -1;

	if (ms < 0) {
		const char *e = getenv("CGBPF_TEST_MMAP_LAG_MS");

		ms = e ? atol(e) : 0;
	}
	if (ms > 0)
		usleep((useconds_t)ms * 1000);
}

static void scan(struct session *r, pid_t pid)
{
	bool mapped = false;
	int n;

	mmap_lag();
	n = attach__scan(r->attach, pid, &mapped);

	if (n < 0 && n != -ENOENT && n != -ESRCH)
		dbg("pid %d: scanning maps: %s", pid, strerror(-n));
	if (mapped || n == -ENOENT || n == -ESRCH || !hmap__get(&r->live, pid))
		hmap__del(&r->waiting, pid, NULL);
	else
		hmap__put(&r->waiting, pid, 1);
	update_mmap_watch(r);
}

/* pid exited. reported: by its exit record, whose program cleared its
 * byte in the targets map at the exit itself; not again here, where the
 * record may be read after the pid was given to a new target (its fork,
 * read from the ctl ring ahead of this ring, or simply later). */
static void target_gone(struct session *r, pid_t pid, bool reported)
{
	uint32_t k = pid;
	uint8_t zero = 0;

	hmap__del(&r->waiting, pid, NULL);
	hmap__del(&r->forked, pid, NULL);
	hmap__del(&r->forked_win, pid, NULL);
	attach__forget(r->attach, pid);
	/* A monitor runs for weeks and must forget the dead; a capture keeps
	 * them for records that are read late. */
	if (r->mon)
		hmap__del(&r->traced, pid, NULL);
	if (hmap__del(&r->live, pid, NULL)) {
		dbg("pid %d exited", pid);
		if (!reported)
			bpf_map__update_elem(r->skel->maps.targets, &k, sizeof(k), &zero,
					     sizeof(zero), BPF_ANY);
	}
}

/* Safety net for exits and mappings the BPF side could not report. */
static void sweep(struct session *r)
{
	uint64_t pid;
	pid_t *gone = NULL;
	size_t ngone = 0;

	if (r->child > 0 && !r->child_reaped && waitpid(r->child, &r->child_status, WNOHANG) > 0)
		r->child_reaped = true;
	gone = malloc((r->live.count + 1) * sizeof(*gone));
	if (!gone)
		return;
	for (size_t it = 0; hmap__next(&r->live, &it, &pid, NULL);) {
		if (!procfs__alive(pid))
			gone[ngone++] = pid;
		else
			scan(r, pid);
	}
	for (size_t i = 0; i < ngone; i++)
		target_gone(r, gone[i], false);
	free(gone);
}

/* ---------------------------------------------------------------- -a */

/* Whether pid sees cgbpf's own root (not a container's): its loader then
 * finds what the host's cache and default directories hold. */
static bool same_root(const struct session *r, pid_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/root", pid);
	return !stat(path, &st) && st.st_dev == r->root_dev && st.st_ino == r->root_ino;
}


#define SYSTEM_SCAN_NS (10000ull * 1000000)
#define CG_WALK_DEPTH 12

/* Finds the cgroup directory whose name contains id (a container id),
 * depth first below dir; the shallowest match wins (a container's own
 * cgroup, not the sub-cgroups some runtimes make inside it). */
static void find_cgroup(const char *dir, const char *id, int depth, char *best, int *best_depth,
			int *matches)
{
	DIR *d;
	struct dirent *e;

	if (depth > CG_WALK_DEPTH || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		char path[4096];

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (strstr(e->d_name, id)) {
			(*matches)++;
			if (*best_depth < 0 || depth < *best_depth) {
				snprintf(best, 4096, "%s", path);
				*best_depth = depth;
			}
			continue;	/* its children are the same container */
		}
		find_cgroup(path, id, depth + 1, best, best_depth, matches);
	}
	closedir(d);
}

/* --cgroup arguments to open cgroup v2 directories; -errno after a
 * message when one names no cgroup. */
static int resolve_cgroups(struct session *r)
{
	const struct record_opts *o = r->o;
	int err;

	if (!o->ncgroup)
		return 0;
	err = procfs__cgroup2_mount(r->cgmount, sizeof(r->cgmount));
	if (err) {
		err("--cgroup needs the cgroup v2 hierarchy mounted (none in /proc/self/mountinfo)");
		return err;
	}
	for (size_t i = 0; i < o->ncgroup; i++) {
		const char *arg = o->cgroups[i];
		char path[4096];
		struct stat st;
		size_t ml = strlen(r->cgmount);

		if (arg[0] == '/') {
			/* Relative to the mount, or a full path below it. */
			if (!strncmp(arg, r->cgmount, ml) && (arg[ml] == '/' || !arg[ml]))
				arg += ml;
			snprintf(path, sizeof(path), "%s%s", r->cgmount, arg);
		} else {
			int best_depth = -1, matches = 0;
			size_t n = strlen(arg);

			if (n < 4 || strspn(arg, "0123456789abcdefABCDEF") != n) {
				err("--cgroup %s: not a cgroup path (starts with /) nor a container "
				    "id (4 or more hex digits)", arg);
				return -EINVAL;
			}
			find_cgroup(r->cgmount, arg, 0, path, &best_depth, &matches);
			if (best_depth < 0) {
				err("--cgroup %s: no cgroup under %s has this container id", arg,
				    r->cgmount);
				return -ENOENT;
			}
			dbg("--cgroup %s: %s (%d match(es))", arg, path, matches);
		}
		if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
			err("--cgroup %s: %s is not a cgroup directory", o->cgroups[i], path);
			return -ENOENT;
		}
		r->cg_fd[r->ncg] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r->cg_rel[r->ncg] = strdup(path + strlen(r->cgmount));
		if (r->cg_fd[r->ncg] < 0 || !r->cg_rel[r->ncg]) {
			err = r->cg_fd[r->ncg] < 0 ? -errno : -ENOMEM;
			err("--cgroup %s: %s", o->cgroups[i], strerror(-err));
			if (r->cg_fd[r->ncg] >= 0)
				close(r->cg_fd[r->ncg]);
			free(r->cg_rel[r->ncg]);
			return err;
		}
		r->ncg++;
	}
	return 0;
}

/* The -a filters, for a process that already runs (BPF applies the same
 * ones to processes that map a library later). */
static bool passes_filters(struct session *r, pid_t pid)
{
	const struct record_opts *o = r->o;

	if (o->ncomm) {
		char comm[16];
		size_t i;

		if (procfs__comm(pid, 0, comm, sizeof(comm)))
			return false;
		for (i = 0; i < o->ncomm && strcmp(comm, o->comms[i]); i++)
			;
		if (i == o->ncomm)
			return false;
	}
	if (r->ncg) {
		char cg[4096];
		size_t i;

		if (procfs__cgroup(pid, cg, sizeof(cg)))
			return false;
		for (i = 0; i < r->ncg; i++) {
			size_t n = strlen(r->cg_rel[i]);

			/* The cgroup itself or one below it ("/" is the root). */
			if (!n || (!strncmp(cg, r->cg_rel[i], n) && (cg[n] == '/' || !cg[n])))
				break;
		}
		if (i == r->ncg)
			return false;
	}
	return true;
}

static void proc_event(struct session *r, enum src_proc ev, uint32_t pid, uint64_t ts);

struct scan_all_ctx {
	struct session *r;
	size_t found;
	bool resolve;		/* also probe what each process would load */
};

static int scan_one(pid_t pid, void *ctx)
{
	struct scan_all_ctx *c = ctx;
	struct session *r = c->r;
	bool mapped = false;
	int n;

	if (pid == getpid() || hmap__get(&r->live, pid) || !passes_filters(r, pid))
		return 0;
	if (c->resolve)
		attach__resolve(r->attach, pid, NULL, NULL, same_root(r, pid));
	n = attach__scan(r->attach, pid, &mapped);
	if (n < 0 && n != -ENOENT && n != -ESRCH && n != -EACCES)
		dbg("pid %d: scanning maps: %s", pid, strerror(-n));
	if (!mapped || !procfs__alive(pid))
		return 0;
	add_target(r, pid);
	model__proc(&r->model, pid);
	/* What it maps already, for the sources (its injection library's
	 * sites): as for -p. A monitor hears of no call but NCCL's, so a
	 * running CUDA process would otherwise wait for its next mapping. */
	proc_event(r, SRC_PROC_CHANGED, pid, session__now());
	c->found++;
	return 0;
}

/* -a: every running process that maps a traced library (and passes the
 * filters) becomes a target; at start, then as a slow safety net for what
 * the mmap watch could not report. */
static size_t scan_all(struct session *r, bool resolve)
{
	struct scan_all_ctx c = { .r = r, .resolve = resolve };

	procfs__for_each_pid(scan_one, &c);
	return c.found;
}

/* ---------------------------------------------------------------- records */

/* A source's trigger (session.trigger): the monitor's flight recorder. */
static void monitor_trigger(struct session *s, const char *why)
{
	if (s->mon)
		monitor__trigger(s->mon, why);
}

/* Samples, backtraces and the runtime's kernel names (host stubs) need
 * the symbolizer to have read a process's files while it is alive. */
/* Tells every source of a change in a target's life (user/core/source.h). */
static void proc_event(struct session *r, enum src_proc ev, uint32_t pid, uint64_t ts)
{
	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->proc)
			r->src[i]->proc(r, r->src_state[i], ev, pid, ts);
}

/*
 * A library file probed only once a process had mapped it (nobody could
 * predict its path): how long after the mapping its probes were live is
 * said in the log, on the process's track and in the summary, since calls
 * made in between were not seen.
 */
static void add_late(struct session *r, uint32_t pid, uint64_t ts, uint64_t window,
		     const char *what, const char *comm)
{
	struct proc *p = model__proc_as(&r->model, pid, comm);
	struct late_attach *l = NULL;

	/* The summary's rows are the first LATE_ROWS; the rest are counted
	 * (hours of churn must not grow this). */
	if (r->nlate < LATE_ROWS && r->nlate == r->caplate) {
		size_t nc = r->caplate ? r->caplate * 2 : 16;
		struct late_attach *n = realloc(r->late, nc * sizeof(*n));

		if (n) {
			r->late = n;
			r->caplate = nc;
		}
	}
	if (r->nlate < r->caplate && r->nlate < LATE_ROWS) {
		l = &r->late[r->nlate];
		memset(l, 0, sizeof(*l));
		l->pid = pid;
		l->window_ns = window;
		snprintf(l->comm, sizeof(l->comm), "%s", p ? p->comm : "?");
		snprintf(l->file, sizeof(l->file), "%s", what);
	}
	r->nlate++;
	r->late_ns += window;
	if (r->pt && r->meta && p) {
		struct pf_annot a[] = {
			{ .name = "library", .type = PA_STR, .s = what },
			{ .name = "probed_after_us", .type = PA_UINT, .u = window / 1000 },
		};

		pftrace__instant(r->pt, r->meta, ts, UUID_PROCESS(pid),
				 "cgbpf: probes came after this point (calls may be missing)",
				 a, 2);
	}
}

static void report_late(struct session *r, const struct rec_mmap *m, uint64_t live)
{
	uint64_t window = live - m->hdr.ts;
	char name[REC_MMAP_NAME + 1];

	snprintf(name, sizeof(name), "%.*s", REC_MMAP_NAME, m->name);
	info("pid %u: %s probed %.3f ms after it was mapped; calls made meanwhile may be "
	     "missing", m->hdr.pid, name, window / 1e6);
	add_late(r, m->hdr.pid, m->hdr.ts, window, name, NULL);
}

/*
 * A forked child runs its parent's code, breakpoints included, before its
 * own probes exist: a uprobe_multi link's filter is the parent's task, and
 * the one probe the kernel copies into a child at fork (a perf-event
 * uprobe with attr.inherit) runs no BPF program there, slows each fork by
 * ~120 ms and makes fork fail with EACCES in an unprivileged process
 * (tests/bpf/inherit_probe.c, docs/design.md). If the child turns out to
 * call a traced API, how long it ran unprobed is reported as for a late
 * mapping.
 */
static void note_fork(struct session *r, uint32_t child, uint64_t fork_ts, uint64_t now)
{
	uint64_t window = now > fork_ts ? now - fork_ts : 0;

	dbg("pid %u: probes in place %.3f ms after its fork", child, window / 1e6);
	if (hmap__put(&r->forked, child, fork_ts) || hmap__put(&r->forked_win, child, window))
		hmap__del(&r->forked, child, NULL);
}

/*
 * A forked child exited before any call of it was traced. When it exited
 * before its probes were in place, whatever it called was missed: said
 * as for a late mapping. One that lived past its window is said only
 * when the kernel shows it entered a probed function (REC_EXIT_UPROBE_HIT,
 * bpf/events.h): with no traced call, that was before its probes. A
 * worker that never calls the API (a DataLoader's) has no such mark and
 * is not noise. What is left unsaid: a child that lived past its window
 * and called only functions probed on entry alone whose first instruction
 * the kernel emulates (no XOL area made), or any child on a kernel whose
 * exit tracepoint runs after the mm is gone (docs/design.md).
 */
static void child_exit(struct session *r, uint32_t pid, uint64_t exit_ts, const char *comm,
		       uint32_t flags)
{
	uint64_t ts, window = 0;

	if (!hmap__del(&r->forked, pid, &ts))
		return;
	hmap__del(&r->forked_win, pid, &window);
	if (exit_ts > ts + window) {
		if (!(flags & REC_EXIT_UPROBE_HIT))
			return;
		info("pid %u: exited %.3f ms after its fork with no call traced, but it entered a "
		     "probed function before its probes were in place (%.3f ms after its fork): "
		     "calls it made then are missing", pid, (exit_ts - ts) / 1e6, window / 1e6);
		add_late(r, pid, ts, window, "(its fork; called before its probes)", comm);
		return;
	}
	info("pid %u: exited %.3f ms after its fork, before its probes were in place (%.3f ms "
	     "after it): calls it made are missing%s", pid, (exit_ts - ts) / 1e6, window / 1e6,
	     (flags & REC_EXIT_MM_READ) && !(flags & REC_EXIT_UPROBE_HIT) ?
		     " (if any: it entered no function probed on return)" : "");
	add_late(r, pid, ts, window, "(its fork; exited unprobed)", comm);
}

static void first_call_of_child(struct session *r, uint32_t pid)
{
	uint64_t ts, window = 0;

	if (!hmap__del(&r->forked, pid, &ts))
		return;
	hmap__del(&r->forked_win, pid, &window);
	info("pid %u: a forked child calling the API; its probes came %.3f ms after its fork: "
	     "calls it made before them are missing", pid, window / 1e6);
	add_late(r, pid, ts, window, "(its fork)", NULL);
}

/* The libraries an exec'ed program's loader will find are probed; tests
 * wait for this line (-v) to start the program's work. */
static void exec_probed(const struct rec_hdr *h)
{
	dbg("pid %u: probes in place %.3f ms after its exec", h->pid,
	    (session__now() - h->ts) / 1e6);
}

static void inject_mapped(struct session *r, pid_t pid);

/* The process has exited, reaped or not: a zombie still answers kill(0)
 * (cgbpf is the parent of `record -- CMD`'s command), so its state says.
 * A leader that exited while other threads run is not gone. */
static bool exited(pid_t pid)
{
	long threads = 0;
	char state = 0;

	if (kill(pid, 0) && errno == ESRCH)
		return true;
	if (procfs__state(pid, &state, &threads))
		return true;
	return state == 'X' || (state == 'Z' && threads <= 1);
}

static void on_mmap(struct session *r, const struct rec_mmap *m)
{
	uint64_t live;

	if (m->new_target) {
		/* BPF made it a target before its mmap returned. */
		mark_live(r, m->hdr.pid);
		r->new_targets++;
		dbg("pid %u mapped %.*s: traced from now on (-a)", m->hdr.pid, REC_MMAP_NAME,
		    m->name);
	}
	r->lib_mapped = true;
	live = attach__live_since(r->attach, m->hdr.pid, m->dev, m->ino);
	dbg("pid %u mapped %.*s%s", m->hdr.pid, REC_MMAP_NAME, m->name,
	    live && live <= m->hdr.ts ? " (probed in advance)" : "");
	scan(r, m->hdr.pid);
	if (!live)
		live = attach__live_since(r->attach, m->hdr.pid, m->dev, m->ino);
	/* Probes that came after the mapping: a file resolved only at exec
	 * (-a) or seen only now (a container's private copy). */
	if (live > m->hdr.ts) {
		report_late(r, m, live);
	} else if (!live && exited((pid_t)m->hdr.pid)) {
		char name[REC_MMAP_NAME + 24];
		uint64_t now = session__now();

		/* Gone before its probes could be attached: every call it
		 * made through that file is missing. */
		snprintf(name, sizeof(name), "%.*s (exited unprobed)", REC_MMAP_NAME, m->name);
		info("pid %u: had exited when cgbpf read that it mapped %.*s (%.3f ms after the "
		     "mapping), before it could be probed: its calls through that file are missing",
		     m->hdr.pid, REC_MMAP_NAME, m->name, (now - m->hdr.ts) / 1e6);
		add_late(r, m->hdr.pid, m->hdr.ts, now - m->hdr.ts, name, NULL);
	} else if (!live && !attach__probed_file(r->attach, m->dev, m->ino)) {
		char name[REC_MMAP_NAME + 24];
		uint64_t now = session__now();

		/* Alive, but the mapping was not in its maps when read (an
		 * exit under way, or an munmap): never probed. */
		snprintf(name, sizeof(name), "%.*s (not probed)", REC_MMAP_NAME, m->name);
		info("pid %u: mapped %.*s, but it was no longer in its memory map when cgbpf read it "
		     "(%.3f ms after the mapping: an exit under way, or an munmap): not probed, its "
		     "calls through that file are missing", m->hdr.pid, REC_MMAP_NAME, m->name,
		     (now - m->hdr.ts) / 1e6);
		add_late(r, m->hdr.pid, m->hdr.ts, now - m->hdr.ts, name, NULL);
	}
	proc_event(r, SRC_PROC_CHANGED, m->hdr.pid, m->hdr.ts);
	/* Name it while it is alive: an exited process has no command line. */
	model__proc_refresh(&r->model, m->hdr.pid);
	if (r->o->inject && r->o->all && !strncmp(m->name, "libcuda.so", 10))
		inject_mapped(r, (pid_t)m->hdr.pid);
}

/* A target's child gets its parent's probes. */
static void probe_child(struct session *r, const struct rec_proc *p)
{
	uint64_t t = session__now();
	int n;

	dbg("pid %u forked %u (%.3f ms ago)", p->hdr.pid, p->other, (t - p->hdr.ts) / 1e6);
	/* Its memory is its parent's: the same files. */
	n = attach__inherit(r->attach, p->hdr.pid, p->other);
	if (n == -ESRCH) {
		/* Gone already: its exit record says it (child_exit). */
		r->forks_unprobed++;
		note_fork(r, p->other, p->hdr.ts, session__now());
	}
	if (!n)
		dbg("pid %u: probes in place at its fork (its parent's)", p->other);
	if (n > 0) {
		dbg("pid %u: attaching its probes took %.3f ms", p->other,
		    (session__now() - t) / 1e6);
		note_fork(r, p->other, p->hdr.ts, session__now());
	}
}

/* The ctl ring's copy of a watched file's mapping: its probes now; the
 * events ring's copy then finds them live (attach__live_since) and says
 * how late they came, in the model's order. */
static void ctl_mmap(struct session *r, const struct rec_mmap *m)
{
	uint64_t t0 = session__now();

	if (!m->new_target && !hmap__get(&r->live, m->hdr.pid))
		return;
	scan(r, m->hdr.pid);
	dbg("pid %u mapped %.*s: probed ahead of the events ring, %.3f ms after the mapping "
	    "(scan %.3f ms)", m->hdr.pid, REC_MMAP_NAME, m->name, (session__now() - m->hdr.ts) / 1e6,
	    (session__now() - t0) / 1e6);
}

/* fork_probed's values: which copy of a fork record probed the child;
 * the other copy, when it comes, only removes the entry. */
#define FORK_BY_CTL 1
#define FORK_BY_EVENTS 2

static void fork_done(struct session *r, uint32_t child, uint64_t by)
{
	/* A ctl copy lost to a full ring leaves its entry: bounded. */
	if (r->fork_probed.count >= 65536)
		hmap__free(&r->fork_probed);
	hmap__put(&r->fork_probed, child, by);
}

/* The ctl ring: forks of targets and mappings of watched files, acted on
 * ahead of the events ring. */
static int handle_ctl(void *ctx, void *data, size_t size)
{
	struct session *r = ctx;
	const struct rec_proc *p = data;
	uint64_t *v;

	if (size >= sizeof(struct rec_mmap) && p->hdr.type == REC_MMAP &&
	    !ingest__check(data, size)) {
		ctl_mmap(r, data);
		return 0;
	}
	if (size < sizeof(*p) || p->hdr.type != REC_PROC_FORK || !r->o->follow)
		return 0;
	/* A child reaped before /proc names it: its name is its parent's. */
	model__proc_hint(&r->model, p->other, p->comm);
	v = hmap__get(&r->fork_probed, p->other);
	if (v) {
		/* The events ring's copy came first and did it. */
		if (*v == FORK_BY_EVENTS)
			hmap__del(&r->fork_probed, p->other, NULL);
		return 0;
	}
	probe_child(r, p);
	fork_done(r, p->other, FORK_BY_CTL);
	return 0;
}

/* Records of the events ring between two reads of the ctl ring: a
 * backlog of millions is drained in seconds, a fork or a mapping waits
 * for at most this many (and the first record of every read of the rings
 * reads the ctl ring first). */
#define CTL_EVERY 512

/* A target process exited: its last records are in. */
static void on_proc_exit(struct session *r, const struct rec_proc *p)
{
	const struct rec_hdr *h = &p->hdr;

	if (r->forked.count)
		child_exit(r, h->pid, h->ts, p->comm, p->flags);
	model__proc_exit(&r->model, p);
	capture__proc_exit(r->cap, h->pid, h->ts);
	target_gone(r, h->pid, true);
	hmap__del(&r->seen, h->pid, NULL);
	proc_event(r, SRC_PROC_EXIT, h->pid, h->ts);
	if (r->mon) {
		/* exit_code: status << 8 | terminating signal. */
		int sig = p->other & 0x7f, status = (p->other >> 8) & 0xff;

		if (r->o->monitor->trigger_exit && ((sig && sig != SIGINT && sig != SIGTERM) ||
						    (!sig && status))) {
			info("pid %u (%.16s) exited %s %d: dumping", h->pid, p->comm,
			     sig ? "on signal" : "with status", sig ? sig : status);
			monitor__trigger(r->mon, "exit");
		}
		/* Days of processes coming and going: forget the dead. */
		monitor__proc_exit(r->mon, h->pid, p->comm);
		model__forget(&r->model, h->pid);
	}
}

/* The events ring's callback (s->handle): validates a record and gives it
 * to the core or the source that takes its type. */
static int handle_record(void *ctx, void *data, size_t size)
{
	struct session *r = ctx;
	const struct rec_hdr *h = data;
	struct rec_string sbuf;
	uint64_t first[SRC_SPLIT_MAX / 8], rest[SRC_SPLIT_MAX / 8];

	if (r->ctl_rb && ++r->since_ctl >= CTL_EVERY) {
		r->since_ctl = 0;
		ring_buffer__consume(r->ctl_rb);
	}

	/* The traced process feeds these bytes: check before trusting. */
	if (ingest__check(data, size)) {
		r->invalid++;
		return 0;
	}
	/* A record that stands for two (--python leaf: a call record carrying
	 * its leaf frame, bpf/pyframes_rec.h) is the first, then the second. */
	if (r->splitter >= 0) {
		size_t n = r->src[r->splitter]->split(data, size, first, rest);

		if (n) {
			handle_record(ctx, first, n);
			h = data = rest;
			size = h->size;
		}
	}
	r->records++;
	/* Before the flight recorder keeps it: the process may be gone by a dump. */
	if (h->type == REC_STRING)
		h = data = (void *)ustr__resolve(data, &size, &sbuf);
	if (r->mon)
		monitor__record(r->mon, data, size);
	if (r->src_of[h->type] >= 0) {
		int i = r->src_of[h->type];

		if (r->src[i]->record(r, r->src_state[i], data, size))
			r->invalid++;
		return 0;
	}
	switch (h->type) {
	case REC_TRIGGER: {
		const struct rec_trigger *t = data;

		if (!r->mon)
			break;
		info("pid %u: %s %s after %.3f s%s: dumping", h->pid,
		     model__func_name(&r->model, t->lib, t->func),
		     t->ret ? "failed" : "returned", t->dur_ns / 1e9,
		     t->ret ? "" : " (slow)");
		monitor__trigger(r->mon, t->ret ? "error" : "slow");
		break;
	}
	case REC_CALL_ENTER:
		if (r->forked.count)
			first_call_of_child(r, h->pid);
		if (!hmap__get(&r->seen, h->pid)) {
			hmap__put(&r->seen, h->pid, 1);
			proc_event(r, SRC_PROC_SEEN, h->pid, h->ts);
		}
		/* A capture range opens before its first call is taken. */
		capture__call_enter(r->cap, data);
		model__call_enter(&r->model, data);
		break;
	case REC_CALL_EXIT:
		model__call_exit(&r->model, data);
		capture__call_exit(r->cap, data);
		break;
	case REC_STRING:
		model__string(&r->model, data);
		break;
	case REC_OUT_ARRAY:
		model__out_array(&r->model, data);
		break;
	case REC_PROC_FORK: {
		const struct rec_proc *p = data;

		if (r->o->follow) {
			model__proc_hint(&r->model, p->other, p->comm);
			mark_live(r, p->other);
			/* Done already when the ctl ring's copy came first;
			 * else done here, and that copy is told. */
			if (!hmap__del(&r->fork_probed, p->other, NULL)) {
				probe_child(r, p);
				fork_done(r, p->other, FORK_BY_EVENTS);
			}
			scan(r, p->other);
		}
		break;
	}
	case REC_PROC_EXEC:
		if (!hmap__get(&r->live, h->pid)) {
			/* -a: not a target until it maps a traced library;
			 * probe what its loader will look for before it does. */
			attach__resolve(r->attach, h->pid, NULL, NULL, same_root(r, h->pid));
			/* A child whose fork record is still to come. */
			if (r->o->split && r->pt && !r->o->all)
				pfsplit__remember(r->pt, h->pid);
			exec_probed(h);
			break;
		}
		/* Its %q variables for --split-per-process, while it lives. */
		if (r->o->split && r->pt)
			pfsplit__remember(r->pt, h->pid);
		model__proc_exec(&r->model, data);
		/* A forked child's window ends with its exec: a new program,
		 * whose probes follow it (the links' filter is the task). */
		hmap__del(&r->forked, h->pid, NULL);
		hmap__del(&r->forked_win, h->pid, NULL);
		/* Its maps first, while it lives: resolving and attaching
		 * below can take milliseconds, a short program's whole life,
		 * and an exited one has no maps to name its host stubs by. */
		proc_event(r, SRC_PROC_CHANGED, h->pid, h->ts);
		/* A new program: it may load libraries not probed yet. */
		attach__resolve(r->attach, h->pid, NULL, NULL, false);
		exec_probed(h);
		scan(r, h->pid);
		break;
	case REC_PROC_EXIT:
		on_proc_exit(r, data);
		break;
	case REC_THREAD_EXIT:
		model__thread_exit(&r->model, data);
		break;
	case REC_MMAP:
		on_mmap(r, data);
		break;
	}
	return 0;
}

static void read_drops(struct session *r, uint64_t drops[REC__COUNT])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;

	memset(drops, 0, REC__COUNT * sizeof(drops[0]));
	if (ncpu <= 0)
		return;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return;
	for (uint32_t t = 0; t < REC__COUNT; t++) {
		if (bpf_map__lookup_elem(r->skel->maps.drops, &t, sizeof(t), vals,
					 ncpu * sizeof(*vals), 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			drops[t] += vals[c];
	}
	free(vals);
}

/* Puts the running total of lost records on a counter track so a reader
 * of the trace sees where data is missing. */
static void report_drops(struct session *r, uint64_t ts, bool final)
{
	uint64_t drops[REC__COUNT], total = 0;

	read_drops(r, drops);
	for (int i = 0; i < REC__COUNT; i++)
		total += drops[i];
	if (!r->pt || !r->meta || (total == r->drops_reported && !final))
		return;
	pftrace__counter(r->pt, r->meta, ts, UUID_CGBPF_DROPS, total);
	r->drops_reported = total;
	if (final) {
		struct pf_annot a[] = {
			{ .name = "lost_records", .type = PA_UINT, .u = total },
			{ .name = "lost_call_entries", .type = PA_UINT, .u = drops[REC_CALL_ENTER] },
			{ .name = "lost_call_returns", .type = PA_UINT, .u = drops[REC_CALL_EXIT] },
			{ .name = "lost_strings", .type = PA_UINT, .u = drops[REC_STRING] },
			{ .name = "lost_other", .type = PA_UINT,
			  .u = total - drops[REC_CALL_ENTER] - drops[REC_CALL_EXIT] - drops[REC_STRING] },
			{ .name = "records", .type = PA_UINT, .u = r->records },
			{ .name = "malformed_records", .type = PA_UINT, .u = r->invalid },
		};

		pftrace__instant(r->pt, r->meta, ts, UUID_CGBPF,
				 total ? "cgbpf: capture ended, RECORDS LOST" : "cgbpf: capture ended",
				 a, sizeof(a) / sizeof(a[0]));
	}
}

/* ---------------------------------------------------------------- setup */

/* Size of the pid-indexed targets array: every pid is below pid_max. */
static uint32_t pid_max(void)
{
	unsigned long v = 0;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");

	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	/* The kernel's ceiling (PID_MAX_LIMIT on 64-bit) if unreadable. */
	return v && v <= 4194304 ? v : 4194304;
}

static int round_pow2_mib(uint32_t mib)
{
	uint32_t v = 1;

	while (v < mib && v < (1u << 14))
		v <<= 1;
	return v;
}

static int open_bpf(struct session *r)
{
	const struct record_opts *o = r->o;
	struct cgbpf_bpf *skel;
	uint64_t ring = (uint64_t)round_pow2_mib(o->ring_mib) << 20;
	bool multi;
	int err, i;

	skel = cgbpf_bpf__open();
	if (!skel) {
		err = -errno;
		err("opening the BPF object: %s", strerror(-err));
		return err;
	}
	r->skel = skel;
	skel->rodata->self_tgid = getpid();
	skel->rodata->wakeup_bytes = ring / 2;
	skel->rodata->follow_children = o->follow;
	/* -a: a process becomes a target when it maps a traced library; with
	 * -p the listed processes are the targets, as without -a. */
	skel->rodata->target_on_map = o->all && !o->npids;
	skel->rodata->filter_ncomm = o->ncomm;
	for (size_t k = 0; k < o->ncomm && k < 8; k++)
		strncpy((char *)skel->rodata->filter_comm[k], o->comms[k],
			sizeof(skel->rodata->filter_comm[k]) - 1);
	skel->rodata->filter_ncgroup = r->ncg;
	if (o->monitor) {
		skel->rodata->aggregate = 1;
		skel->rodata->emit_records = o->monitor->flight_ns != 0;
		skel->rodata->nccl_records = !!(o->trace_mask & TRACE_BIT(LIB_NCCL));
		skel->rodata->trigger_slow_ns = o->monitor->trigger_slow_ns;
	}
	{
		char names[8][ATTACH_WATCH_LEN];
		size_t n = attach__watch_names(o->trace_mask, names, 8);

		_Static_assert(sizeof(skel->rodata->watch_names[0]) == ATTACH_WATCH_LEN, "watch names");
		for (i = 0; i < (int)n; i++)
			memcpy((char *)skel->rodata->watch_names[i], names[i], ATTACH_WATCH_LEN);
		skel->rodata->watch_count = n;
	}
	if (capture__gated(&o->cap)) {
		const struct capture_opts *c = &o->cap;

		skel->rodata->capture_gated = 1;
		skel->rodata->capture_kind = c->range == CAPTURE_RANGE_NVTX ? CAPTURE_K_NVTX :
					     c->range == CAPTURE_RANGE_PROFILER ? CAPTURE_K_PROFILER :
					     CAPTURE_K_NONE;
		skel->rodata->capture_name_len = strlen(c->nvtx_name);
		memcpy((char *)skel->rodata->capture_name, c->nvtx_name, sizeof(c->nvtx_name));
	}
	multi = attach__prepare(skel);
	err = bpf_map__set_max_entries(skel->maps.events, ring);
	for (size_t k = 0; !err && k < r->nsrc; k++)
		if (r->src[k]->prepare)
			err = r->src[k]->prepare(r, r->src_state[k]);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.targets, pid_max());
	if (!err)
		err = cgbpf_bpf__load(skel);
	if (err) {
		err("loading BPF programs: %s%s", strerror(-err),
		    err == -EPERM ? " (are you root? is unprivileged BPF locked down?)" : "");
		return err;
	}
	for (uint32_t k = 0; k < r->ncg; k++) {
		if (bpf_map__update_elem(skel->maps.filter_cgroups, &k, sizeof(k), &r->cg_fd[k],
					 sizeof(r->cg_fd[k]), BPF_ANY)) {
			err = -errno;
			err("--cgroup %s: %s", o->cgroups[k], strerror(-err));
			return err;
		}
	}
	r->rb = ring_buffer__new(bpf_map__fd(skel->maps.events), handle_record, r, NULL);
	/* The ctl ring twice: in rb for its wakeups, alone to be read in
	 * the middle of rb's backlog. Both read and advance the consumer
	 * position the kernel shares, one at a time (one thread). */
	if (r->rb)
		r->ctl_rb = ring_buffer__new(bpf_map__fd(skel->maps.ctl), handle_ctl, r, NULL);
	if (!r->rb || !r->ctl_rb ||
	    ring_buffer__add(r->rb, bpf_map__fd(skel->maps.ctl), handle_ctl, r)) {
		err = -errno ? -errno : -ENOMEM;
		err("setting up the ring buffers: %s", strerror(-err));
		return err;
	}
	/* Uprobes are attached per library file by attach.c. The sources go
	 * first: the scheduler's programs share a tracepoint
	 * (sched_process_exit) with proc_exit and must see a target before
	 * proc_exit forgets it. */
	for (size_t k = 0; k < r->nsrc; k++) {
		if (r->src[k]->start && (err = r->src[k]->start(r, r->src_state[k])))
			return err;
	}
	skel->links.proc_fork = bpf_program__attach(skel->progs.proc_fork);
	skel->links.proc_exec = bpf_program__attach(skel->progs.proc_exec);
	skel->links.proc_exit = bpf_program__attach(skel->progs.proc_exit);
	if (!skel->links.proc_fork || !skel->links.proc_exec || !skel->links.proc_exit) {
		err = -errno;
		err("attaching scheduler tracepoints: %s", strerror(-err));
		return err;
	}
	/* -a and the monitor trace every process that maps a library: one
	 * probe set per file serves them all. Otherwise each target gets its
	 * own, so no other process carries a breakpoint. */
	r->attach = attach__new(skel, multi, o->trace_mask, !(o->all && !o->npids));
	if (!r->attach) {
		err = -errno ? -errno : -ENOMEM;
		err("setting up the probes: %s", strerror(-err));
		return err;
	}
	return 0;
}

/* What execvp would run for name: name itself when it has a slash, else
 * the first executable in PATH. */
static bool find_exe(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *save = NULL;
	bool found = false;

	if (strchr(name, '/'))
		return (size_t)snprintf(out, len, "%s", name) < len && !access(out, X_OK);
	copy = strdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !found;
	     d = strtok_r(NULL, ":", &save))
		found = (size_t)snprintf(out, len, "%s/%s", *d ? d : ".", name) < len &&
			!access(out, X_OK);
	free(copy);
	return found;
}

/* Forks the command stopped on a pipe; it execs once released. */
static pid_t spawn(char **cmd, int *release_fd)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = -errno;

		close(fds[0]);
		close(fds[1]);
		return e;
	}
	if (pid == 0) {
		char c;

		close(fds[1]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		/* EOF without a byte: cgbpf failed to set up, do not run. */
		if (read(fds[0], &c, 1) != 1)
			_exit(127);
		execvp(cmd[0], cmd);
		fprintf(stderr, "cgbpf: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	*release_fd = fds[1];
	return pid;
}

static void describe_cgbpf(struct session *r, uint64_t ts)
{
	pftrace__clock_snapshot(r->pt);
	pftrace__system_info(r->pt);
	{
		char thr[24] = "off";

		/* osrt_sum says what it counts; cgbpf stats reads it here. */
		if (r->o->syscall_threshold_ns != THRESHOLD_OFF)
			snprintf(thr, sizeof(thr), "%" PRIu64, r->o->syscall_threshold_ns);
		pftrace__attribute(r->pt, "cgbpf.syscall_threshold_ns", thr);
	}
	pftrace__track(r->pt, UUID_CGBPF, 0, "cgbpf");
	pftrace__counter_track(r->pt, UUID_CGBPF_DROPS, UUID_CGBPF, "cgbpf lost records",
			       PF_UNIT_COUNT);
	r->meta = pftrace__seq(r->pt, UUID_CGBPF, ts);
	pftrace__counter(r->pt, r->meta, ts, UUID_CGBPF_DROPS, 0);
}

static void flush_sources(struct session *r);

static void flush_for_capture(void *ctx)
{
	flush_sources(ctx);
}

static bool window_close(void *ctx, uint32_t pid)
{
	struct session *r = ctx;
	bool asked = false;

	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->window_close && r->src[i]->window_close(r, r->src_state[i], pid))
			asked = true;
	return asked;
}

static bool window_settled(void *ctx, uint32_t pid)
{
	struct session *r = ctx;

	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->window_settled && !r->src[i]->window_settled(r, r->src_state[i], pid))
			return false;
	return true;
}

static void window_end(void *ctx, uint32_t pid)
{
	struct session *r = ctx;

	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->window_end)
			r->src[i]->window_end(r, r->src_state[i], pid);
}

static bool sources_settled(struct session *r)
{
	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->settled && !r->src[i]->settled(r, r->src_state[i]))
			return false;
	return true;
}

static void flush_sources(struct session *r)
{
	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->flush)
			r->src[i]->flush(r, r->src_state[i]);
}

/* One run of record__run: the session and what its steps hand on. */
/* A process for --inject: done, or due at a time (-a: a moment after it
 * mapped libcuda, again when all its threads were busy in the loader). */
struct inj_entry {
	pid_t pid;
	bool done;
	int tries;
	uint64_t due;
	struct ptinject_result res;
};

#define INJ_DELAY_NS 50000000ull	/* after the libcuda mapping (-a) */
#define INJ_RETRY_NS 200000000ull	/* after a refusal for busy threads */
#define INJ_TRIES 5

struct run {
	struct session r;
	struct traceout out;
	struct capture_info ci;
	struct inj_entry *inj;	/* --inject: the processes injected or queued */
	size_t ninj, capinj;
	uint64_t t0;		/* the capture's start (the trace's first event) */
	uint64_t deadline;	/* --duration's end; 0: none */
	int release_fd;		/* -- CMD waits until this is written */
	bool timed_out;		/* --duration or the windows ended it, not the targets */
};

/* What can fail before any BPF work: privileges, BTF, the pids given.
 * 0, or the exit code after saying why. */
static int check_targets(const struct record_opts *o)
{
	int err = check_caps();

	if (!err)
		err = check_btf();
	if (err)
		return 1;
	for (size_t i = 0; i < o->npids; i++) {
		if (kill(o->pids[i], 0) && errno == ESRCH) {
			err("no process with pid %d", o->pids[i]);
			return 1;
		}
		if (!procfs__alive(o->pids[i])) {
			err("pid %d has exited (zombie)", o->pids[i]);
			return 1;
		}
	}
	return 0;
}

/* The monitor's port and dump dir, the summary file and the trace,
 * opened before the BPF work: a typo in -o must not cost a capture. 0,
 * or the exit code after saying why (nothing left behind). */
static int open_outputs(struct run *run)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;
	int ret;

	if (o->monitor) {
		r->mon = monitor__new(o->monitor);
		if (!r->mon)
			return 1;
		r->pysites = monitor__pysites(r->mon);
		r->trigger = monitor_trigger;
	}
	if (o->summary_path && !o->no_summary) {
		r->summary_f = outfile__fopen_new(o->summary_path, OUTFILE_MODE, o->force);
		if (!r->summary_f && errno == EEXIST && !o->force) {
			err("%s exists: cgbpf does not overwrite it without --force", o->summary_path);
			return 2;
		}
		if (!r->summary_f) {
			err("cannot write %s: %s", o->summary_path, outfile__strerror(-errno));
			return 1;
		}
	}
	if (!o->summary_only) {
		ret = traceout__open(&run->out, o, &r->pt);
		if (ret) {
			if (r->summary_f) {
				outfile__discard(fileno(r->summary_f), o->summary_path);
				fclose(r->summary_f);
			}
			return ret;
		}
	}
	return 0;
}

/* The model and its sinks, and the wanted sources' states: the trace
 * writer's sink first, the summary's after every source's. 0 or -1 after
 * saying why. */
static int init_sources(struct session *r)
{
	struct sink sk;

	model__init(&r->model);
	r->summary = summary__new();
	if (!r->summary) {
		err("out of memory");
		return -1;
	}
	if (r->pt) {
		sk = pfsink__sink(r->pt);
		model__add_sink(&r->model, &sk);
	}
	memset(r->src_of, -1, sizeof(r->src_of));
	r->splitter = -1;
	for (size_t i = 0; sources[i]; i++) {
		const struct source *src = sources[i];

		if (src->wanted && !src->wanted(r->o))
			continue;
		if (r->nsrc == SESSION_SOURCES) {
			err("too many event sources (%s)", src->name);
			return -1;
		}
		r->src[r->nsrc] = src;
		if (src->init && src->init(r, &r->src_state[r->nsrc]))
			return -1;	/* it said why */
		for (int k = 0; k < SRC_TYPES && src->types[k]; k++)
			if (src->types[k] < REC__COUNT)
				r->src_of[src->types[k]] = r->nsrc;
		if (src->split) {
			if (r->splitter >= 0) {
				err("two event sources split records (%s, %s)",
				    r->src[r->splitter]->name, src->name);
				return -1;
			}
			r->splitter = r->nsrc;
		}
		r->nsrc++;
	}
	sk = summary__sink(r->summary);
	model__add_sink(&r->model, &sk);
	return 0;
}

/* The metrics page's series of the sources (monitor__set_metrics). */
static void sources_metrics(void *ctx, const struct src_metrics *m)
{
	struct session *r = ctx;

	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->metrics)
			r->src[i]->metrics(r, r->src_state[i], m);
}

/* The BPF object, the capture windows and the monitor's aggregates. 0 or
 * -1 after saying why. */
static int open_capture(struct run *run)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;
	struct stat st;

	log__hook_libbpf();
	if (!stat("/", &st)) {
		r->root_dev = st.st_dev;
		r->root_ino = st.st_ino;
	}
	if (resolve_cgroups(r) || open_bpf(r))
		return -1;
	if (capture__gated(&o->cap)) {
		struct capture_env env = {
			.o = &o->cap, .m = &r->model, .pt = r->pt, .pattern = o->output,
			.made = r->pt && !run->out.split ? traceout__current(&run->out) : NULL,
			.split = run->out.split,
			.pid = o->npids ? o->pids[0] : 0, .force = o->force,
			.gate_fd = bpf_map__fd(r->skel->maps.gate), .flush = flush_for_capture,
			.flush_ctx = r, .window_close = window_close,
			.window_settled = window_settled, .window_end = window_end,
		};

		/* Before anything is described: the descriptors are kept for
		 * every file. */
		r->cap = capture__new(&env, session__now());
		if (!r->cap) {
			err("capture windows: %s", strerror(errno));
			return -1;
		}
	}
	if (r->mon && monitor__start(r->mon, r->skel, &r->model, r->attach))
		return -1;
	if (r->mon)
		monitor__set_metrics(r->mon, sources_metrics, r);
	return 0;
}

static void set_signals(const struct session *r)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (r->mon) {
		struct sigaction su = { .sa_handler = on_usr1 };

		sigaction(SIGUSR1, &su, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
}

/* -- CMD forked, waiting for its release, with the sources told. 0, or
 * the exit code after saying why. */
static int spawn_command(struct run *run)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;
	int err;

	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->spawn)
			r->src[i]->spawn(r, r->src_state[i], o->cmd[0]);
	r->child = spawn(o->cmd, &run->release_fd);
	if (r->child < 0) {
		err("cannot start %s: %s", o->cmd[0], strerror(-r->child));
		return 1;
	}
	add_target(r, r->child);
	for (size_t i = 0; i < r->nsrc; i++)
		if (r->src[i]->spawned)
			r->src[i]->spawned(r, r->src_state[i], (uint32_t)r->child);
	/* Before it runs: a name taken or unusable costs no capture.
	 * Capture windows name their files when they open them. */
	if (r->cap)
		capture__set_pid(r->cap, r->child);
	err = r->cap ? 0 : traceout__named(&run->out, r->child);
	return err;
}

/* The -p targets (and with --follow their descendants), then every
 * target's libraries probed: the files its loader would load, before it
 * maps them, and what it maps already. */
/* Queues pid for --inject (once per process), due at due. */
static void inject_queue(struct run *run, pid_t pid, uint64_t due)
{
	for (size_t i = 0; i < run->ninj; i++)
		if (run->inj[i].pid == pid)
			return;
	if (run->ninj == run->capinj) {
		size_t nc = run->capinj ? run->capinj * 2 : 16;
		struct inj_entry *e = realloc(run->inj, nc * sizeof(*e));

		if (!e)
			return;
		run->inj = e;
		run->capinj = nc;
	}
	run->inj[run->ninj++] = (struct inj_entry){ .pid = pid, .due = due };
}

/* The injection as an instant on the process's track: GPU activity is
 * measured from about here on, never before. */
static void mark_injection(struct session *r, const struct inj_entry *e, uint64_t now)
{
	const struct ptinject_result *x = &e->res;
	struct proc *p = model__proc(&r->model, (uint32_t)e->pid);

	if (p)
		p->injected_ns = now;
	if (r->pt && r->meta && p) {
		struct pf_annot a[] = {
			{ .name = "thread", .type = PA_UINT, .u = (uint64_t)x->tid },
			{ .name = "thread_was", .type = PA_STR, .s = x->tid_syscall },
			{ .name = "held_us", .type = PA_UINT, .u = (uint64_t)(x->hold_ms * 1000) },
			{ .name = "library", .type = PA_STR, .s = x->lib },
		};

		pftrace__instant(r->pt, r->meta, now, UUID_PROCESS((uint32_t)e->pid),
				 "cgbpf: injection library loaded (--inject): GPU activity from here",
				 a, 4);
	}
}

static void inject_one(struct session *r, struct inj_entry *e, const char *lib, uint64_t now)
{
	struct ptinject_result *x = &e->res;

	e->tries++;
	ptinject__run(e->pid, lib, x);
	/* All its threads in the loader (-a: it is loading libcuda now):
	 * again a little later. */
	if (x->outcome == PTINJ_REFUSED && x->busy && e->tries < INJ_TRIES) {
		e->due = now + INJ_RETRY_NS;
		dbg("pid %d: every thread busy (%s): injected again later", e->pid, x->why);
		return;
	}
	e->done = true;
	if (x->outcome == PTINJ_INJECTED)
		mark_injection(r, e, now);
	if (x->outcome == PTINJ_INJECTED)
		info("pid %d: injection library loaded (thread %d, %s, held %.2f ms; mapped "
		     "%.1f ms later)", e->pid, x->tid, x->tid_syscall, x->hold_ms, x->load_ms);
	else if (x->outcome == PTINJ_PRESENT)
		info("pid %d: injection library loaded already: nothing injected", e->pid);
	else
		warn("pid %d: not injected: %s", e->pid, x->why);
}

/*
 * --inject: cgbpf's injection library into each queued process whose time
 * has come (its probes are in place already, so its mapping is seen and
 * its sites probed). -p targets are queued at the start, -a ones when
 * they map libcuda.
 */
static void inject_due(struct run *run, uint64_t now)
{
	char lib[PATH_MAX];
	bool have = false;

	for (size_t i = 0; i < run->ninj; i++) {
		struct inj_entry *e = &run->inj[i];

		if (e->done || e->due > now)
			continue;
		if (!have && !inject__path(lib, sizeof(lib))) {
			e->done = true;
			e->res.outcome = PTINJ_REFUSED;
			snprintf(e->res.why, sizeof(e->res.why), "cgbpf's injection library is not "
				 "installed next to it (build/inject/ or ../lib/cgbpf/)");
			warn("pid %d: not injected: %s", e->pid, e->res.why);
			continue;
		}
		have = true;
		inject_one(&run->r, e, lib, now);
	}
}

/* A process that maps libcuda under -a --inject: queued, for a moment
 * later (the thread that maps it is inside its dlopen now). */
static void inject_mapped(struct session *r, pid_t pid)
{
	inject_queue((struct run *)r, pid, session__now() + INJ_DELAY_NS);
}

static int find_libcuda(const struct map_entry *e, void *ctx)
{
	const char *b = e->path ? strrchr(e->path, '/') : NULL;

	(void)ctx;
	return b && !strncmp(b + 1, "libcuda.so", 10) ? 1 : 0;
}

/* -a --inject at the start: every traced process that maps libcuda. */
static void inject_live(struct run *run)
{
	uint64_t pid, now = session__now();

	for (size_t it = 0; hmap__next(&run->r.live, &it, &pid, NULL);)
		if (procfs__for_each_map((pid_t)pid, find_libcuda, NULL) == 1)
			inject_queue(run, (pid_t)pid, now);
	inject_due(run, now);
}

static void add_given_targets(struct session *r)
{
	const struct record_opts *o = r->o;
	uint64_t pid;

	for (size_t i = 0; i < o->npids; i++) {
		if (o->all && !passes_filters(r, o->pids[i])) {
			warn("pid %d does not pass --comm/--cgroup: not traced", o->pids[i]);
			continue;
		}
		add_target(r, o->pids[i]);
		model__proc(&r->model, o->pids[i]);
		if (o->follow) {
			pid_t *kids;
			size_t nkids;

			if (!procfs__descendants(o->pids[i], &kids, &nkids)) {
				for (size_t k = 0; k < nkids; k++)
					add_target(r, kids[k]);
				free(kids);
			}
		}
	}
	for (size_t it = 0; hmap__next(&r->live, &it, &pid, NULL);) {
		if ((pid_t)pid != r->child) {
			attach__resolve(r->attach, pid, NULL, NULL, false);
			/* What it maps already, for the sources. */
			proc_event(r, SRC_PROC_CHANGED, pid, session__now());
		}
		scan(r, pid);
	}
}

/* -a without -p: the host's own libraries, for processes to come, and
 * every process that maps one already. */
static void add_system(struct session *r)
{
	const struct record_opts *o = r->o;
	size_t n;

	attach__resolve(r->attach, 0, NULL, NULL, false);
	n = scan_all(r, true);
	update_mmap_watch(r);
	info("tracing every process that loads a traced library%s%s, now or later "
	     "(%zu already do, %zu library file(s) probed)",
	     o->ncomm ? ", named as --comm says" : "",
	     o->ncgroup ? ", in the --cgroup cgroups" : "", n, attach__files(r->attach));
}

/* CMD's libraries, found as its loader will find them, and a runtime
 * linked into CMD itself (nvcc's default) are probed before it execs;
 * then it is released. */
static void release_command(struct run *run)
{
	struct session *r = &run->r;
	char exe[PATH_MAX];

	if (find_exe(r->o->cmd[0], exe, sizeof(exe))) {
		attach__resolve(r->attach, r->child, exe, environ, false);
		attach__exe(r->attach, exe, r->child);
	}
	if (run->release_fd >= 0) {
		if (write(run->release_fd, "g", 1) != 1)
			warn("releasing the command: %s", strerror(errno));
		close(run->release_fd);
		run->release_fd = -1;
	}
}

/* Everything traced from now on: targets added, probed, -- CMD released.
 * 0, or the exit code after saying why. */
static int start_targets(struct run *run)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;
	int err;

	if (o->cmd) {
		err = spawn_command(run);
		if (err)
			return err;
	}
	add_given_targets(r);
	if (o->inject) {
		for (size_t i = 0; i < o->npids; i++)
			inject_queue(run, o->pids[i], 0);
		inject_due(run, session__now());
	}
	if (o->all && !o->npids) {
		add_system(r);
		if (o->inject)
			inject_live(run);
	}
	if (o->cmd)
		release_command(run);
	if (o->cmd)
		info("tracing %s (pid %d); Ctrl-C stops", o->cmd[0], r->child);
	else if (o->all && !o->npids)
		info(o->monitor ? "monitoring; metrics at http://%s/metrics; SIGTERM stops" :
		     "system-wide capture running; Ctrl-C stops%s", o->monitor ? o->monitor->listen : "");
	else
		info("tracing %zu process(es)%s; Ctrl-C stops", o->npids,
		     attach__files(r->attach) ? "" :
		     " (no traced library loaded yet: waiting for one)");
	return 0;
}

/* The ring loop: drains, ticks the sources and windows, flushes, scans,
 * until Ctrl-C, --duration, the windows' end or the targets' exit. */
static void run_loop(struct run *run)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;
	uint64_t last_flush, last_scan, last_system_scan;

	last_flush = last_scan = last_system_scan = run->t0;
	while (!stop_requested) {
		uint64_t now;
		int n;

		/* The first record of every read looks at the ctl ring first. */
		r->since_ctl = CTL_EVERY - 1;
		n = ring_buffer__poll(r->rb, POLL_MS);

		if (n < 0 && n != -EINTR) {
			err("reading the ring buffer: %s", strerror(-n));
			break;
		}
		/* Records are submitted without wakeups: drain on every timeout. */
		ring_buffer__consume(r->rb);
		now = session__now();
		for (size_t i = 0; i < r->nsrc; i++)
			if (r->src[i]->tick)
				r->src[i]->tick(r, r->src_state[i], now);
		if (run->ninj)
			inject_due(run, now);
		capture__tick(r->cap, now);
		if (capture__done(r->cap)) {
			info("capture windows done: stopping");
			run->timed_out = true;	/* a -- COMMAND keeps running, as with --duration */
			break;
		}
		if (r->pt && now - last_flush >= FLUSH_NS) {
			report_drops(r, now, false);
			flush_sources(r);
			if (pftrace__flush(r->pt)) {
				r->fatal = pftrace__error(r->pt);
				break;
			}
			last_flush = now;
		}
		if (r->pt && pftrace__error(r->pt)) {
			r->fatal = pftrace__error(r->pt);
			break;
		}
		if (now - last_scan >= SCAN_NS || !r->live.count) {
			sweep(r);
			last_scan = now;
		}
		if (r->mon) {
			if (dump_requested) {
				dump_requested = 0;
				monitor__trigger(r->mon, "signal");
			}
			monitor__tick(r->mon, now);
		}
		if (now - last_system_scan >= SYSTEM_SCAN_NS) {
			size_t found = o->all && !o->npids ? scan_all(r, false) : 0;

			if (found)
				warn("%zu process(es) mapping a traced library were found by the "
				     "periodic scan, not when they mapped it: their first calls may "
				     "be missing", found);
			attach__release_unmapped(r->attach);
			last_system_scan = now;
		}
		if (o->all && o->cmd && r->child_reaped) {
			info("%s exited", o->cmd[0]);
			break;
		}
		if (!r->live.count && !o->all) {
			info("all traced processes exited");
			break;
		}
		if (run->deadline && now >= run->deadline) {
			run->timed_out = true;
			break;
		}
	}
}

/* The last records of exiting targets may still be in the ring; a
 * source may hold data elsewhere and ask for time to bring it. */
static void drain_sources(struct session *r)
{
	uint64_t wait = 0, until;

	ring_buffer__consume(r->rb);
	for (size_t i = 0; i < r->nsrc; i++) {
		uint64_t w = r->src[i]->stop ? r->src[i]->stop(r, r->src_state[i]) : 0;

		if (w > wait)
			wait = w;
	}
	until = session__now() + wait;
	while (wait && session__now() < until && !sources_settled(r)) {
		ring_buffer__poll(r->rb, 10);
		ring_buffer__consume(r->rb);
	}
	ring_buffer__consume(r->rb);
}

/* The summary's account of --inject, per process. */
static void print_injections(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct run *run = ctx;

	(void)drops;
	fprintf(f, "\n GPU activity injection (--inject):\n");
	for (size_t i = 0; i < run->ninj; i++) {
		const struct ptinject_result *x = &run->inj[i].res;

		fprintf(f, "   pid %d: ", run->inj[i].pid);
		if (!run->inj[i].done && run->inj[i].tries)
			fprintf(f, "refused: %s (tried %d times; the capture ended before the "
				   "next try)\n", x->why, run->inj[i].tries);
		else if (!run->inj[i].done)
			fprintf(f, "not injected: the capture ended first\n");
		else if (x->outcome == PTINJ_INJECTED)
			fprintf(f, "injected now: thread %d (%s) held %.2f ms; library mapped %.1f ms "
				   "later%s\n", x->tid, x->tid_syscall, x->hold_ms, x->load_ms,
				x->eintr ? "; its call returned EINTR" : "");
		else if (x->outcome == PTINJ_PRESENT)
			fprintf(f, "already loaded (%s): nothing entered the process\n", x->lib);
		else
			fprintf(f, "%s: %s\n", ptinject__outcome_name(x->outcome), x->why);
	}
	fprintf(f, "   (GPU activity only from the injection on; NVTX ranges of a process "
		   "that initialized NVTX before are not recovered)\n");
}

/* The capture info the summary prints: windows and sources finished,
 * counts, drops; with a capture that ran, the trace's last events. */
static void finish_capture(struct run *run, int ret)
{
	struct session *r = &run->r;
	struct capture_info *ci = &run->ci;

	if (r->skel) {
		uint64_t end = session__now();

		ci->records = r->records;
		/* First: it ends a window still open, before the sources end. */
		capture__finish(r->cap, end, ci);
		for (size_t i = 0; i < r->nsrc; i++)
			if (r->src[i]->finish)
				r->src[i]->finish(r, r->src_state[i], ci);
		if (run->ninj)
			summary__add_section(ci, SUMMARY_OTHER, print_injections, run);
		ci->invalid = r->invalid;
		ci->duration_ns = end - run->t0;
		read_drops(r, ci->drops);
		if (r->pt && ret == 0) {
			flush_sources(r);
			report_drops(r, end, true);
			pftrace__clock_snapshot(r->pt);
		}
	}
	if (r->attach) {
		ci->lib_files = attach__files(r->attach);
		ci->probes = attach__probes(r->attach);
		ci->late = r->late;
		ci->nlate = r->nlate;
		ci->nlate_rows = r->nlate < LATE_ROWS ? r->nlate : LATE_ROWS;
		ci->late_ns = r->late_ns;
		ci->forks_unprobed = r->forks_unprobed;
		if (ret == 0 && !attach__seen_mapped(r->attach) && !r->lib_mapped) {
			char names[64];

			apilib__mask_names(r->o->trace_mask, names, sizeof(names));
			info("no traced process loaded a traced library (--trace %s): the trace "
			     "holds no API calls", names);
		}
	}
}

/* The trace closed (or, for a capture that failed before it began,
 * removed with the summary file, as one that fails its first checks
 * leaves nothing), its path and size for the summary. Returns ret, or 1
 * when a file could not be written. */
static int close_trace(struct run *run, int ret)
{
	struct session *r = &run->r;
	struct capture_info *ci = &run->ci;
	const struct record_opts *o = r->o;

	if (ret && !r->meta && !r->fatal) {
		pftrace__discard(r->pt, traceout__current(&run->out));
		r->pt = NULL;
		if (r->summary_f) {
			outfile__discard(fileno(r->summary_f), o->summary_path);
			fclose(r->summary_f);
			r->summary_f = NULL;
		}
	}
	if (r->pt) {
		int e = pftrace__close(r->pt);

		if (!r->fatal)
			r->fatal = e;
		traceout__abandon(&run->out);
		ci->trace_path = run->out.split ? NULL : run->out.path;	/* split: pfsplit names them */
		/* Capture windows list their files in their own section. */
		if (r->cap && (run->out.split || capture__numbered(&o->cap) || !capture__files(r->cap)))
			ci->trace_path = NULL;
		else if (r->cap)
			ci->trace_path = capture__file_path(r->cap, 0);
		r->trace_written = ci->trace_path;
		if (ci->trace_path) {
			struct stat st;

			if (!stat(ci->trace_path, &st))
				ci->trace_bytes = st.st_size;
		}
	}
	if (capture__failed(r->cap) && !r->fatal) {
		err("a capture window's trace could not be written (see above)");
		ret = 1;
	} else if (r->fatal && run->out.split) {
		err("not every process's trace was written (see above)");
		ret = 1;
	} else if (r->fatal) {
		err("writing %s failed: %s; the trace holds everything written before the error "
		    "and is valid", run->out.path, strerror(-r->fatal));
		ret = 1;
	}
	return ret;
}

/* The summary on stdout and in --summary-file, then which files were
 * written. Returns ret, or 1 when the summary file could not be written. */
static int print_summary(struct run *run, int ret)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;

	if (ret == 0 && !o->no_summary) {
		summary__print(r->summary, &r->model, &run->ci, stdout);
		fflush(stdout);
		if (r->summary_f) {
			bool bad;

			summary__print(r->summary, &r->model, &run->ci, r->summary_f);
			bad = fflush(r->summary_f) || ferror(r->summary_f);
			if (fclose(r->summary_f) || bad) {
				err("writing %s failed: %s", o->summary_path, strerror(errno));
				ret = 1;
			}
			r->summary_f = NULL;
		}
	}
	if (r->summary_f)
		fclose(r->summary_f);
	if (ret == 0 && r->pt && r->cap && !capture__files(r->cap))
		info("no capture window opened: no trace written");
	else if (ret == 0 && r->pt && r->cap && (run->out.split || capture__numbered(&o->cap)))
		info("wrote %zu file(s): open them at https://ui.perfetto.dev",
		     capture__files(r->cap));
	else if (ret == 0 && r->pt && !run->out.split)
		info("wrote %s: open it at https://ui.perfetto.dev",
		     r->cap ? capture__file_path(r->cap, 0) : run->out.path);
	return ret;
}

/* -- CMD reaped, or left running when --duration ended the capture.
 * Returns ret, or with a capture that succeeded the command's own exit
 * code. */
static int wait_command(struct run *run, int ret)
{
	struct session *r = &run->r;
	const struct record_opts *o = r->o;

	if (ret == 0 && r->child > 0 && !r->child_reaped &&
	    waitpid(r->child, &r->child_status, WNOHANG) > 0)
		r->child_reaped = true;
	if (ret == 0 && r->child > 0 && !r->child_reaped) {
		if (run->timed_out && procfs__alive(r->child)) {
			/* --duration ended the capture, not the command. */
			info("%s (pid %d) keeps running; the capture ended after --duration",
			     o->cmd[0], r->child);
			r->child = -1;
		} else {
			/* A terminal's Ctrl-C reached the command too (same process
			 * group); SIGTERM was for cgbpf alone: pass it on. Without a
			 * signal the command exited and only needs reaping. */
			if (stop_requested == SIGTERM)
				kill(r->child, SIGTERM);
			if (stop_requested)
				info("waiting for %s (pid %d) to exit; Ctrl-C again to leave it",
				     o->cmd[0], r->child);
			if (waitpid(r->child, &r->child_status, 0) > 0)
				r->child_reaped = true;
		}
	}
	if (ret == 0 && r->child_reaped)
		ret = WIFEXITED(r->child_status) ? WEXITSTATUS(r->child_status) :
						   128 + WTERMSIG(r->child_status);
	return ret;
}

static void free_session(struct session *r)
{
	ring_buffer__free(r->rb);
	ring_buffer__free(r->ctl_rb);
	hmap__free(&r->fork_probed);
	/* Before the BPF object: sources hold links to its programs. */
	for (size_t i = r->nsrc; i-- > 0;)
		if (r->src[i]->fini)
			r->src[i]->fini(r, r->src_state[i]);
	attach__free(r->attach);
	for (size_t i = 0; i < r->ncg; i++) {
		close(r->cg_fd[i]);
		free(r->cg_rel[i]);
	}
	cgbpf_bpf__destroy(r->skel);
	capture__free(r->cap);
	summary__free(r->summary);
	model__free(&r->model);
	hmap__free(&r->live);
	hmap__free(&r->traced);
	hmap__free(&r->waiting);
	hmap__free(&r->seen);
	free(r->late);
	hmap__free(&r->forked);
	hmap__free(&r->forked_win);
}

int record__run(const struct record_opts *o)
{
	struct run run = { .r = { .o = o, .child = -1, .handle = handle_record },
			   .t0 = session__now(), .release_fd = -1 };
	struct session *r = &run.r;
	int ret;

	ret = check_targets(o);
	if (!ret)
		ret = open_outputs(&run);
	if (ret)
		return ret;
	ret = 1;
	if (init_sources(r) || open_capture(&run))
		goto cleanup;
	set_signals(r);
	run.t0 = session__now();
	if (r->pt)
		describe_cgbpf(r, run.t0);
	ret = start_targets(&run);
	if (ret)
		goto cleanup;
	ret = 1;
	/* --duration counts from here: attaching (slow under load) is not
	 * taken out of the time traced. */
	capture__start(r->cap, session__now());
	if (o->duration_ns)
		run.deadline = session__now() + o->cap.delay_ns + o->duration_ns;
	run_loop(&run);
	drain_sources(r);
	ret = 0;

cleanup:
	if (run.release_fd >= 0)
		close(run.release_fd);	/* the command never runs */
	finish_capture(&run, ret);
	ret = close_trace(&run, ret);
	if (r->mon) {
		monitor__free(r->mon);	/* waits for a dump being written */
		r->mon = NULL;
		r->pysites = NULL;
		if (ret == 0)
			info("monitor stopped");
	}
	ret = print_summary(&run, ret);
	ret = wait_command(&run, ret);
	free_session(r);
	return ret;
}
