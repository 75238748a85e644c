// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "agg.h"
#include "cgbpf.skel.h"
#include "capture/monitor.h"
#include "core/apilib.h"
#include "core/attach.h"
#include "core/ingest.h"
#include "core/model.h"
#include "lib/hmap.h"
#include "lib/ncclbw.h"
#include "lib/http.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "lib/procfs.h"
#include "out/perfetto.h"
#include "out/pfsink.h"
#include "sources/gpu/gpu.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclmon.h"
#include "sources/nccl/ncclpf.h"
#include "sources/nccl/ncclsum.h"
#include "sources/python/pysites.h"
#include "sources/syscalls/syscalls.h"

/*
 * The endpoint never blocks the event loop: connections are non-blocking
 * and served a little on every tick. A client gets HTTP_HEAD_NS from its
 * connect to send its request head (at most HTTP_MAX_REQUEST bytes) and
 * HTTP_DONE_NS in all to take the answer; at most HTTP_MAX_CONNS are kept,
 * a new one evicting the oldest still sending its request. So slow or
 * oversized requests cost bounded memory and never delay metrics, dumps
 * or the ring buffer.
 */
#define HTTP_MAX_CONNS 32
#define HTTP_HEAD_NS (2ull * 1000000000)
#define HTTP_DONE_NS (10ull * 1000000000)
#define HTTP_ACCEPTS_PER_TICK 64
/* Answers not yet taken by their clients, all connections together: a
 * client that reads slowly must not make the daemon hold many copies of a
 * large metrics page. */
#define HTTP_OUT_MAX (32u << 20)

/* ------------------------------------------------------------ flight ring */

/*
 * The flight recorder: ring records as [u32 length][u32 0][record], each
 * entry and so each record 8-byte aligned as in the BPF ring (the model
 * reads their fields in place: a record at 4 mod 8 was undefined
 * behaviour, UBSan's "misaligned address"), never split across the end
 * (a zero length, or fewer than 4 bytes left, means "continue at the
 * start"). The oldest records go when space is needed or when they fall
 * out of the time window.
 */
struct flight {
	uint8_t *buf;
	size_t cap, head, tail, n;
	uint64_t window_ns;
	uint64_t dropped;	/* records too big to keep */
};

#define ENT_HDR 8

static size_t ent_size(size_t len)
{
	return (ENT_HDR + len + 7) & ~(size_t)7;
}

static void flight_evict(struct flight *f)
{
	uint32_t len;

	if (!f->n)
		return;
	if (f->cap - f->tail < 4 || !(memcpy(&len, f->buf + f->tail, 4), len)) {
		f->tail = 0;
		memcpy(&len, f->buf, 4);
	}
	f->tail += ent_size(len);
	if (--f->n == 0)
		f->head = f->tail = 0;
}

static const void *flight_oldest(const struct flight *f, uint32_t *len)
{
	size_t t = f->tail;

	if (!f->n)
		return NULL;
	if (f->cap - t < 4 || !(memcpy(len, f->buf + t, 4), *len))
		t = 0;
	memcpy(len, f->buf + t, 4);
	return f->buf + t + ENT_HDR;
}

static void flight_put(struct flight *f, const void *data, size_t len)
{
	size_t need = ent_size(len);
	uint32_t l32 = len, ol;
	const struct rec_hdr *h = data, *old;

	if (need > f->cap / 4) {
		f->dropped++;
		return;
	}
	/*
	 * Entries live in [tail, head), wrapping at most once. head never
	 * catches up with tail (a gap of at least 8 bytes stays), so
	 * head == tail only when the ring is empty.
	 */
	for (;;) {
		if (!f->n) {
			f->head = f->tail = 0;
			break;
		}
		if (f->head >= f->tail) {
			if (f->cap - f->head >= need)
				break;
			/* Mark the end and continue at the start, in front of tail. */
			if (f->cap - f->head >= 4) {
				uint32_t zero = 0;

				memcpy(f->buf + f->head, &zero, 4);
			}
			f->head = 0;
			while (f->n && f->tail <= need)
				flight_evict(f);
			if (!f->n)
				f->head = f->tail = 0;
			break;
		}
		if (f->tail - f->head > need)
			break;
		flight_evict(f);
	}
	memcpy(f->buf + f->head, &l32, 4);
	memset(f->buf + f->head + 4, 0, ENT_HDR - 4);
	memcpy(f->buf + f->head + ENT_HDR, data, len);
	f->head += need;
	f->n++;
	/* The time window: what is older than it goes too. */
	while (f->window_ns && f->n > 1 && (old = flight_oldest(f, &ol)) &&
	       old->ts + f->window_ns < h->ts)
		flight_evict(f);
}

/* The ring's records oldest first as [u32 len][record] in out (malloc'ed). */
static uint8_t *flight_copy(const struct flight *f, size_t *out_len)
{
	uint8_t *out = malloc(f->cap ? f->cap : 1);
	size_t t = f->tail, o = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < f->n; i++) {
		uint32_t len;

		if (f->cap - t < 4 || !(memcpy(&len, f->buf + t, 4), len))
			t = 0;
		memcpy(&len, f->buf + t, 4);
		memcpy(out + o, f->buf + t, ENT_HDR + len);
		o += ent_size(len);
		t += ent_size(len);
	}
	*out_len = o;
	return out;
}

/* ------------------------------------------------------------ monitor */

struct dump_job {
	uint8_t *data;
	size_t len;
	char path[4096];		/* for messages: the directory and name */
	char name[256];			/* in the dump directory */
	char tmp[256 + 8];
	int err;
	uint64_t records;
	/* The live model's NCCL communicators at the snapshot (nccl.h). */
	struct nccl_seed *seeds;
	size_t nseeds;
};

/* A client connection: reading its request, then writing the answer. */
struct conn {
	int fd;				/* -1: free slot */
	bool writing;
	uint64_t since;			/* accepted (CLOCK_BOOTTIME ns) */
	size_t n;			/* request bytes in req */
	char req[HTTP_MAX_REQUEST];
	char *out;			/* the answer, malloc'ed */
	size_t out_len, out_off;
};

