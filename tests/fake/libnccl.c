/* SPDX-License-Identifier: MIT */
/*
 * A fake NCCL (libnccl.so.2) for testing cgbpf on machines without GPUs.
 * It exports the real names with the real signatures (the toolkit's
 * nccl.h), each as a strong pncclX and a weak ncclX alias at the same
 * address, as NVIDIA's builds with the profiling API do.
 *
 * Communicators are simulated on the host: the ranks of one communicator
 * may be threads of one process or separate processes. Their shared state
 * (a "world") lives in a POSIX shared-memory object named after the unique
 * id, created by the first rank to arrive at ncclCommInitRank and unlinked
 * once all ranks have joined; ncclCommInitAll keeps it in anonymous memory.
 * Every lock and condition in it is process-shared.
 *
 * Collectives (all-reduce, all-gather, reduce-scatter, broadcast, reduce,
 * all-to-all) block until every rank of the communicator has entered the
 * same collective (counted per rank, so a late rank holds the others up,
 * as on a GPU), then take FAKENCCL_NS_PER_BYTE (default 0, may be
 * fractional) times count x datatype size nanoseconds. Send blocks until
 * the peer posted the matching receive and vice versa, so an ungrouped
 * ring of sends deadlocks here as it does on real NCCL. Between
 * ncclGroupStart and ncclGroupEnd calls only enqueue; ncclGroupEnd enters
 * every enqueued operation, then waits for all of them (so one thread can
 * drive all ranks of a ncclCommInitAll communicator, and a grouped ring of
 * send/recv completes), then takes their summed time once. Buffers are
 * never read or written (they are device memory to the caller); streams
 * are opaque (but see FAKENCCL_ASYNC). A wait longer than
 * FAKENCCL_TIMEOUT_S (default 60) seconds fails with ncclSystemError.
 *
 * FAKENCCL_ASYNC=1 (read once, at load; unset, empty or "0": off) times
 * operations as a GPU does: an ungrouped operation's call (a group's
 * ncclGroupEnd) enters its operation(s), so the other ranks see this rank
 * arrive, starts and stops the plugin's task events as above, and returns
 * ncclSuccess at once. The operation (the group, as one unit) is then
 * pending on the stream it was given (the pointer's value; NULL and
 * cudaStreamLegacy (0x1) are the same legacy default stream, anything
 * else, cudaStreamPerThread included, is matched by value). What the
 * synchronous call does after entering (waiting for the other ranks or
 * the peer, the simulated time, the plugin's KernelCh and proxy events,
 * the "bytes" stats) happens later, in the order the operations were
 * entered, on the first of:
 *   - the application synchronizing that stream: the fake libcuda's
 *     cuStreamSynchronize (and its _ptsz form, and cudaStreamSynchronize,
 *     which calls it) calls the exported hook
 *       int fakenccl_sync(void *stream, int all)
 *     with the stream after its own wait, cuCtxSynchronize(_v2) (and
 *     cudaDeviceSynchronize) with all = 1: every pending operation of the
 *     process. The hook completes the matching pending operations and
 *     returns 0, or the ncclResult_t of the first that failed (a wait past
 *     FAKENCCL_TIMEOUT_S: ncclSystemError, with ncclGetLastError set on
 *     that thread); libcuda then returns CUDA_ERROR_UNKNOWN. Without
 *     FAKENCCL_ASYNC the hook returns 0 at once. libcuda looks it up
 *     itself (no link dependency), so real CUDA never calls it;
 *   - the same process making another operation (or ncclGroupEnd, or
 *     ncclCommSplit) on a communicator the pending one uses: all its
 *     pending operations complete first, as NCCL orders its work on a
 *     communicator; a failure is that call's result (ncclSystemError),
 *     and the new operation is not entered;
 *   - ncclCommFinalize, ncclCommDestroy (both return a failure),
 *     ncclCommAbort (ignores it) of such a communicator;
 *   - the process exiting (an atexit handler, before FAKENCCL_STATS is
 *     written), so that the stats and FAKENCCL_PROFILER_TRUTH are complete.
 * Each of these completes only what was pending when it began.
 * FAKENCCL_TIMEOUT_S counts from when a completion begins. The plugin's
 * GPU span still starts at the launch (or the ready instant) and ends when
 * the host completed the operation. Pending operations are the process's,
 * not a device's: with ranks as threads of one process, a stream they
 * share, or cuCtxSynchronize, also waits for the other ranks' operations
 * (as if on one GPU), and times out if one of those needs the caller's
 * next operation; give each rank its own stream. Unset, nothing of this
 * runs: no thread, no list, a branch or two per call.
 *
 * FAKENCCL_STATS=path writes at exit, for ground truth ("%p" in the path
 * becomes the pid):
 *   {"pid": N, "calls": {"ncclX": n, ...}, "grouped": {"ncclX": n, ...},
 *    "bytes": {"ncclX": count x datatype size summed, ...}, "groups": n}
 * "calls" counts every call the library received (errors too), "grouped"
 * the operations enqueued inside a group, "groups" the outermost
 * ncclGroupEnd calls, "bytes" the successful operations' bytes.
 *
 * Profiler plugin, driven as NCCL 2.28 drives one (the v5 ABI of
 * inject/nccl_prof_abi.h) or as NCCL 2.27 drives one (v4). Without
 * NCCL_PROFILER_PLUGIN nothing below happens: no thread, no timestamps,
 * no output.
 *   Loading, once per process at the first communicator init (InitRank,
 *   InitRankConfig, InitAll, Split): NCCL_PROFILER_PLUGIN=PATH (with a
 *   '/') or NAME (libnccl-profiler-NAME.so, found by the dynamic loader;
 *   "none" loads nothing) is dlopened RTLD_NOW | RTLD_LOCAL, then the
 *   symbols ncclProfiler_VER are looked up for each VER of
 *   FAKENCCL_PROFILER_VERSIONS (comma-separated, default "v6,v5,v4,v3,v1",
 *   the order NCCL 2.29 tries). The first symbol found is driven if it is
 *   v5 or v4: when it is another version, or none is found, or dlopen
 *   fails, one line on stderr says so ("fakenccl: profiler plugin PATH:
 *   ...: continuing without") and the run goes on without a plugin.
 *   Success is silent unless FAKENCCL_DEBUG is set (which also prints the
 *   plugin's logger calls). A forked child keeps the parent's loaded plugin.
 *   v4 differs only in init's parameter order and the descriptor's layout
 *   (a uint8_t type, no parentGroup in coll and p2p): every event below
 *   is built as for v5, then copied into a zeroed v4 descriptor (its
 *   padding 0, as NCCL 2.27's = {0}); v4's parentObj of a task is the
 *   group event, NULL here as in v5.
 *   Communicators: every one created (each of ncclCommInitAll's, each
 *   ncclCommSplit child) gets init(&ctx, commHash, &mask, commName (the
 *   config's, or ""), 1 node, nranks, rank, logger) (v4: init(&ctx,
 *   &mask, commName, commHash, 1 node, nranks, rank, logger)), all with a
 *   pointer to one process-wide int mask; a non-zero return is reported
 *   on stderr and that communicator runs without the plugin. commHash is
 *   NCCL's (2.26 and later): the hash of the 128-byte unique id (for
 *   ncclCommInitAll, one made inside), and for a split child of the
 *   parent's commHash, the parent's split count and the color. The
 *   first of ncclCommFinalize, ncclCommDestroy, ncclCommAbort calls
 *   finalize(ctx), after the proxy thread has reported everything queued.
 *   Operations: the mask is read (relaxed) as each operation is entered,
 *   ungrouped in the call, grouped at ncclGroupEnd; 0 calls nothing. Every
 *   collective takes its seqNumber, counted per communicator and function
 *   (ncclBcast counts as Broadcast) from 0 whatever the mask. With
 *   NPA_COLL (or NPA_P2P for ncclSend/ncclRecv) a task event starts on the
 *   calling thread before the operation is entered (parent NULL; func as
 *   NCCL names it: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce,
 *   AlltoAll, Send, Recv; datatype as "ncclFloat32" etc.; root -1 for
 *   collectives without one; nchannels FAKENCCL_CHANNELS (default 2,
 *   1..32), 1 for point-to-point; nwarps 8, algo RING, proto SIMPLE) and
 *   stops right after it was entered ("launched"), before the operation
 *   waits: children always come after their task stopped, as from NCCL's
 *   proxy thread. A group starts all its tasks, enters all, stops all.
 *   GPU span: from the instant this rank entered the operation (its
 *   kernel's launch: NCCL's kernel writes a channel's start as it begins,
 *   before it waits for its peers, so a late rank's span starts late; a
 *   group: the latest of its operations') to the end of its simulated
 *   time (a group: one span for all its operations, a kernel). With
 *   FAKENCCL_GPU_START=ready the span starts when the last rank entered
 *   (kept in the world, so every rank sees the same instant). Once the span is over the
 *   operation goes to a per-process proxy thread ("NCCL Progress", started
 *   at the first one, signals blocked) which sleeps until FAKENCCL_PROXY_LAG_US
 *   (default 20) after the GPU end, so a KernelCh is observed late on
 *   purpose, as a real proxy thread reads the GPU's timestamps late. For
 *   each channel c it then reports, per the mask read at entry: NPA_KERNEL_CH
 *   (parent the task's handle, pTimer the channel's start on the fake GPU
 *   clock, then recordEventState(KernelChStop) with the end, then stop);
 *   with NPA_PROXY_OP or NPA_PROXY_STEP and nranks > 1 a ProxyOp (pid,
 *   channel c, send to (rank + 1) % nranks, 4 steps of bytes / nchannels /
 *   4 (at least 1)), and with NPA_PROXY_STEP its 4 steps, each through
 *   SEND_GPU_WAIT (0 bytes) and SEND_WAIT (chunk bytes). Channel c starts c
 *   microseconds after channel 0 (c/nchannels of the span when the span is
 *   shorter than nchannels microseconds); all end at the end. A NULL
 *   handle is never passed to stop_event or record_event_state. The fake
 *   GPU clock is CLOCK_REALTIME + FAKENCCL_GPU_CLOCK_OFFSET_NS (signed,
 *   default 1234567890123): not the host's CLOCK_BOOTTIME. Span instants
 *   are read on both clocks at once. Without FAKENCCL_ASYNC every call
 *   returns once its (simulated) work is done.
 *   FAKENCCL_PROFILER_TRUTH=path ("%p": the pid; one file per process,
 *   forked children included) appends, one write(2) per line as it
 *   reports: "op HASH FUNC SEQ RANK BYTES" for each task event started
 *   (SEQ -1 for Send/Recv) and "ch HASH FUNC SEQ RANK CHANNEL START END"
 *   for each KernelCh started, HASH the commHash in 16 hex digits, START
 *   and END the channel's span in CLOCK_BOOTTIME nanoseconds (the same
 *   instants as its pTimers).
 */
