// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "core/ustr.h"

#define PAGE 4096u

ssize_t ustr__read(pid_t pid, uint64_t addr, char *buf, size_t cap)
{
	size_t got = 0;

	if (!cap)
		return -EINVAL;
	/*
	 * Page by page: a string may end just before an unmapped page, and
	 * one remote range over both would fail (or stop) as a whole.
	 */
	while (got + 1 < cap) {
		uint64_t at = addr + got;
		size_t want = PAGE - (at & (PAGE - 1));
		struct iovec local, remote;
		ssize_t n;
		char *nul;

		if (want > cap - 1 - got)
			want = cap - 1 - got;
		local = (struct iovec){ buf + got, want };
		remote = (struct iovec){ (void *)(uintptr_t)at, want };
		n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (n <= 0) {
			if (!got)
				return n < 0 ? -errno : -EFAULT;
			break;	/* what was read ends unterminated: keep it */
		}
		nul = memchr(buf + got, 0, n);
		if (nul)
			return nul - buf;
		got += n;
		if ((size_t)n < want)
			break;
	}
	buf[got] = 0;
	return got;
}

const char *ustr__unreadable(uint64_t addr, char *buf, size_t cap)
{
	snprintf(buf, cap, "(unreadable at 0x%" PRIx64 ")", addr);
	return buf;
}

const struct rec_string *ustr__resolve(const struct rec_string *r, size_t *size,
				       struct rec_string *buf)
{
	size_t head = offsetof(struct rec_string, str);
	ssize_t n;

	if (!(r->flags & STR_UNREAD) || (r->flags & STR_UNREADABLE))
		return r;
	memcpy(buf, r, head);
	if (!r->addr) {
		n = snprintf(buf->str, sizeof(buf->str), "(null)");
	} else {
		n = ustr__read(r->hdr.pid, r->addr, buf->str, sizeof(buf->str));
		if (n < 0) {
			ustr__unreadable(r->addr, buf->str, sizeof(buf->str));
			n = strlen(buf->str);
			buf->flags |= STR_UNREADABLE;
		}
	}
	buf->len = n;
	buf->truncated = (size_t)n == sizeof(buf->str) - 1;
	buf->hdr.size = head + n + 1;
	*size = buf->hdr.size;
	return buf;
}