struct monitor {
	struct monitor_opts o;
	int lfd;			/* listening socket */
	int dirfd;			/* the dump directory (O_PATH) */
	struct conn conns[HTTP_MAX_CONNS];
	uint64_t http_dropped;		/* connections closed unanswered (slow, evicted) */
	struct cgbpf_bpf *skel;
	struct model *model;
	struct attach *attach;
	int ncpu;
	struct agg_val *vals;		/* per-CPU read buffer */
	struct flight flight;
	pthread_mutex_t lock;		/* the flight ring (records vs dump snapshot) */
	uint64_t last_house;
	struct hmap gone;		/* pids seen exited at the last housekeeping */
	struct hmap dead_names;		/* pid -> char * comm of exited processes */
	/* Dumps. */
	pthread_t worker;
	bool working;
	atomic_bool done;
	struct dump_job job;
	char pending[64];		/* reasons waiting for the running dump ("error+exit") */
	uint64_t dumps, dump_failures, coalesced, scrapes;
	uint64_t last_dump_ns;
	char last_dump[4096];
	struct pysites *pysites;	/* --python-sites */
	struct ncclmon *nccl;		/* NCCL metrics per communicator and rank */
	void (*more)(void *ctx, const struct src_metrics *m);	/* the sources' series */
	void *more_ctx;
};

