// SPDX-License-Identifier: MIT
/*
 * Parsers of untrusted input, on the cases the fuzzers found or that
 * define their contract (docs/security.md): the monitor's HTTP request
 * parser, its config file parser, record validation and the ld.so.cache
 * parser. The fuzz/ harnesses explore the rest.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/apilib.h"
#include "cli/config.h"
#include "events.h"
#include "lib/http.h"
#include "core/ingest.h"
#include "lib/elf/ldpath.h"
#include "lib/log.h"
#include "core/model.h"
#include "sources/nvtx/nvtx.h"
#include "nvtx_rec.h"
#include "pyframes_rec.h"
#include "tap.h"
#include "sources/sources.h"

static int http(const char *s, struct http_req *r)
{
	return http__parse_request(s, strlen(s), r);
}

static void test_http(void)
{
	struct http_req r;
	char *big;

	check(http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 1 &&
	      !strcmp(r.method, "GET") && !strcmp(r.path, "/metrics"),
	      "http: a scrape parses to GET /metrics");
	check(http("POST /dump HTTP/1.0\n\n", &r) == 1 && !strcmp(r.method, "POST") &&
	      !strcmp(r.path, "/dump"), "http: bare LF line ends");
	check(http("GET /metrics?name[]=x HTTP/1.1\r\n\r\n", &r) == 1 && !strcmp(r.path, "/metrics"),
	      "http: the query string is not part of the path");
	check(http("GET /metrics HTTP/1.1\r\nHost: x\r\n", &r) == 0,
	      "http: a head without its empty line needs more bytes");
	check(http("GET", &r) == 0, "http: a partial request line needs more bytes");
	check(http("GET metrics HTTP/1.1\r\n\r\n", &r) == -EINVAL, "http: a relative path is refused");
	check(http("\x16\x03\x01\x02\x01\n\n", &r) == -EINVAL, "http: TLS bytes are refused");
	check(http("GET /a\x01 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "http: control bytes in the path");
	check(http("GET / SPDY/3\r\n\r\n", &r) == -EINVAL, "http: another protocol version");
	check(http("VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n", &r) == -ENAMETOOLONG,
	      "http: a method longer than 15 characters: 414");
	big = malloc(HTTP_MAX_REQUEST + 2);
	if (big) {
		memset(big, 'a', HTTP_MAX_REQUEST + 1);
		memcpy(big, "GET /", 5);
		big[HTTP_MAX_REQUEST + 1] = 0;
		check(http__parse_request(big, HTTP_MAX_REQUEST, &r) == -E2BIG,
		      "http: %d bytes without an end: 431", HTTP_MAX_REQUEST);
		memcpy(big + 300, " HTTP/1.1\r\n\r\n", 13);
		check(http(big, &r) == -ENAMETOOLONG, "http: a path over 255 bytes: 414");
		free(big);
	}
}

static void test_config(void)
{
	static const char good[] = "# comment\nlisten 127.0.0.1:1\n  flight-recorder = 10s # why\r\n"
				   "\n\tno-trigger-exit\ncomm=python\n";
	char **av, msg[256], *nul;
	int ac, err;

	err = config__parse(good, sizeof(good) - 1, &av, &ac, msg, sizeof(msg));
	if (check(!err && ac == 8, "config: 4 options, 3 values (%d: %s)", err, msg))
		check(!strcmp(av[0], "monitor") && !strcmp(av[1], "--listen") &&
		      !strcmp(av[2], "127.0.0.1:1") && !strcmp(av[3], "--flight-recorder") &&
		      !strcmp(av[4], "10s") && !strcmp(av[5], "--no-trigger-exit") &&
		      !strcmp(av[6], "--comm") && !strcmp(av[7], "python") && !av[8],
		      "config: keys, values, comments, CRLF and '=' as the command line has them");
	config__free(av, ac);
	err = config__parse("listen 1\0x", 10, &av, &ac, msg, sizeof(msg));
	check(err == -EINVAL && strstr(msg, "line 1") && !av, "config: a NUL byte is refused (%s)", msg);
	err = config__parse("--listen x\n", 11, &av, &ac, msg, sizeof(msg));
	check(err == -EINVAL && strstr(msg, "not an option name"), "config: '--key' is refused (%s)",
	      msg);
	nul = malloc(CONFIG_MAX_LINE + 16);
	if (nul) {
		/* One long line was split in two lines, the rest taken for an
		 * option of its own. */
		memset(nul, 'a', CONFIG_MAX_LINE + 15);
		memcpy(nul, "listen ", 7);
		err = config__parse(nul, CONFIG_MAX_LINE + 15, &av, &ac, msg, sizeof(msg));
		check(err == -EINVAL && strstr(msg, "longer than"), "config: an over-long line is refused "
		      "(%s)", msg);
		free(nul);
	}
	err = config__parse("", 0, &av, &ac, msg, sizeof(msg));
	check(!err && ac == 1 && av && !av[1], "config: an empty file has no options");
	config__free(av, ac);
	err = config__read("/dev/zero", &av, &ac, msg, sizeof(msg));
	check(err == -EINVAL && strstr(msg, "not a regular file"), "config: a device is refused "
	      "(%s)", msg);
}

