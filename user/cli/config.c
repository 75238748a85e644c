// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/config.h"

void config__free(char **argv, int argc)
{
	if (!argv)
		return;
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* Option names are lowercase words joined by dashes ("flight-recorder"). */
static bool option_name(const char *k, size_t n)
{
	if (!n || k[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '-'))
			return false;
	return true;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Appends a copy of s[0..n) to av; 0 or -ENOMEM. */
static int push(char ***av, int *ac, int *cap, const char *prefix, const char *s, size_t n)
{
	size_t pl = strlen(prefix);
	char *c;

	if (*ac + 2 > *cap) {
		int nc = *cap ? *cap * 2 : 16;
		char **na = realloc(*av, nc * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*av = na;
		*cap = nc;
	}
	c = malloc(pl + n + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, prefix, pl);
	memcpy(c + pl, s, n);
	c[pl + n] = 0;
	(*av)[(*ac)++] = c;
	(*av)[*ac] = NULL;
	return 0;
}

int config__parse(const char *text, size_t len, char ***argv, int *argc, char *msg,
		  size_t msglen)
{
	char **av = NULL;
	int ac = 0, cap = 0, err, lineno = 0;
	size_t off = 0;

	*argv = NULL;
	*argc = 0;
	if (msglen)
		msg[0] = 0;
	if (len > CONFIG_MAX_BYTES) {
		snprintf(msg, msglen, "larger than %u bytes: not a config file", CONFIG_MAX_BYTES);
		return -EFBIG;
	}
	err = push(&av, &ac, &cap, "", "monitor", 7);
	while (!err && off < len) {
		const char *line = text + off, *nl = memchr(line, '\n', len - off);
		size_t n = nl ? (size_t)(nl - line) : len - off, k, v, e;

		off += n + (nl != NULL);
		lineno++;
		if (memchr(line, 0, n)) {
			snprintf(msg, msglen, "line %d: a NUL byte: not a text file", lineno);
			err = -EINVAL;
			break;
		}
		if (n > CONFIG_MAX_LINE) {
			snprintf(msg, msglen, "line %d: longer than %d characters", lineno,
				 CONFIG_MAX_LINE);
			err = -EINVAL;
			break;
		}
		{
			const char *hash = memchr(line, '#', n);

			if (hash)
				n = hash - line;
		}
		for (k = 0; k < n && blank(line[k]); k++)
			;
		for (e = n; e > k && blank(line[e - 1]); e--)
			;
		if (k == e)
			continue;
		/* KEY, then blanks or '=' (either or both), then VALUE. */
		for (v = k; v < e && !blank(line[v]) && line[v] != '='; v++)
			;
		if (!option_name(line + k, v - k)) {
			snprintf(msg, msglen, "line %d: '%.*s' is not an option name (e.g. 'listen "
				 "127.0.0.1:9464')", lineno, (int)(v - k > 64 ? 64 : v - k), line + k);
			err = -EINVAL;
			break;
		}
		err = push(&av, &ac, &cap, "--", line + k, v - k);
		while (!err && v < e && (blank(line[v]) || line[v] == '='))
			v++;
		if (!err && v < e)
			err = push(&av, &ac, &cap, "", line + v, e - v);
	}
	if (err) {
		if (err == -ENOMEM)
			snprintf(msg, msglen, "out of memory");
		config__free(av, ac);
		return err;
	}
	*argv = av;
	*argc = ac;
	return 0;
}

int config__read(const char *path, char ***argv, int *argc, char *msg, size_t msglen)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, err = 0;

	*argv = NULL;
	*argc = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		snprintf(msg, msglen, "%s", strerror(-err));
		return err;
	}
	/* A FIFO or a device is not a config file (and could block). */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(msg, msglen, "not a regular file");
		close(fd);
		return -EINVAL;
	}
	buf = malloc(CONFIG_MAX_BYTES + 1);
	while (buf && len <= CONFIG_MAX_BYTES) {
		ssize_t r = read(fd, buf + len, CONFIG_MAX_BYTES + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			snprintf(msg, msglen, "%s", strerror(-err));
			break;
		}
		if (!r)
			break;
		len += r;
	}
	close(fd);
	if (!buf) {
		snprintf(msg, msglen, "out of memory");
		return -ENOMEM;
	}
	if (!err)
		err = config__parse(buf, len, argv, argc, msg, msglen);
	free(buf);
	return err;
}