static int parse_listen(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

struct monitor *monitor__new(const struct monitor_opts *o)
{
	struct monitor *mo = calloc(1, sizeof(*mo));
	struct sockaddr_in sa;
	struct stat st;
	int one = 1;

	if (!mo) {
		err("out of memory");
		return NULL;
	}
	mo->o = *o;
	mo->lfd = -1;
	mo->dirfd = -1;
	for (int i = 0; i < HTTP_MAX_CONNS; i++)
		mo->conns[i].fd = -1;
	pthread_mutex_init(&mo->lock, NULL);
	if (parse_listen(o->listen, &sa)) {
		err("--listen %s: expected IPv4ADDR:PORT, e.g. %s", o->listen,
		    MONITOR_DEFAULT_LISTEN);
		goto fail;
	}
	if (!o->dump_dir) {
		/* The default is for dumps only: without a flight recorder
		 * there are none, and nothing is created. */
		mo->o.dump_dir = MONITOR_DEFAULT_DUMP_DIR;
		if (o->flight_ns) {
			int e = outfile__mkdir(MONITOR_DEFAULT_DUMP_DIR, OUTDIR_PRIVATE_MODE);

			if (e) {
				err("cannot create the dump directory %s: %s; name another with "
				    "--dump-dir", MONITOR_DEFAULT_DUMP_DIR, strerror(-e));
				goto fail;
			}
		}
	}
	if (o->dump_dir || o->flight_ns) {
		const char *d = mo->o.dump_dir;

		mo->dirfd = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (mo->dirfd < 0) {
			if (errno == ENOENT)
				err("--dump-dir %s: no such directory: create it (mkdir -m 0700 %s) or "
				    "leave --dump-dir out for the default, %s", d, d,
				    MONITOR_DEFAULT_DUMP_DIR);
			else
				err("--dump-dir %s: %s", d, errno == ENOTDIR ? "not a directory" :
				    strerror(errno));
			goto fail;
		}
		if (faccessat(mo->dirfd, ".", W_OK | X_OK, AT_EACCESS)) {
			err("--dump-dir %s: not writable: %s", d, strerror(errno));
			goto fail;
		}
		if (!fstat(mo->dirfd, &st) && (st.st_mode & 0077) && o->flight_ns)
			dbg("--dump-dir %s is open to other users (mode %04o): dumps are 0600, "
			    "their names visible", d, (unsigned)(st.st_mode & 07777));
	}
	mo->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (mo->lfd < 0 || setsockopt(mo->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(mo->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(mo->lfd, 16)) {
		err("--listen %s: %s%s", o->listen, strerror(errno),
		    errno == EADDRINUSE ? " (another cgbpf monitor or service has this port: "
					  "pick another with --listen)" : "");
		goto fail;
	}
	if (o->python_sites && !(mo->pysites = pysites__new(o->python_sites))) {
		err("out of memory");
		goto fail;
	}
	if (o->flight_ns) {
		/* Half for the ring, half for one dump's snapshot of it. */
		mo->flight.cap = (o->flight_bytes / 2) & ~(size_t)7;
		mo->flight.window_ns = o->flight_ns;
		mo->flight.buf = malloc(mo->flight.cap);
		if (!mo->flight.buf) {
			err("--flight-memory: cannot allocate %zu bytes", mo->flight.cap);
			goto fail;
		}
	}
	return mo;
fail:
	monitor__free(mo);
	return NULL;
}

/* Which calls count bytes and which may trigger, from each library. */
static int configure(struct monitor *mo)
{
	for (unsigned l = 0; l < LIB__COUNT; l++) {
		const struct api_lib *lib = apilib__get(l);

		if (!lib || !lib->agg_cfg)
			continue;
		for (uint16_t f = 0; f < lib->nfuncs && f < 256; f++) {
			struct agg_cfg c = { 0 };
			uint32_t k = l * 256 + f;

			lib->agg_cfg(f, &c);
			if (!mo->o.trigger_errors)
				c.flags &= ~AGG_F_ERRORS;
			if (bpf_map__update_elem(mo->skel->maps.agg_cfgs, &k, sizeof(k), &c, sizeof(c),
						 BPF_ANY))
				return -errno;
		}
	}
	return 0;
}

int monitor__start(struct monitor *mo, struct cgbpf_bpf *skel, struct model *m,
		   struct attach *a)
{
	int err;

	mo->skel = skel;
	mo->model = m;
	mo->attach = a;
	mo->ncpu = libbpf_num_possible_cpus();
	if (mo->ncpu <= 0)
		return -EINVAL;
	mo->vals = calloc(mo->ncpu, sizeof(*mo->vals));
	mo->nccl = ncclmon__new();
	if (!mo->vals || !mo->nccl)
		return -ENOMEM;
	{
		struct sink s = ncclmon__sink(mo->nccl);

		if (model__add_sink(m, &s))
			return -E2BIG;
	}
	err = configure(mo);
	if (err)
		err("configuring the aggregates: %s", strerror(-err));
	return err;
}

void monitor__free(struct monitor *mo)
{
	if (!mo)
		return;
	if (mo->working) {
		pthread_join(mo->worker, NULL);
		free(mo->job.data);
		nccl__seeds_free(mo->job.seeds, mo->job.nseeds);
	}
	if (mo->lfd >= 0)
		close(mo->lfd);
	if (mo->dirfd >= 0)
		close(mo->dirfd);
	for (int i = 0; i < HTTP_MAX_CONNS; i++) {
		if (mo->conns[i].fd >= 0)
			close(mo->conns[i].fd);
		free(mo->conns[i].out);
	}
	free(mo->vals);
	free(mo->flight.buf);
	pysites__free(mo->pysites);
	ncclmon__free(mo->nccl);
	hmap__free(&mo->gone);
	{
		uint64_t v;

		for (size_t it = 0; hmap__next(&mo->dead_names, &it, NULL, &v);)
			free((void *)(uintptr_t)v);
		hmap__free(&mo->dead_names);
	}
	pthread_mutex_destroy(&mo->lock);
	free(mo);
}

void monitor__record(struct monitor *mo, const void *data, size_t size)
{
	if (!mo->flight.buf)
		return;
	pthread_mutex_lock(&mo->lock);
	flight_put(&mo->flight, data, size);
	pthread_mutex_unlock(&mo->lock);
}

/* ------------------------------------------------------------ dumps */

/* A record of the snapshot into the dump's model, as record.c's handler
 * does for the live stream (minus attaching and stacks); GPU batches
 * (CUPTI's activity, NCCL's profiler plugin) into gpu, when there is one. */
static void replay(struct model *m, struct gpu *gpu, const uint8_t *data, uint32_t len)
{
	const struct rec_hdr *h = (const void *)data;

	if (ingest__check(data, len))
		return;
	switch (h->type) {
	case REC_GPU_BATCH:
		if (gpu)
			gpu__record(gpu, data, len);
		break;
	case REC_CALL_ENTER:
		model__call_enter(m, (const void *)data);
		break;
	case REC_CALL_EXIT:
		model__call_exit(m, (const void *)data);
		break;
	case REC_STRING:
		model__string(m, (const void *)data);
		break;
	case REC_OUT_ARRAY:
		model__out_array(m, (const void *)data);
		break;
	case REC_PROC_EXIT:
		model__proc_exit(m, (const void *)data);
		break;
	case REC_THREAD_EXIT:
		model__thread_exit(m, (const void *)data);
		break;
	}
}

/* Every record of a snapshot (flight_copy's) through replay; their count. */
static uint64_t replay_all(struct model *m, struct gpu *gpu, const uint8_t *data, size_t size)
{
	uint64_t n = 0;

	for (size_t o = 0; o + ENT_HDR <= size; n++) {
		uint32_t len;

		memcpy(&len, data + o, 4);
		replay(m, gpu, data + o + ENT_HDR, len);
		o += ent_size(len);
	}
	return n;
}

/*
 * Processes that exited have no /proc left: their exit records name
 * them, the main thread's (its thread exit, or the process's when it was
 * the last) over the process exit's, which is the last thread's: a
 * worker's name ("pt_autograd_0") when the main thread left first.
 */
static void name_exited(struct model *m, const uint8_t *data, size_t size)
{
	struct hmap best = { 0 };	/* pid -> offset + 1, bit 63: the main thread's */
	uint64_t k, v;

	for (size_t o = 0; o + ENT_HDR <= size;) {
		const struct rec_proc *p = (const void *)(data + o + ENT_HDR);
		uint32_t len;
		uint64_t *b;
		bool main;

		memcpy(&len, data + o, 4);
		if (len >= sizeof(*p) && (p->hdr.type == REC_PROC_EXIT ||
					  p->hdr.type == REC_THREAD_EXIT)) {
			main = p->hdr.tid == p->hdr.pid;
			b = hmap__get(&best, p->hdr.pid);
			if ((main || p->hdr.type == REC_PROC_EXIT) && (!b || (main && !(*b >> 63))) &&
			    hmap__put(&best, p->hdr.pid, (o + 1) | (uint64_t)main << 63))
				break;	/* ENOMEM: the names known so far */
		}
		o += ent_size(len);
	}
	for (size_t it = 0; hmap__next(&best, &it, &k, &v);) {
		const struct rec_proc *p = (const void *)(data + (v & ~(1ull << 63)) - 1 + ENT_HDR);

		if (!procfs__alive((uint32_t)k))
			model__proc_name(m, (uint32_t)k, p->comm);
	}
	hmap__free(&best);
}

/* The snapshot's NCCL operations on communicators created before it:
 * counted in a first replay, so that the dump numbers them as the live
 * model did (nccl__seeds_rebase). */
static void count_seeded(struct dump_job *j)
{
	struct model c;

	if (!j->nseeds)
		return;
	model__init(&c);
	nccl__seed(&c, j->seeds, j->nseeds);
	replay_all(&c, NULL, j->data, j->len);
	nccl__seeds_rebase(j->seeds, j->nseeds, &c);
	model__free(&c);
}

static void *dump_worker(void *arg)
{
	struct monitor *mo = arg;
	struct dump_job *j = &mo->job;
	/* Dumps hold other users' command lines and arguments: 0600, the
	 * sudo user's; in the directory opened at start, whatever its path
	 * names now. */
	int fd = outfile__create(mo->dirfd, j->tmp, OUTFILE_PRIVATE_MODE);
	struct pftrace *pt = fd < 0 ? NULL : pftrace__fdopen(fd);
	struct model m;
	struct sink sk, gs, before, after, ss;
	struct ncclsum *sum;
	struct gpu *gpu;

	if (!pt) {
		j->err = fd < 0 ? fd : -errno;
		if (fd >= 0) {
			close(fd);
			unlinkat(mo->dirfd, j->tmp, 0);
		}
		atomic_store(&mo->done, true);
		return NULL;
	}
	model__init(&m);
	sk = pfsink__sink(pt);
	model__add_sink(&m, &sk);
	/* NCCL as record writes it: the communicators' tracks around the
	 * threads' slices, and their list for cgbpf stats (ENOMEM: the
	 * dump has the threads' slices only). */
	sum = ncclsum__new(&m);
	before = ncclpf__sink_before(pt);
	after = ncclpf__sink_after(pt);
	ss = sum ? ncclsum__sink(sum) : (struct sink){ 0 };
	if (!sum || model__add_sink_first(&m, &before) || model__add_sink(&m, &after) ||
	    model__add_sink(&m, &ss))
		warn("flight recorder dump: no NCCL communicator tracks (out of sinks or memory)");
	/* The GPU side as record writes it, what was measured only
	 * (ENOMEM: the dump has none). */
	gpu = gpu__new(&m, pt);
	if (gpu)
		gpu__measured_only(gpu);
	gs = gpu ? gpu__sink(gpu) : (struct sink){ 0 };
	if (gpu && model__add_sink(&m, &gs)) {
		gpu__free(gpu);
		gpu = NULL;
	}
	pftrace__clock_snapshot(pt);
	pftrace__system_info(pt);
	name_exited(&m, j->data, j->len);
	count_seeded(j);
	nccl__seed(&m, j->seeds, j->nseeds);
	j->records = replay_all(&m, gpu, j->data, j->len);
	gpu__end_quiet(gpu);
	ncclsum__describe(sum, pt);
	/* Calls still open at the snapshot end where it ends. */
	pftrace__clock_snapshot(pt);
	j->err = pftrace__close(pt);
	gpu__free(gpu);
	ncclsum__free(sum);
	model__free(&m);
	if (!j->err && renameat(mo->dirfd, j->tmp, mo->dirfd, j->name))
		j->err = -errno;
	if (j->err)
		unlinkat(mo->dirfd, j->tmp, 0);
	atomic_store(&mo->done, true);
	return NULL;
}

static void start_dump(struct monitor *mo, const char *why)
{
	struct dump_job *j = &mo->job;
	char stamp[32];
	struct tm tm;
	time_t t = time(NULL);
	int e;

	memset(j, 0, sizeof(*j));
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(j->name, sizeof(j->name), "cgbpf-dump-%s-%" PRIu64 "-%s.perfetto-trace", stamp,
		 mo->dumps + mo->dump_failures + 1, why);
	snprintf(j->tmp, sizeof(j->tmp), "%s.partial", j->name);
	snprintf(j->path, sizeof(j->path), "%s/%s", mo->o.dump_dir, j->name);
	/* The snapshot is the only work on the event path: a memcpy. */
	pthread_mutex_lock(&mo->lock);
	j->data = flight_copy(&mo->flight, &j->len);
	pthread_mutex_unlock(&mo->lock);
	/* The live model has taken every record the snapshot holds (each
	 * goes to the flight recorder first): its communicators are those
	 * the snapshot's calls use, numbered up to its end. */
	if (j->data && mo->model)
		j->seeds = nccl__seeds(mo->model, &j->nseeds);
	if (!j->data) {
		warn("dump (%s): out of memory for the snapshot", why);
		mo->dump_failures++;
		return;
	}
	atomic_store(&mo->done, false);
	e = pthread_create(&mo->worker, NULL, dump_worker, mo);
	if (e) {
		warn("dump (%s): cannot start its thread: %s", why, strerror(e));
		free(j->data);
		j->data = NULL;
		nccl__seeds_free(j->seeds, j->nseeds);
		j->seeds = NULL;
		mo->dump_failures++;
		return;
	}
	mo->working = true;
	info("dumping the flight recorder (%s) to %s", why, j->path);
}

static void reap_dump(struct monitor *mo)
{
	if (!mo->working || !atomic_load(&mo->done))
		return;
	pthread_join(mo->worker, NULL);
	mo->working = false;
	free(mo->job.data);
	mo->job.data = NULL;
	nccl__seeds_free(mo->job.seeds, mo->job.nseeds);
	mo->job.seeds = NULL;
	if (mo->job.err) {
		mo->dump_failures++;
		warn("dump to %s failed: %s", mo->job.path, outfile__strerror(mo->job.err));
	} else {
		mo->dumps++;
		snprintf(mo->last_dump, sizeof(mo->last_dump), "%s", mo->job.path);
		info("wrote %s (%" PRIu64 " records)", mo->job.path, mo->job.records);
	}
}

void monitor__trigger(struct monitor *mo, const char *why)
{
	if (!mo->flight.buf) {
		dbg("dump (%s) asked for, but the flight recorder is off (--flight-recorder)", why);
		return;
	}
	reap_dump(mo);
	if (mo->working) {
		/* One at a time: the next one covers every reason that came
		 * meanwhile, and its name lists them. */
		size_t l = strlen(mo->pending), w = strlen(why);
		const char *hit = strstr(mo->pending, why);

		if (!(hit && (hit[w] == '+' || !hit[w])) && l + w + 2 < sizeof(mo->pending))
			snprintf(mo->pending + l, sizeof(mo->pending) - l, "%s%s", l ? "+" : "", why);
		mo->coalesced++;
		return;
	}
	start_dump(mo, why);
}

/* ------------------------------------------------------------ metrics */

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

__attribute__((format(printf, 2, 3)))
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += n;
			return;
		}
		{
			size_t nc = (b->cap ? b->cap * 2 : 65536) + n;
			char *np = realloc(b->p, nc);

			if (!np) {
				b->oom = true;
				return;
			}
			b->p = np;
			b->cap = nc;
		}
	}
}