/* A call record with its Python leaf frame (bpf/pyframes_rec.h): checked
 * by size, and split back into the frame record and the plain call. */
static void test_call_py(const struct rec_call_enter *plain)
{
	struct rec_call_enter_py cp = { .call = *plain };
	struct rec_call_enter call;
	static struct rec_py_frames fr;
	size_t n;

	cp.call.hdr.size = sizeof(cp);
	cp.call.hdr.pid = 7;
	cp.call.hdr.tid = 8;
	cp.call.hdr.ts = 99;
	cp.call.func = 3;
	cp.call.args[0] = 42;
	cp.py.code = 0x1000;
	cp.py.lasti = -2;
	cp.py.flags = PYF_ENTRY;
	check(!ingest__check(&cp, sizeof(cp)), "ingest: a call entry with its leaf frame passes");
	cp.call.hdr.size = sizeof(cp) - 8;
	check(ingest__check(&cp, sizeof(cp) - 8) == -EINVAL,
	      "ingest: a call entry of neither size is refused");
	cp.call.hdr.size = sizeof(cp);
	check(src_python.split(plain, sizeof(*plain), &fr, &call) == 0,
	      "split: a plain call entry is left alone");
	n = src_python.split(&cp, sizeof(cp), &fr, &call);
	check(n == offsetof(struct rec_py_frames, frames) + sizeof(struct py_rec_frame) &&
	      !ingest__check(&fr, n), "split: the frame record (%zu bytes) passes ingest", n);
	check(fr.hdr.type == REC_PY_FRAMES && fr.hdr.size == n && fr.hdr.pid == 7 &&
	      fr.hdr.tid == 8 && fr.hdr.ts == 99 && fr.nframes == 1 && fr.what == PYR_CALL &&
	      fr.lib == cp.call.lib && fr.func == 3 && !fr.truncated && fr.mode == PY_MODE_LEAF &&
	      fr.frames[0].code == 0x1000 && fr.frames[0].lasti == -2 &&
	      fr.frames[0].flags == PYF_ENTRY, "split: the frame record is the call's leaf");
	check(call.hdr.type == REC_CALL_ENTER && call.hdr.size == sizeof(call) &&
	      call.func == 3 && call.args[0] == 42 && !ingest__check(&call, sizeof(call)),
	      "split: the call record is the plain one");
}

/* ncclCommInitAll's comms (REC_OUT_ARRAY): bounded, within the call's length. */
static void test_out_array(void)
{
	struct rec_out_array o = { .hdr = { .type = REC_OUT_ARRAY, .size = sizeof(o) },
				   .lib = LIB_NCCL, .n = 4, .len = 4 };

	check(!ingest__check(&o, sizeof(o)), "ingest: an out array of 4 of 4 passes");
	o.n = 5;
	check(ingest__check(&o, sizeof(o)) == -EINVAL, "ingest: more words than the call's length");
	o.n = o.len = OUT_ARRAY_MAX + 1;
	check(ingest__check(&o, sizeof(o)) == -EINVAL, "ingest: more words than the record holds");
	o.n = o.len = 4;
	o.func = apilib__get(LIB_NCCL)->nfuncs;
	check(ingest__check(&o, sizeof(o)) == -EINVAL, "ingest: an unknown function");
	o.func = 0;
	check(ingest__check(&o, sizeof(o) - 8) == -EINVAL, "ingest: a short record");
}