#define _GNU_SOURCE
#include <nccl.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../inject/nccl_prof_abi.h"

/* Strong pncclX defined here, weak ncclX alias after it. */
#define ALIAS(name) extern __typeof(p##name) name __attribute__((weak, alias("p" #name)))

#define ID_MAGIC 0x4c43434e454b4146ull /* "FAKENCCL" */

/* ------------------------------------------------------------ stats */

enum fn {
	F_GetVersion, F_GetUniqueId, F_CommInitRank, F_CommInitAll, F_CommInitRankConfig,
	F_CommSplit, F_CommFinalize, F_CommDestroy, F_CommAbort, F_CommCount, F_CommCuDevice,
	F_CommUserRank, F_CommGetAsyncError, F_GetErrorString, F_GetLastError, F_AllReduce,
	F_Broadcast, F_Bcast, F_Reduce, F_AllGather, F_ReduceScatter, F_AlltoAll, F_Send,
	F_Recv, F_GroupStart, F_GroupEnd, F__COUNT
};

static const char *const fn_names[F__COUNT] = {
	"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll",
	"ncclCommInitRankConfig", "ncclCommSplit", "ncclCommFinalize", "ncclCommDestroy",
	"ncclCommAbort", "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank",
	"ncclCommGetAsyncError", "ncclGetErrorString", "ncclGetLastError", "ncclAllReduce",
	"ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
	"ncclAlltoAll", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
};

static _Atomic uint64_t st_calls[F__COUNT], st_grouped[F__COUNT], st_bytes[F__COUNT];
static _Atomic uint64_t st_groups;

#define COUNT(f) atomic_fetch_add_explicit(&st_calls[f], 1, memory_order_relaxed)

/* ------------------------------------------------------------ errors */

static __thread char last_error[256];

static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return r;
}

/* ------------------------------------------------------------ clocks, environment */

/* One instant on the two clocks that matter: CLOCK_BOOTTIME (the host
 * clock cgbpf uses) and CLOCK_REALTIME (the fake GPU clock's base). */
struct stamp {
	uint64_t boot, real;
};

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* Both clocks at one moment: the realtime read bracketed by two boottime
 * reads, the tightest of a few tries (a preemption between two reads
 * would put tens of microseconds between the GPU's times and the truth
 * file's). */
static void stamp_now(struct stamp *t)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 8 && best > 2000; i++) {
		struct timespec b, r, b2;

		clock_gettime(CLOCK_BOOTTIME, &b);
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_BOOTTIME, &b2);
		if ((uint64_t)(ts_ns(&b2) - ts_ns(&b)) < best) {
			best = (uint64_t)(ts_ns(&b2) - ts_ns(&b));
			t->boot = ts_ns(&b) + best / 2;
			t->real = ts_ns(&r);
		}
	}
}

/* getenv(name) as a number in [lo, hi], def if unset, empty or unparsable. */
static long long env_num(const char *name, long long def, long long lo, long long hi)
{
	const char *e = getenv(name);
	char *end;
	long long v;

	if (!e || !*e)
		return def;
	errno = 0;
	v = strtoll(e, &end, 10);
	if (errno || end == e)
		return def;
	return v < lo ? lo : v > hi ? hi : v;
}

/* Copies tmpl to path, "%p" becoming the pid. */
static void expand_pid(const char *tmpl, char *path, size_t cap)
{
	size_t n = 0;

	for (; *tmpl && n + 16 < cap; tmpl++) {
		if (tmpl[0] == '%' && tmpl[1] == 'p') {
			n += (size_t)snprintf(path + n, cap - n, "%d", getpid());
			tmpl++;
		} else {
			path[n++] = *tmpl;
		}
	}
	path[n] = 0;
}

/* ------------------------------------------------------------ worlds */

/* The state shared by the ranks of one communicator. Arrays follow the
 * header: coll[nranks] (collectives each rank entered), sent[nranks *
 * nranks] and recvd[nranks * nranks] (sends posted from row to column,
 * receives posted by row from column), split_color[nranks],
 * split_key[nranks], then the instants operations became ready to run
 * (their last rank entered), rings of {seq, boottime, realtime}:
 * cready[CRING] for collectives by sequence number, pready[nranks *
 * nranks][PRING] for the sends from row to column and their receives. A
 * rank reads its operation's slot once the operation is ready; a slot
 * already reused (a group of more than a ring's operations) reads as
 * "now". */
struct world {
	_Atomic int ready;
	int nranks;
	int joined;
	int refs;	/* communicators sharing this mapping (ncclCommInitAll) */
	uint64_t key[2];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t data[];
};

struct ncclComm {
	struct world *w;
	size_t map_size;
	int shared_map;	/* one mapping for all ranks: the last destroy unmaps */
	int rank;
	int nranks;
	int cudev;
	uint64_t splits;	/* ncclCommSplit calls so far */
	uint64_t hash;		/* commHash: the same in every member's process */
	void *prof_ctx;		/* the profiler plugin's context */
	int prof_on;		/* the plugin's init succeeded for this communicator */
	int prof_done;		/* its finalize was called */
	uint64_t seq[F__COUNT];	/* seqNumber per function (ncclBcast: ncclBroadcast's) */
};

#define CRING 256
#define PRING 8

static size_t world_size(int nranks)
{
	size_t n = (size_t)nranks;

	return sizeof(struct world) +
	       (n + 2 * n * n + 2 * n + 3 * CRING + n * n * 3 * PRING) * sizeof(uint64_t);
}

static uint64_t *w_coll(struct world *w) { return w->data; }
static uint64_t *w_sent(struct world *w) { return w->data + w->nranks; }
static uint64_t *w_recvd(struct world *w) { return w_sent(w) + (size_t)w->nranks * w->nranks; }
static int64_t *w_split_color(struct world *w)
{
	return (int64_t *)(w_recvd(w) + (size_t)w->nranks * w->nranks);
}
static int64_t *w_split_key(struct world *w) { return w_split_color(w) + w->nranks; }
static uint64_t *w_cready(struct world *w) { return (uint64_t *)(w_split_key(w) + w->nranks); }
static uint64_t *w_pready(struct world *w, int from, int to)
{
	return w_cready(w) + 3 * CRING + ((size_t)from * w->nranks + to) * 3 * PRING;
}

/* The profiler plugin (section "profiler plugin"): only a process that
 * loaded one takes the timestamps below (a rank of a process without it
 * leaves its slots unwritten: a rank that has one then reads "now"). */
static int prof_ver;	/* the version driven: 5 (prof) or 4 (prof_v4); 0: none */
static const struct npa_profiler_v5 *prof;
static const struct npa_profiler_v4 *prof_v4;

/* With w->lock held: operation seq of the ring became ready now. */
static void ready_put(uint64_t *ring, unsigned slots, uint64_t seq)
{
	uint64_t *slot = ring + 3 * (seq % slots);
	struct stamp t;

	if (!prof_ver)
		return;
	stamp_now(&t);
	slot[0] = seq;
	slot[1] = t.boot;
	slot[2] = t.real;
}

/* With w->lock held: when operation seq of the ring became ready. */
static void ready_get(const uint64_t *ring, unsigned slots, uint64_t seq, struct stamp *t)
{
	const uint64_t *slot = ring + 3 * (seq % slots);

	if (!prof_ver)
		return;
	if (slot[0] != seq) {
		stamp_now(t);
		return;
	}
	t->boot = slot[1];
	t->real = slot[2];
}

static void world_init(struct world *w, int nranks, const uint64_t key[2])
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;

	w->nranks = nranks;
	w->joined = 0;
	w->key[0] = key[0];
	w->key[1] = key[1];
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&w->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_store(&w->ready, 1);
}

static long timeout_s(void)
{
	static long t;

	if (!t) {
		const char *e = getenv("FAKENCCL_TIMEOUT_S");
		long v = e ? strtol(e, NULL, 10) : 0;

		t = v > 0 ? v : 60;
	}
	return t;
}

static struct timespec deadline(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_s();
	return ts;
}

static void shm_name(char *buf, size_t cap, const uint64_t key[2])
{
	snprintf(buf, cap, "/fakenccl-%016llx%016llx", (unsigned long long)key[0],
		 (unsigned long long)key[1]);
}

/* Maps the world named key of nranks ranks, creating it if this is the
 * first rank; NULL with last_error set on failure. */
