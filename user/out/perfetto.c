// SPDX-License-Identifier: MIT
/*
 * out/: what a capture writes. The streaming Perfetto writer
 * (perfetto.c), model events as tracks (pfsink.c), one file per process
 * (pfsplit.c), capture windows (capwin.c) and the summary's frame
 * (summary.c; its sections come from the sources). It uses core/ and
 * lib/ only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "lib/pb.h"
#include "lib/version.h"
#include "out/perfetto.h"

/* Field numbers, from perfetto_trace.proto. */
enum {
	TRACE_PACKET = 1,

	PKT_TIMESTAMP = 8,
	PKT_CLOCK_SNAPSHOT = 6,
	PKT_SEQ_ID = 10,
	PKT_TRACK_EVENT = 11,
	PKT_INTERNED = 12,
	PKT_SEQ_FLAGS = 13,
	PKT_SYSTEM_INFO = 45,
	PKT_TS_CLOCK_ID = 58,
	PKT_DEFAULTS = 59,
	PKT_TRACK_DESC = 60,

	DEFAULTS_TS_CLOCK_ID = 58,
	DEFAULTS_TRACK_EVENT = 11,
	TE_DEFAULTS_TRACK_UUID = 11,

	CLOCKS = 1,
	CLOCK_ID = 1,
	CLOCK_TS = 2,
	CLOCK_INCREMENTAL = 3,
	CLOCK_PRIMARY = 2,

	TE_CATEGORY_IIDS = 3,
	TE_ANNOT = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK_UUID = 11,
	TE_COUNTER_VALUE = 30,
	TE_CALLSTACK = 55,
	TE_LEGACY_EVENT = 6,
	TE_FLOW_IDS = 47,
	TE_FLOW_IDS_OLD = 36,
	TE_TERMINATING_FLOW_IDS = 48,
	TE_TERMINATING_FLOW_IDS_OLD = 42,
	LE_BIND_ID = 8,
	LE_FLOW_DIRECTION = 13,
	LE_FLOW_IN = 1,
	ICS_FRAMES = 1,
	ICS_FUNCTION_NAME = 1,

	DA_NAME_IID = 1,
	DA_BOOL = 2,
	DA_UINT = 3,
	DA_INT = 4,
	DA_DOUBLE = 5,
	DA_POINTER = 7,
	DA_STRING_IID = 17,

	ID_EVENT_CATEGORIES = 1,
	ID_EVENT_NAMES = 2,
	ID_ANNOT_NAMES = 3,
	ID_ANNOT_STRINGS = 29,
	INTERNED_IID = 1,
	INTERNED_STR = 2,	/* EventName.name, DebugAnnotationName.name, InternedString.str */

	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	TD_DESCRIPTION = 14,
	PD_PID = 1,
	PD_CMDLINE = 2,
	PD_NAME = 6,
	PD_LABELS = 8,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	CD_UNIT = 3,

	SI_UTSNAME = 1,
	SI_MACHINE_NAME = 17,
	PKT_TRACE_ATTRIBUTES = 126,
	TA_ATTRIBUTE = 1,
	TA_KEY = 1,
	TA_STRING_VALUE = 3,
	UTS_SYSNAME = 1,
	UTS_VERSION = 2,
	UTS_RELEASE = 3,
	UTS_MACHINE = 4,
};

enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };
enum { CLOCK_REALTIME_ID = 1, CLOCK_MONOTONIC_ID = 3, CLOCK_BOOTTIME_ID = 6 };
/* Sequence-scoped incremental clock (ids 64..127 are per sequence). */
enum { CLOCK_INCR_ID = 64 };

#define FLUSH_BYTES (64u << 10)
#define INTERN_MAX 4096		/* entries per sequence before a reset */
#define META_SEQ 1

enum intern_kind { IK_EVENT, IK_ANNOT_NAME, IK_STRING, IK_CATEGORY, IK__COUNT };

/*
 * The strings a sequence interned last, by address: most events repeat the
 * names of the ones before (the same literal, the same kernel name from
 * the model, the same launch string from its cache), and comparing the
 * bytes costs less than hashing them and looking the hash up (a third of
 * the consumer's time per launch went there). A hit needs the same bytes
 * at the same address, so a buffer reused for other text misses, and
 * gets what hashing would have given. Any entry can hold any address (a
 * launch's eight or so strings, mapped by address into sixteen slots,
 * shared a slot in most runs and missed every time), and a miss replaces
 * the entry used longest ago, so a rare string costs one hot string one
 * miss at most.
 */
#define MEMO_N 16
#define MEMO_LEN 96		/* longer strings are hashed every time */

struct intern_memo {
	const char *p[MEMO_N];	/* NULL: empty */
	uint32_t used[MEMO_N];	/* clock at the last hit or put */
	uint32_t clock;
	struct {
		uint64_t iid;
		uint8_t kind;
		uint8_t len;
		char copy[MEMO_LEN];
	} e[MEMO_N];
};

