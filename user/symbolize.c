// SPDX-License-Identifier: MIT
/*
 * TEMPORARY symbolizer of the stacks branch (i3-stacks), for its own tests
 * only: frame pointers for unwinding, /proc/PID/maps plus ELF .symtab /
 * .dynsym for names, /proc/kallsyms for the kernel. No DWARF CFI, no
 * debuglink, no demangling. The libdwfl implementation of the "sym"
 * branch (same header, user/symbolize.h) replaces this file at the merge.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hmap.h"
#include "procfs.h"
#include "symbolize.h"

struct ssym {
	uint64_t addr, size;
	char *name;
};

struct sfile {
	char *path;
	char build_id[41];
	struct ssym *syms;
	size_t nsyms;
	struct { uint64_t vaddr, off, filesz; } load[16];
	int nload;
};

struct smap {
	uint64_t start, end, off;
	struct sfile *file;
};

struct sproc {
	struct smap *maps;
	size_t n;
	bool stale;
};

struct symbolizer {
	struct hmap procs;	/* pid -> struct sproc * */
	struct hmap files;	/* hash(dev, ino) -> struct sfile * */
	struct ssym *ksyms;
	size_t nksyms;
	bool ksyms_read;
};

struct symbolizer *symbolizer__new(void)
{
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = EINVAL;
		return NULL;
	}
	return calloc(1, sizeof(struct symbolizer));
}

static void free_file(struct sfile *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nsyms; i++)
		free(f->syms[i].name);
	free(f->syms);
	free(f->path);
	free(f);
}

static void free_proc(struct sproc *p)
{
	if (!p)
		return;
	free(p->maps);
	free(p);
}

void symbolizer__free(struct symbolizer *s)
{
	uint64_t v;

	if (!s)
		return;
	for (size_t it = 0; hmap__next(&s->procs, &it, NULL, &v);)
		free_proc((void *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&s->files, &it, NULL, &v);)
		free_file((void *)(uintptr_t)v);
	hmap__free(&s->procs);
	hmap__free(&s->files);
	for (size_t i = 0; i < s->nksyms; i++)
		free(s->ksyms[i].name);
	free(s->ksyms);
	free(s);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct ssym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void read_elf(struct sfile *f, int fd)
{
	static const char hex[] = "0123456789abcdef";
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	size_t nph = 0, cap = 0;

	if (!elf)
		return;
	if (!elf_getphdrnum(elf, &nph)) {
		for (size_t i = 0; i < nph && f->nload < 16; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD) {
				f->load[f->nload].vaddr = ph.p_vaddr;
				f->load[f->nload].off = ph.p_offset;
				f->load[f->nload].filesz = ph.p_filesz;
				f->nload++;
			}
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || !(d = elf_getdata(scn, NULL)))
			continue;
		if (sh.sh_type == SHT_NOTE) {
			GElf_Nhdr nh;
			size_t off = 0, noff, doff;

			while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
				const uint8_t *b = (const uint8_t *)d->d_buf + doff;
				size_t i;

				if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4)
					continue;
				for (i = 0; i < nh.n_descsz && i < 20; i++) {
					f->build_id[2 * i] = hex[b[i] >> 4];
					f->build_id[2 * i + 1] = hex[b[i] & 15];
				}
				f->build_id[2 * i] = 0;
			}
			continue;
		}
		if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (f->nsyms == cap) {
				size_t nc = cap ? cap * 2 : 256;
				struct ssym *n = realloc(f->syms, nc * sizeof(*n));

				if (!n)
					break;
				f->syms = n;
				cap = nc;
			}
			f->syms[f->nsyms].addr = sym.st_value;
			f->syms[f->nsyms].size = sym.st_size;
			f->syms[f->nsyms].name = strdup(name);
			if (f->syms[f->nsyms].name)
				f->nsyms++;
		}
	}
	if (f->nsyms)
		qsort(f->syms, f->nsyms, sizeof(*f->syms), cmp_sym);
	elf_end(elf);
}

struct load_ctx {
	struct symbolizer *s;
	pid_t pid;
	struct sproc *p;
	size_t cap;
};

static int add_map(const struct map_entry *e, void *ctx)
{
	struct load_ctx *c = ctx;
	uint64_t key = hash__u64(((uint64_t)e->dev_major << 40 | (uint64_t)e->dev_minor << 20) ^
				 e->inode);
	uint64_t *v;
	struct sfile *f;
	struct smap *m;

	if (e->perms[2] != 'x' || !e->inode || !e->path[0])
		return 0;
	v = hmap__get(&c->s->files, key);
	if (v) {
		f = (void *)(uintptr_t)*v;
	} else {
		char buf[4096];
		int fd;

		f = calloc(1, sizeof(*f));
		if (!f)
			return -ENOMEM;
		f->path = strdup(e->path);
		/* Inside the target's mount namespace; map_files for deleted files. */
		snprintf(buf, sizeof(buf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, c->pid,
			 e->start, e->end);
		fd = open(buf, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			snprintf(buf, sizeof(buf), "/proc/%d/root%s", c->pid, e->path);
			fd = open(buf, O_RDONLY | O_CLOEXEC);
		}
		if (fd >= 0) {
			read_elf(f, fd);
			close(fd);
		}
		if (hmap__put(&c->s->files, key, (uintptr_t)f)) {
			free_file(f);
			return -ENOMEM;
		}
	}
	if (c->p->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 32;
		struct smap *n = realloc(c->p->maps, nc * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->p->maps = n;
		c->cap = nc;
	}
	m = &c->p->maps[c->p->n++];
	m->start = e->start;
	m->end = e->end;
	m->off = e->offset;
	m->file = f;
	return 0;
}

static struct sproc *get_proc(struct symbolizer *s, pid_t pid, bool reload)
{
	uint64_t *v = hmap__get(&s->procs, pid);
	struct sproc *p = v ? (void *)(uintptr_t)*v : NULL;
	struct load_ctx c = { .s = s, .pid = pid };

	if (p && !p->stale && !reload)
		return p;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hmap__put(&s->procs, pid, (uintptr_t)p)) {
			free(p);
			return NULL;
		}
	}
	/* A process that is gone keeps the maps read before. */
	c.p = calloc(1, sizeof(*c.p));
	if (!c.p)
		return p;
	if (procfs__for_each_map(pid, add_map, &c) < 0 || !c.p->n) {
		free_proc(c.p);
		p->stale = false;
		return p;
	}
	free(p->maps);
	p->maps = c.p->maps;
	p->n = c.p->n;
	p->stale = false;
	free(c.p);
	return p;
}