/* Label values are escaped as the exposition format wants. */
static void label_value(char *out, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < len; s++) {
		if (*s == '\\' || *s == '"') {
			out[o++] = '\\';
			out[o++] = *s;
		} else if (*s == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *s;
		}
	}
	out[o] = 0;
}

void monitor__proc_exit(struct monitor *mo, uint32_t pid, const char *comm)
{
	uint64_t *v = mo->model ? hmap__get(&mo->model->procs, pid) : NULL;
	uint64_t old;
	char *c;

	/* The process's name as the model knows it: the exit record's is
	 * that of its last thread to exit (a library's watcher thread,
	 * "cgbpf-inject", as often as the main one). */
	if (v && *((struct proc *)(uintptr_t)*v)->comm)
		comm = ((struct proc *)(uintptr_t)*v)->comm;
	c = strndup(comm, 15);

	if (!c)
		return;
	if (hmap__del(&mo->dead_names, pid, &old))
		free((void *)(uintptr_t)old);
	if (hmap__put(&mo->dead_names, pid, (uintptr_t)c))
		free(c);
}

static void comm_of(struct monitor *mo, uint32_t pid, char *out, size_t len)
{
	uint64_t *v = hmap__get(&mo->model->procs, pid);
	char comm[16];

	if (v) {
		label_value(out, len, ((struct proc *)(uintptr_t)*v)->comm);
		return;
	}
	/* Exited: its aggregates stay scrapable for an interval, its name too. */
	v = hmap__get(&mo->dead_names, pid);
	if (v) {
		label_value(out, len, (const char *)(uintptr_t)*v);
		return;
	}
	if (procfs__comm(pid, 0, comm, sizeof(comm)))
		snprintf(comm, sizeof(comm), "?");
	label_value(out, len, comm);
}