struct pfseq {
	uint32_t id;
	uint64_t track;
	uint64_t last_ts;
	bool need_reset;
	struct hmap iids;	/* hash(kind, string) -> iid */
	uint64_t next_iid;
	struct intern_memo *memo;	/* at the first string interned */
};

struct pftrace {
	int fd;
	struct pb out;		/* whole packets not yet written */
	uint64_t written;
	int err;
	uint32_t next_seq;
	uint64_t last_snapshot;	/* BOOTTIME of the latest clock snapshot */
	struct pfseq **seqs;
	size_t nseqs, capseqs;
	struct pfsplit *split;	/* a router (--split-per-process): writes nothing itself */
	const struct pf_router_ops *route;	/* the split's side, with split */
	/* Capture windows (pftrace__pause / __resume): the track descriptors
	 * written so far, their packet bodies after the timestamp, for a new
	 * file; keep: remember them at all. */
	bool keep, paused;
	uint32_t generation;
	struct hmap descs;	/* uuid -> index in desc */
	struct pf_desc { uint64_t uuid; uint8_t *body; size_t len; } *desc;
	size_t ndesc, capdesc;
	size_t desc_body;	/* offset of the descriptor being written, after its timestamp */
};

/* Runs stmt with pt as each of a router's files in turn, then returns. */
#define FOR_FILES(pt, stmt)                                                        \
	do {                                                                       \
		if ((pt)->split) {                                                 \
			struct pftrace *router_ = (pt);                            \
			for (size_t i_ = 0;                                        \
			     (pt = router_->route->file(router_->split, i_)) ||    \
			     i_ < router_->route->nfiles(router_->split); i_++)    \
				if (pt)                                            \
					stmt;                                      \
			return;                                                    \
		}                                                                  \
	} while (0)

/* Runs stmt with pt as each file a descriptor of uuid goes to, then
 * returns. */
#define FOR_DESC(pt, uuid, parent, pid, stmt)                                       \
	do {                                                                       \
		if ((pt)->split) {                                                 \
			struct pftrace *router_ = (pt);                            \
			for (size_t i_ = 0;                                        \
			     router_->route->route_desc(router_->split, uuid,      \
							parent, pid, i_, &pt);     \
			     i_++)                                                 \
				if (pt)                                            \
					stmt;                                      \
			return;                                                    \
		}                                                                  \
	} while (0)

struct new_str {
	enum intern_kind kind;
	uint64_t iid;
	const char *s;
};

struct pftrace *pftrace__create(const char *path)
{
	int fd = outfile__create(AT_FDCWD, path, OUTFILE_MODE);
	struct pftrace *pt;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	pt = pftrace__fdopen(fd);
	if (!pt) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return pt;
}

struct pftrace *pftrace__router(const struct pf_router_ops *ops, struct pfsplit *split)
{
	struct pftrace *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return NULL;
	pt->fd = -1;
	pb__init(&pt->out);
	pt->next_seq = META_SEQ + 1;
	pt->split = split;
	pt->route = ops;
	return pt;
}

struct pftrace *pftrace__pending(void)
{
	struct pftrace *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return NULL;
	pt->fd = -1;
	pb__init(&pt->out);
	pt->next_seq = META_SEQ + 1;
	return pt;
}

void pftrace__set_fd(struct pftrace *pt, int fd)
{
	pt->fd = fd;
}

struct pfsplit *pftrace__split(const struct pftrace *pt)
{
	return pt->split;
}

struct pftrace *pftrace__fdopen(int fd)
{
	struct pftrace *pt;

	if (fd < 0)
		return NULL;	/* errno from the open that failed */
	pt = calloc(1, sizeof(*pt));
	if (!pt)
		return NULL;
	pt->fd = fd;
	pb__init(&pt->out);
	pt->next_seq = META_SEQ + 1;
	return pt;
}

int pftrace__error(const struct pftrace *pt)
{
	return pt->split ? pt->route->error(pt->split) : pt->err;
}

uint64_t pftrace__bytes(const struct pftrace *pt)
{
	uint64_t n = 0;

	if (pt->split) {
		const struct pftrace *f;

		for (size_t i = 0; i < pt->route->nfiles(pt->split); i++)
			if ((f = pt->route->file(pt->split, i)))
				n += pftrace__bytes(f);
		return n;
	}
	return pt->written + pt->out.len;
}

/* Length of the longest run of whole top-level packets in buf[0..n). */
static size_t whole_packets(const uint8_t *buf, size_t len, size_t n)
{
	size_t p = 0, good = 0;

	while (p < len) {
		uint64_t v = 0;
		size_t q = p + 1;
		int shift = 0;

		/* Each packet is field 1, wire type 2: 0x0a, varint length, bytes. */
		while (q < len && shift < 64) {
			v |= (uint64_t)(buf[q] & 0x7f) << shift;
			shift += 7;
			if (!(buf[q++] & 0x80))
				break;
		}
		if (q + v > n)
			break;
		p = good = q + v;
	}
	return good;
}