static void test_ingest(void)
{
	struct rec_call_enter e = { .hdr = { .type = REC_CALL_ENTER, .size = sizeof(e) } };
	struct rec_string s = { .hdr = { .type = REC_STRING } };
	struct rec_nvtx nv = { .hdr = { .type = REC_NVTX } };
	size_t sl = offsetof(struct rec_string, str) + 4;

	check(!ingest__check(&e, sizeof(e)), "ingest: a call entry of cuInit passes");
	e.func = apilib__get(LIB_CUDA)->nfuncs;
	check(ingest__check(&e, sizeof(e)) == -EINVAL,
	      "ingest: a function id past the library's table is refused (fuzz_records found "
	      "cuda.c indexing with it)");
	e.func = 0;
	e.lib = LIB__COUNT;
	check(ingest__check(&e, sizeof(e)) == -EINVAL, "ingest: an unknown library is refused");
	e.lib = 0;
	check(ingest__check(&e, sizeof(e) - 1) == -EINVAL, "ingest: a size other than the header's");
	test_call_py(&e);
	s.hdr.size = sl;
	s.len = 4;
	memcpy(s.str, "abcd", 4);
	check(!ingest__check(&s, sl), "ingest: a 4-byte string in its record passes");
	s.len = 5;
	check(ingest__check(&s, sl) == -EINVAL, "ingest: a string longer than its record");
	s.len = 4;
	s.str[2] = 0;
	check(ingest__check(&s, sl) == -EINVAL, "ingest: a NUL inside a string");
	nv.hdr.size = offsetof(struct rec_nvtx, str) + 3;
	nv.probe = NV_PUSH;
	nv.len = 2;
	memcpy(nv.str, "ab", 3);
	check(!ingest__check(&nv, nv.hdr.size), "ingest: an NVTX message with its NUL passes");
	nv.str[2] = 'c';
	check(ingest__check(&nv, nv.hdr.size) == -EINVAL, "ingest: an NVTX message without its NUL");
	nv.str[2] = 0;
	nv.probe = NV__COUNT;
	check(ingest__check(&nv, nv.hdr.size) == -EINVAL, "ingest: an unknown NVTX probe");
	test_out_array();
}

static int count_entry(const char *name, const char *path, void *ctx)
{
	(*(int *)ctx)++;
	return 0;
}

static void test_ldcache(void)
{
	/* The new format's header and one x86-64 libc6 entry. */
	struct {
		char magic[20];
		uint32_t nlibs, len_strings, unused[5];
		int32_t flags;
		uint32_t key, value, osversion;
		uint64_t hwcap;
		char strings[40];
	} img = { "glibc-ld.so.cache1.1", 1, 40, { 0 }, 0x0303, 0, 0, 0, 0, "" };
	uint8_t *odd = malloc(sizeof(img) + 1);
	int n = 0, rc;

	img.key = offsetof(typeof(img), strings);
	img.value = img.key + 13;
	memcpy(img.strings, "libcuda.so.1\0/lib/libcuda.so.1", 31);
	if (!odd)
		return;
	memcpy(odd + 1, &img, sizeof(img));
	rc = ldpath__parse_cache(odd + 1, sizeof(img), count_entry, &n);
	check(!rc && n == 1, "ldcache: an image at an odd address parses (%d, %d entries)", rc, n);
	img.value = sizeof(img) - 1;	/* its string would run past the end */
	img.strings[39] = 'x';
	n = 0;
	check(!ldpath__parse_cache(&img, sizeof(img), count_entry, &n) && n == 0,
	      "ldcache: an entry whose string leaves the image is skipped");
	img.nlibs = 1000;
	check(ldpath__parse_cache(&img, sizeof(img), count_entry, &n) == -EINVAL,
	      "ldcache: more entries than the image holds is refused");
	free(odd);
	check(ldpath__library_name("libcuda.so.580.65.06") && ldpath__library_name("libnccl.so") &&
	      !ldpath__library_name("libcuda.so.d") && !ldpath__library_name("libcuda.so.1.") &&
	      !ldpath__library_name(""), "ldcache: library names");
}

/* Two NVTX start records with one id (a lost end, or ids reused): the
 * first range was overwritten in the open map and leaked (fuzz_records,
 * on a capture whose records came twice). ASan's leak check at exit is
 * the assertion; the summary counts the dropped one. */