static struct world *world_open(const uint64_t key[2], int nranks)
{
	struct timespec until = deadline(), now, nap = { 0, 1000000 };
	size_t size = world_size(nranks);
	struct world *w;
	char name[64];
	int fd, created = 0;
	struct stat st;

	shm_name(name, sizeof(name), key);
	for (;;) {
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd >= 0) {
			created = 1;
			if (ftruncate(fd, (off_t)size)) {
				fail(ncclSystemError, "fake nccl: ftruncate %s: %s", name, strerror(errno));
				close(fd);
				shm_unlink(name);
				return NULL;
			}
			break;
		}
		if (errno != EEXIST) {
			fail(ncclSystemError, "fake nccl: shm_open %s: %s", name, strerror(errno));
			return NULL;
		}
		fd = shm_open(name, O_RDWR, 0600);
		if (fd >= 0) {
			if (!fstat(fd, &st) && (size_t)st.st_size >= size)
				break;
			close(fd);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec) {
			fail(ncclSystemError, "fake nccl: timed out joining %s", name);
			return NULL;
		}
		nanosleep(&nap, NULL);
	}
	w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (w == MAP_FAILED) {
		fail(ncclSystemError, "fake nccl: mmap %s: %s", name, strerror(errno));
		return NULL;
	}
	if (created)
		world_init(w, nranks, key);
	while (!atomic_load(&w->ready)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec) {
			munmap(w, size);
			fail(ncclSystemError, "fake nccl: timed out joining %s", name);
			return NULL;
		}
		nanosleep(&nap, NULL);
	}
	if (w->nranks != nranks) {
		int n = w->nranks;

		munmap(w, size);
		fail(ncclInvalidArgument, "fake nccl: nranks %d, but the communicator has %d", nranks, n);
		return NULL;
	}
	return w;
}

/* Waits, with w->lock held, until done(w, arg) is true; 0 or -ETIMEDOUT. */
static int wait_locked(struct world *w, int (*done)(struct world *, const void *), const void *arg,
		       const struct timespec *until)
{
	while (!done(w, arg))
		if (pthread_cond_timedwait(&w->cond, &w->lock, until) == ETIMEDOUT && !done(w, arg))
			return -ETIMEDOUT;
	return 0;
}

static int all_joined(struct world *w, const void *arg)
{
	return w->joined >= w->nranks;
}

/* Joins rank to world w: returns a new communicator once all ranks have
 * joined, NULL with last_error set otherwise. */
static struct ncclComm *world_join(struct world *w, int rank, int cudev)
{
	struct timespec until = deadline();
	/* malloc, not calloc: glibc's calloc never takes a chunk from the
	 * thread's cache of freed ones, malloc does, so a communicator
	 * created after a destroy can get the destroyed one's handle, as a
	 * long job's can (tests of dumps rely on it). explicit_bzero: the
	 * compiler makes malloc and memset one calloc. */
	struct ncclComm *c = malloc(sizeof(*c));
	char name[64];
	int err;

	if (!c) {
		fail(ncclSystemError, "fake nccl: out of memory");
		return NULL;
	}
	explicit_bzero(c, sizeof(*c));
	c->w = w;
	c->map_size = world_size(w->nranks);
	c->rank = rank;
	c->nranks = w->nranks;
	c->cudev = cudev;
	pthread_mutex_lock(&w->lock);
	if (++w->joined == w->nranks) {
		shm_name(name, sizeof(name), w->key);
		shm_unlink(name);
		pthread_cond_broadcast(&w->cond);
	}
	err = wait_locked(w, all_joined, NULL, &until);
	pthread_mutex_unlock(&w->lock);
	if (err) {
		/* Nobody else will come: leave no stale object behind. */
		shm_name(name, sizeof(name), w->key);
		shm_unlink(name);
		free(c);
		fail(ncclSystemError, "fake nccl: timed out waiting for %d ranks", w->nranks);
		return NULL;
	}
	return c;
}

/* ------------------------------------------------------------ operations */

enum op_kind { OP_COLL, OP_SEND, OP_RECV };

struct op {
	enum fn fn;
	enum op_kind kind;
	struct ncclComm *comm;
	const void *stream;	/* FAKENCCL_ASYNC: the stream it is pending on */
	int peer;
	uint64_t bytes;
	uint64_t seq;	/* the sequence number it was entered with */
	/* For the profiler plugin: */
	const void *sendbuff;
	void *recvbuff;
	size_t count;
	ncclDataType_t type;
	int root;	/* -1: a collective without root */
	int pmask;	/* the event mask read when it was entered */
	uint64_t pseq;	/* seqNumber (collectives) */
	void *task;	/* the Coll/P2p event's handle, NULL: not tracked */
	void *api[2];	/* v5: its GroupApi and CollApi/P2pApi events' handles */
	struct stamp ready;	/* when its last rank entered */
	struct stamp launched;	/* when this rank entered it (its kernel's launch) */
};

static int op_done(struct world *w, const void *arg)
{
	const struct op *o = arg;
	int n = w->nranks, r = o->comm->rank, i;

	switch (o->kind) {
	case OP_COLL:
		for (i = 0; i < n; i++)
			if (w_coll(w)[i] < o->seq)
				return 0;
		return 1;
	case OP_SEND:	/* the peer posted its seq-th receive from us */
		return w_recvd(w)[(size_t)o->peer * n + r] >= o->seq;
	case OP_RECV:
		return w_sent(w)[(size_t)o->peer * n + r] >= o->seq;
	}
	return 1;
}