int pftrace__flush(struct pftrace *pt)
{
	size_t off = 0;

	if (pt->split) {
		int err = 0;
		struct pftrace *f;

		for (size_t i = 0; i < pt->route->nfiles(pt->split); i++)
			if ((f = pt->route->file(pt->split, i)) && pftrace__flush(f) && !err)
				err = pftrace__error(f);
		return err;
	}
	if (pt->err)
		return pt->err;
	if (pt->paused) {
		pb__reset(&pt->out);
		return 0;
	}
	if (pt->fd < 0)
		return pt->out.err;	/* pending: no file yet, the buffer keeps it all */
	if (pt->out.err) {
		pt->err = pt->out.err;
		return pt->err;
	}
	while (off < pt->out.len) {
		ssize_t n = write(pt->fd, pt->out.buf + off, pt->out.len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			pt->err = n < 0 ? -errno : -ENOSPC;
			/* Keep the file a sequence of whole packets: cut the
			 * partly written one. A pipe or device cannot be cut;
			 * the write error is the one to report either way. */
			pt->written += whole_packets(pt->out.buf, pt->out.len, off);
			if (ftruncate(pt->fd, pt->written) < 0 && errno != EINVAL)
				warn("cutting the partial packet off the trace: %s", strerror(errno));
			pb__reset(&pt->out);
			return pt->err;
		}
		off += n;
	}
	pt->written += pt->out.len;
	pb__reset(&pt->out);
	return 0;
}

void pftrace__discard(struct pftrace *pt, const char *path)
{
	if (!pt)
		return;
	if (pt->split) {
		pt->route->close(pt->split, true);
		pt->split = NULL;
		pftrace__close(pt);
		return;
	}
	outfile__discard(pt->fd, path);
	pb__reset(&pt->out);
	pt->err = -ECANCELED;	/* so that close writes nothing */
	pftrace__close(pt);
}

int pftrace__close(struct pftrace *pt)
{
	int err;

	if (!pt)
		return 0;
	if (pt->split) {
		err = pt->route->close(pt->split, false);
	} else if (pt->fd < 0) {
		/* Paused: the error of the last file, if any. Pending: never
		 * given a file, so nothing to write. */
		err = pt->paused ? pftrace__flush(pt) : 0;
	} else {
		err = pftrace__flush(pt);
		if (close(pt->fd) < 0 && !err)
			err = -errno;
	}
	for (size_t i = 0; i < pt->ndesc; i++)
		free(pt->desc[i].body);
	free(pt->desc);
	hmap__free(&pt->descs);
	for (size_t i = 0; i < pt->nseqs; i++) {
		hmap__free(&pt->seqs[i]->iids);
		free(pt->seqs[i]->memo);
		free(pt->seqs[i]);
	}
	free(pt->seqs);
	pb__free(&pt->out);
	free(pt);
	return err;
}

static void packet_end(struct pftrace *pt)
{
	pb__end(&pt->out);
	/* Paused: nothing is buffered but this packet, which goes. */
	if (pt->paused)
		pb__reset(&pt->out);
	else if (pt->out.len >= FLUSH_BYTES && pt->fd >= 0)
		pftrace__flush(pt);
}

struct pb *pftrace__packet_begin(struct pftrace *pt)
{
	/* A router cannot tell whose a raw packet is: its writers (scheduler,
	 * CPU samples) are off with --split-per-process. */
	if (pt->err || pt->split)
		return NULL;
	pb__begin(&pt->out, TRACE_PACKET);
	return &pt->out;
}

void pftrace__packet_end(struct pftrace *pt)
{
	packet_end(pt);
}

uint32_t pftrace__new_seq_id(struct pftrace *pt)
{
	return pt->next_seq++;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void put_clock(struct pb *pb, uint32_t id, uint64_t ts, bool incremental)
{
	pb__begin(pb, CLOCKS);
	pb__varint(pb, CLOCK_ID, id);
	pb__varint(pb, CLOCK_TS, ts);
	if (incremental)
		pb__bool(pb, CLOCK_INCREMENTAL, true);
	pb__end(pb);
}

void pftrace__clock_snapshot(struct pftrace *pt)
{
	struct pb *pb = &pt->out;
	uint64_t boot, mono, real;

	FOR_FILES(pt, pftrace__clock_snapshot(pt));
	if (pt->err)
		return;
	/* Bracket MONOTONIC and REALTIME between two BOOTTIME reads. */
	boot = clock_ns(CLOCK_BOOTTIME);
	mono = clock_ns(CLOCK_MONOTONIC);
	real = clock_ns(CLOCK_REALTIME);
	boot = (boot + clock_ns(CLOCK_BOOTTIME)) / 2;
	if (boot < pt->last_snapshot)
		boot = pt->last_snapshot;
	pt->last_snapshot = boot;
	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PKT_TIMESTAMP, boot);
	pb__varint(pb, PKT_SEQ_ID, META_SEQ);
	pb__begin(pb, PKT_CLOCK_SNAPSHOT);
	put_clock(pb, CLOCK_BOOTTIME_ID, boot, false);
	put_clock(pb, CLOCK_MONOTONIC_ID, mono, false);
	put_clock(pb, CLOCK_REALTIME_ID, real, false);
	pb__varint(pb, CLOCK_PRIMARY, CLOCK_BOOTTIME_ID);
	pb__end(pb);
	packet_end(pt);
}