void monitor__set_metrics(struct monitor *mo,
			  void (*fn)(void *ctx, const struct src_metrics *m), void *ctx)
{
	mo->more = fn;
	mo->more_ctx = ctx;
}

struct pysites *monitor__pysites(struct monitor *mo)
{
	return mo ? mo->pysites : NULL;
}

/* pysites__render()'s callbacks; ctx: { struct buf *, struct monitor * }. */
static void site_line(void *ctx, const char *line)
{
	bprintf(((void **)ctx)[0], "%s", line);
}

static void site_comm(void *ctx, uint32_t pid, char *out, size_t len)
{
	comm_of(((void **)ctx)[1], pid, out, len);
}

static bool read_agg(struct monitor *mo, const struct agg_key *k, struct agg_val *sum)
{
	memset(sum, 0, sizeof(*sum));
	if (bpf_map__lookup_elem(mo->skel->maps.aggs, k, sizeof(*k), mo->vals,
				 mo->ncpu * sizeof(*mo->vals), 0))
		return false;
	for (int c = 0; c < mo->ncpu; c++) {
		sum->count += mo->vals[c].count;
		sum->total_ns += mo->vals[c].total_ns;
		sum->bytes += mo->vals[c].bytes;
		sum->errors += mo->vals[c].errors;
		for (int b = 0; b < AGG_BUCKETS; b++)
			sum->hist[b] += mo->vals[c].hist[b];
	}
	return true;
}

/* Histogram bounds: 1 us to ~18 min in powers of 4 (log2 buckets 10..40). */
#define LE_FIRST 10
#define LE_STEP 2

/* Every key of the aggregate map, into a new array (free() it) of *n;
 * fewer when memory runs out, NULL when there are none. */
static struct agg_key *agg_keys(struct monitor *mo, size_t *n)
{
	struct agg_key k, next, *keys = NULL;
	size_t cap = 0;
	int err;

	*n = 0;
	for (err = bpf_map__get_next_key(mo->skel->maps.aggs, NULL, &next, sizeof(next)); !err;
	     err = bpf_map__get_next_key(mo->skel->maps.aggs, &k, &next, sizeof(next))) {
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct agg_key *nk = realloc(keys, nc * sizeof(*nk));

			if (!nk)
				break;
			keys = nk;
			cap = nc;
		}
		keys[(*n)++] = next;
		k = next;
	}
	return keys;
}

/* The duration histogram of one series, cumulative as the format wants. */
static void render_histogram(struct buf *b, const char *labels, const struct agg_val *v)
{
	uint64_t cum = 0;

	for (int bk = 0; bk < AGG_BUCKETS; bk++) {
		cum += v->hist[bk];
		/* Bucket bk holds [2^bk, 2^(bk+1)) ns. */
		if (bk + 1 >= LE_FIRST && (bk + 1 - LE_FIRST) % LE_STEP == 0)
			bprintf(b, "cgbpf_call_duration_seconds_bucket{%s,le=\"%.9g\"} "
				   "%" PRIu64 "\n", labels,
				(double)(1ull << (bk + 1)) / 1e9, (uint64_t)cum);
	}
	bprintf(b, "cgbpf_call_duration_seconds_bucket{%s,le=\"+Inf\"} %" PRIu64
		   "\n", labels, (uint64_t)v->count);
	bprintf(b, "cgbpf_call_duration_seconds_sum{%s} %.9f\n", labels,
		v->total_ns / 1e9);
	bprintf(b, "cgbpf_call_duration_seconds_count{%s} %" PRIu64 "\n", labels,
		(uint64_t)v->count);
}

/* The HELP and TYPE of each per-call metric, in the order
 * render_calls() writes them. */
static const char *const call_help[] = {
	"# HELP cgbpf_calls_total API calls that returned, per process and function.\n"
	"# TYPE cgbpf_calls_total counter\n",
	"# HELP cgbpf_call_errors_total Calls that returned an error code.\n"
	"# TYPE cgbpf_call_errors_total counter\n",
	"# HELP cgbpf_bytes_total Bytes moved, set or allocated by the calls "
	"(copies, memsets, allocations, NCCL buffers).\n"
	"# TYPE cgbpf_bytes_total counter\n",
	"# HELP cgbpf_call_duration_seconds Time from a call's entry to its "
	"return (host side).\n"
	"# TYPE cgbpf_call_duration_seconds histogram\n",
	"# HELP cgbpf_nccl_bus_bytes_total NCCL bytes times nccl-tests' bus "
	"factor for the communicator size (rate / duration rate = busbw).\n"
	"# TYPE cgbpf_nccl_bus_bytes_total counter\n",
};

/* The series of one (process, function) key in the metric'th per-call
 * metric (call_help's order); nothing for a key without calls. */
static void render_call(struct monitor *mo, struct buf *b, int metric, const struct agg_key *key)
{
	const struct api_lib *lib = apilib__get(key->lib);
	bool sys = key->lib == AGG_LIB_SYSCALL;
	struct agg_val v;
	char comm[64], labels[256], sname[32];

	if ((!sys && (!lib || key->func >= lib->nfuncs)) || !read_agg(mo, key, &v) || !v.count)
		return;
	comm_of(mo, key->pid, comm, sizeof(comm));
	snprintf(labels, sizeof(labels), "pid=\"%u\",comm=\"%s\",lib=\"%s\",func=\"%s\"",
		 key->pid, comm, sys ? "syscall" : lib->name,
		 sys ? syscalls__name(key->func, sname, sizeof(sname)) : lib->symbol(key->func));
	/* NCCL collectives: one series per communicator size. */
	if (key->nranks) {
		size_t l = strlen(labels);

		snprintf(labels + l, sizeof(labels) - l, ",nranks=\"%u\"", key->nranks);
	}
	switch (metric) {
	case 0:
		bprintf(b, "cgbpf_calls_total{%s} %" PRIu64 "\n", labels, (uint64_t)v.count);
		break;
	case 1:
		if (v.errors)
			bprintf(b, "cgbpf_call_errors_total{%s} %" PRIu64 "\n", labels,
				(uint64_t)v.errors);
		break;
	case 2:
		if (v.bytes && !(key->lib == LIB_NCCL && nccl_funcs[key->func].cls == NC_C_INIT_RANK))
			bprintf(b, "cgbpf_bytes_total{%s} %" PRIu64 "\n", labels, (uint64_t)v.bytes);
		break;
	case 3:
		render_histogram(b, labels, &v);
		break;
	case 4:
		if (key->lib == LIB_NCCL && key->nranks && v.bytes) {
			int coll = nccl_funcs[key->func].coll;

			bprintf(b, "cgbpf_nccl_bus_bytes_total{%s} %.0f\n", labels,
				(double)v.bytes * ncclbw__size_factor(coll, key->nranks) *
				ncclbw__bus_factor(coll, key->nranks));
		}
		break;
	}
}

