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
 * are opaque. A wait longer than FAKENCCL_TIMEOUT_S (default 60) seconds
 * fails with ncclSystemError.
 *
 * FAKENCCL_STATS=path writes at exit, for ground truth ("%p" in the path
 * becomes the pid):
 *   {"pid": N, "calls": {"ncclX": n, ...}, "grouped": {"ncclX": n, ...},
 *    "bytes": {"ncclX": count x datatype size summed, ...}, "groups": n}
 * "calls" counts every call the library received (errors too), "grouped"
 * the operations enqueued inside a group, "groups" the outermost
 * ncclGroupEnd calls, "bytes" the successful operations' bytes.
 */
#define _GNU_SOURCE
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
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

/* ------------------------------------------------------------ worlds */

/* The state shared by the ranks of one communicator. Arrays follow the
 * header: coll[nranks] (collectives each rank entered), sent[nranks *
 * nranks] and recvd[nranks * nranks] (sends posted from row to column,
 * receives posted by row from column), split_color[nranks],
 * split_key[nranks]. */
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
};

static size_t world_size(int nranks)
{
	size_t n = (size_t)nranks;

	return sizeof(struct world) + (n + 2 * n * n + 2 * n) * sizeof(uint64_t);
}

static uint64_t *w_coll(struct world *w) { return w->data; }
static uint64_t *w_sent(struct world *w) { return w->data + w->nranks; }
static uint64_t *w_recvd(struct world *w) { return w_sent(w) + (size_t)w->nranks * w->nranks; }
static int64_t *w_split_color(struct world *w)
{
	return (int64_t *)(w_recvd(w) + (size_t)w->nranks * w->nranks);
}
static int64_t *w_split_key(struct world *w) { return w_split_color(w) + w->nranks; }

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
	struct ncclComm *c = calloc(1, sizeof(*c));
	char name[64];
	int err;

	if (!c) {
		fail(ncclSystemError, "fake nccl: out of memory");
		return NULL;
	}
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
	int peer;
	uint64_t bytes;
	uint64_t seq;	/* the sequence number it was entered with */
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
	int n = w->nranks, r = o->comm->rank;

	pthread_mutex_lock(&w->lock);
	switch (o->kind) {
	case OP_COLL:
		o->seq = ++w_coll(w)[r];
		break;
	case OP_SEND:
		o->seq = ++w_sent(w)[(size_t)r * n + o->peer];
		break;
	case OP_RECV:
		o->seq = ++w_recvd(w)[(size_t)r * n + o->peer];
		break;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static ncclResult_t op_wait(const struct op *o, const struct timespec *until)
{
	struct world *w = o->comm->w;
	int err;

	pthread_mutex_lock(&w->lock);
	err = wait_locked(w, op_done, o, until);
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

/* Validates and runs (or, inside a group, enqueues) one operation. */
static ncclResult_t submit(enum fn fn, enum op_kind kind, ncclComm_t comm, size_t count,
			   ncclDataType_t type, int peer, int op)
{
	struct op o = { .fn = fn, .kind = kind, .comm = comm, .peer = peer };
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
	until = deadline();
	op_enter(&o);
	r = op_wait(&o, &until);
	if (r != ncclSuccess)
		return r;
	simulate(o.bytes);
	atomic_fetch_add_explicit(&st_bytes[fn], o.bytes, memory_order_relaxed);
	return ncclSuccess;
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
	w = world_open(k + 1, nranks);
	if (!w)
		return ncclSystemError;
	*comm = world_join(w, rank, rank);
	if (!*comm) {
		munmap(w, world_size(nranks));
		return ncclSystemError;
	}
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
	uint64_t key[2];
	struct world *w;
	size_t size;
	int i;

	COUNT(F_CommInitAll);
	if (!comms || ndev < 1)
		return fail(ncclInvalidArgument, "ncclCommInitAll: comms %p, ndev %d", (void *)comms, ndev);
	size = world_size(ndev);
	w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (w == MAP_FAILED)
		return fail(ncclSystemError, "fake nccl: mmap: %s", strerror(errno));
	new_key(key);
	world_init(w, ndev, key);
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
	}
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
	return ncclSuccess;
}
ALIAS(ncclCommSplit);

static ncclResult_t comm_free(enum fn fn, ncclComm_t comm)
{
	int last = 1;

	if (!comm)
		return fail(ncclInvalidArgument, "%s: comm is NULL", fn_names[fn]);
	if (comm->shared_map) {
		pthread_mutex_lock(&comm->w->lock);
		last = --comm->w->refs == 0;
		pthread_mutex_unlock(&comm->w->lock);
	}
	if (last)
		munmap(comm->w, comm->map_size);
	free(comm);
	return ncclSuccess;
}

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
	COUNT(F_CommFinalize);
	return comm ? ncclSuccess : fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
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
	return submit(F_AllReduce, OP_COLL, comm, count, datatype, 0, op);
}
ALIAS(ncclAllReduce);