static void attribute(struct pb *pb, const char *key, const char *value)
{
	pb__begin(pb, TA_ATTRIBUTE);
	pb__string(pb, TA_KEY, key);
	pb__string(pb, TA_STRING_VALUE, value);
	pb__end(pb);
}

void pftrace__system_info(struct pftrace *pt)
{
	struct pb *pb = &pt->out;
	struct utsname u;

	FOR_FILES(pt, pftrace__system_info(pt));
	if (pt->err || uname(&u))
		return;
	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PKT_SEQ_ID, META_SEQ);
	pb__begin(pb, PKT_SYSTEM_INFO);
	pb__begin(pb, SI_UTSNAME);
	pb__string(pb, UTS_SYSNAME, u.sysname);
	pb__string(pb, UTS_VERSION, u.version);
	pb__string(pb, UTS_RELEASE, u.release);
	pb__string(pb, UTS_MACHINE, u.machine);
	pb__end(pb);
	/* The host's name labels its machine when traces are merged. */
	pb__string(pb, SI_MACHINE_NAME, u.nodename);
	pb__end(pb);
	packet_end(pt);
	/* Who wrote the trace and where: cgbpf merge recognizes its inputs
	 * by these; trace processor shows them as trace_attribute.* metadata. */
	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PKT_SEQ_ID, META_SEQ);
	pb__begin(pb, PKT_TRACE_ATTRIBUTES);
	attribute(pb, "cgbpf.version", CGBPF_VERSION);
	attribute(pb, "cgbpf.hostname", u.nodename);
	pb__end(pb);
	packet_end(pt);
}

void pftrace__attribute(struct pftrace *pt, const char *key, const char *value)
{
	struct pb *pb = &pt->out;

	if (pt->err)
		return;
	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PKT_SEQ_ID, META_SEQ);
	pb__begin(pb, PKT_TRACE_ATTRIBUTES);
	attribute(pb, key, value);
	pb__end(pb);
	packet_end(pt);
}

/*
 * Descriptors carry the time they are written. Trace processor binds a
 * thread or process track to a pid at the first packet that uses it, in
 * time order, and gives a packet without timestamp the latest time read
 * before it in the file: a descriptor written before the scheduler data it
 * follows would then bind a pid before its fork, to a process the fork
 * then replaces (slices in one process, the same thread's states in
 * another). Now is never before the records that made cgbpf describe the
 * track, so never before the task's fork.
 */
static void desc_begin(struct pftrace *pt, uint64_t uuid, uint64_t parent)
{
	struct pb *pb = &pt->out;

	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PKT_TIMESTAMP, clock_ns(CLOCK_BOOTTIME));
	pt->desc_body = pb->len;
	pb__varint(pb, PKT_SEQ_ID, META_SEQ);
	pb__begin(pb, PKT_TRACK_DESC);
	pb__varint(pb, TD_UUID, uuid);
	if (parent)
		pb__varint(pb, TD_PARENT, parent);
}

/* Remembers the descriptor just closed (its latest version per uuid, in
 * the order uuids first came: parents before children) for a new file. */
static void keep_desc(struct pftrace *pt, uint64_t uuid)
{
	size_t len = pt->out.len - pt->desc_body;
	uint64_t *v = hmap__get(&pt->descs, uuid);
	uint8_t *body;

	if (pt->out.err || !(body = malloc(len)))
		return;
	memcpy(body, pt->out.buf + pt->desc_body, len);
	if (v) {
		free(pt->desc[*v].body);
		pt->desc[*v].body = body;
		pt->desc[*v].len = len;
		return;
	}
	if (pt->ndesc == pt->capdesc) {
		size_t nc = pt->capdesc ? pt->capdesc * 2 : 64;
		struct pf_desc *n = realloc(pt->desc, nc * sizeof(*n));

		if (!n) {
			free(body);
			return;
		}
		pt->desc = n;
		pt->capdesc = nc;
	}
	if (hmap__put(&pt->descs, uuid, pt->ndesc)) {
		free(body);
		return;
	}
	pt->desc[pt->ndesc++] = (struct pf_desc){ uuid, body, len };
}

static void desc_end(struct pftrace *pt, uint64_t uuid)
{
	pb__end(&pt->out);
	if (pt->keep)
		keep_desc(pt, uuid);
	packet_end(pt);
}

