// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include "lib/http.h"

/* Offset just past the empty line that ends the head, or 0 if none yet. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static bool tchar(char c)
{
	/* RFC 9110 token characters, which is what a method is made of. */
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

int http__parse_request(const char *buf, size_t len, struct http_req *r)
{
	size_t end, i = 0, m, p;

	memset(r, 0, sizeof(*r));
	if (len > HTTP_MAX_REQUEST)
		len = HTTP_MAX_REQUEST;
	end = head_end(buf, len);
	if (!end)
		return len == HTTP_MAX_REQUEST ? -E2BIG : 0;
	/* Request line: METHOD SP TARGET [SP HTTP/x.y] (CR)LF. */
	for (m = 0; i < end && tchar(buf[i]); i++, m++)
		;
	if (!m || buf[i] != ' ')
		return -EINVAL;
	if (m >= sizeof(r->method))
		return -ENAMETOOLONG;
	memcpy(r->method, buf, m);
	i++;
	if (buf[i] != '/' && buf[i] != '*')
		return -EINVAL;
	for (p = 0; i + p < end && buf[i + p] > ' ' && buf[i + p] != 0x7f; p++)
		;
	if (buf[i + p] != ' ' && buf[i + p] != '\r' && buf[i + p] != '\n')
		return -EINVAL;
	{
		const char *q = memchr(buf + i, '?', p);
		size_t n = q ? (size_t)(q - (buf + i)) : p;

		if (n >= sizeof(r->path))
			return -ENAMETOOLONG;
		memcpy(r->path, buf + i, n);
	}
	i += p;
	if (buf[i] == ' ') {
		i++;
		if (end - i < 8 || memcmp(buf + i, "HTTP/1.", 7) || buf[i + 7] < '0' ||
		    buf[i + 7] > '9')
			return -EINVAL;
		i += 8;
	}
	if (buf[i] == '\r')
		i++;
	if (buf[i] != '\n')
		return -EINVAL;
	return 1;
}
