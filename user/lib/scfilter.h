/* SPDX-License-Identifier: MIT */
/*
 * Runs a seccomp filter (classic BPF over struct seccomp_data) the way the
 * kernel does, to tell before a call is made what a process's filter
 * would answer: record --inject (user/capture/ptinject.c) refuses a
 * process whose filter would kill it, or stop it, on a call the injection
 * makes.
 */
#ifndef CGBPF_SCFILTER_H
#define CGBPF_SCFILTER_H

#include <stddef.h>
#include <stdint.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

/* The filter's answer for d (SECCOMP_RET_*), or -EINVAL for a program the
 * kernel would not have loaded (a jump out of it, no return, an unknown
 * instruction, a load outside seccomp_data). */
int64_t scfilter__run(const struct sock_filter *f, size_t n, const struct seccomp_data *d);

/* Of two answers, the one the kernel acts on (the lowest action, signed:
 * KILL_PROCESS, KILL_THREAD, TRAP, ERRNO, USER_NOTIF, TRACE, LOG, ALLOW). */
uint32_t scfilter__stricter(uint32_t a, uint32_t b);

/* An action that would hurt the process, or stop it, for a call it did
 * not make itself: KILL_PROCESS, KILL_THREAD, TRAP, USER_NOTIF, and any
 * action the kernel does not know (it kills). */
int scfilter__harmful(uint32_t ret);

/* "KILL_PROCESS", "ERRNO", ...: the action's name. */
const char *scfilter__name(uint32_t ret);

#endif