void pftrace__keep_descriptors(struct pftrace *pt)
{
	pt->keep = true;
}

bool pftrace__paused(const struct pftrace *pt)
{
	return pt->paused;
}

uint32_t pftrace__generation(const struct pftrace *pt)
{
	return pt->generation;
}

int pftrace__pause(struct pftrace *pt, const char *discard_path)
{
	int err = 0;

	if (pt->paused)
		return 0;
	if (pt->fd < 0) {
		/* Pending (--split-per-process), never given a file: what it
		 * holds goes, its kept descriptors stay. */
		pb__reset(&pt->out);
	} else if (discard_path) {
		pb__reset(&pt->out);
		outfile__discard(pt->fd, discard_path);
		close(pt->fd);
	} else {
		pftrace__clock_snapshot(pt);
		err = pftrace__flush(pt);
		if (close(pt->fd) < 0 && !err)
			err = -errno;
	}
	pt->fd = -1;
	pt->paused = true;
	return err;
}

int pftrace__resume(struct pftrace *pt, const char *path, bool replace)
{
	int fd;

	if (!pt->paused)
		return 0;
	fd = replace ? outfile__create(AT_FDCWD, path, OUTFILE_MODE) :
		       outfile__create_new(AT_FDCWD, path, OUTFILE_MODE);
	if (fd == -EEXIST && !replace)
		return fd;	/* the caller says so; the capture goes on paused */
	if (fd < 0) {
		pt->err = fd;
		return fd;
	}
	pt->fd = fd;
	pt->paused = false;
	pt->written = 0;
	pt->generation++;
	pftrace__clock_snapshot(pt);
	pftrace__system_info(pt);
	for (size_t i = 0; i < pt->ndesc; i++) {
		struct pb *pb = &pt->out;

		pb__begin(pb, TRACE_PACKET);
		pb__varint(pb, PKT_TIMESTAMP, clock_ns(CLOCK_BOOTTIME));
		pb__raw(pb, pt->desc[i].body, pt->desc[i].len);
		packet_end(pt);
	}
	/* Interned names and clocks of the last file mean nothing here. */
	for (size_t i = 0; i < pt->nseqs; i++)
		pt->seqs[i]->need_reset = true;
	return pftrace__flush(pt);
}

void pftrace__process_labeled(struct pftrace *pt, uint64_t uuid, int pid, const char *name,
			      const char *cmdline, const char *label)
{
	struct pb *pb = &pt->out;

	FOR_DESC(pt, uuid, 0, pid, pftrace__process_labeled(pt, uuid, pid, name, cmdline, label));
	if (pt->err)
		return;
	desc_begin(pt, uuid, 0);
	pb__begin(pb, TD_PROCESS);
	pb__varint(pb, PD_PID, (uint32_t)pid);
	if (cmdline && *cmdline)
		pb__string(pb, PD_CMDLINE, cmdline);
	if (name && *name)
		pb__string(pb, PD_NAME, name);
	if (label && *label)
		pb__string(pb, PD_LABELS, label);
	pb__end(pb);
	desc_end(pt, uuid);
}

void pftrace__process(struct pftrace *pt, uint64_t uuid, int pid, const char *name,
		      const char *cmdline)
{
	pftrace__process_labeled(pt, uuid, pid, name, cmdline, NULL);
}

void pftrace__thread(struct pftrace *pt, uint64_t uuid, uint64_t parent, int pid, int tid,
		     const char *name)
{
	struct pb *pb = &pt->out;

	FOR_DESC(pt, uuid, parent, pid, pftrace__thread(pt, uuid, parent, pid, tid, name));
	if (pt->err)
		return;
	desc_begin(pt, uuid, parent);
	pb__begin(pb, TD_THREAD);
	pb__varint(pb, THD_PID, (uint32_t)pid);
	pb__varint(pb, THD_TID, (uint32_t)tid);
	if (name && *name)
		pb__string(pb, THD_NAME, name);
	pb__end(pb);
	desc_end(pt, uuid);
}

void pftrace__counter_track(struct pftrace *pt, uint64_t uuid, uint64_t parent,
			    const char *name, enum pf_unit unit)
{
	struct pb *pb = &pt->out;

	if (pt->split)
		pt->route->global_desc(pt->split, true, uuid, parent, name, NULL, unit);
	FOR_DESC(pt, uuid, parent, 0, pftrace__counter_track(pt, uuid, parent, name, unit));
	if (pt->err)
		return;
	desc_begin(pt, uuid, parent);
	pb__string(pb, TD_NAME, name);
	pb__begin(pb, TD_COUNTER);
	if (unit)
		pb__varint(pb, CD_UNIT, unit);
	pb__end(pb);
	desc_end(pt, uuid);
}

