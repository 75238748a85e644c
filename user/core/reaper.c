// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "core/reaper.h"
#include "lib/log.h"

/*
 * Enough threads that a process's probes go in about one grace period
 * (each thread waits in the kernel, none uses CPU), few enough to stay
 * unnoticed. Started at the first hand-over and kept to the end.
 */
#define REAPER_THREADS 8

struct item {
	struct bpf_link *link;	/* or */
	int fd;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct item *q;		/* a ring of cap items */
	size_t head, n, cap;
	size_t busy;		/* items taken, not yet released */
	size_t threads;
	bool tried;
} R = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
};

static void release(struct item it)
{
	if (it.link)
		bpf_link__destroy(it.link);
	else if (it.fd >= 0)
		close(it.fd);
}

static void *reaper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&R.lock);
	for (;;) {
		struct item it;

		while (!R.n)
			pthread_cond_wait(&R.work, &R.lock);
		it = R.q[R.head];
		R.head = (R.head + 1) % R.cap;
		R.n--;
		R.busy++;
		pthread_mutex_unlock(&R.lock);
		release(it);
		pthread_mutex_lock(&R.lock);
		R.busy--;
		if (!R.n && !R.busy)
			pthread_cond_broadcast(&R.idle);
	}
	return NULL;
}

/* With R.lock held. */
static void start_threads(void)
{
	pthread_attr_t attr;
	sigset_t all, old;

	R.tried = true;
	if (pthread_attr_init(&attr))
		return;
	pthread_attr_setstacksize(&attr, 64 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Signals (Ctrl-C, SIGTERM) stay with the threads that handle them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (size_t i = 0; i < REAPER_THREADS; i++) {
		pthread_t t;

		if (pthread_create(&t, &attr, reaper_main, NULL))
			break;
		R.threads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (!R.threads)
		warn("no thread to release probes on (%s): the trace may miss records "
		     "while a process's probes are released", strerror(errno));
}

static void hand_over(struct item it)
{
	pthread_mutex_lock(&R.lock);
	if (!R.tried)
		start_threads();
	if (R.threads && R.n == R.cap) {
		size_t cap = R.cap ? 2 * R.cap : 64;
		struct item *q = malloc(cap * sizeof(*q));

		if (q) {
			for (size_t i = 0; i < R.n; i++)
				q[i] = R.q[(R.head + i) % R.cap];
			free(R.q);
			R.q = q;
			R.cap = cap;
			R.head = 0;
		}
	}
	if (!R.threads || R.n == R.cap) {
		pthread_mutex_unlock(&R.lock);
		release(it);	/* no thread, or no memory: here and now */
		return;
	}
	R.q[(R.head + R.n++) % R.cap] = it;
	pthread_cond_signal(&R.work);
	pthread_mutex_unlock(&R.lock);
}

void reaper__link(struct bpf_link *l)
{
	if (l)
		hand_over((struct item){ .link = l, .fd = -1 });
}

void reaper__fd(int fd)
{
	if (fd >= 0)
		hand_over((struct item){ .fd = fd });
}

void reaper__wait(void)
{
	pthread_mutex_lock(&R.lock);
	while (R.n || R.busy)
		pthread_cond_wait(&R.idle, &R.lock);
	pthread_mutex_unlock(&R.lock);
}
