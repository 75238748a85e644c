// SPDX-License-Identifier: MIT
/*
 * A workload with known scheduler behaviour, for tests/integration/
 * test_sched.py: a thread that sleeps known durations, one that spins,
 * one blocked on a mutex another holds, one that renames itself, and a
 * child process that renames itself and then execs sleep(1).
 *
 *   sched_mix [GATE]   waits for the file GATE to exist first (tests
 *                      attaching with -p create it once cgbpf is ready)
 *
 * Manifest (CGBPF_MANIFEST=path): {"pid", "sleeper", "sleep_ms", "spinner",
 * "spin_ms", "holder", "waiter", "hold_ms", "renamer", "old_name",
 * "new_name", "child", "child_name", "exec_comm"}.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLEEPS 5
#define SLEEP_MS 20
#define SPIN_MS 150
#define HOLD_MS 100

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t held;
static int tid_sleeper, tid_spinner, tid_holder, tid_waiter, tid_renamer;

static int gettid_(void)
{
	return (int)syscall(SYS_gettid);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *sleeper(void *a)
{
	tid_sleeper = gettid_();
	pthread_setname_np(pthread_self(), "sleeper");
	for (int i = 0; i < SLEEPS; i++)
		sleep_ms(SLEEP_MS);
	return a;
}

static void *spinner(void *a)
{
	volatile unsigned long n = 0;
	double end;

	tid_spinner = gettid_();
	pthread_setname_np(pthread_self(), "spinner");
	end = now_ms() + SPIN_MS;
	while (now_ms() < end)
		n++;
	return a;
}

static void *holder(void *a)
{
	tid_holder = gettid_();
	pthread_setname_np(pthread_self(), "holder");
	pthread_mutex_lock(&lock);
	pthread_barrier_wait(&held);
	sleep_ms(HOLD_MS);
	pthread_mutex_unlock(&lock);
	return a;
}

static void *waiter(void *a)
{
	tid_waiter = gettid_();
	pthread_setname_np(pthread_self(), "waiter");
	pthread_barrier_wait(&held);
	pthread_mutex_lock(&lock);	/* blocks about HOLD_MS */
	pthread_mutex_unlock(&lock);
	return a;
}

static void *renamer(void *a)
{
	tid_renamer = gettid_();
	prctl(PR_SET_NAME, "rn-before");
	sleep_ms(20);
	pthread_setname_np(pthread_self(), "rn-after");
	sleep_ms(20);
	sleep_ms(20);
	return a;
}

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = { sleeper, spinner, holder, waiter, renamer };
	pthread_t th[5];
	const char *path = getenv("CGBPF_MANIFEST");
	pid_t child;

	while (argc > 1 && access(argv[1], F_OK))
		sleep_ms(5);
	pthread_barrier_init(&held, NULL, 2);
	child = fork();
	if (child == 0) {
		prctl(PR_SET_NAME, "child-renamed");
		sleep_ms(30);
		execl("/bin/sleep", "sleep", "0.05", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 5; i++)
		pthread_create(&th[i], NULL, fns[i], NULL);
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	waitpid(child, NULL, 0);
	if (path) {
		char tmp[4096];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		f = fopen(tmp, "w");
		if (!f)
			return 1;
		fprintf(f, "{\"pid\": %d, \"sleeper\": %d, \"sleep_ms\": %d, \"spinner\": %d, "
			"\"spin_ms\": %d, \"holder\": %d, \"waiter\": %d, \"hold_ms\": %d, "
			"\"renamer\": %d, \"old_name\": \"rn-before\", \"new_name\": \"rn-after\", "
			"\"child\": %d, \"child_name\": \"child-renamed\", \"exec_comm\": \"sleep\"}\n",
			getpid(), tid_sleeper, SLEEPS * SLEEP_MS, tid_spinner, SPIN_MS, tid_holder,
			tid_waiter, HOLD_MS, tid_renamer, child);
		fclose(f);
		rename(tmp, path);
	}
	return 0;
}
