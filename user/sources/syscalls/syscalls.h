/* SPDX-License-Identifier: MIT */
/*
 * Syscalls of target threads (records from bpf/syscalls.bpf.c): decoding
 * into model events (name, return value and errno, the fd's file for
 * ioctl, the op for futex) and the osrt_sum-like summary table.
 */
#ifndef CGBPF_SYSCALLS_H
#define CGBPF_SYSCALLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "syscalls_rec.h"
#include "core/model.h"

/* Decodes a validated REC_SYSCALL record and hands it to the sinks. */
void model__syscall(struct model *m, const struct rec_syscall *r);

/* Name of x86_64 syscall nr, or "syscall_NNN" written into buf. */
const char *syscalls__name(uint32_t nr, char *buf, size_t len);
/* futex(2) op as strace writes it ("FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"). */
const char *syscalls__futex_op(uint64_t op, char *buf, size_t len);
/* A printable name of the file a sys_fd describes ("/dev/null", "pipe:[123]",
 * ".../a/b" when the walk stopped short of the root). */
const char *syscalls__fd_name(const struct sys_fd *fd, char *buf, size_t len);

/* Per-syscall duration statistics for the summary. */
struct syssum;

struct syssum *syssum__new(void);
/* Frees; accepts NULL. */
void syssum__free(struct syssum *s);
void syssum__add(struct syssum *s, const struct syscall_ev *e);
/* The sink feeding s (syssum__add for each syscall). */
struct sink syssum__sink(struct syssum *s);
/* Prints the table; threshold_ns is the recording threshold (THRESHOLD_OFF:
 * syscalls were not traced). */
void syssum__print(struct syssum *s, uint64_t threshold_ns, FILE *f);
/* Calls counted for syscall nr (for tests). */
uint64_t syssum__calls(const struct syssum *s, uint32_t nr);

#endif