/* Enters o: counts it in its world, where the other ranks can see it. */
static void op_enter(struct op *o)
{
	struct world *w = o->comm->w;
	int n = w->nranks, r = o->comm->rank, i;

	pthread_mutex_lock(&w->lock);
	switch (o->kind) {
	case OP_COLL:
		o->seq = ++w_coll(w)[r];
		for (i = 0; i < n && (i == r || w_coll(w)[i] >= o->seq); i++)
			;
		if (i == n)	/* the last rank to enter it */
			ready_put(w_cready(w), CRING, o->seq);
		break;
	case OP_SEND:
		o->seq = ++w_sent(w)[(size_t)r * n + o->peer];
		if (w_recvd(w)[(size_t)o->peer * n + r] >= o->seq)
			ready_put(w_pready(w, r, o->peer), PRING, o->seq);
		break;
	case OP_RECV:
		o->seq = ++w_recvd(w)[(size_t)r * n + o->peer];
		if (w_sent(w)[(size_t)o->peer * n + r] >= o->seq)
			ready_put(w_pready(w, o->peer, r), PRING, o->seq);
		break;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Waits until o can run; sets o->ready. */
static ncclResult_t op_wait(struct op *o, const struct timespec *until)
{
	struct world *w = o->comm->w;
	int err, r = o->comm->rank;

	pthread_mutex_lock(&w->lock);
	err = wait_locked(w, op_done, o, until);
	if (!err) {
		switch (o->kind) {
		case OP_COLL:
			ready_get(w_cready(w), CRING, o->seq, &o->ready);
			break;
		case OP_SEND:
			ready_get(w_pready(w, r, o->peer), PRING, o->seq, &o->ready);
			break;
		case OP_RECV:
			ready_get(w_pready(w, o->peer, r), PRING, o->seq, &o->ready);
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
	if (err)
		return fail(ncclSystemError, "fake nccl: %s on rank %d timed out waiting for %s",
			    fn_names[o->fn], o->comm->rank,
			    o->kind == OP_COLL ? "the other ranks" : "the peer");
	return ncclSuccess;
}

static void simulate(uint64_t bytes)
{
	static double ns_per_byte = -1;
	struct timespec ts;
	double ns;

	if (ns_per_byte < 0) {
		const char *e = getenv("FAKENCCL_NS_PER_BYTE");
		double v = e ? strtod(e, NULL) : 0;

		ns_per_byte = v > 0 ? v : 0;
	}
	ns = ns_per_byte * (double)bytes;
	if (ns < 1)
		return;
	ts.tv_sec = (time_t)(ns / 1e9);
	ts.tv_nsec = (long)(ns - (double)ts.tv_sec * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The calling thread's open group. */
static __thread int group_depth;
static __thread struct op *group_ops;
static __thread size_t group_len, group_cap;

static size_t type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
		return 1;
	case ncclFloat16: case ncclBfloat16:
		return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32:
		return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64:
		return 8;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------ profiler plugin */

/* The one event mask of the process, given to every init; the plugin may
 * change it at any time from any thread: read relaxed, once per operation. */
static int prof_mask;
static pthread_once_t prof_once = PTHREAD_ONCE_INIT;

static int prof_debug(void)
{
	const char *e = getenv("FAKENCCL_DEBUG");

	return e && *e && strcmp(e, "0");
}

static int read_mask(void)
{
	return __atomic_load_n(&prof_mask, __ATOMIC_RELAXED);
}

/* Read when the plugin loads: FAKENCCL_CHANNELS, FAKENCCL_GPU_CLOCK_OFFSET_NS,
 * FAKENCCL_PROXY_LAG_US (how long after an operation's GPU end the proxy
 * thread looks at it). */
static int prof_nch = 2;
static int64_t gpu_offset = 1234567890123ll;
static uint64_t proxy_lag_ns = 20000;

static int nchannels(void)
{
	return prof_nch;
}

/* The fake GPU's %globaltimer at realtime instant real. */
static uint64_t gpu_ns(uint64_t real)
{
	return (uint64_t)((int64_t)real + gpu_offset);
}

/* NCCL's names, as its profiler gives them. */
static const char *prof_func(enum fn fn)
{
	switch (fn) {
	case F_AllReduce: return "AllReduce";
	case F_Broadcast: case F_Bcast: return "Broadcast";
	case F_Reduce: return "Reduce";
	case F_AllGather: return "AllGather";
	case F_ReduceScatter: return "ReduceScatter";
	case F_AlltoAll: return "AlltoAll";
	case F_Send: return "Send";
	case F_Recv: return "Recv";
	default: return "Unknown";
	}
}

static const char *type_name(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: return "ncclInt8";
	case ncclUint8: return "ncclUint8";
	case ncclInt32: return "ncclInt32";
	case ncclUint32: return "ncclUint32";
	case ncclInt64: return "ncclInt64";
	case ncclUint64: return "ncclUint64";
	case ncclFloat16: return "ncclFloat16";
	case ncclFloat32: return "ncclFloat32";
	case ncclFloat64: return "ncclFloat64";
	case ncclBfloat16: return "ncclBfloat16";
	case ncclFloat8e4m3: return "ncclFloat8e4m3";
	case ncclFloat8e5m2: return "ncclFloat8e5m2";
	default: return "Unknown";
	}
}

/* ---- calling the plugin, v5 or v4 */

/* startEvent with d, a v5 descriptor; for v4 converted to its layout (a
 * one-byte type, no parentGroup), zeroed first as NCCL 2.27's = {0}. */
static void prof_start(void *ctx, void **handle, struct npa_descr_v5 *d)
{
	struct npa_descr_v4 d4;

	if (prof_ver == 5) {
		prof->start_event(ctx, handle, d);
		return;
	}
	memset(&d4, 0, sizeof(d4));
	d4.type = (uint8_t)d->type;
	d4.parent = d->parent;
	d4.rank = d->rank;
	switch (d->type) {
	case NPA_COLL:
		d4.coll.seq = d->coll.seq;
		d4.coll.func = d->coll.func;
		d4.coll.send_buff = d->coll.send_buff;
		d4.coll.recv_buff = d->coll.recv_buff;
		d4.coll.count = d->coll.count;
		d4.coll.root = d->coll.root;
		d4.coll.datatype = d->coll.datatype;
		d4.coll.nchannels = d->coll.nchannels;
		d4.coll.nwarps = d->coll.nwarps;
		d4.coll.algo = d->coll.algo;
		d4.coll.proto = d->coll.proto;
		break;
	case NPA_P2P:
		d4.p2p.func = d->p2p.func;
		d4.p2p.buff = d->p2p.buff;
		d4.p2p.datatype = d->p2p.datatype;
		d4.p2p.count = d->p2p.count;
		d4.p2p.peer = d->p2p.peer;
		d4.p2p.nchannels = d->p2p.nchannels;
		break;
	case NPA_PROXY_OP:
		d4.proxy_op.pid = d->proxy_op.pid;
		d4.proxy_op.channel = d->proxy_op.channel;
		d4.proxy_op.peer = d->proxy_op.peer;
		d4.proxy_op.nsteps = d->proxy_op.nsteps;
		d4.proxy_op.chunk_size = d->proxy_op.chunk_size;
		d4.proxy_op.is_send = d->proxy_op.is_send;
		break;
	case NPA_PROXY_STEP:
		d4.proxy_step.step = d->proxy_step.step;
		break;
	case NPA_KERNEL_CH:
		d4.kernel_ch.channel = d->kernel_ch.channel;
		d4.kernel_ch.ptimer = d->kernel_ch.ptimer;
		break;
	default:
		break;
	}
	prof_v4->start_event(ctx, handle, &d4);
}

static void prof_stop(void *handle)
{
	if (prof_ver == 5)
		prof->stop_event(handle);
	else
		prof_v4->stop_event(handle);
}

/* The state arguments are the same union in v4 and v5. */
static void prof_record(void *handle, int state, union npa_state_args_v5 *a)
{
	if (prof_ver == 5)
		prof->record_event_state(handle, state, a);
	else
		prof_v4->record_event_state(handle, state, a);
}

/* ---- ground truth */

static pthread_mutex_t truth_lock = PTHREAD_MUTEX_INITIALIZER;
static int truth_fd = -1;
static pid_t truth_pid;

/* Appends one line to FAKENCCL_PROFILER_TRUTH (this process's file). */
static void truth(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void truth(const char *fmt, ...)
{
	const char *tmpl = getenv("FAKENCCL_PROFILER_TRUTH");
	char line[512], path[4096];
	va_list ap;
	int len;

	if (!tmpl || !*tmpl)
		return;
	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (len <= 0)
		return;
	if ((size_t)len >= sizeof(line))
		len = sizeof(line) - 1;
	pthread_mutex_lock(&truth_lock);
	if (truth_pid != getpid()) {
		if (truth_fd >= 0)
			close(truth_fd);
		expand_pid(tmpl, path, sizeof(path));
		truth_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (truth_fd < 0)
			fprintf(stderr, "fakenccl: %s: %s\n", path, strerror(errno));
		truth_pid = getpid();
	}
	/* One write per line: complete lines, whatever ends the process. */
	if (truth_fd >= 0 && write(truth_fd, line, (size_t)len) != len)
		fprintf(stderr, "fakenccl: writing the profiler truth: %s\n", strerror(errno));
	pthread_mutex_unlock(&truth_lock);
}

/* ---- the proxy thread */

/* A completed operation whose KernelCh and ProxyOp/ProxyStep events the
 * proxy thread reports. */
struct pitem {
	struct pitem *next;
	void *ctx;
	void *task;
	uint64_t hash;
	int pmask, rank, nranks, nch;
	const char *func;
	long long seq;	/* -1: point-to-point */
	uint64_t bytes;
	struct stamp start, end;	/* the GPU span */
};

static pthread_mutex_t pq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pq_work = PTHREAD_COND_INITIALIZER, pq_idle = PTHREAD_COND_INITIALIZER;
static struct pitem *pq_head, **pq_tail = &pq_head;
static int pq_busy;
static pid_t pq_pid;	/* the process whose proxy thread runs (none after fork) */

static void proxy_run(const struct pitem *it)
{
	uint64_t lag = proxy_lag_ns, span = it->end.boot - it->start.boot;
	struct npa_descr_v5 d;
	union npa_state_args_v5 a;
	struct timespec nap;
	struct stamp now;
	int c, s;

	/* A proxy thread sees the GPU's timestamps late. */
	stamp_now(&now);
	if (now.boot < it->end.boot + lag) {
		uint64_t ns = it->end.boot + lag - now.boot;

		nap.tv_sec = (time_t)(ns / 1000000000u);
		nap.tv_nsec = (long)(ns % 1000000000u);
		while (nanosleep(&nap, &nap) && errno == EINTR)
			;
	}
	for (c = 0; c < it->nch; c++) {
		/* Channel c starts c us after channel 0, or, in a span too short
		 * for that, c/nch of the span; all end at the end. */
		uint64_t off = (uint64_t)c * 1000;

		if (span < (uint64_t)it->nch * 1000)
			off = span * (uint64_t)c / (uint64_t)it->nch;
		if (it->pmask & NPA_KERNEL_CH) {
			void *kh = NULL;

			memset(&d, 0, sizeof(d));
			d.type = NPA_KERNEL_CH;
			d.parent = it->task;
			d.kernel_ch.channel = (uint8_t)c;
			d.kernel_ch.ptimer = gpu_ns(it->start.real + off);
			prof_start(it->ctx, &kh, &d);
			if (kh) {
				memset(&a, 0, sizeof(a));
				a.kernel_ch.ptimer = gpu_ns(it->end.real);
				prof_record(kh, NPA_KERNEL_CH_STOP, &a);
				prof_stop(kh);
			}
			truth("ch %016llx %s %lld %d %d %llu %llu\n", (unsigned long long)it->hash,
			      it->func, it->seq, it->rank, c, (unsigned long long)(it->start.boot + off),
			      (unsigned long long)it->end.boot);
		}
		/* NCCL starts ProxyOp events for ProxyStep too (their parent). */
		if ((it->pmask & (NPA_PROXY_OP | NPA_PROXY_STEP)) && it->nranks > 1) {
			uint64_t chunk = it->bytes / (uint64_t)it->nch / 4;
			void *ph = NULL;

			if (chunk < 1)
				chunk = 1;
			if (chunk > INT32_MAX)
				chunk = INT32_MAX;
			memset(&d, 0, sizeof(d));
			d.type = NPA_PROXY_OP;
			d.parent = it->task;
			d.rank = it->rank;
			d.proxy_op.pid = getpid();
			d.proxy_op.channel = (uint8_t)c;
			d.proxy_op.peer = (it->rank + 1) % it->nranks;
			d.proxy_op.nsteps = 4;
			d.proxy_op.chunk_size = (int)chunk;
			d.proxy_op.is_send = 1;
			prof_start(it->ctx, &ph, &d);
			for (s = 0; s < 4 && (it->pmask & NPA_PROXY_STEP); s++) {
				void *sh = NULL;

				memset(&d, 0, sizeof(d));
				d.type = NPA_PROXY_STEP;
				d.parent = ph;
				d.rank = it->rank;
				d.proxy_step.step = s;
				prof_start(it->ctx, &sh, &d);
				if (!sh)
					continue;
				memset(&a, 0, sizeof(a));
				a.proxy_step.trans_size = 0;
				prof_record(sh, NPA_STEP_SEND_GPU_WAIT, &a);
				a.proxy_step.trans_size = (size_t)chunk;
				prof_record(sh, NPA_STEP_SEND_WAIT, &a);
				prof_stop(sh);
			}
			if (ph)
				prof_stop(ph);
		}
	}
}

static void *proxy_main(void *arg)
{
	struct pitem *it;

	pthread_mutex_lock(&pq_lock);
	for (;;) {
		while (!pq_head)
			pthread_cond_wait(&pq_work, &pq_lock);
		it = pq_head;
		pq_head = it->next;
		if (!pq_head)
			pq_tail = &pq_head;
		pq_busy = 1;
		pthread_mutex_unlock(&pq_lock);
		proxy_run(it);
		free(it);
		pthread_mutex_lock(&pq_lock);
		pq_busy = 0;
		if (!pq_head)
			pthread_cond_broadcast(&pq_idle);
	}
	return NULL;
}

/* Hands it to this process's proxy thread, started on first use. */
static void proxy_post(struct pitem *it)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err;

	pthread_mutex_lock(&pq_lock);
	if (pq_pid != getpid()) {
		/* No application signal is handled on this thread. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = pthread_create(&t, &attr, proxy_main, NULL);
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err) {
			/* No thread: report on the calling thread. */
			pthread_mutex_unlock(&pq_lock);
			proxy_run(it);
			free(it);
			return;
		}
		pthread_setname_np(t, "NCCL Progress");
		pq_pid = getpid();
	}
	it->next = NULL;
	*pq_tail = it;
	pq_tail = &it->next;
	pthread_cond_signal(&pq_work);
	pthread_mutex_unlock(&pq_lock);
}

/* Waits until the proxy thread has reported everything posted so far. */
static void proxy_drain(void)
{
	pthread_mutex_lock(&pq_lock);
	if (pq_pid == getpid())
		while (pq_head || pq_busy)
			pthread_cond_wait(&pq_idle, &pq_lock);
	pthread_mutex_unlock(&pq_lock);
}

/* ---- loading, communicators */

static void prof_logger(int level, unsigned long flags, const char *file, int line,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void prof_logger(int level, unsigned long flags, const char *file, int line,
			const char *fmt, ...)
{
	va_list ap;

	if (!prof_debug())
		return;
	fprintf(stderr, "fakenccl: plugin log (level %d) %s:%d: ", level, file ? file : "?", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void pend_at_exit(void);

/* Registered after the plugin's own load: runs before its exit handlers. */
static void prof_at_exit(void)
{
	pend_at_exit();	/* FAKENCCL_ASYNC: their events first */
	proxy_drain();
}

static void prof_load_once(void)
{
	const char *env = getenv("NCCL_PROFILER_PLUGIN");
	const char *vers = getenv("FAKENCCL_PROFILER_VERSIONS");
	char path[4096], list[256], sym[96], *tok, *save = NULL;
	const struct npa_profiler_v5 *p;
	const struct npa_profiler_v4 *p4;
	void *lib;
	int bad;

	if (!env || !*env || !strcasecmp(env, "none"))
		return;
	prof_nch = (int)env_num("FAKENCCL_CHANNELS", 2, 1, 32);
	gpu_offset = env_num("FAKENCCL_GPU_CLOCK_OFFSET_NS", 1234567890123ll, INT64_MIN, INT64_MAX);
	proxy_lag_ns = (uint64_t)env_num("FAKENCCL_PROXY_LAG_US", 20, 1, 10000000) * 1000;
	if (strchr(env, '/'))
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "libnccl-profiler-%s.so", env);
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "fakenccl: profiler plugin %s: %s: continuing without\n", path,
			dlerror());
		return;
	}
	snprintf(list, sizeof(list), "%s", vers && *vers ? vers : "v6,v5,v4,v3,v1");
	for (tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		snprintf(sym, sizeof(sym), "ncclProfiler_%s", tok);
		p = dlsym(lib, sym);
		if (!p)
			continue;
		if (strcmp(tok, "v5") && strcmp(tok, "v4")) {
			fprintf(stderr, "fakenccl: profiler plugin %s: %s found, but this fake drives "
				"only v5 and v4: continuing without\n", path, sym);
			dlclose(lib);
			return;
		}
		/* The same struct but for init's and startEvent's types. */
		p4 = (const struct npa_profiler_v4 *)(const void *)p;
		if (!strcmp(tok, "v5"))
			bad = !p->init || !p->start_event || !p->stop_event ||
			      !p->record_event_state || !p->finalize;
		else
			bad = !p4->init || !p4->start_event || !p4->stop_event ||
			      !p4->record_event_state || !p4->finalize;
		if (bad) {
			fprintf(stderr, "fakenccl: profiler plugin %s: %s has NULL functions: "
				"continuing without\n", path, sym);
			dlclose(lib);
			return;
		}
		if (prof_debug())
			fprintf(stderr, "fakenccl: profiler plugin %s: %s (\"%s\")\n", path, sym,
				p->name ? p->name : "");
		if (!strcmp(tok, "v5")) {
			prof = p;
			prof_ver = 5;
		} else {
			prof_v4 = p4;
			prof_ver = 4;
		}
		atexit(prof_at_exit);
		return;
	}
	fprintf(stderr, "fakenccl: profiler plugin %s: no ncclProfiler_vN symbol it knows: "
		"continuing without\n", path);
	dlclose(lib);
}

/* At a communicator's init: loads the plugin, once per process. */
static void prof_load(void)
{
	pthread_once(&prof_once, prof_load_once);
}

/*
 * commHash as NCCL 2.26 and later compute it (src/include/bitops.h's
 * eatHash/digestHash, src/init.cc): two accumulator words; each piece
 * fed in xors its size into the first, then each 8-byte chunk of it
 * (zero-padded) stirs both and is added. A communicator from a unique
 * id: the hash of its 128 bytes; a split child: of (parent's commHash,
 * the parent's split count, color), three pieces.
 */
static void eat(uint64_t acc[2], const void *bytes, size_t size)
{
	const unsigned char *p = bytes;

	acc[0] ^= size;
	while (size) {
		size_t n = size < 8 ? size : 8;
		uint64_t x = 0;

		acc[0] += acc[1];
		acc[1] ^= acc[0];
		acc[0] ^= acc[0] >> 31;
		acc[0] *= 0x9de62bbc8cef3ce3ull;
		acc[1] ^= acc[1] >> 32;
		acc[1] *= 0x485cd6311b599e79ull;
		memcpy(&x, p, n);
		p += n;
		size -= n;
		acc[0] += x;
	}
}

static uint64_t digest(const uint64_t acc[2])
{
	uint64_t h = acc[0];

	h ^= h >> 31;
	h *= 0xbac3bd562846de6bull;
	h += acc[1];
	h ^= h >> 32;
	h *= 0x995a187a14e7b445ull;
	return h;
}

static uint64_t id_hash(const ncclUniqueId *id)
{
	uint64_t acc[2] = { 1, 1 };

	eat(acc, id->internal, sizeof(id->internal));
	return digest(acc);
}

static uint64_t split_hash(uint64_t parent, int count, int color)
{
	uint64_t acc[2] = { 1, 1 };

	eat(acc, &parent, sizeof(parent));
	eat(acc, &count, sizeof(count));
	eat(acc, &color, sizeof(color));
	return digest(acc);
}

/* Calls the plugin's init for a new communicator. */
static void prof_comm_init(struct ncclComm *c, const ncclConfig_t *config)
{
	const char *name = "";
	npa_result_t r;

#if NCCL_VERSION_CODE >= 22700
	if (config && config->commName)
		name = config->commName;
#endif
	if (!prof_ver)
		return;
	c->prof_ctx = NULL;
	if (prof_ver == 5)
		r = prof->init(&c->prof_ctx, c->hash, &prof_mask, name, 1, c->nranks, c->rank,
			       prof_logger);
	else	/* v4: the name first, the mask second */
		r = prof_v4->init(&c->prof_ctx, &prof_mask, name, c->hash, 1, c->nranks, c->rank,
				  prof_logger);
	if (r != NPA_SUCCESS) {
		fprintf(stderr, "fakenccl: profiler plugin init for comm %016llx rank %d returned "
			"%d: this communicator continues without\n", (unsigned long long)c->hash,
			c->rank, (int)r);
		c->prof_ctx = NULL;
		return;
	}
	c->prof_on = 1;
}

/* ncclCommFinalize/Destroy/Abort: the plugin's finalize, once. */
static void prof_comm_fini(struct ncclComm *c)
{
	if (!c->prof_on || c->prof_done)
		return;
	c->prof_done = 1;
	proxy_drain();	/* its events are reported before its context goes */
	if (prof_ver == 5)
		prof->finalize(c->prof_ctx);
	else
		prof_v4->finalize(c->prof_ctx);
}

/* ---- operations */

/*
 * NCCL 2.28 starts these v5 events whenever any bit of the mask is set,
 * asked for or not: the call's implicit group (GroupApi), the call
 * (CollApi or P2pApi, its parent the group) and, around the kernel's
 * launch, KernelLaunch; the call's and group's end after the task's.
 */
static void prof_api_start(struct op *o)
{
	struct ncclComm *c = o->comm;
	struct npa_descr_v5 d;
	void *kl = NULL;

	memset(&d, 0, sizeof(d));
	d.type = NPA_GROUP_API;
	d.rank = c->rank;
	d.group_api.group_depth = 1;
	prof->start_event(c->prof_ctx, &o->api[0], &d);
	memset(&d, 0, sizeof(d));
	d.rank = c->rank;
	d.parent = o->api[0];
	if (o->kind == OP_COLL) {
		d.type = NPA_COLL_API;
		d.coll_api.func = prof_func(o->fn);
		d.coll_api.count = o->count;
		d.coll_api.datatype = type_name(o->type);
		d.coll_api.root = o->root;
	} else {
		d.type = NPA_P2P_API;
		d.p2p_api.func = prof_func(o->fn);
		d.p2p_api.count = o->count;
		d.p2p_api.datatype = type_name(o->type);
	}
	prof->start_event(c->prof_ctx, &o->api[1], &d);
	memset(&d, 0, sizeof(d));
	d.type = NPA_KERNEL_LAUNCH;
	d.rank = c->rank;
	d.parent = o->api[0];
	prof->start_event(c->prof_ctx, &kl, &d);
	if (kl)
		prof->stop_event(kl);
}

static void prof_api_stop(struct op *o)
{
	for (int i = 1; i >= 0; i--)
		if (o->api[i]) {
			prof->stop_event(o->api[i]);
			o->api[i] = NULL;
		}
}

/* Before o is entered ("launched"): its seqNumber, the mask, the task's
 * start event. */
static void prof_task_start(struct op *o)
{
	struct ncclComm *c = o->comm;
	struct npa_descr_v5 d;

	o->task = NULL;
	o->pmask = 0;
	o->pseq = 0;
	if (o->kind == OP_COLL)
		o->pseq = c->seq[o->fn == F_Bcast ? F_Broadcast : o->fn]++;
	o->api[0] = o->api[1] = NULL;
	if (!c->prof_on)
		return;
	o->pmask = read_mask();
	if (prof_ver == 5 && o->pmask)
		prof_api_start(o);
	memset(&d, 0, sizeof(d));
	d.parent = NULL;
	d.rank = c->rank;
	if (o->kind == OP_COLL) {
		if (!(o->pmask & NPA_COLL))
			return;
		d.type = NPA_COLL;
		d.coll.seq = o->pseq;
		d.coll.func = prof_func(o->fn);
		d.coll.send_buff = o->sendbuff;
		d.coll.recv_buff = o->recvbuff;
		d.coll.count = o->count;
		d.coll.root = o->root;
		d.coll.datatype = type_name(o->type);
		d.coll.nchannels = (uint8_t)nchannels();
		d.coll.nwarps = 8;
		d.coll.algo = "RING";
		d.coll.proto = "SIMPLE";
		d.coll.parent_group = NULL;
		prof_start(c->prof_ctx, &o->task, &d);
		truth("op %016llx %s %llu %d %llu\n", (unsigned long long)c->hash, d.coll.func,
		      (unsigned long long)o->pseq, c->rank, (unsigned long long)o->bytes);
	} else {
		if (!(o->pmask & NPA_P2P))
			return;
		d.type = NPA_P2P;
		d.p2p.func = prof_func(o->fn);
		d.p2p.buff = o->kind == OP_SEND ? (void *)(uintptr_t)o->sendbuff : o->recvbuff;
		d.p2p.datatype = type_name(o->type);
		d.p2p.count = o->count;
		d.p2p.peer = o->peer;
		d.p2p.nchannels = 1;
		d.p2p.parent_group = NULL;
		prof_start(c->prof_ctx, &o->task, &d);
		truth("op %016llx %s -1 %d %llu\n", (unsigned long long)c->hash, d.p2p.func,
		      c->rank, (unsigned long long)o->bytes);
	}
}

/* After o was entered, as NCCL stops its tasks after the kernel launch. */
static void prof_task_stop(struct op *o)
{
	if (o->comm->prof_on)
		stamp_now(&o->launched);
	if (o->task)
		prof_stop(o->task);
	prof_api_stop(o);
}

/* FAKENCCL_GPU_START=ready: channels start when the last rank entered;
 * default (launch): when this rank entered, as NCCL's kernel writes its
 * channel's start when it begins, before it waits for its peers. */
static int gpu_start_ready(void)
{
	static int v = -1;

	if (v < 0) {
		const char *e = getenv("FAKENCCL_GPU_START");

		v = e && !strcmp(e, "ready");
	}
	return v;
}

/* Whether o, completed, has proxy-side events to report. */
static int prof_children(const struct op *o)
{
	if (!o->comm->prof_on)
		return 0;
	return (o->pmask & NPA_KERNEL_CH) ||
	       ((o->pmask & (NPA_PROXY_OP | NPA_PROXY_STEP)) && o->comm->nranks > 1);
}

/* o's simulated GPU work ran from start to end: its proxy-side events. */
static void prof_complete(const struct op *o, const struct stamp *start, const struct stamp *end)
{
	struct ncclComm *c = o->comm;
	struct pitem *it;

	if (!prof_children(o))
		return;
	it = calloc(1, sizeof(*it));
	if (!it)
		return;
	it->ctx = c->prof_ctx;
	it->task = o->task;
	it->hash = c->hash;
	it->pmask = o->pmask;
	it->rank = c->rank;
	it->nranks = c->nranks;
	it->nch = o->kind == OP_COLL ? nchannels() : 1;
	it->func = prof_func(o->fn);
	it->seq = o->kind == OP_COLL ? (long long)o->pseq : -1;
	it->bytes = o->bytes;
	it->start = *start;
	it->end = *end;
	if (it->end.boot < it->start.boot)
		it->end = it->start;
	proxy_post(it);
}

/* Everything after operations were entered (one, or a group's): waits
 * until they can run, takes their simulated time once (a group runs as one
 * kernel: one GPU span for all its operations, from the latest of their
 * starts), hands the plugin's proxy-side events over, counts the bytes. */
static ncclResult_t finish(struct op *ops, size_t n, const struct timespec *until)
{
	struct stamp start = { 0, 0 }, end;
	ncclResult_t r = ncclSuccess;
	uint64_t total = 0;
	size_t i, children = 0;

	for (i = 0; i < n && r == ncclSuccess; i++) {
		const struct stamp *st;

		r = op_wait(&ops[i], until);
		st = gpu_start_ready() ? &ops[i].ready : &ops[i].launched;
		if (r == ncclSuccess && st->boot > start.boot)
			start = *st;
	}
	if (r != ncclSuccess)
		return r;
	for (i = 0; i < n; i++) {
		total += ops[i].bytes;
		atomic_fetch_add_explicit(&st_bytes[ops[i].fn], ops[i].bytes, memory_order_relaxed);
	}
	simulate(total);
	for (i = 0; i < n; i++)
		children += (size_t)prof_children(&ops[i]);
	if (children)
		stamp_now(&end);
	for (i = 0; i < n && children; i++)
		prof_complete(&ops[i], &start, &end);
	return ncclSuccess;
}

/* ---- FAKENCCL_ASYNC: operations pending on their streams */

static int async_mode;	/* FAKENCCL_ASYNC, read at load */

/* One ungrouped operation or one group, entered, not yet completed; a
 * process-wide list in the order they were entered. */
struct pend {
	struct pend *next;
	uint64_t id;	/* its place in the order they were entered */
	int running;	/* a thread is completing it (pend_lock) */
	int done;	/* completed and off the list; the last waiter frees it */
	int waiters;	/* threads waiting for another's completion of it */
	ncclResult_t res;
	size_t n;
	struct op ops[];
};

static pthread_mutex_t pend_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pend_cond = PTHREAD_COND_INITIALIZER;
static struct pend *pend_head;
static uint64_t pend_ids;	/* ids handed out so far (pend_lock) */
static pthread_once_t pend_once = PTHREAD_ONCE_INIT;

enum sel { SEL_ALL, SEL_STREAM, SEL_COMM };

/* NULL and cudaStreamLegacy ((cudaStream_t)0x1) are one stream. */
static const void *stream_key(const void *stream)
{
	return stream == (const void *)(uintptr_t)1 ? NULL : stream;
}

static int pend_match(const struct pend *p, enum sel how, const void *key)
{
	size_t i;

	if (how == SEL_ALL)
		return 1;
	for (i = 0; i < p->n; i++)
		if (how == SEL_STREAM ? p->ops[i].stream == key : (const void *)p->ops[i].comm == key)
			return 1;
	return 0;
}

/* Completes, in order, every unit pending when it was called that how and
 * key select (the ones another thread is completing: waits for them); the
 * first failure, or ncclSuccess. Units added meanwhile are not its own, as
 * a synchronize waits for the work submitted before it. */
static ncclResult_t pend_flush(enum sel how, const void *key)
{
	ncclResult_t r = ncclSuccess, res;
	struct timespec until;
	struct pend *p, **pp;
	uint64_t limit;

	if (how == SEL_STREAM)
		key = stream_key(key);
	pthread_mutex_lock(&pend_lock);
	limit = pend_ids;
	for (;;) {
		for (p = pend_head; p && p->id < limit && !pend_match(p, how, key); p = p->next)
			;
		if (p && p->id >= limit)
			p = NULL;
		if (!p)
			break;
		if (p->running) {
			p->waiters++;
			while (!p->done)
				pthread_cond_wait(&pend_cond, &pend_lock);
			res = p->res;
			if (--p->waiters == 0)
				free(p);
		} else {
			/* Not under the lock: it waits for other ranks, which may be
			 * threads of this process completing or adding their own. */
			p->running = 1;
			pthread_mutex_unlock(&pend_lock);
			until = deadline();
			res = finish(p->ops, p->n, &until);
			pthread_mutex_lock(&pend_lock);
			for (pp = &pend_head; *pp != p; pp = &(*pp)->next)
				;
			*pp = p->next;
			p->res = res;
			p->done = 1;
			if (p->waiters)
				pthread_cond_broadcast(&pend_cond);
			else
				free(p);
		}
		if (r == ncclSuccess)
			r = res;
	}
	pthread_mutex_unlock(&pend_lock);
	return r;
}

/* At exit: nothing stays pending (runs before FAKENCCL_STATS is written). */
static void pend_at_exit(void)
{
	pend_flush(SEL_ALL, NULL);
}

static void pend_register(void)
{
	/* After main started: runs before the libraries' destructors. */
	atexit(pend_at_exit);
}

/* Makes ops[0..n), just entered, pending; 0 if it could not (then the
 * caller completes them now). */
static int pend_add(const struct op *ops, size_t n)
{
	struct pend *p, **pp;
	size_t i;

	if (!n)
		return 1;
	p = malloc(sizeof(*p) + n * sizeof(*ops));
	if (!p)
		return 0;
	pthread_once(&pend_once, pend_register);
	p->next = NULL;
	p->running = p->done = p->waiters = 0;
	p->res = ncclSuccess;
	p->n = n;
	memcpy(p->ops, ops, n * sizeof(*ops));
	for (i = 0; i < n; i++)
		p->ops[i].stream = stream_key(p->ops[i].stream);
	pthread_mutex_lock(&pend_lock);
	p->id = pend_ids++;
	for (pp = &pend_head; *pp; pp = &(*pp)->next)
		;
	*pp = p;
	pthread_mutex_unlock(&pend_lock);
	return 1;
}

/* The hook the fake libcuda calls after its own wait in cuStreamSynchronize
 * (stream, all 0) and cuCtxSynchronize (all 1): completes what is pending
 * on stream, or everything. 0, or the first failure's ncclResult_t. */
__attribute__((visibility("default"))) int fakenccl_sync(void *stream, int all);
int fakenccl_sync(void *stream, int all)
{
	if (!async_mode)
		return 0;
	return (int)pend_flush(all ? SEL_ALL : SEL_STREAM, stream);
}

/* Validates and runs (or, inside a group, enqueues) one operation. */
static ncclResult_t submit(enum fn fn, enum op_kind kind, ncclComm_t comm, const void *sendbuff,
			   void *recvbuff, size_t count, ncclDataType_t type, int peer, int op,
			   cudaStream_t stream)
{
	struct op o = { .fn = fn, .kind = kind, .comm = comm, .stream = stream, .peer = peer,
			.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .type = type,
			.root = -1 };
	size_t ts = type_size(type);
	struct timespec until;
	ncclResult_t r;

	if (!comm)
		return fail(ncclInvalidArgument, "%s: comm is NULL", fn_names[fn]);
	if (!ts)
		return fail(ncclInvalidArgument, "%s: invalid datatype %d", fn_names[fn], (int)type);
	if (op < 0 || op >= ncclNumOps)
		return fail(ncclInvalidArgument, "%s: invalid reduction op %d", fn_names[fn], op);
	if (peer < 0 || peer >= comm->nranks)
		return fail(ncclInvalidArgument, "%s: %s %d out of range [0, %d)", fn_names[fn],
			    kind == OP_COLL ? "root" : "peer", peer, comm->nranks);
	o.bytes = (uint64_t)count * ts;
	if (fn == F_Broadcast || fn == F_Bcast || fn == F_Reduce)
		o.root = peer;
	if (group_depth > 0) {
		if (group_len == group_cap) {
			size_t cap = group_cap ? group_cap * 2 : 16;
			struct op *ops = realloc(group_ops, cap * sizeof(*ops));

			if (!ops)
				return fail(ncclSystemError, "fake nccl: out of memory");
			group_ops = ops;
			group_cap = cap;
		}
		group_ops[group_len++] = o;
		atomic_fetch_add_explicit(&st_grouped[fn], 1, memory_order_relaxed);
		return ncclSuccess;
	}
	if (async_mode) {
		/* NCCL orders its work on a communicator: what is pending on
		 * this one completes first. */
		r = pend_flush(SEL_COMM, comm);
		if (r != ncclSuccess)
			return r;
	}
	until = deadline();
	prof_task_start(&o);
	op_enter(&o);
	prof_task_stop(&o);
	if (async_mode && pend_add(&o, 1))
		return ncclSuccess;
	return finish(&o, 1, &until);
}

/* ------------------------------------------------------------ API */

ncclResult_t pncclGetVersion(int *version)
{
	COUNT(F_GetVersion);
	if (!version)
		return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
ALIAS(ncclGetVersion);

/* A key no other world on this machine has. */
static void new_key(uint64_t k[2])
{
	static _Atomic uint64_t seq;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	k[0] = (uint64_t)getpid() << 32 | (atomic_fetch_add(&seq, 1) & 0xffffffff);
	k[1] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
	uint64_t k[3];

	COUNT(F_GetUniqueId);
	if (!id)
		return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
	k[0] = ID_MAGIC;
	new_key(k + 1);
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, k, sizeof(k));
	return ncclSuccess;
}
ALIAS(ncclGetUniqueId);

static ncclResult_t init_rank(enum fn fn, ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
			      ncclConfig_t *config)
{
	uint64_t k[3];
	struct world *w;

	if (!comm)
		return fail(ncclInvalidArgument, "%s: comm is NULL", fn_names[fn]);
	*comm = NULL;
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return fail(ncclInvalidArgument, "%s: rank %d of %d", fn_names[fn], rank, nranks);
	if (config && config->magic != 0xcafebeef)
		return fail(ncclInvalidArgument, "%s: config not initialized with NCCL_CONFIG_INITIALIZER",
			    fn_names[fn]);
	memcpy(k, id.internal, sizeof(k));
	if (k[0] != ID_MAGIC)
		return fail(ncclInvalidArgument, "%s: not a unique id from ncclGetUniqueId", fn_names[fn]);
	prof_load();
	w = world_open(k + 1, nranks);
	if (!w)
		return ncclSystemError;
	*comm = world_join(w, rank, rank);
	if (!*comm) {
		munmap(w, world_size(nranks));
		return ncclSystemError;
	}
	(*comm)->hash = id_hash(&id);
	prof_comm_init(*comm, config);
	return ncclSuccess;
}

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	COUNT(F_CommInitRank);
	return init_rank(F_CommInitRank, comm, nranks, id, rank, NULL);
}
ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
				     ncclConfig_t *config)
{
	COUNT(F_CommInitRankConfig);
	return init_rank(F_CommInitRankConfig, comm, nranks, id, rank, config);
}
ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	ncclUniqueId uid;
	uint64_t key[2];
	struct world *w;
	size_t size;
	int i;

	COUNT(F_CommInitAll);
	if (!comms || ndev < 1)
		return fail(ncclInvalidArgument, "ncclCommInitAll: comms %p, ndev %d", (void *)comms, ndev);
	prof_load();
	size = world_size(ndev);
	w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (w == MAP_FAILED)
		return fail(ncclSystemError, "fake nccl: mmap: %s", strerror(errno));
	new_key(key);
	world_init(w, ndev, key);
	/* NCCL makes a unique id of its own for them. */
	memset(&uid, 0, sizeof(uid));
	memcpy(uid.internal, key, sizeof(key));
	/* One map shared by ndev communicators, all joined up front. */
	w->joined = ndev;
	w->refs = ndev;
	for (i = 0; i < ndev; i++) {
		comms[i] = calloc(1, sizeof(struct ncclComm));
		if (!comms[i]) {
			while (i--)
				free(comms[i]);
			munmap(w, size);
			return fail(ncclSystemError, "fake nccl: out of memory");
		}
		comms[i]->w = w;
		comms[i]->map_size = size;
		comms[i]->shared_map = 1;
		comms[i]->rank = i;
		comms[i]->nranks = ndev;
		comms[i]->cudev = devlist ? devlist[i] : i;
		comms[i]->hash = id_hash(&uid);
	}
	for (i = 0; i < ndev; i++)
		prof_comm_init(comms[i], NULL);
	return ncclSuccess;
}
ALIAS(ncclCommInitAll);

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
			    ncclConfig_t *config)
{
	struct op barrier = { .fn = F_CommSplit, .kind = OP_COLL, .comm = comm };
	struct timespec until = deadline();
	int n, i, newrank = 0, newn = 0;
	uint64_t k[2];
	struct world *w, *nw;
	ncclResult_t r;

	COUNT(F_CommSplit);
	if (!comm || !newcomm)
		return fail(ncclInvalidArgument, "ncclCommSplit: comm %p, newcomm %p", (void *)comm,
			    (void *)newcomm);
	*newcomm = NULL;
	if (config && config->magic != 0xcafebeef)
		return fail(ncclInvalidArgument, "ncclCommSplit: config not initialized");
	if (async_mode && (r = pend_flush(SEL_COMM, comm)) != ncclSuccess)
		return r;
	prof_load();
	w = comm->w;
	n = w->nranks;
	/* Publish (color, key), wait for everyone, read, wait again so that
	 * nobody overwrites the slots of a rank still reading them. */
	pthread_mutex_lock(&w->lock);
	w_split_color(w)[comm->rank] = color;
	w_split_key(w)[comm->rank] = key;
	pthread_mutex_unlock(&w->lock);
	op_enter(&barrier);
	r = op_wait(&barrier, &until);
	if (r != ncclSuccess)
		return r;
	pthread_mutex_lock(&w->lock);
	for (i = 0; i < n; i++) {
		int64_t ci = w_split_color(w)[i], ki = w_split_key(w)[i];

		if (color == NCCL_SPLIT_NOCOLOR || ci != color)
			continue;
		newn++;
		if (ki < key || (ki == key && i < comm->rank))
			newrank++;
	}
	pthread_mutex_unlock(&w->lock);
	op_enter(&barrier);
	r = op_wait(&barrier, &until);
	if (r != ncclSuccess)
		return r;
	comm->splits++;
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	/* Every member derives the same name for the child world. */
	k[0] = w->key[0] ^ (0x9e3779b97f4a7c15ull * comm->splits);
	k[1] = w->key[1] ^ ((uint64_t)(uint32_t)color << 32 | 0x5fa1u);
	nw = world_open(k, newn);
	if (!nw)
		return ncclSystemError;
	*newcomm = world_join(nw, newrank, comm->cudev);
	if (!*newcomm) {
		munmap(nw, world_size(newn));
		return ncclSystemError;
	}
	/* Every member agrees on the parent's hash, the split count, the color. */
	(*newcomm)->hash = split_hash(comm->hash, (int)comm->splits, color);
	prof_comm_init(*newcomm, config);
	return ncclSuccess;
}
ALIAS(ncclCommSplit);

