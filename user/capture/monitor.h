/* SPDX-License-Identifier: MIT */
/*
 * `cgbpf monitor`: the metrics endpoint over the BPF aggregates, and the
 * flight recorder (recent full-detail records, dumped as Perfetto traces
 * on demand or on a trigger). The capture itself (attach, targets, ring)
 * is record.c's, run in monitor mode.
 */
#ifndef CGBPF_MONITOR_H
#define CGBPF_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/opts.h"
#include "core/source.h"

#define MONITOR_DEFAULT_LISTEN "127.0.0.1:9464"
/* Created (0700) when the flight recorder is on and no --dump-dir is given. */
#define MONITOR_DEFAULT_DUMP_DIR "/var/lib/cgbpf"

struct monitor;
struct cgbpf_bpf;
struct model;
struct attach;
struct pysites;

/* Checks the options that can fail before any BPF work: the listen
 * address parses and is free (the socket is kept), the dump directory is
 * writable (the default one created, with a flight recorder). NULL after
 * a message. */
struct monitor *monitor__new(const struct monitor_opts *o);
/* After the BPF object is loaded: the aggregates' configuration. */
int monitor__start(struct monitor *mo, struct cgbpf_bpf *skel, struct model *m,
		   struct attach *a);
void monitor__free(struct monitor *mo);

/* More series for the metrics page: fn(ctx, m) writes them through m
 * (record.c asks every source's metrics hook, core/source.h). */
void monitor__set_metrics(struct monitor *mo,
			  void (*fn)(void *ctx, const struct src_metrics *m), void *ctx);

/* The Python call-site table (--python-sites), NULL when off. */
struct pysites *monitor__pysites(struct monitor *mo);

/* A record read from the ring (validated): kept by the flight recorder. */
void monitor__record(struct monitor *mo, const void *data, size_t size);
/* A traced process exited: its name outlives it while its metrics do. */
void monitor__proc_exit(struct monitor *mo, uint32_t pid, const char *comm);
/* Asks for a dump; why names it ("slow", "error", "exit", "signal",
 * "request"). Coalesced while one is being written. */
void monitor__trigger(struct monitor *mo, const char *why);
/* From the event loop: serves HTTP requests, does housekeeping every
 * interval, starts and reaps dump threads. */
void monitor__tick(struct monitor *mo, uint64_t now_ns);

/* `cgbpf dump`: asks the daemon at listen for a dump, prints its answer;
 * returns the exit code. */
int monitor__request_dump(const char *listen);

#endif
