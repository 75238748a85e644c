// SPDX-License-Identifier: MIT
/* -o patterns: %p %h %n %q{VAR} %% (see outname.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/outname.h"

#define VAR_MAX 255

static int fail(char *err, size_t errn, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errn) {
		va_start(ap, fmt);
		vsnprintf(err, errn, fmt, ap);
		va_end(ap);
	}
	return code;
}

static bool var_char(char c, bool first)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (!first && c >= '0' && c <= '9');
}

/* At p (just after "%q"): "{NAME}". The name's length, or -EINVAL. */
static int var_name(const char *p, const char *pattern, char *err, size_t errn)
{
	int len = 0;

	if (*p != '{')
		return fail(err, errn, -EINVAL, "in -o '%s': %%q needs a variable name in "
			    "braces, e.g. %%q{RANK}", pattern);
	for (p++; p[len] && p[len] != '}'; len++) {
		if (!var_char(p[len], len == 0))
			return fail(err, errn, -EINVAL, "in -o '%s': '%c' cannot be part of a "
				    "variable name in %%q{...} (letters, digits, _)", pattern,
				    p[len]);
	}
	if (!p[len])
		return fail(err, errn, -EINVAL, "in -o '%s': %%q{ is not closed by '}'", pattern);
	if (!len || len > VAR_MAX)
		return fail(err, errn, -EINVAL, "in -o '%s': %%q{} needs a variable name of 1 "
			    "to %d characters", pattern, VAR_MAX);
	return len;
}

/* Walks pattern; for each code calls nothing, only checks. */
int outname__check(const char *pattern, char *err, size_t errn)
{
	for (const char *p = pattern; *p; p++) {
		int len;

		if (*p != '%')
			continue;
		switch (p[1]) {
		case 'p': case 'h': case 'n': case '%':
			p++;
			break;
		case 'q':
			len = var_name(p + 2, pattern, err, errn);
			if (len < 0)
				return len;
			p += 2 + len + 1;
			break;
		case '\0':
			return fail(err, errn, -EINVAL, "in -o '%s': a lone %% ends the name (write "
				    "%%%% for a percent sign)", pattern);
		default:
			return fail(err, errn, -EINVAL, "in -o '%s': unknown code %%%c (known: %%p pid, "
				    "%%h host, %%n file number, %%q{VAR} environment, %%%% percent)",
				    pattern, p[1]);
		}
	}
	return 0;
}

bool outname__uses(const char *pattern, char code)
{
	for (const char *p = pattern; *p; p++) {
		if (*p != '%' || !p[1])
			continue;
		if (p[1] == code)
			return true;
		p++;	/* %% or the code letter */
	}
	return false;
}

