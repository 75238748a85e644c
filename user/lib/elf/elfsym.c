// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/elf/elfsym.h"
#include "lib/hmap.h"

struct elfsym {
	struct hmap by_name;	/* hash of name -> index + 1 into syms */
	struct sym { char *name; uint64_t off, size; } *syms;
	size_t n, cap;
	char build_id[41];
};

static int vaddr_to_off(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	size_t nph;

	if (elf_getphdrnum(elf, &nph))
		return -EINVAL;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

static int add(struct elfsym *es, const char *name, uint64_t off, uint64_t size)
{
	uint64_t h = hash__bytes(name, strlen(name));

	/* Collisions of the 64-bit hash are resolved by linear probing on h. */
	for (uint64_t *v; (v = hmap__get(&es->by_name, h)); h++)
		if (!strcmp(es->syms[*v - 1].name, name))
			return 0;	/* first definition wins (.dynsym before .symtab) */
	if (es->n == es->cap) {
		size_t nc = es->cap ? es->cap * 2 : 256;
		struct sym *s = realloc(es->syms, nc * sizeof(*s));

		if (!s)
			return -ENOMEM;
		es->syms = s;
		es->cap = nc;
	}
	es->syms[es->n].name = strdup(name);
	if (!es->syms[es->n].name)
		return -ENOMEM;
	es->syms[es->n].off = off;
	es->syms[es->n].size = size;
	es->n++;
	return hmap__put(&es->by_name, h, es->n);
}

static int read_symtab(struct elfsym *es, Elf *elf, Elf_Scn *scn, GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		uint64_t off;
		int err;

		if (!gelf_getsym(data, i, &sym))
			continue;
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
		    !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name || vaddr_to_off(elf, sym.st_value, &off))
			continue;
		err = add(es, name, off, sym.st_size);
		if (err)
			return err;
	}
	return 0;
}

static void read_build_id(struct elfsym *es, Elf *elf)
{
	Elf_Scn *scn = NULL;
	static const char hex[] = "0123456789abcdef";

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		while ((off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			const uint8_t *d = (const uint8_t *)data->d_buf + doff;
			size_t i;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + noff, "GNU", 4))
				continue;
			for (i = 0; i < nh.n_descsz && i < 20; i++) {
				es->build_id[2 * i] = hex[d[i] >> 4];
				es->build_id[2 * i + 1] = hex[d[i] & 15];
			}
			es->build_id[2 * i] = 0;
			return;
		}
	}
}

struct elfsym *elfsym__open(const char *path)
{
	struct elfsym *es = NULL;
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	int fd, err = 0;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = EINVAL;
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	es = calloc(1, sizeof(*es));
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!es || !elf || elf_kind(elf) != ELF_K_ELF) {
		err = es ? -ENOEXEC : -ENOMEM;
		goto cleanup;
	}
	/* .dynsym first: exported names are what callers reach. */
	for (int pass = 0; pass < 2 && !err; pass++) {
		scn = NULL;
		while (!err && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh))
				continue;
			if (sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				err = read_symtab(es, elf, scn, &sh);
		}
	}
	if (!err)
		read_build_id(es, elf);
cleanup:
	if (elf)
		elf_end(elf);
	close(fd);
	if (err) {
		elfsym__close(es);
		errno = -err;
		return NULL;
	}
	return es;
}

void elfsym__close(struct elfsym *es)
{
	if (!es)
		return;
	for (size_t i = 0; i < es->n; i++)
		free(es->syms[i].name);
	free(es->syms);
	hmap__free(&es->by_name);
	free(es);
}

int elfsym__range(const struct elfsym *es, const char *name, uint64_t *off, uint64_t *size)
{
	uint64_t h = hash__bytes(name, strlen(name));

	for (uint64_t *v; (v = hmap__get(&es->by_name, h)); h++) {
		if (!strcmp(es->syms[*v - 1].name, name)) {
			*off = es->syms[*v - 1].off;
			if (size)
				*size = es->syms[*v - 1].size;
			return 0;
		}
	}
	return -ENOENT;
}

int elfsym__offset(const struct elfsym *es, const char *name, uint64_t *off)
{
	return elfsym__range(es, name, off, NULL);
}

size_t elfsym__count(const struct elfsym *es)
{
	return es->n;
}

const char *elfsym__build_id(const struct elfsym *es)
{
	return es->build_id;
}