void pftrace__track_desc(struct pftrace *pt, uint64_t uuid, uint64_t parent, const char *name,
			 const char *description)
{
	if (pt->split)
		pt->route->global_desc(pt->split, false, uuid, parent, name, description, 0);
	FOR_DESC(pt, uuid, parent, 0, pftrace__track_desc(pt, uuid, parent, name, description));
	if (pt->err)
		return;
	desc_begin(pt, uuid, parent);
	pb__string(&pt->out, TD_NAME, name);
	if (description && *description)
		pb__string(&pt->out, TD_DESCRIPTION, description);
	desc_end(pt, uuid);
}

void pftrace__track(struct pftrace *pt, uint64_t uuid, uint64_t parent, const char *name)
{
	pftrace__track_desc(pt, uuid, parent, name, NULL);
}

/*
 * Clears the sequence's incremental state and restates its defaults and
 * clock; later timestamps are deltas from ts. Records reach the writer a
 * little out of order across threads, and BOOTTIME must not go backwards
 * from one clock snapshot to the next (trace processors reject such a
 * snapshot), so the base is never before the previous snapshot; the few
 * events older than the base are written with absolute timestamps.
 */
static void seq_reset(struct pftrace *pt, struct pfseq *s, uint64_t ts)
{
	struct pb *pb = &pt->out;

	if (ts < pt->last_snapshot)
		ts = pt->last_snapshot;
	pt->last_snapshot = ts;
	hmap__free(&s->iids);
	if (s->memo)
		memset(s->memo, 0, sizeof(*s->memo));
	s->next_iid = 1;
	s->need_reset = false;
	s->last_ts = ts;
	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PKT_TIMESTAMP, ts);
	pb__varint(pb, PKT_TS_CLOCK_ID, CLOCK_BOOTTIME_ID);
	pb__varint(pb, PKT_SEQ_ID, s->id);
	pb__varint(pb, PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
	pb__begin(pb, PKT_DEFAULTS);
	pb__varint(pb, DEFAULTS_TS_CLOCK_ID, CLOCK_INCR_ID);
	pb__begin(pb, DEFAULTS_TRACK_EVENT);
	pb__varint(pb, TE_DEFAULTS_TRACK_UUID, s->track);
	pb__end(pb);
	pb__end(pb);
	pb__begin(pb, PKT_CLOCK_SNAPSHOT);
	put_clock(pb, CLOCK_BOOTTIME_ID, ts, false);
	put_clock(pb, CLOCK_INCR_ID, ts, true);
	pb__end(pb);
	packet_end(pt);
}

struct pfseq *pftrace__seq(struct pftrace *pt, uint64_t default_track, uint64_t ts0)
{
	struct pfseq *s;

