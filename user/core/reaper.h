/* SPDX-License-Identifier: MIT */
/*
 * Releasing probes off the thread that reads the rings.
 *
 * Closing a uprobe link waits in the kernel for RCU grace periods
 * (synchronize_rcu_tasks_trace, on perf-event links up to three times):
 * measured here, about 45 ms per uprobe_multi link and 110 ms per
 * perf-event uprobe, so a process with 23 NVTX v2 probes took 2.5 s to let
 * go of. Done by the consumer, that stopped every ring for seconds and
 * processes started meanwhile ran unprobed. The reaper's threads do it
 * instead, several at once, so concurrent releases share grace periods.
 */
#ifndef CGBPF_REAPER_H
#define CGBPF_REAPER_H

struct bpf_link;

/* Hands over a link (bpf_link__destroy) or a link's fd (close): the
 * caller must not touch it again. Without a thread (none could be
 * started), the release is done at once, by the caller. NULL and
 * negative fds are ignored. */
void reaper__link(struct bpf_link *l);
void reaper__fd(int fd);

/* Returns once everything handed over so far is released. */
void reaper__wait(void);

#endif
