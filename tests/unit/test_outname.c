// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/lib/outname.c, the -o pattern expansion: every code, the
 * errors (unknown code, unterminated %q{), values from a process made
 * harmless, and the /proc/PID/environ reader against a child whose
 * environment this test sets itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/outname.h"
#include "tap.h"
#include "sources/sources.h"

/* A fake environment: NAME=value pairs. */
static int fake_env(void *ctx, pid_t pid, const char *name, char *buf, size_t n)
{
	const char *const *kv = ctx;

	(void)pid;
	for (; *kv; kv += 2) {
		if (strcmp(kv[0], name))
			continue;
		if (strlen(kv[1]) >= n)
			return -ENAMETOOLONG;
		strcpy(buf, kv[1]);
		return 0;
	}
	return -ENOENT;
}

static const char *env_kv[] = { "RANK", "3", "LOCAL_RANK", "1", "EVIL", "../../etc/x",
				"DOTS", "..", "CTRL", "a\nb", NULL };

static void expect(const char *pat, const struct outname_ctx *c, const char *want)
{
	char out[256], err[1024] = "";
	int e = outname__expand(pat, c, out, sizeof(out), err, sizeof(err));

	if (!check(!e && !strcmp(out, want), "'%s' -> '%s'", pat, want))
		printf("#   got %d '%s' (%s)\n", e, e ? "" : out, err);
}

static void expect_err(const char *pat, const struct outname_ctx *c, int code, const char *in_msg)
{
	char out[256], err[1024] = "";
	int e = outname__expand(pat, c, out, sizeof(out), err, sizeof(err));

	if (!check(e == code && strstr(err, in_msg), "'%s' fails (%d) saying '%s'", pat, code,
		   in_msg))
		printf("#   got %d '%s'\n", e, err);
}

static void test_env_reader(void)
{
	char buf[64];
	int fds[2], e;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC)) {
		skip("no pipe: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (!pid) {
		char *argv[] = { "sleep", "30", NULL };
		char *envp[] = { "A=1", "RANK=7", "EMPTY=", "XRANK=9", NULL };

		/* fds[1] closes at exec: the parent's read then sees EOF. */
		execve("/bin/sleep", argv, envp);
		(void)!write(fds[1], "x", 1);
		_exit(127);
	}
	close(fds[1]);
	{
		char c;

		ssize_t r = read(fds[0], &c, 1);	/* 0 at exec, 1 if it failed */

		close(fds[0]);
		if (r) {
			skip("cannot run /bin/sleep for the environment tests");
			waitpid(pid, NULL, 0);
			return;
		}
	}
	e = outname__proc_env(NULL, pid, "RANK", buf, sizeof(buf));
	check(!e && !strcmp(buf, "7"), "/proc/PID/environ: RANK=7 (got %d '%s')", e, e ? "" : buf);
	e = outname__proc_env(NULL, pid, "EMPTY", buf, sizeof(buf));
	check(!e && !buf[0], "/proc/PID/environ: EMPTY= is set and empty (%d)", e);
	e = outname__proc_env(NULL, pid, "RAN", buf, sizeof(buf));
	check(e == -ENOENT, "/proc/PID/environ: a prefix of a name is not the name (%d)", e);
	e = outname__proc_env(NULL, pid, "HOME", buf, sizeof(buf));
	check(e == -ENOENT, "/proc/PID/environ: missing variable -ENOENT (%d)", e);
	{
		struct outname_ctx c = { .pid = pid, .seq = 1, .host = "h" };
		char want[64];

		snprintf(want, sizeof(want), "r7-%d.pb", (int)pid);
		expect("r%q{RANK}-%p.pb", &c, want);
		expect_err("r%q{LOCAL_RANK}", &c, -ENOENT, "has no LOCAL_RANK");
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	e = outname__proc_env(NULL, 0, "OUTNAME_TEST_SELF", buf, sizeof(buf));
	check(e == -ENOENT, "own environment: unset variable -ENOENT (%d)", e);
	setenv("OUTNAME_TEST_SELF", "x y", 1);
	e = outname__proc_env(NULL, 0, "OUTNAME_TEST_SELF", buf, sizeof(buf));
	check(!e && !strcmp(buf, "x y"), "own environment: getenv (%d)", e);
}

int main(void)
{
	sources__init();
	struct outname_ctx c = { .pid = 4242, .seq = 2, .host = "node-a", .env = fake_env,
				 .env_ctx = env_kv };
	struct outname_ctx empty = c;
	char out[64], self[32];

	expect("trace.perfetto-trace", &c, "trace.perfetto-trace");
	expect("r_%p_%h", &c, "r_4242_node-a");
	expect("run-%n.pb", &c, "run-2.pb");
	expect("rank%q{RANK}.%q{LOCAL_RANK}", &c, "rank3.1");
	expect("100%%-%p%%", &c, "100%-4242%");
	expect("%%q{RANK}", &c, "%q{RANK}");
	expect("d/%q{EVIL}", &c, "d/.._.._etc_x");
	expect("d/%q{DOTS}/x", &c, "d/__/x");
	expect("%q{CTRL}", &c, "a_b");
	c.host = "a/b";
	expect("%h", &c, "a_b");
	c.host = "node-a";
	empty.missing_empty = true;
	expect("r%q{NOPE}-%p", &empty, "r-4242");
	expect_err("r%q{NOPE}", &c, -ENOENT, "NOPE");
	expect_err("r%x", &c, -EINVAL, "unknown code %x");
	expect_err("r%", &c, -EINVAL, "lone %");
	expect_err("r%q{RANK", &c, -EINVAL, "not closed");
	expect_err("r%qRANK", &c, -EINVAL, "in braces");
	expect_err("r%q{}", &c, -EINVAL, "variable name of 1");
	expect_err("r%q{A-B}", &c, -EINVAL, "'-' cannot be part");
	{
		char longp[300];

		memset(longp, 'a', sizeof(longp) - 1);
		longp[sizeof(longp) - 1] = '\0';
		expect_err(longp, &c, -ENAMETOOLONG, "longer than");
	}
	expect_err("%q{NOPE}", &empty, -EINVAL, "empty name");
	check(outname__check("a%p%q{X}%%", out, sizeof(out)) == 0, "check: a valid pattern");
	check(outname__check("a%y", out, sizeof(out)) == -EINVAL, "check: %%y is refused");
	check(outname__uses("a%p", 'p') && !outname__uses("a%%p", 'p') &&
	      outname__uses("%q{R}", 'q') && !outname__uses("x", 'n'), "uses: %%p, not %%%%p");
	check(!outname__add_pid("run.perfetto-trace", out, sizeof(out)) &&
	      !strcmp(out, "run.%p.perfetto-trace"), "add_pid: before the extension (%s)", out);
	check(!outname__add_pid("d.x/run", out, sizeof(out)) && !strcmp(out, "d.x/run.%p"),
	      "add_pid: no extension, dots in the directory (%s)", out);
	check(!outname__add_pid(".hidden", out, sizeof(out)) && !strcmp(out, ".hidden.%p"),
	      "add_pid: a leading dot is no extension (%s)", out);
	check(outname__add_pid("run.pb", out, 8) == -ENAMETOOLONG, "add_pid: too long");
	snprintf(self, sizeof(self), "%d", (int)getpid());
	expect("%p", &(struct outname_ctx){ 0 }, self);
	test_env_reader();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