static const struct smap *find_map(const struct sproc *p, uint64_t ip)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (ip >= p->maps[i].start && ip < p->maps[i].end)
			return &p->maps[i];
	return NULL;
}

static const struct ssym *find_sym(const struct ssym *syms, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	return &syms[lo - 1];
}

int symbolizer__user(struct symbolizer *s, pid_t pid, uint64_t ip, struct sym_frame *out)
{
	struct sproc *p = get_proc(s, pid, false);
	const struct smap *m = find_map(p, ip);
	const struct sfile *f;
	uint64_t foff, vaddr;
	const struct ssym *sym;

	memset(out, 0, sizeof(*out));
	out->ip = ip;
	if (!m) {
		p = get_proc(s, pid, true);
		m = find_map(p, ip);
	}
	if (!m)
		return -ENOENT;
	f = m->file;
	out->module = f->path;
	out->module_start = m->start;
	out->module_end = m->end;
	out->build_id = f->build_id[0] ? f->build_id : NULL;
	foff = ip - m->start + m->off;
	vaddr = foff;
	for (int i = 0; i < f->nload; i++)
		if (foff >= f->load[i].off && foff < f->load[i].off + f->load[i].filesz) {
			vaddr = foff - f->load[i].off + f->load[i].vaddr;
			break;
		}
	out->module_off = vaddr;
	sym = find_sym(f->syms, f->nsyms, vaddr);
	if (!sym || (sym->size && vaddr >= sym->addr + sym->size))
		return -ENOENT;
	out->function = sym->name;
	out->function_off = vaddr - sym->addr;
	return 0;
}

int symbolizer__user_ret(struct symbolizer *s, pid_t pid, uint64_t ret, struct sym_frame *out)
{
	int err = symbolizer__user(s, pid, ret ? ret - 1 : ret, out);

	out->ip = ret;
	if (ret && out->function)
		out->function_off++;
	if (ret && out->module)
		out->module_off++;
	return err;
}

int symbolizer__unwind(struct symbolizer *s, pid_t pid, pid_t tid, const struct sym_regs *regs,
		       const void *stack, size_t len, uint64_t *ips, int max, bool *truncated)
{
	uint64_t fp = regs->bp;
	int n = 0;

	*truncated = false;
	if (max <= 0)
		return 0;
	ips[n++] = regs->ip;
	while (n < max) {
		uint64_t next, ret;

		if (!fp)
			break;
		if (fp < regs->sp || fp + 16 > regs->sp + len) {
			*truncated = true;
			break;
		}
		memcpy(&next, (const char *)stack + (fp - regs->sp), 8);
		memcpy(&ret, (const char *)stack + (fp - regs->sp) + 8, 8);
		if (!ret)
			break;
		ips[n++] = ret;
		if (next <= fp)
			break;
		fp = next;
	}
	return n;
}

static void read_kallsyms(struct symbolizer *s)
{
	char line[512];
	size_t cap = 0;
	FILE *f;

	s->ksyms_read = true;
	f = fopen("/proc/kallsyms", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		uint64_t addr;
		char type, name[256];

		if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type, name) != 3 || !addr)
			continue;
		if (type != 't' && type != 'T' && type != 'W' && type != 'w')
			continue;
		if (s->nksyms == cap) {
			size_t nc = cap ? cap * 2 : 65536;
			struct ssym *n = realloc(s->ksyms, nc * sizeof(*n));

			if (!n)
				break;
			s->ksyms = n;
			cap = nc;
		}
		s->ksyms[s->nksyms].addr = addr;
		s->ksyms[s->nksyms].size = 0;
		s->ksyms[s->nksyms].name = strdup(name);
		if (s->ksyms[s->nksyms].name)
			s->nksyms++;
	}
	fclose(f);
	if (s->nksyms)
		qsort(s->ksyms, s->nksyms, sizeof(*s->ksyms), cmp_sym);
}

int symbolizer__kernel(struct symbolizer *s, uint64_t ip, struct sym_frame *out)
{
	const struct ssym *sym;

	memset(out, 0, sizeof(*out));
	out->ip = ip;
	out->kernel = true;
	out->module = "[kernel.kallsyms]";
	if (!s->ksyms_read)
		read_kallsyms(s);
	sym = find_sym(s->ksyms, s->nksyms, ip);
	if (!sym)
		return -ENOENT;
	out->function = sym->name;
	out->function_off = ip - sym->addr;
	return 0;
}

void symbolizer__invalidate(struct symbolizer *s, pid_t pid)
{
	uint64_t *v = hmap__get(&s->procs, pid);

	if (v)
		((struct sproc *)(uintptr_t)*v)->stale = true;
}

void symbolizer__proc_exit(struct symbolizer *s, pid_t pid)
{
	/* Kept: records of the process may still be in the ring. */
	(void)s;
	(void)pid;
}
