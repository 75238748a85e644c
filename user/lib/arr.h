/* SPDX-License-Identifier: MIT */
/* Growing arrays: room for one more element. */
#ifndef CGBPF_ARR_H
#define CGBPF_ARR_H

#include <errno.h>
#include <stdlib.h>

/* Makes *arr (of *cap elements of size bytes, n used) hold at least n + 1,
 * doubling from 8. 0 or -ENOMEM (the array is then as it was). */
static inline int arr__grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 8;
	p = realloc(*arr, nc * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

#endif