/* ncclCommDestroy, ncclCommAbort: what is pending on comm completes first
 * (Destroy returns its failure, Abort ignores it), then it goes. */
static ncclResult_t comm_free(enum fn fn, ncclComm_t comm)
{
	ncclResult_t r = ncclSuccess;
	int last = 1;

	if (!comm)
		return fail(ncclInvalidArgument, "%s: comm is NULL", fn_names[fn]);
	if (async_mode)
		r = pend_flush(SEL_COMM, comm);
	if (fn == F_CommAbort)
		r = ncclSuccess;
	prof_comm_fini(comm);
	if (comm->shared_map) {
		pthread_mutex_lock(&comm->w->lock);
		last = --comm->w->refs == 0;
		pthread_mutex_unlock(&comm->w->lock);
	}
	if (last)
		munmap(comm->w, comm->map_size);
	free(comm);
	return r;
}

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
	ncclResult_t r = ncclSuccess;

	COUNT(F_CommFinalize);
	if (!comm)
		return fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
	if (async_mode)
		r = pend_flush(SEL_COMM, comm);
	prof_comm_fini(comm);
	return r;
}
ALIAS(ncclCommFinalize);

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
	COUNT(F_CommDestroy);
	return comm_free(F_CommDestroy, comm);
}
ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm)
{
	COUNT(F_CommAbort);
	return comm_free(F_CommAbort, comm);
}
ALIAS(ncclCommAbort);

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
	COUNT(F_CommCount);
	if (!comm || !count)
		return fail(ncclInvalidArgument, "ncclCommCount: NULL argument");
	*count = comm->nranks;
	return ncclSuccess;
}
ALIAS(ncclCommCount);

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
	COUNT(F_CommCuDevice);
	if (!comm || !device)
		return fail(ncclInvalidArgument, "ncclCommCuDevice: NULL argument");
	*device = comm->cudev;
	return ncclSuccess;
}
ALIAS(ncclCommCuDevice);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
	COUNT(F_CommUserRank);
	if (!comm || !rank)
		return fail(ncclInvalidArgument, "ncclCommUserRank: NULL argument");
	*rank = comm->rank;
	return ncclSuccess;
}
ALIAS(ncclCommUserRank);

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
	COUNT(F_CommGetAsyncError);
	if (!comm || !async_error)
		return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
	*async_error = ncclSuccess;
	return ncclSuccess;
}
ALIAS(ncclCommGetAsyncError);

