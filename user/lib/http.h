/* SPDX-License-Identifier: MIT */
/*
 * The monitor endpoint's HTTP/1.x request parser: anyone who can connect
 * to the port sends these bytes (loopback by default, but every local
 * user and container sharing the host's network can). Pure: bytes in,
 * verdict out; the connection handling is monitor.c's.
 */
#ifndef CGBPF_HTTP_H
#define CGBPF_HTTP_H

#include <stddef.h>

/* The longest request head (request line and headers) accepted. */
#define HTTP_MAX_REQUEST 8192

struct http_req {
	char method[16];	/* "GET" */
	char path[256];		/* "/metrics", without the query string */
};

/*
 * Parses the request head at the start of buf[0..len): 1 when it is
 * complete (an empty line ends it) with r filled, 0 when more bytes are
 * needed, -EINVAL when it is not an HTTP request (answer 400), -E2BIG
 * when no end came within HTTP_MAX_REQUEST bytes (431), -ENAMETOOLONG
 * for a method or path longer than r holds (414). Bytes after the head
 * (a body) are not looked at.
 */
int http__parse_request(const char *buf, size_t len, struct http_req *r);

#endif