	if (pt->nseqs == pt->capseqs) {
		size_t nc = pt->capseqs ? pt->capseqs * 2 : 64;
		struct pfseq **n = realloc(pt->seqs, nc * sizeof(*n));

		if (!n)
			return NULL;
		pt->seqs = n;
		pt->capseqs = nc;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = pt->next_seq++;
	s->track = default_track;
	s->need_reset = true;
	s->last_ts = ts0;
	pt->seqs[pt->nseqs++] = s;
	return s;
}

/* Starts a packet on s at ts: a delta on the incremental clock, or an
 * absolute BOOTTIME timestamp if ts went backwards. */
static void seq_packet(struct pftrace *pt, struct pfseq *s, uint64_t ts)
{
	struct pb *pb = &pt->out;

	if (s->need_reset || s->next_iid > INTERN_MAX)
		seq_reset(pt, s, ts);
	pb__begin(pb, TRACE_PACKET);
	if (ts >= s->last_ts) {
		pb__varint(pb, PKT_TIMESTAMP, ts - s->last_ts);
		s->last_ts = ts;
	} else {
		pb__varint(pb, PKT_TIMESTAMP, ts);
		pb__varint(pb, PKT_TS_CLOCK_ID, CLOCK_BOOTTIME_ID);
	}
	pb__varint(pb, PKT_SEQ_ID, s->id);
	/* Interned names and the incremental clock live in sequence state. */
	pb__varint(pb, PKT_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
}

/* The iid the memo holds for str (kind k), or 0. No strlen: the copy's
 * bytes, then the terminator after them (strncmp stops at a shorter
 * string's end, which a copy of strlen bytes cannot hold). */
static uint64_t memo_get(struct intern_memo *m, enum intern_kind k, const char *str)
{
	for (int i = 0; i < MEMO_N; i++) {
		if (m->p[i] != str || m->e[i].kind != k ||
		    strncmp(m->e[i].copy, str, m->e[i].len) || str[m->e[i].len])
			continue;
		m->used[i] = ++m->clock;
		return m->e[i].iid;
	}
	return 0;
}

/* Remembers in m (or nowhere, if NULL) that str (len bytes, under
 * MEMO_LEN) is iid, in place of the entry used longest ago. */
static void memo_put(struct intern_memo *m, enum intern_kind k, const char *str, size_t len,
		     uint64_t iid)
{
	int old = 0;

	if (!m)
		return;
	for (int i = 1; i < MEMO_N; i++)
		if (m->clock - m->used[i] > m->clock - m->used[old])
			old = i;
	m->p[old] = str;
	m->used[old] = ++m->clock;
	m->e[old].iid = iid;
	m->e[old].kind = k;
	m->e[old].len = len;
	memcpy(m->e[old].copy, str, len);
}

static uint64_t intern(struct pfseq *s, enum intern_kind k, const char *str,
		       struct new_str *news, int *nnew, int maxnew)
{
	struct intern_memo *m = NULL;
	uint64_t h, *v, iid;
	size_t len;

	if (!s->memo)
		s->memo = calloc(1, sizeof(*s->memo));
	if (s->memo && (iid = memo_get(s->memo, k, str)))
		return iid;
	len = strlen(str);
	if (len < MEMO_LEN)
		m = s->memo;
	/* A 64-bit hash stands for the string: a collision among a few
	 * thousand entries per sequence has odds around 1e-12. */
	h = hash__bytes(str, len) ^ ((uint64_t)k << 61);
	v = hmap__get(&s->iids, h);
	if (v) {
		memo_put(m, k, str, len, *v);
		return *v;
	}
	if (*nnew >= maxnew || hmap__put(&s->iids, h, s->next_iid))
		return 0;
	news[*nnew].kind = k;
	news[*nnew].iid = s->next_iid;
	news[*nnew].s = str;
	(*nnew)++;
	memo_put(m, k, str, len, s->next_iid);
	return s->next_iid++;
}

static void write_interned(struct pb *pb, const struct new_str *news, int n)
{
	static const uint32_t field[IK__COUNT] = { ID_EVENT_NAMES, ID_ANNOT_NAMES,
						   ID_ANNOT_STRINGS, ID_EVENT_CATEGORIES };

	if (!n)
		return;
	pb__begin(pb, PKT_INTERNED);
	/* Repeated fields of one kind need not be contiguous. */
	for (int i = 0; i < n; i++) {
		pb__begin(pb, field[news[i].kind]);
		pb__varint(pb, INTERNED_IID, news[i].iid);
		pb__string(pb, INTERNED_STR, news[i].s);
		pb__end(pb);
	}
	pb__end(pb);
}

#define MAX_ANNOTS 16

struct event_iids {
	uint64_t name;
	uint64_t cat;
	uint64_t annot_name[MAX_ANNOTS];
	uint64_t annot_str[MAX_ANNOTS];
};

struct inline_stack {
	const char *const *frames;
	int n;
};

/* A flow id in the varint field while that is shorter than fixed64's 8
 * bytes (ids are per-capture counters: 1 to 3 bytes), else in the fixed64
 * one. Trace processor reads either (the fixed64 one first). */
static void flow_id(struct pb *pb, uint32_t varint_field, uint32_t fixed_field, uint64_t id)
{
	if (id < 1ull << 56)
		pb__varint(pb, varint_field, id);
	else
		pb__fixed64(pb, fixed_field, id);
}

static void event(struct pftrace *pt, struct pfseq *s, uint64_t ts, int type, uint64_t track,
		  const char *cat, const char *name, const struct pf_annot *a, int n,
		  bool counter, int64_t value, const struct inline_stack *cs,
		  const struct pf_flow *flow)
{
	struct new_str news[2 + 2 * MAX_ANNOTS];
	struct event_iids ids = { 0 };
	struct pb *pb = &pt->out;
	int nnew = 0;

	if (pt->split) {
		struct pftrace *fpt;
		struct pfseq *fs;

		for (size_t i = 0; pt->route->route_event(pt->split, s, s->track, track, ts, i,
							    &fpt, &fs); i++)
			event(fpt, fs, ts, type, track, cat, name, a, n, counter, value, cs, flow);
		return;
	}
	if (pt->err)
		return;
	if (n > MAX_ANNOTS)
		n = MAX_ANNOTS;
	seq_packet(pt, s, ts);
	if (name)
		ids.name = intern(s, IK_EVENT, name, news, &nnew, 1 + 2 * MAX_ANNOTS);
	if (cat)
		ids.cat = intern(s, IK_CATEGORY, cat, news, &nnew, 2 + 2 * MAX_ANNOTS);
	for (int i = 0; i < n; i++) {
		ids.annot_name[i] = intern(s, IK_ANNOT_NAME, a[i].name, news, &nnew,
					   1 + 2 * MAX_ANNOTS);
		if (a[i].type == PA_STR)
			ids.annot_str[i] = intern(s, IK_STRING, a[i].s ? a[i].s : "", news,
						  &nnew, 1 + 2 * MAX_ANNOTS);
	}
	write_interned(pb, news, nnew);
	pb__begin(pb, PKT_TRACK_EVENT);
	pb__varint(pb, TE_TYPE, type);
	if (track)
		pb__varint(pb, TE_TRACK_UUID, track);
	if (ids.cat)
		pb__varint(pb, TE_CATEGORY_IIDS, ids.cat);
	else if (cat)
		pb__string(pb, 22, cat);
	if (ids.name)
		pb__varint(pb, TE_NAME_IID, ids.name);
	else if (name)
		pb__string(pb, 23, name);
	if (counter)
		pb__int(pb, TE_COUNTER_VALUE, value);
	for (int i = 0; i < n; i++) {
		pb__begin(pb, TE_ANNOT);
		if (ids.annot_name[i])
			pb__varint(pb, DA_NAME_IID, ids.annot_name[i]);
		else
			pb__string(pb, 10, a[i].name);
		switch (a[i].type) {
		case PA_UINT:
			pb__varint(pb, DA_UINT, a[i].u);
			break;
		case PA_INT:
			pb__int(pb, DA_INT, a[i].i);
			break;
		case PA_PTR:
			pb__varint(pb, DA_POINTER, a[i].u);
			break;
		case PA_BOOL:
			pb__bool(pb, DA_BOOL, a[i].u != 0);
			break;
		case PA_DOUBLE:
			pb__double(pb, DA_DOUBLE, a[i].d);
			break;
		case PA_STR:
			if (ids.annot_str[i])
				pb__varint(pb, DA_STRING_IID, ids.annot_str[i]);
			else
				pb__string(pb, 6, a[i].s ? a[i].s : "");
			break;
		}
		pb__end(pb);
	}
	if (flow && flow->out)
		flow_id(pb, TE_FLOW_IDS_OLD, TE_FLOW_IDS, flow->out);
	if (flow && flow->end)
		flow_id(pb, TE_TERMINATING_FLOW_IDS_OLD, TE_TERMINATING_FLOW_IDS, flow->end);
	if (flow && flow->in) {
		pb__begin(pb, TE_LEGACY_EVENT);
		pb__varint(pb, LE_BIND_ID, flow->in);
		pb__varint(pb, LE_FLOW_DIRECTION, LE_FLOW_IN);
		pb__end(pb);
	}
	if (cs && cs->n) {
		pb__begin(pb, TE_CALLSTACK);
		for (int i = 0; i < cs->n; i++) {
			pb__begin(pb, ICS_FRAMES);
			pb__string(pb, ICS_FUNCTION_NAME, cs->frames[i]);
			pb__end(pb);
		}
		pb__end(pb);
	}
	pb__end(pb);
	packet_end(pt);
}

void pftrace__begin(struct pftrace *pt, struct pfseq *s, uint64_t ts, const char *name,
		    const struct pf_annot *a, int n)
{
	event(pt, s, ts, TYPE_SLICE_BEGIN, 0, NULL, name, a, n, false, 0, NULL, NULL);
}

void pftrace__begin_cat(struct pftrace *pt, struct pfseq *s, uint64_t ts, const char *cat,
			const char *name, const struct pf_annot *a, int n)
{
	event(pt, s, ts, TYPE_SLICE_BEGIN, 0, cat, name, a, n, false, 0, NULL, NULL);
}

void pftrace__begin_on(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		       const char *cat, const char *name, const struct pf_annot *a, int n)
{
	event(pt, s, ts, TYPE_SLICE_BEGIN, track, cat, name, a, n, false, 0, NULL, NULL);
}

void pftrace__end_on(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		     const struct pf_annot *a, int n)
{
	event(pt, s, ts, TYPE_SLICE_END, track, NULL, NULL, a, n, false, 0, NULL, NULL);
}

void pftrace__begin_flow(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
			 const char *cat, const char *name, const struct pf_annot *a, int n,
			 const struct pf_flow *f)
{
	event(pt, s, ts, TYPE_SLICE_BEGIN, track, cat, name, a, n, false, 0, NULL, f);
}

void pftrace__end(struct pftrace *pt, struct pfseq *s, uint64_t ts,
		  const struct pf_annot *a, int n)
{
	event(pt, s, ts, TYPE_SLICE_END, 0, NULL, NULL, a, n, false, 0, NULL, NULL);
}

void pftrace__instant(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		      const char *name, const struct pf_annot *a, int n)
{
	event(pt, s, ts, TYPE_INSTANT, track, NULL, name, a, n, false, 0, NULL, NULL);
}

void pftrace__counter(struct pftrace *pt, struct pfseq *s, uint64_t ts, uint64_t track,
		      int64_t value)
{
	event(pt, s, ts, TYPE_COUNTER, track, NULL, NULL, NULL, 0, true, value, NULL, NULL);
}

void pftrace__end_stack(struct pftrace *pt, struct pfseq *s, uint64_t ts,
			const struct pf_annot *a, int n, const char *const *frames, int nframes)
{
	struct inline_stack cs = { .frames = frames, .n = nframes };

	event(pt, s, ts, TYPE_SLICE_END, 0, NULL, NULL, a, n, false, 0, &cs, NULL);
}