const char *pncclGetErrorString(ncclResult_t result)
{
	COUNT(F_GetErrorString);
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}
ALIAS(ncclGetErrorString);

const char *pncclGetLastError(ncclComm_t comm)
{
	COUNT(F_GetLastError);
	return last_error;
}
ALIAS(ncclGetLastError);

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_AllReduce);
	return submit(F_AllReduce, OP_COLL, comm, sendbuff, recvbuff, count, datatype, 0, op, stream);
}
ALIAS(ncclAllReduce);

/* Set while ncclBcast runs its ncclBroadcast: that call is the library's
 * own, not one the application made. */
static __thread int in_bcast;

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	if (in_bcast)
		return submit(F_Bcast, OP_COLL, comm, sendbuff, recvbuff, count, datatype, root, 0,
			      stream);
	COUNT(F_Broadcast);
	return submit(F_Broadcast, OP_COLL, comm, sendbuff, recvbuff, count, datatype, root, 0,
		      stream);
}
ALIAS(ncclBroadcast);

/* As in NVIDIA's build, ncclBcast calls the exported ncclBroadcast (through
 * the PLT): a tracer sees one API call nested in another. */
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
			ncclComm_t comm, cudaStream_t stream)
{
	ncclResult_t r;

	COUNT(F_Bcast);
	in_bcast = 1;
	r = ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
	in_bcast = 0;
	return r;
}
ALIAS(ncclBcast);

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			 ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
			 cudaStream_t stream)
{
	COUNT(F_Reduce);
	return submit(F_Reduce, OP_COLL, comm, sendbuff, recvbuff, count, datatype, root, op, stream);
}
ALIAS(ncclReduce);

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_AllGather);
	return submit(F_AllGather, OP_COLL, comm, sendbuff, recvbuff, sendcount, datatype, 0, 0,
		      stream);
}
ALIAS(ncclAllGather);

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
				cudaStream_t stream)
{
	COUNT(F_ReduceScatter);
	return submit(F_ReduceScatter, OP_COLL, comm, sendbuff, recvbuff, recvcount, datatype, 0,
		      op, stream);
}
ALIAS(ncclReduceScatter);

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_AlltoAll);
	return submit(F_AlltoAll, OP_COLL, comm, sendbuff, recvbuff, count, datatype, 0, 0, stream);
}
ALIAS(ncclAlltoAll);

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_Send);
	return submit(F_Send, OP_SEND, comm, sendbuff, NULL, count, datatype, peer, 0, stream);
}
ALIAS(ncclSend);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_Recv);
	return submit(F_Recv, OP_RECV, comm, NULL, recvbuff, count, datatype, peer, 0, stream);
}
ALIAS(ncclRecv);