/* The per-call metrics: each one's HELP and TYPE, then its series for
 * each of the n keys. */
static void render_calls(struct monitor *mo, struct buf *b, const struct agg_key *keys, size_t n)
{
	for (int metric = 0; metric < (int)(sizeof(call_help) / sizeof(*call_help)); metric++) {
		bprintf(b, "%s", call_help[metric]);
		for (size_t i = 0; i < n; i++)
			render_call(mo, b, metric, &keys[i]);
	}
}

/* Per process: time blocked in synchronization / NCCL calls (those
 * flagged as able to hang) and in syscalls (--syscall-threshold), summed
 * over the n keys. */
static void render_waits(struct monitor *mo, struct buf *b, const struct agg_key *keys, size_t n)
{
	struct hmap sync = { 0 }, sysw = { 0 };
	uint64_t pid, ns;

	bprintf(b, "# HELP cgbpf_sync_wait_seconds_total Time spent in synchronization and NCCL "
		   "calls, per process.\n# TYPE cgbpf_sync_wait_seconds_total counter\n");
	bprintf(b, "# HELP cgbpf_syscall_wait_seconds_total Time spent in syscalls lasting at "
		   "least --syscall-threshold, per process.\n"
		   "# TYPE cgbpf_syscall_wait_seconds_total counter\n");
	for (size_t i = 0; i < n; i++) {
		const struct api_lib *lib = apilib__get(keys[i].lib);
		struct agg_cfg c = { 0 };
		struct agg_val v;
		struct hmap *h = NULL;
		uint64_t *cur;

		if (keys[i].lib == AGG_LIB_SYSCALL) {
			h = &sysw;
		} else if (lib && lib->agg_cfg && keys[i].func < lib->nfuncs) {
			lib->agg_cfg(keys[i].func, &c);
			if (c.flags & AGG_F_SLOW)
				h = &sync;
		}
		if (!h || !read_agg(mo, &keys[i], &v))
			continue;
		cur = hmap__get(h, keys[i].pid);
		if (cur)
			*cur += v.total_ns;
		else
			hmap__put(h, keys[i].pid, v.total_ns);
	}
	for (int w = 0; w < 2; w++) {
		struct hmap *h = w ? &sysw : &sync;

		for (size_t it = 0; hmap__next(h, &it, &pid, &ns);) {
			char comm[64];

			comm_of(mo, pid, comm, sizeof(comm));
			bprintf(b, "%s{pid=\"%u\",comm=\"%s\"} %.9f\n",
				w ? "cgbpf_syscall_wait_seconds_total" :
				    "cgbpf_sync_wait_seconds_total", (uint32_t)pid, comm, ns / 1e9);
		}
		hmap__free(h);
	}
}

