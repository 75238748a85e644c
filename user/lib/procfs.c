// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/procfs.h"

static int parse_hex(char **p, uint64_t *v, char stop)
{
	char *end;

	errno = 0;
	*v = strtoull(*p, &end, 16);
	if (errno || end == *p || *end != stop)
		return -EINVAL;
	*p = end + 1;
	return 0;
}

int procfs__parse_maps_line(char *line, struct map_entry *e)
{
	char *p = line, *end;
	uint64_t maj, min;
	size_t n;

	memset(e, 0, sizeof(*e));
	if (parse_hex(&p, &e->start, '-') || parse_hex(&p, &e->end, ' '))
		return -EINVAL;
	if (strlen(p) < 5 || p[4] != ' ')
		return -EINVAL;
	memcpy(e->perms, p, 4);
	p += 5;
	if (parse_hex(&p, &e->offset, ' ') || parse_hex(&p, &maj, ':') ||
	    parse_hex(&p, &min, ' '))
		return -EINVAL;
	e->dev_major = maj;
	e->dev_minor = min;
	errno = 0;
	e->inode = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EINVAL;
	p = end;
	while (*p == ' ')
		p++;
	n = strlen(p);
	while (n && (p[n - 1] == '\n'))
		p[--n] = 0;
	e->path = p;
	return 0;
}

int procfs__for_each_map(pid_t pid, int (*cb)(const struct map_entry *e, void *ctx),
			 void *ctx)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	errno = 0;
	while (getline(&line, &cap, f) > 0) {
		struct map_entry e;

		if (procfs__parse_maps_line(line, &e))
			continue;
		ret = cb(&e, ctx);
		if (ret)
			break;
		errno = 0;
	}
	/* A read that failed part-way is not the end of the map: a caller
	 * looking for a mapping must not take it as absent. */
	if (!ret && ferror(f))
		ret = errno ? -errno : -EIO;
	free(line);
	fclose(f);
	return ret;
}

static ssize_t read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	if (fd < 0)
		return -errno;
	while ((size_t)total < len) {
		n = read(fd, buf + total, len - total);
		if (n < 0) {
			n = -errno;
			close(fd);
			return n;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	return total;
}

int procfs__comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	if (tid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	n = read_file(path, buf, len - 1);
	if (n < 0)
		return n;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
	return 0;
}

char *procfs__cmdline(pid_t pid)
{
	char path[64];
	size_t cap = 4096;
	char *buf = malloc(cap + 1);
	ssize_t n;

	if (!buf)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = read_file(path, buf, cap);
	if (n < 0) {
		free(buf);
		errno = -n;
		return NULL;
	}
	while (n > 0 && buf[n - 1] == 0)
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	buf[n] = 0;
	/* Kept per process for hours of churn: no 4 KiB for a short line. */
	{
		char *fit = realloc(buf, n + 1);

		return fit ? fit : buf;
	}
}

int procfs__state(pid_t pid, char *state, long *threads)
{
	char path[64], buf[1024], *p;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	n = read_file(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return n;
	buf[n] = 0;
	/* The state follows the last ')' (comm may contain parentheses). */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	*state = p[2];
	/* num_threads is field 20; the state is field 3. */
	p += 2;
	for (int field = 3; field < 20 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	*threads = p ? strtol(p, NULL, 10) : -1;
	return 0;
}

bool procfs__alive(pid_t pid)
{
	char state;
	long threads;

	return !procfs__state(pid, &state, &threads) && state != 'Z' && state != 'X';
}

static int push(pid_t **out, size_t *n, size_t *cap, pid_t v)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		pid_t *p = realloc(*out, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*out = p;
		*cap = nc;
	}
	(*out)[(*n)++] = v;
	return 0;
}

int procfs__descendants(pid_t pid, pid_t **out, size_t *n)
{
	size_t cap = 0, done = 0;
	int err = 0;

	*out = NULL;
	*n = 0;
	err = push(out, n, &cap, pid);
	/* Breadth first over the list as it grows; the root is dropped at the end. */
	while (!err && done < *n) {
		pid_t cur = (*out)[done++];
		char path[64];
		DIR *d;
		struct dirent *de;

		snprintf(path, sizeof(path), "/proc/%d/task", cur);
		d = opendir(path);
		if (!d)
			continue;
		while (!err && (de = readdir(d))) {
			char cpath[320], buf[4096], *p, *end;
			ssize_t len;

			if (!isdigit((unsigned char)de->d_name[0]))
				continue;
			snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", cur, de->d_name);
			len = read_file(cpath, buf, sizeof(buf) - 1);
			if (len <= 0)
				continue;
			buf[len] = 0;
			for (p = buf; !err; p = end) {
				long v = strtol(p, &end, 10);

				if (end == p)
					break;
				/* The children file lists zombies until reaped. */
				if (procfs__alive((pid_t)v))
					err = push(out, n, &cap, (pid_t)v);
			}
		}
		closedir(d);
	}
	if (err) {
		free(*out);
		*out = NULL;
		*n = 0;
		return err;
	}
	memmove(*out, *out + 1, (*n - 1) * sizeof(**out));
	(*n)--;
	return 0;
}

int procfs__cgroup(pid_t pid, char *buf, size_t len)
{
	char path[64], data[4096], *line, *save = NULL;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	n = read_file(path, data, sizeof(data) - 1);
	if (n < 0)
		return n;
	data[n] = 0;
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "0::", 3))
			continue;
		if ((size_t)snprintf(buf, len, "%s", line + 3) >= len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

int procfs__container_id(pid_t pid, char *buf, size_t len)
{
	char path[64], data[4096];
	ssize_t n;
	int run = 0;

	if (len < 13)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	n = read_file(path, data, sizeof(data) - 1);
	if (n < 0)
		return n;
	/* The first run of exactly 64 hex digits, in any hierarchy's path. */
	for (ssize_t i = 0; i <= n; i++) {
		if (i < n && isxdigit((unsigned char)data[i])) {
			run++;
			continue;
		}
		if (run == 64) {
			memcpy(buf, data + i - 64, 12);
			buf[12] = 0;
			return 0;
		}
		run = 0;
	}
	return -ENOENT;
}

int procfs__cgroup2_mount(char *buf, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SRC SOPTS" */
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - "), mnt[4096];

		if (!sep || strncmp(sep + 3, "cgroup2 ", 8))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if ((size_t)snprintf(buf, len, "%s", mnt) < len)
			err = 0;
		else
			err = -ENAMETOOLONG;
		break;
	}
	fclose(f);
	return err;
}

int procfs__for_each_pid(int (*cb)(pid_t pid, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int ret = 0;

	if (!d)
		return -errno;
	while (!ret && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0)
			continue;
		ret = cb(pid, ctx);
	}
	closedir(d);
	return ret;
}