ncclResult_t pncclGroupStart(void)
{
	COUNT(F_GroupStart);
	group_depth++;
	return ncclSuccess;
}
ALIAS(ncclGroupStart);

ncclResult_t pncclGroupEnd(void)
{
	struct timespec until;
	ncclResult_t r = ncclSuccess;
	size_t i;

	COUNT(F_GroupEnd);
	if (group_depth <= 0)
		return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group");
	if (--group_depth > 0)
		return ncclSuccess;
	atomic_fetch_add_explicit(&st_groups, 1, memory_order_relaxed);
	/* FAKENCCL_ASYNC: what is pending on these communicators goes first. */
	for (i = 0; async_mode && i < group_len && r == ncclSuccess; i++)
		r = pend_flush(SEL_COMM, group_ops[i].comm);
	if (r != ncclSuccess) {
		group_len = 0;
		return r;
	}
	until = deadline();
	/* One launch: every task starts, the work is entered, every task stops. */
	for (i = 0; i < group_len; i++)
		prof_task_start(&group_ops[i]);
	for (i = 0; i < group_len; i++)
		op_enter(&group_ops[i]);
	for (i = 0; i < group_len; i++)
		prof_task_stop(&group_ops[i]);
	if (!async_mode || !pend_add(group_ops, group_len))
		r = finish(group_ops, group_len, &until);
	group_len = 0;
	return r;
}
ALIAS(ncclGroupEnd);