static void test_nvtx_reused_id(void)
{
	struct model m;
	struct nvtx *n;
	struct rec_nvtx r = { .hdr = { .type = REC_NVTX, .pid = 0x40000001, .tid = 0x40000001 } };
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	model__init(&m);
	n = nvtx__new(&m, NULL);
	if (!check(n != NULL, "nvtx: decoder made"))
		return;
	r.hdr.size = offsetof(struct rec_nvtx, str) + 2;
	r.len = 1;
	r.str[0] = 'a';
	r.id = 7;
	for (int i = 0; i < 2; i++) {
		r.probe = NV_START;
		r.hdr.ts = 1000 + i;
		nvtx__record(n, &r, r.hdr.size);
	}
	r.probe = NV_END;
	r.hdr.ts = 2000;
	nvtx__record(n, &r, r.hdr.size);
	f = open_memstream(&text, &len);
	nvtx__print(n, NULL, f);
	fclose(f);
	check(text && strstr(text, "StartEnd") && strstr(text, "0 marks; 1 pops/ends"),
	      "nvtx: a range started twice under one id ends once, the other is counted "
	      "unmatched");
	free(text);
	nvtx__free(n);
	model__free(&m);
}

/* Allocation sizes are the traced process's arguments: the memory counter
 * saturates instead of overflowing (fuzz_records: signed overflow in
 * model__mem, the counter then clamped to 0). */
static void test_mem_saturates(void)
{
	struct model m;
	struct thread *t;

	model__init(&m);
	t = model__thread(&m, 0x40000002, 0x40000002);
	if (!check(t != NULL, "memory counter: a thread"))
		return;
	model__mem(&m, t, CTR_GPU_MEM, 1, INT64_MAX);
	model__mem(&m, t, CTR_GPU_MEM, 2, INT64_MAX);
	check(t->proc->mem[CTR_GPU_MEM] == INT64_MAX && t->proc->mem_peak[CTR_GPU_MEM] == INT64_MAX,
	      "memory counter: two huge allocations saturate (%" PRId64 ")",
	      t->proc->mem[CTR_GPU_MEM]);
	model__mem(&m, t, CTR_GPU_MEM, 3, INT64_MIN);
	check(t->proc->mem[CTR_GPU_MEM] == 0, "memory counter: a huge free stops at 0");
	model__free(&m);
}

static int found_lib(int fd, const char *path, void *ctx)
{
	(*(int *)ctx)++;
	return 0;
}

/* A FIFO where a library or a debug file is looked for (a container
 * chooses its files): an open for reading would wait for a writer
 * forever; it must not be opened at all. */
static void test_fifo(void)
{
	char dir[] = "/tmp/cgbpf-fifo-XXXXXX", fifo[64], llp[80];
	char *env[] = { llp, NULL };
	const char *const prefixes[] = { "libcuda.so", NULL };
	struct ldpath_req q = { .env = env, .prefixes = prefixes, .skip_system = true };
	int rootfd, fd, n = 0;

	if (!check(mkdtemp(dir) != NULL, "fifo: temporary directory"))
		return;
	snprintf(fifo, sizeof(fifo), "%s/libcuda.so.1", dir);
	snprintf(llp, sizeof(llp), "LD_LIBRARY_PATH=%s", dir);
	if (check(!mkfifo(fifo, 0644), "fifo: libcuda.so.1 is a FIFO")) {
		rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		alarm(20);	/* a hang is a failure, not a stuck test run */
		fd = ldpath__open_at(rootfd, fifo, O_RDONLY);
		check(fd == -EINVAL, "fifo: ldpath__open_at refuses it without opening it (%d)", fd);
		fd = ldpath__open_file(fifo);
		check(fd == -EINVAL, "fifo: ldpath__open_file too (%d)", fd);
		check(!ldpath__resolve(&q, found_lib, &n) && n == 0,
		      "fifo: resolving libcuda.so through LD_LIBRARY_PATH skips it (%d found)", n);
		alarm(0);
		close(rootfd);
		unlink(fifo);
	}
	rmdir(dir);
}

int main(void)
{
	sources__init();
	setvbuf(stdout, NULL, _IOLBF, 0);
	log_verbosity = LOG_ERR;
	test_http();
	test_config();
	test_ingest();
	test_ldcache();
	test_fifo();
	test_nvtx_reused_id();
	test_mem_saturates();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
