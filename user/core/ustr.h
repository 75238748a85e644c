/* SPDX-License-Identifier: MIT */
/*
 * Strings of a traced process that its probes could not read (their page
 * was not yet in the process's page table): read from user space with
 * process_vm_readv, which faults pages in as the process itself would, or
 * named "(unreadable at 0x...)" so that no name is ever silently blank.
 */
#ifndef CGBPF_USTR_H
#define CGBPF_USTR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "events.h"

/* Reads the NUL-terminated string at addr in process pid into buf (cap
 * bytes, cap >= 1), truncated and always terminated. Returns its length,
 * or -errno: the process is gone (-ESRCH) or addr is not readable memory
 * (-EFAULT). Never reads past the first NUL's page. */
ssize_t ustr__read(pid_t pid, uint64_t addr, char *buf, size_t cap);

/* Writes the placeholder a string that cannot be read shows as:
 * "(unreadable at 0x<addr>)"; returns buf. */
const char *ustr__unreadable(uint64_t addr, char *buf, size_t cap);

/*
 * A string record r of size *size as the model should see it: r itself
 * when BPF read the string, else a copy in buf with the string read from
 * the process (flag STR_UNREAD kept) or, when that fails too, the
 * placeholder and STR_UNREADABLE. A NULL argument reads "(null)". *size
 * becomes the returned record's size. r must have passed record
 * validation's minimum size (the header up to str).
 */
const struct rec_string *ustr__resolve(const struct rec_string *r, size_t *size,
				       struct rec_string *buf);

#endif