/* ------------------------------------------------------------ fork, exit stats */

/* A forked child counts only the calls it makes, and has no open group. */
static void fork_child(void)
{
	int i;

	for (i = 0; i < F__COUNT; i++) {
		atomic_store(&st_calls[i], 0);
		atomic_store(&st_grouped[i], 0);
		atomic_store(&st_bytes[i], 0);
	}
	atomic_store(&st_groups, 0);
	group_depth = 0;
	group_len = 0;
	/* What the parent left pending is the parent's to complete. */
	pthread_mutex_init(&pend_lock, NULL);
	pthread_cond_init(&pend_cond, NULL);
	while (pend_head) {
		struct pend *p = pend_head;

		pend_head = p->next;
		free(p);	/* nobody here completes or waits for it */
	}
	/* The proxy thread and its queue stay with the parent; the truth file
	 * is per process: reopened (for the child's pid) at its first line. */
	pthread_mutex_init(&pq_lock, NULL);
	pthread_cond_init(&pq_work, NULL);
	pthread_cond_init(&pq_idle, NULL);
	while (pq_head) {
		struct pitem *it = pq_head;

		pq_head = it->next;
		free(it);
	}
	pq_tail = &pq_head;
	pq_busy = 0;
	pq_pid = 0;
	pthread_mutex_init(&truth_lock, NULL);
	if (truth_fd >= 0)
		close(truth_fd);
	truth_fd = -1;
	truth_pid = 0;
}

__attribute__((constructor)) static void fake_load(void)
{
	const char *e = getenv("FAKENCCL_ASYNC");

	async_mode = e && *e && strcmp(e, "0");
	pthread_atfork(NULL, NULL, fork_child);
}

__attribute__((destructor)) static void write_stats(void)
{
	const char *tmpl = getenv("FAKENCCL_STATS");
	char path[4096], tmp[4200];
	const uint64_t *tabs[3] = { (const uint64_t *)st_calls, (const uint64_t *)st_grouped,
				    (const uint64_t *)st_bytes };
	static const char *const tab_names[3] = { "calls", "grouped", "bytes" };
	FILE *f;
	int t, i, first;

	if (!tmpl || !*tmpl)
		return;
	expand_pid(tmpl, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, getpid());
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "{\"pid\": %d", getpid());
	for (t = 0; t < 3; t++) {
		fprintf(f, ", \"%s\": {", tab_names[t]);
		for (i = 0, first = 1; i < F__COUNT; i++) {
			uint64_t v = atomic_load(&((const _Atomic uint64_t *)tabs[t])[i]);

			if (!v)
				continue;
			fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", fn_names[i], (unsigned long long)v);
			first = 0;
		}
		fprintf(f, "}");
	}
	fprintf(f, ", \"groups\": %llu}\n", (unsigned long long)atomic_load(&st_groups));
	if (fclose(f) == 0)
		rename(tmp, path);
	else
		unlink(tmp);
}