int outname__add_pid(const char *pattern, char *out, size_t n)
{
	const char *base = strrchr(pattern, '/'), *dot;
	size_t at, len = strlen(pattern);
	int w;

	base = base ? base + 1 : pattern;
	/* The extension is what follows the first dot that is not the name's
	 * leading one (".hidden" has none): "a.perfetto-trace", "a.pb.gz". */
	dot = strchr(base + (*base == '.'), '.');
	at = dot ? (size_t)(dot - pattern) : len;
	w = snprintf(out, n, "%.*s.%%p%s", (int)at, pattern, pattern + at);
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

int outname__proc_env(void *ctx, pid_t pid, const char *name, char *buf, size_t n)
{
	size_t nl = strlen(name), cap = 64 << 10, len = 0;
	char path[64], *data = NULL;
	int fd, err = -ENOENT;

	(void)ctx;
	if (!pid) {
		const char *v = getenv(name);

		if (!v)
			return -ENOENT;
		if (strlen(v) >= n)
			return -ENAMETOOLONG;
		strcpy(buf, v);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;	/* no such process, not no such variable */
	for (;;) {
		ssize_t r;

		if (len == cap || !data) {
			char *nd;

			if (data)
				cap *= 2;
			if (cap > OUTNAME_ENV_MAX) {
				err = -EFBIG;
				goto cleanup;
			}
			nd = realloc(data, cap + 1);
			if (!nd) {
				err = -ENOMEM;
				goto cleanup;
			}
			data = nd;
		}
		r = read(fd, data + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto cleanup;
		}
		if (!r)
			break;
		len += r;
	}
	data[len] = '\0';
	/* NAME=value entries, each ended by a NUL (the last one may not be). */
	for (size_t off = 0; off < len;) {
		const char *e = data + off;
		size_t el = strnlen(e, len - off);

		if (el > nl && !memcmp(e, name, nl) && e[nl] == '=') {
			if (el - nl - 1 >= n) {
				err = -ENAMETOOLONG;
				goto cleanup;
			}
			memcpy(buf, e + nl + 1, el - nl - 1);
			buf[el - nl - 1] = '\0';
			err = 0;
			goto cleanup;
		}
		off += el + 1;
	}
cleanup:
	free(data);
	close(fd);
	return err;
}

/* Appends s (a value from outside the pattern) to out, made harmless as a
 * part of one path component. */
static int put_value(char *out, size_t n, size_t *len, const char *s)
{
	bool dots = *s != '\0';
	size_t start = *len;

	for (const char *c = s; *c; c++) {
		if (*len + 1 >= n)
			return -ENAMETOOLONG;
		out[(*len)++] = (*c == '/' || (unsigned char)*c < 0x20 || *c == 0x7f) ? '_' : *c;
		dots = dots && *c == '.';
	}
	if (dots)	/* "." or "..": a directory, not a name */
		memset(out + start, '_', *len - start);
	out[*len] = '\0';
	return 0;
}

static int put_str(char *out, size_t n, size_t *len, const char *s, size_t sl)
{
	if (*len + sl >= n)
		return -ENAMETOOLONG;
	memcpy(out + *len, s, sl);
	*len += sl;
	out[*len] = '\0';
	return 0;
}

int outname__expand(const char *pattern, const struct outname_ctx *ctx, char *out, size_t n,
		    char *err, size_t errn)
{
	outname_env_fn env = ctx->env ? ctx->env : outname__proc_env;
	char val[4096], num[24];
	size_t len = 0;
	int e = outname__check(pattern, err, errn);

	if (e)
		return e;
	if (!n)
		return fail(err, errn, -ENAMETOOLONG, "no room for the name");
	out[0] = '\0';
	for (const char *p = pattern; *p && !e; p++) {
		const char *lit = p;
		int vl;

		while (*p && *p != '%')
			p++;
		e = put_str(out, n, &len, lit, p - lit);
		if (e || !*p)
			break;
		switch (p[1]) {
		case '%':
			e = put_str(out, n, &len, "%", 1);
			break;
		case 'p':
			snprintf(num, sizeof(num), "%d", ctx->pid ? (int)ctx->pid : (int)getpid());
			e = put_str(out, n, &len, num, strlen(num));
			break;
		case 'n':
			snprintf(num, sizeof(num), "%u", ctx->seq);
			e = put_str(out, n, &len, num, strlen(num));
			break;
		case 'h':
			if (ctx->host) {
				e = put_value(out, n, &len, ctx->host);
				break;
			}
			if (gethostname(val, sizeof(val) - 1))
				return fail(err, errn, -errno, "in -o '%s': cannot read the host name "
					    "for %%h: %s", pattern, strerror(errno));
			val[sizeof(val) - 1] = '\0';
			e = put_value(out, n, &len, val);
			break;
		case 'q': {
			char name[VAR_MAX + 1];

			vl = var_name(p + 2, pattern, err, errn);
			memcpy(name, p + 3, vl);
			name[vl] = '\0';
			e = env(ctx->env_ctx, ctx->pid, name, val, sizeof(val));
			if (e == -ENOENT && ctx->missing_empty) {
				e = 0;
				val[0] = '\0';
			} else if (e == -ENOENT) {
				if (ctx->pid)
					return fail(err, errn, e, "in -o '%s': process %d has no %s in its "
						    "environment (/proc/%d/environ)", pattern,
						    (int)ctx->pid, name, (int)ctx->pid);
				return fail(err, errn, e, "in -o '%s': %s is not set in the "
					    "environment the command inherits", pattern, name);
			} else if (e) {
				return fail(err, errn, e, "in -o '%s': cannot read %s of process %d: "
					    "%s", pattern, name, (int)ctx->pid, strerror(-e));
			}
			e = put_value(out, n, &len, val);
			p += 3 + vl;	/* on the '}': the loop's p++ passes it */
			continue;
		}
		}
		p++;
	}
	if (e == -ENAMETOOLONG)
		return fail(err, errn, e, "-o '%s' expands to a name longer than %zu bytes",
			    pattern, n - 1);
	if (!e && !len)
		return fail(err, errn, -EINVAL, "-o '%s' expands to an empty name", pattern);
	return e;
}
