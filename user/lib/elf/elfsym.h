/* SPDX-License-Identifier: MIT */
/*
 * Function symbols of one ELF file (.dynsym and .symtab) with the file
 * offsets uprobes need. Opened once per library file and shared by every
 * probe on it.
 */
#ifndef CGBPF_ELFSYM_H
#define CGBPF_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct elfsym;

/* Reads the function symbols of path; NULL with errno set on failure. */
struct elfsym *elfsym__open(const char *path);
/* Frees; accepts NULL. */
void elfsym__close(struct elfsym *es);
/* File offset of a defined function symbol; 0 on success, -ENOENT if the
 * file does not define it. */
int elfsym__offset(const struct elfsym *es, const char *name, uint64_t *off);
/* The same, with the symbol's size in bytes (st_size, 0 if unknown). */
int elfsym__range(const struct elfsym *es, const char *name, uint64_t *off, uint64_t *size);
/* Number of function symbols read. */
size_t elfsym__count(const struct elfsym *es);
/* The build id as lowercase hex, "" if the file has none. */
const char *elfsym__build_id(const struct elfsym *es);

#endif
