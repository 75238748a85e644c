/* SPDX-License-Identifier: MIT */
/*
 * The host side's feed of the NCCL hang watcher (user/core/hangwatch.h):
 * collectives and sends/receives as their calls begin, the communicators'
 * ranks as ncclCommInitRank* returns, and each process's last traced call
 * made from Python.
 */
#ifndef CGBPF_NCCLHANG_H
#define CGBPF_NCCLHANG_H

#include "core/hangwatch.h"
#include "core/model.h"

/* The model sink feeding h. */
struct sink ncclhang__sink(struct hangwatch *h);

#endif
