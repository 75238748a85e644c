/* SPDX-License-Identifier: MIT */
/*
 * cgbpf stats --report nccl_straggler_activity: what the rank
 * nccl_stragglers names did before the operations it entered last, from
 * the return of its previous operation on that communicator to the late
 * entry: its outermost traced calls in those stretches (by Python call
 * site when the call has one, else by name) and its CPU samples (by
 * innermost function). A second read of the traces, for that process
 * only.
 */
#ifndef CGBPF_STRAGACT_H
#define CGBPF_STRAGACT_H

#include <stdio.h>
#include "lib/straggle.h"
#include "lib/sumtab.h"

/* Prints the report for named (NULL: nobody was named) from the traces
 * at paths; 0, or -errno after a message. */
int stragact__print(const struct straggle_named *named, char *const *paths, int npaths,
		    enum sumtab_fmt fmt, FILE *f);

#endif