/* Records the BPF side dropped, all kinds and CPUs together. */
static uint64_t read_drops(struct monitor *mo)
{
	int ncpu = mo->ncpu;
	uint64_t *vals = calloc(ncpu, sizeof(*vals)), drops = 0;

	for (uint32_t t = 0; vals && t < REC__COUNT; t++) {
		if (bpf_map__lookup_elem(mo->skel->maps.drops, &t, sizeof(t), vals,
					 ncpu * sizeof(*vals), 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			drops += vals[c];
	}
	free(vals);
	return drops;
}

/* Device memory held, per process. */
static void render_gpu_memory(struct monitor *mo, struct buf *b)
{
	uint32_t pk, pnext;
	bool first = true;

	bprintf(b, "# HELP cgbpf_gpu_memory_bytes Device memory a process holds through the driver "
		   "API's allocations made while cgbpf watched (frees of older ones are not "
		   "counted).\n# TYPE cgbpf_gpu_memory_bytes gauge\n");
	while (!bpf_map__get_next_key(mo->skel->maps.gpu_mem, first ? NULL : &pk, &pnext,
				      sizeof(pnext))) {
		int64_t held;
		char comm[64];

		first = false;
		pk = pnext;
		if (bpf_map__lookup_elem(mo->skel->maps.gpu_mem, &pk, sizeof(pk), &held,
					 sizeof(held), 0))
			continue;
		comm_of(mo, pk, comm, sizeof(comm));
		bprintf(b, "cgbpf_gpu_memory_bytes{pid=\"%u\",comm=\"%s\"} %" PRId64 "\n", pk,
			comm, held < 0 ? 0 : held);
	}
}

/* cgbpf's own health: drops, what it traces and holds, dumps, scrapes;
 * nkeys: the series in the aggregate map. */
static void render_self(struct monitor *mo, struct buf *b, uint64_t drops, size_t nkeys)
{
	bprintf(b, "# HELP cgbpf_dropped_records_total Records lost because the ring buffer was "
		   "full.\n# TYPE cgbpf_dropped_records_total counter\ncgbpf_dropped_records_total %"
		   PRIu64 "\n", drops);
	bprintf(b, "# HELP cgbpf_traced_processes Processes traced now.\n"
		   "# TYPE cgbpf_traced_processes gauge\ncgbpf_traced_processes %zu\n",
		mo->model->procs.count);
	bprintf(b, "# HELP cgbpf_probed_library_files Library files with probes attached.\n"
		   "# TYPE cgbpf_probed_library_files gauge\ncgbpf_probed_library_files %zu\n",
		attach__files(mo->attach));
	bprintf(b, "# HELP cgbpf_aggregate_series (process, function) pairs in the BPF map "
		   "(at most %d).\n# TYPE cgbpf_aggregate_series gauge\ncgbpf_aggregate_series %zu\n",
		AGG_MAX_KEYS, nkeys);
	bprintf(b, "# HELP cgbpf_flight_recorder_records Records held by the flight recorder.\n"
		   "# TYPE cgbpf_flight_recorder_records gauge\ncgbpf_flight_recorder_records %zu\n",
		mo->flight.n);
	bprintf(b, "# HELP cgbpf_dumps_total Flight-recorder dumps written.\n"
		   "# TYPE cgbpf_dumps_total counter\ncgbpf_dumps_total %" PRIu64 "\n", mo->dumps);
	bprintf(b, "# HELP cgbpf_dump_failures_total Dumps that could not be written.\n"
		   "# TYPE cgbpf_dump_failures_total counter\ncgbpf_dump_failures_total %" PRIu64
		   "\n", mo->dump_failures);
	bprintf(b, "# HELP cgbpf_scrapes_total Metrics requests served.\n"
		   "# TYPE cgbpf_scrapes_total counter\ncgbpf_scrapes_total %" PRIu64 "\n",
		mo->scrapes);
	bprintf(b, "# HELP cgbpf_http_dropped_total Endpoint connections closed unanswered: "
		   "no whole request in time, too many at once, or the answer not taken.\n"
		   "# TYPE cgbpf_http_dropped_total counter\ncgbpf_http_dropped_total %" PRIu64
		   "\n", mo->http_dropped);
}

/* The /metrics page into b, in Prometheus' text exposition format. */
static void render(struct monitor *mo, struct buf *b)
{
	size_t n;
	struct agg_key *keys = agg_keys(mo, &n);
	uint64_t drops;

	render_calls(mo, b, keys, n);
	render_waits(mo, b, keys, n);
	free(keys);
	drops = read_drops(mo);
	render_gpu_memory(mo, b);
	render_self(mo, b, drops, n);
	if (mo->pysites) {
		void *ctx[2] = { b, mo };

		pysites__render(mo->pysites, site_line, site_comm, ctx);
	}
	{
		void *ctx[2] = { b, mo };

		ncclmon__render(mo->nccl, site_line, ctx);
	}
	if (mo->more) {
		void *ctx[2] = { b, mo };
		struct src_metrics m = { .line = site_line, .comm = site_comm, .ctx = ctx };

		mo->more(mo->more_ctx, &m);
	}
}

/* ------------------------------------------------------------ http */

static void conn_close(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = c->n = 0;
	c->writing = false;
}

/* Sets the answer; it is written as the client takes it. body may be NULL
 * only with len 0. */
static void respond(struct conn *c, int code, const char *status, const char *type,
		    const char *body, size_t len)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n", code, status, type, len);

	c->writing = true;
	c->out_off = 0;
	c->out = malloc(n + len);
	if (!c->out) {
		c->out_len = 0;
		return;
	}
	memcpy(c->out, hdr, n);
	if (len)
		memcpy(c->out + n, body, len);
	c->out_len = n + len;
}

static void text(struct conn *c, int code, const char *status, const char *body)
{
	respond(c, code, status, "text/plain", body, strlen(body));
}

/* Bytes of answers waiting for their clients. */
static size_t pending_out(const struct monitor *mo)
{
	size_t n = 0;

	for (int i = 0; i < HTTP_MAX_CONNS; i++)
		if (mo->conns[i].fd >= 0 && mo->conns[i].writing)
			n += mo->conns[i].out_len - mo->conns[i].out_off;
	return n;
}

/* The answer to a complete request. */
static void serve(struct monitor *mo, struct conn *c, const struct http_req *rq)
{
	if (!strcmp(rq->path, "/metrics") && !strcmp(rq->method, "GET")) {
		struct buf b = { 0 };

		mo->scrapes++;
		render(mo, &b);
		if (b.oom)
			text(c, 500, "Internal Server Error", "out of memory\n");
		else if (pending_out(mo) + b.len > HTTP_OUT_MAX)
			text(c, 503, "Service Unavailable", "other clients have not taken their "
			     "answers yet: retry\n");
		else
			respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
		free(b.p);
	} else if (!strcmp(rq->path, "/dump") && (!strcmp(rq->method, "POST") ||
						   !strcmp(rq->method, "GET"))) {
		char body[4300];

		if (!mo->flight.buf) {
			text(c, 409, "Conflict", "the flight recorder is off: start the monitor with "
			     "--flight-recorder TIME\n");
			return;
		}
		monitor__trigger(mo, "request");
		snprintf(body, sizeof(body), "%s\n",
			 mo->working ? mo->job.path : "(queued after the running dump)");
		text(c, 202, "Accepted", body);
	} else if (!strcmp(rq->path, "/")) {
		text(c, 200, "OK", "cgbpf monitor: GET /metrics (Prometheus text format), "
		     "POST /dump (flight recorder)\n");
	} else {
		text(c, 404, "Not Found", "not found\n");
	}
}

/* Reads what the client sent; answers once the head is complete. */
static void conn_read(struct monitor *mo, struct conn *c)
{
	struct http_req rq;
	int r;

	while (c->n < sizeof(c->req)) {
		ssize_t got = read(c->fd, c->req + c->n, sizeof(c->req) - c->n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (got <= 0) {
			/* Gone, or done sending without a whole request. */
			conn_close(c);
			return;
		}
		c->n += got;
	}
	r = http__parse_request(c->req, c->n, &rq);
	if (r == 1)
		serve(mo, c, &rq);
	else if (r == -E2BIG)
		text(c, 431, "Request Header Fields Too Large", "request too large\n");
	else if (r == -ENAMETOOLONG)
		text(c, 414, "URI Too Long", "path too long\n");
	else if (r < 0)
		text(c, 400, "Bad Request", "bad request\n");
}

/* Writes what the client takes now; closes when all is written. */
static void conn_write(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (w <= 0)
			break;
		c->out_off += w;
	}
	conn_close(c);
}

/* A slot for a new connection: a free one, else the one that has been
 * sending its request the longest (it had its chance). */
static struct conn *conn_slot(struct monitor *mo)
{
	struct conn *old = NULL;

	for (int i = 0; i < HTTP_MAX_CONNS; i++) {
		struct conn *c = &mo->conns[i];

		if (c->fd < 0)
			return c;
		if (!c->writing && (!old || c->since < old->since))
			old = c;
	}
	if (old) {
		conn_close(old);
		mo->http_dropped++;
	}
	return old;
}

static void http_tick(struct monitor *mo, uint64_t now)
{
	int fd;

	for (int n = 0; n < HTTP_ACCEPTS_PER_TICK &&
	     (fd = accept4(mo->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0; n++) {
		struct conn *c = conn_slot(mo);

		if (!c) {
			/* Every slot is busy writing answers: come back later. */
			close(fd);
			mo->http_dropped++;
			continue;
		}
		c->fd = fd;
		c->since = now;
	}
	for (int i = 0; i < HTTP_MAX_CONNS; i++) {
		struct conn *c = &mo->conns[i];

		if (c->fd < 0)
			continue;
		if (now - c->since >= (c->writing ? HTTP_DONE_NS : HTTP_HEAD_NS)) {
			if (!c->writing)
				dbg("metrics endpoint: a client sent no whole request in %llu s: "
				    "closed", HTTP_HEAD_NS / 1000000000);
			conn_close(c);
			mo->http_dropped++;
			continue;
		}
		if (!c->writing)
			conn_read(mo, c);
		if (c->fd >= 0 && c->writing)
			conn_write(c);
	}
}

/* Forgets the aggregates of processes gone for a whole interval: they
 * were scrapable for one interval after their exit. */
/* Memory accounting of processes that are gone goes at once. */
static void forget_memory(struct monitor *mo)
{
	struct agg_alloc_key ak, anext, *del = NULL;
	uint32_t pk, pnext;
	size_t n = 0, cap = 0;
	bool first = true;

	while (!bpf_map__get_next_key(mo->skel->maps.gpu_mem, first ? NULL : &pk, &pnext,
				      sizeof(pnext))) {
		first = false;
		pk = pnext;
		if (!procfs__alive(pk))
			bpf_map__delete_elem(mo->skel->maps.gpu_mem, &pk, sizeof(pk), 0);
	}
	first = true;
	while (!bpf_map__get_next_key(mo->skel->maps.gpu_allocs, first ? NULL : &ak, &anext,
				      sizeof(anext))) {
		first = false;
		ak = anext;
		if (procfs__alive(ak.pid))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct agg_alloc_key *nd = realloc(del, nc * sizeof(*nd));

			if (!nd)
				break;
			del = nd;
			cap = nc;
		}
		del[n++] = ak;
	}
	for (size_t i = 0; i < n; i++)
		bpf_map__delete_elem(mo->skel->maps.gpu_allocs, &del[i], sizeof(del[i]), 0);
	free(del);
}

static void housekeeping(struct monitor *mo)
{
	struct agg_key k, next, *del = NULL;
	struct hmap seen_gone = { 0 }, alive = { 0 }, dropped = { 0 }, keyed = { 0 };
	size_t ndel = 0, cap = 0;
	uint64_t pid, name;
	bool first = true;

	/* Keys are collected, then deleted: deleting during the walk would
	 * restart it. */
	while (!bpf_map__get_next_key(mo->skel->maps.aggs, first ? NULL : &k, &next,
				      sizeof(next))) {
		first = false;
		k = next;
		hmap__put(&keyed, k.pid, 1);
		if (hmap__get(&alive, k.pid))
			continue;
		if (!hmap__get(&dropped, k.pid) && !hmap__get(&seen_gone, k.pid)) {
			if (procfs__alive(k.pid)) {
				hmap__put(&alive, k.pid, 1);
				continue;
			}
			/* Gone at the last round too: its interval is over. */
			hmap__put(hmap__get(&mo->gone, k.pid) ? &dropped : &seen_gone, k.pid, 1);
		}
		if (!hmap__get(&dropped, k.pid))
			continue;
		if (ndel == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct agg_key *nd = realloc(del, nc * sizeof(*nd));

			if (!nd)
				break;
			del = nd;
			cap = nc;
		}
		del[ndel++] = k;
	}
	for (size_t i = 0; i < ndel; i++)
		bpf_map__delete_elem(mo->skel->maps.aggs, &del[i], sizeof(del[i]), 0);
	for (size_t it = 0; hmap__next(&dropped, &it, &pid, NULL);)
		if (hmap__del(&mo->dead_names, pid, &name))
			free((void *)(uintptr_t)name);
	/* Names of processes that never had aggregates go as well. */
	{
		uint64_t *gone_names = calloc(mo->dead_names.count + 1, sizeof(*gone_names));
		size_t n = 0;

		for (size_t it = 0; gone_names && hmap__next(&mo->dead_names, &it, &pid, NULL);)
			if (!hmap__get(&keyed, pid))
				gone_names[n++] = pid;
		for (size_t i = 0; i < n; i++)
			if (hmap__del(&mo->dead_names, gone_names[i], &name))
				free((void *)(uintptr_t)name);
		free(gone_names);
	}
	hmap__free(&keyed);
	free(del);
	hmap__free(&alive);
	hmap__free(&dropped);
	hmap__free(&mo->gone);
	mo->gone = seen_gone;
}

static bool pid_alive(uint32_t pid)
{
	return procfs__alive((pid_t)pid);
}

void monitor__tick(struct monitor *mo, uint64_t now)
{
	http_tick(mo, now);
	reap_dump(mo);
	if (!mo->working && mo->pending[0]) {
		char why[sizeof(mo->pending)];

		memcpy(why, mo->pending, sizeof(why));
		mo->pending[0] = 0;
		start_dump(mo, why);
	}
	if (now - mo->last_house >= mo->o.interval_ns) {
		housekeeping(mo);
		forget_memory(mo);
		if (mo->pysites)
			pysites__sweep(mo->pysites, pid_alive);
		ncclmon__sweep(mo->nccl, pid_alive);
		mo->last_house = now;
	}
}

/* ------------------------------------------------------------ client */

int monitor__request_dump(const char *listen)
{
	struct sockaddr_in sa;
	char resp[8192];
	static const char req[] = "POST /dump HTTP/1.0\r\nHost: cgbpf\r\nContent-Length: 0\r\n\r\n";
	size_t n = 0;
	int fd, code = 0;

	if (parse_listen(listen, &sa)) {
		err("--listen %s: expected IPv4ADDR:PORT", listen);
		return 2;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err("no cgbpf monitor at %s: %s (start one with 'sudo cgbpf monitor "
		    "--flight-recorder 30s', or give its address with --listen)", listen,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		err("%s: %s", listen, strerror(errno));
		close(fd);
		return 1;
	}
	while (n < sizeof(resp) - 1) {
		ssize_t r = read(fd, resp + n, sizeof(resp) - 1 - n);

		if (r <= 0)
			break;
		n += r;
	}
	close(fd);
	resp[n] = 0;
	if (sscanf(resp, "HTTP/%*s %d", &code) != 1) {
		err("%s: not a cgbpf monitor answer", listen);
		return 1;
	}
	{
		char *body = strstr(resp, "\r\n\r\n");

		body = body ? body + 4 : resp;
		if (code == 202) {
			printf("dump requested: %s", body);
			return 0;
		}
		err("the monitor answered %d: %s", code, body);
	}
	return 1;
}
