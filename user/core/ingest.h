/* SPDX-License-Identifier: MIT */
/*
 * Validation of the records read from the events ring buffer before any
 * decoder sees them. Their sizes, lengths and strings come from probes in
 * processes cgbpf does not trust (a traced process chooses what its string
 * arguments hold, and a corrupted record must not become a read past its
 * end): every field a decoder relies on is checked here, once.
 */
#ifndef CGBPF_INGEST_H
#define CGBPF_INGEST_H

#include <stddef.h>

/* 0 when the record data, size bytes as the ring buffer gave it, is one
 * the decoders may read: its header's size is size, its type is an events
 * ring type, it is at least as large as its type needs, and its lengths
 * and strings stay inside it; -EINVAL otherwise. Scheduler records have
 * their own ring and checks (schedtrace__handle); stack records are
 * checked further by stacks__record. */
int ingest__check(const void *data, size_t size);
/* The smallest record of a type on the events ring (a stack record's:
 * its fixed part, without the stack copy); 0: not one of its. */
size_t ingest__min_size(unsigned type);

#endif