/* Set while ncclBcast runs its ncclBroadcast: that call is the library's
 * own, not one the application made. */
static __thread int in_bcast;

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	if (in_bcast)
		return submit(F_Bcast, OP_COLL, comm, count, datatype, root, 0);
	COUNT(F_Broadcast);
	return submit(F_Broadcast, OP_COLL, comm, count, datatype, root, 0);
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
	return submit(F_Reduce, OP_COLL, comm, count, datatype, root, op);
}
ALIAS(ncclReduce);

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_AllGather);
	return submit(F_AllGather, OP_COLL, comm, sendcount, datatype, 0, 0);
}
ALIAS(ncclAllGather);

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
				cudaStream_t stream)
{
	COUNT(F_ReduceScatter);
	return submit(F_ReduceScatter, OP_COLL, comm, recvcount, datatype, 0, op);
}
ALIAS(ncclReduceScatter);

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_AlltoAll);
	return submit(F_AlltoAll, OP_COLL, comm, count, datatype, 0, 0);
}
ALIAS(ncclAlltoAll);

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_Send);
	return submit(F_Send, OP_SEND, comm, count, datatype, peer, 0);
}
ALIAS(ncclSend);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	COUNT(F_Recv);
	return submit(F_Recv, OP_RECV, comm, count, datatype, peer, 0);
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
	uint64_t total = 0;
	size_t i;

	COUNT(F_GroupEnd);
	if (group_depth <= 0)
		return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group");
	if (--group_depth > 0)
		return ncclSuccess;
	atomic_fetch_add_explicit(&st_groups, 1, memory_order_relaxed);
	until = deadline();
	for (i = 0; i < group_len; i++)
		op_enter(&group_ops[i]);
	for (i = 0; i < group_len && r == ncclSuccess; i++)
		r = op_wait(&group_ops[i], &until);
	if (r == ncclSuccess) {
		for (i = 0; i < group_len; i++) {
			total += group_ops[i].bytes;
			atomic_fetch_add_explicit(&st_bytes[group_ops[i].fn], group_ops[i].bytes,
						  memory_order_relaxed);
		}
		simulate(total);
	}
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
}

__attribute__((constructor)) static void fake_load(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

__attribute__((destructor)) static void write_stats(void)
{
	const char *tmpl = getenv("FAKENCCL_STATS");
	char path[4096], tmp[4200];
	const uint64_t *tabs[3] = { (const uint64_t *)st_calls, (const uint64_t *)st_grouped,
				    (const uint64_t *)st_bytes };
	static const char *const tab_names[3] = { "calls", "grouped", "bytes" };
	size_t n = 0;
	FILE *f;
	int t, i, first;

	if (!tmpl || !*tmpl)
		return;
	for (; *tmpl && n + 16 < sizeof(path); tmpl++) {
		if (tmpl[0] == '%' && tmpl[1] == 'p') {
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", getpid());
			tmpl++;
		} else {
			path[n++] = *tmpl;
		}
	}
	path[n] = 0;
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
