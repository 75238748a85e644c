/* SPDX-License-Identifier: MIT */
/*
 * libcgbpf-nvtx.so: an NVTX v3 injection library that turns NVTX calls
 * into USDT probes for cgbpf (see cgbpf_nvtx_probes.h for the probes and
 * nvtx_abi.h for how NVTX loads it). It never writes, prints or opens
 * anything: with no tracer attached each call costs a semaphore load and a
 * branch (plus the bookkeeping NVTX's return values need: a thread-local
 * depth for push/pop, an atomic counter for range ids).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include "cgbpf_nvtx_probes.h"
#include "nvtx_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* One semaphore per probe, named as sys/sdt.h expects; the kernel counts
 * it up for every attached tracer. */
#define SEMAPHORE(name) \
	__attribute__((section(".probes"), used)) \
	volatile unsigned short cgbpf_nvtx_##name##_semaphore
#define ENABLED(name) __builtin_expect(cgbpf_nvtx_##name##_semaphore != 0, 0)

SEMAPHORE(push);
SEMAPHORE(pop);
SEMAPHORE(start);
SEMAPHORE(end);
SEMAPHORE(mark);
SEMAPHORE(name_thread);
SEMAPHORE(name_category);
SEMAPHORE(domain_create);
SEMAPHORE(domain_destroy);
SEMAPHORE(register_string);

/* A registered string; its handle is str. */
struct rstring {
	struct rstring *next;
	char str[];
};

/* A domain; its handle is name, so that a tracer reads the name through
 * the handle. Registered strings live as long as their domain. */
struct domain {
	pthread_mutex_t lock;
	struct rstring *strings;
	char name[];
};

/* Strings registered in the default (NULL) domain live forever. */
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rstring *default_strings;

static uint64_t next_range_id = 1;
static __thread int push_depth;

/* An event's attributes in probe form. */
struct attrs {
	uint64_t msg_kind;
	const void *msg;
	uint64_t color_type;
	uint64_t color;
	uint64_t category;
	uint64_t payload_type;
	uint64_t payload;
};

/* Writes wide string w into buf (cap bytes) as UTF-8, truncated at a
 * character boundary, always NUL-terminated; returns buf. */
static char *to_utf8(const wchar_t *w, char *buf, size_t cap)
{
	size_t n = 0;

	if (!w)
		w = L"";
	for (; *w; w++) {
		uint32_t c = (uint32_t)*w;
		char enc[4];
		size_t len;

		if (c >= 0xd800 && c < 0xe000)
			c = 0xfffd;
		if (c < 0x80) {
			enc[0] = (char)c;
			len = 1;
		} else if (c < 0x800) {
			enc[0] = (char)(0xc0 | c >> 6);
			enc[1] = (char)(0x80 | (c & 0x3f));
			len = 2;
		} else if (c < 0x10000) {
			enc[0] = (char)(0xe0 | c >> 12);
			enc[1] = (char)(0x80 | (c >> 6 & 0x3f));
			enc[2] = (char)(0x80 | (c & 0x3f));
			len = 3;
		} else if (c < 0x110000) {
			enc[0] = (char)(0xf0 | c >> 18);
			enc[1] = (char)(0x80 | (c >> 12 & 0x3f));
			enc[2] = (char)(0x80 | (c >> 6 & 0x3f));
			enc[3] = (char)(0x80 | (c & 0x3f));
			len = 4;
		} else {
			enc[0] = (char)0xef;
			enc[1] = (char)0xbf;
			enc[2] = (char)0xbd;
			len = 3;
		}
		if (n + len >= cap)
			break;
		memcpy(buf + n, enc, len);
		n += len;
	}
	buf[n] = 0;
	return buf;
}

/* Returns a heap copy of wide string w as UTF-8 (no length limit), or
 * NULL when out of memory. */
static char *dup_utf8(const wchar_t *w, size_t *len_out)
{
	size_t cap = (w ? wcslen(w) : 0) * 4 + 1;
	char *buf = malloc(cap);

	if (!buf)
		return NULL;
	to_utf8(w, buf, cap);
	*len_out = strlen(buf);
	return buf;
}

/* Fills a from NVTX event attributes; utf8 (CGBPF_NVTX_UTF8_MAX bytes)
 * receives a converted wide message. */
static void decode(const struct nvtxabi_event_attributes *ea, struct attrs *a, char *utf8)
{
	memset(a, 0, sizeof(*a));
	if (!ea || ea->size < offsetof(struct nvtxabi_event_attributes, message) + sizeof(ea->message))
		return;
	if (ea->color_type == NVTXABI_COLOR_ARGB) {
		a->color_type = 1;
		a->color = ea->color;
	}
	a->category = ea->category;
	a->payload_type = (uint32_t)ea->payload_type;
	switch (ea->payload_type) {
	case NVTXABI_PAYLOAD_UNSIGNED_INT64:
	case NVTXABI_PAYLOAD_INT64:
	case NVTXABI_PAYLOAD_DOUBLE:
		a->payload = ea->payload.u64;
		break;
	case NVTXABI_PAYLOAD_UNSIGNED_INT32:
	case NVTXABI_PAYLOAD_INT32:
	case NVTXABI_PAYLOAD_FLOAT:
		a->payload = ea->payload.u32;
		break;
	default:
		a->payload_type = 0;
		break;
	}
	switch (ea->message_type) {
	case NVTXABI_MESSAGE_ASCII:
		if (ea->message.ascii) {
			a->msg_kind = CGBPF_NVTX_MSG_ASCII;
			a->msg = ea->message.ascii;
		}
		break;
	case NVTXABI_MESSAGE_UNICODE:
		if (ea->message.unicode) {
			a->msg_kind = CGBPF_NVTX_MSG_UNICODE;
			a->msg = to_utf8(ea->message.unicode, utf8, CGBPF_NVTX_UTF8_MAX);
		}
		break;
	case NVTXABI_MESSAGE_REGISTERED:
		if (ea->message.registered) {
			a->msg_kind = CGBPF_NVTX_MSG_REGISTERED;
			a->msg = ea->message.registered;
		}
		break;
	}
}

static void ascii_attrs(const char *msg, struct attrs *a)
{
	memset(a, 0, sizeof(*a));
	if (msg) {
		a->msg_kind = CGBPF_NVTX_MSG_ASCII;
		a->msg = msg;
	}
}

static void wide_attrs(const wchar_t *msg, struct attrs *a, char *utf8)
{
	memset(a, 0, sizeof(*a));
	if (msg) {
		a->msg_kind = CGBPF_NVTX_MSG_UNICODE;
		a->msg = to_utf8(msg, utf8, CGBPF_NVTX_UTF8_MAX);
	}
}

/* ------------------------------------------------------------ probes */

static void fire_push(const void *domain, const struct attrs *a)
{
	STAP_PROBE8(cgbpf_nvtx, push, domain, a->msg_kind, a->msg, a->color_type,
		    a->color, a->category, a->payload_type, a->payload);
}

static void fire_start(const void *domain, uint64_t id, const struct attrs *a)
{
	STAP_PROBE9(cgbpf_nvtx, start, domain, id, a->msg_kind, a->msg, a->color_type,
		    a->color, a->category, a->payload_type, a->payload);
}

static void fire_mark(const void *domain, const struct attrs *a)
{
	STAP_PROBE8(cgbpf_nvtx, mark, domain, a->msg_kind, a->msg, a->color_type,
		    a->color, a->category, a->payload_type, a->payload);
}

/* ------------------------------------------------------------ push/pop */

static int push_level(void)
{
	return push_depth++;
}

static int pop_level(void)
{
	if (push_depth <= 0)
		return -1;
	return --push_depth;
}

static int push_ex(const void *domain, const struct nvtxabi_event_attributes *ea)
{
	if (ENABLED(push)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		decode(ea, &a, utf8);
		fire_push(domain, &a);
	}
	return push_level();
}

static int range_push_ex(const struct nvtxabi_event_attributes *ea)
{
	return push_ex(NULL, ea);
}

static int domain_range_push_ex(const void *domain, const struct nvtxabi_event_attributes *ea)
{
	return push_ex(domain, ea);
}

static int range_push_a(const char *msg)
{
	if (ENABLED(push)) {
		struct attrs a;

		ascii_attrs(msg, &a);
		fire_push(NULL, &a);
	}
	return push_level();
}

static int range_push_w(const wchar_t *msg)
{
	if (ENABLED(push)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		wide_attrs(msg, &a, utf8);
		fire_push(NULL, &a);
	}
	return push_level();
}

static int range_pop(void)
{
	if (ENABLED(pop))
		STAP_PROBE1(cgbpf_nvtx, pop, (const void *)NULL);
	return pop_level();
}

static int domain_range_pop(const void *domain)
{
	if (ENABLED(pop))
		STAP_PROBE1(cgbpf_nvtx, pop, domain);
	return pop_level();
}

/* ------------------------------------------------------------ start/end */

static uint64_t new_range_id(void)
{
	return __atomic_fetch_add(&next_range_id, 1, __ATOMIC_RELAXED);
}

static uint64_t start_ex(const void *domain, const struct nvtxabi_event_attributes *ea)
{
	uint64_t id = new_range_id();

	if (ENABLED(start)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		decode(ea, &a, utf8);
		fire_start(domain, id, &a);
	}
	return id;
}

static uint64_t range_start_ex(const struct nvtxabi_event_attributes *ea)
{
	return start_ex(NULL, ea);
}

static uint64_t domain_range_start_ex(const void *domain, const struct nvtxabi_event_attributes *ea)
{
	return start_ex(domain, ea);
}

static uint64_t range_start_a(const char *msg)
{
	uint64_t id = new_range_id();

	if (ENABLED(start)) {
		struct attrs a;

		ascii_attrs(msg, &a);
		fire_start(NULL, id, &a);
	}
	return id;
}

static uint64_t range_start_w(const wchar_t *msg)
{
	uint64_t id = new_range_id();

	if (ENABLED(start)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		wide_attrs(msg, &a, utf8);
		fire_start(NULL, id, &a);
	}
	return id;
}

static void range_end(uint64_t id)
{
	if (ENABLED(end))
		STAP_PROBE2(cgbpf_nvtx, end, (const void *)NULL, id);
}

static void domain_range_end(const void *domain, uint64_t id)
{
	if (ENABLED(end))
		STAP_PROBE2(cgbpf_nvtx, end, domain, id);
}

/* ------------------------------------------------------------ marks */

static void mark_ex(const struct nvtxabi_event_attributes *ea)
{
	if (ENABLED(mark)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		decode(ea, &a, utf8);
		fire_mark(NULL, &a);
	}
}

static void domain_mark_ex(const void *domain, const struct nvtxabi_event_attributes *ea)
{
	if (ENABLED(mark)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		decode(ea, &a, utf8);
		fire_mark(domain, &a);
	}
}

static void mark_a(const char *msg)
{
	if (ENABLED(mark)) {
		struct attrs a;

		ascii_attrs(msg, &a);
		fire_mark(NULL, &a);
	}
}

static void mark_w(const wchar_t *msg)
{
	if (ENABLED(mark)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];
		struct attrs a;

		wide_attrs(msg, &a, utf8);
		fire_mark(NULL, &a);
	}
}

/* ------------------------------------------------------------ names */

static void name_category_a(uint32_t category, const char *name)
{
	if (ENABLED(name_category))
		STAP_PROBE3(cgbpf_nvtx, name_category, (const void *)NULL, (uint64_t)category,
			    name ? name : "");
}

static void name_category_w(uint32_t category, const wchar_t *name)
{
	if (ENABLED(name_category)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];

		STAP_PROBE3(cgbpf_nvtx, name_category, (const void *)NULL, (uint64_t)category,
			    to_utf8(name, utf8, sizeof(utf8)));
	}
}

static void domain_name_category_a(const void *domain, uint32_t category, const char *name)
{
	if (ENABLED(name_category))
		STAP_PROBE3(cgbpf_nvtx, name_category, domain, (uint64_t)category,
			    name ? name : "");
}

static void domain_name_category_w(const void *domain, uint32_t category, const wchar_t *name)
{
	if (ENABLED(name_category)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];

		STAP_PROBE3(cgbpf_nvtx, name_category, domain, (uint64_t)category,
			    to_utf8(name, utf8, sizeof(utf8)));
	}
}

static void name_os_thread_a(uint32_t tid, const char *name)
{
	if (ENABLED(name_thread))
		STAP_PROBE2(cgbpf_nvtx, name_thread, (uint64_t)tid, name ? name : "");
}

static void name_os_thread_w(uint32_t tid, const wchar_t *name)
{
	if (ENABLED(name_thread)) {
		char utf8[CGBPF_NVTX_UTF8_MAX];

		STAP_PROBE2(cgbpf_nvtx, name_thread, (uint64_t)tid, to_utf8(name, utf8, sizeof(utf8)));
	}
}

/* ------------------------------------------------------------ domains */

static struct domain *domain_of(const void *handle)
{
	return (struct domain *)((char *)handle - offsetof(struct domain, name));
}

/* Takes ownership of name (len bytes, NUL-terminated, malloc'd) and
 * returns the new domain's handle, or NULL when out of memory. */
static void *domain_create(char *name, size_t len)
{
	struct domain *d;

	if (!name)
		return NULL;
	d = malloc(sizeof(*d) + len + 1);
	if (!d) {
		free(name);
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->strings = NULL;
	memcpy(d->name, name, len + 1);
	free(name);
	if (ENABLED(domain_create))
		STAP_PROBE2(cgbpf_nvtx, domain_create, (const void *)d->name, (const char *)d->name);
	return d->name;
}

static void *domain_create_a(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	return domain_create(strndup(name ? name : "", len), len);
}

static void *domain_create_w(const wchar_t *name)
{
	size_t len = 0;
	char *utf8 = dup_utf8(name, &len);

	return domain_create(utf8, len);
}

static void domain_destroy(void *handle)
{
	struct domain *d;
	struct rstring *s, *next;

	if (!handle)
		return;
	if (ENABLED(domain_destroy))
		STAP_PROBE1(cgbpf_nvtx, domain_destroy, (const void *)handle);
	d = domain_of(handle);
	for (s = d->strings; s; s = next) {
		next = s->next;
		free(s);
	}
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* Takes ownership of str (len bytes + NUL, malloc'd); returns the handle of
 * a registered copy, or NULL when out of memory. */
static const void *register_string(const void *domain, char *str, size_t len)
{
	pthread_mutex_t *lock = &default_lock;
	struct rstring **head = &default_strings;
	struct rstring *s;

	if (!str)
		return NULL;
	s = malloc(sizeof(*s) + len + 1);
	if (!s) {
		free(str);
		return NULL;
	}
	memcpy(s->str, str, len + 1);
	free(str);
	if (domain) {
		struct domain *d = domain_of(domain);

		lock = &d->lock;
		head = &d->strings;
	}
	pthread_mutex_lock(lock);
	s->next = *head;
	*head = s;
	pthread_mutex_unlock(lock);
	if (ENABLED(register_string))
		STAP_PROBE3(cgbpf_nvtx, register_string, domain, (const void *)s->str,
			    (const char *)s->str);
	return s->str;
}

static const void *domain_register_string_a(const void *domain, const char *str)
{
	size_t len = str ? strlen(str) : 0;

	return register_string(domain, strndup(str ? str : "", len), len);
}

static const void *domain_register_string_w(const void *domain, const wchar_t *str)
{
	size_t len = 0;
	char *utf8 = dup_utf8(str, &len);

	return register_string(domain, utf8, len);
}

/* ------------------------------------------------------------ entry point */

/* Routes callback id of a module table of size entries to fn. */
static void route(nvtxabi_fnptr **table, unsigned int size, unsigned int id, void *fn)
{
	if (id < size && table[id])
		*table[id] = (nvtxabi_fnptr)fn;
}

/* Called by each NVTX instance in the process at its first NVTX call;
 * returns 1 (attached) or 0 (NVTX then turns every call into a no-op). */
EXPORT int InitializeInjectionNvtx2(nvtxabi_get_export_table get_export_table)
{
	const struct nvtxabi_etbl_callbacks *cb;
	const struct nvtxabi_etbl_version *ver;
	nvtxabi_fnptr **t = NULL;
	unsigned int n = 0;

	if (!get_export_table)
		return 0;
	cb = get_export_table(NVTXABI_ETID_CALLBACKS);
	if (!cb || cb->struct_size < sizeof(*cb) || !cb->get_module_function_table)
		return 0;
	ver = get_export_table(NVTXABI_ETID_VERSIONINFO);
	if (ver && ver->struct_size >= sizeof(*ver) && ver->set_injection_nvtx_version)
		ver->set_injection_nvtx_version(NVTXABI_VERSION);

	if (!cb->get_module_function_table(NVTXABI_MODULE_CORE, &t, &n) || !t)
		return 0;
	route(t, n, NVTXABI_CORE_MarkEx, mark_ex);
	route(t, n, NVTXABI_CORE_MarkA, mark_a);
	route(t, n, NVTXABI_CORE_MarkW, mark_w);
	route(t, n, NVTXABI_CORE_RangeStartEx, range_start_ex);
	route(t, n, NVTXABI_CORE_RangeStartA, range_start_a);
	route(t, n, NVTXABI_CORE_RangeStartW, range_start_w);
	route(t, n, NVTXABI_CORE_RangeEnd, range_end);
	route(t, n, NVTXABI_CORE_RangePushEx, range_push_ex);
	route(t, n, NVTXABI_CORE_RangePushA, range_push_a);
	route(t, n, NVTXABI_CORE_RangePushW, range_push_w);
	route(t, n, NVTXABI_CORE_RangePop, range_pop);
	route(t, n, NVTXABI_CORE_NameCategoryA, name_category_a);
	route(t, n, NVTXABI_CORE_NameCategoryW, name_category_w);
	route(t, n, NVTXABI_CORE_NameOsThreadA, name_os_thread_a);
	route(t, n, NVTXABI_CORE_NameOsThreadW, name_os_thread_w);

	/* Headers older than NVTX 2 have no CORE2 module: keep CORE. */
	t = NULL;
	n = 0;
	if (!cb->get_module_function_table(NVTXABI_MODULE_CORE2, &t, &n) || !t)
		return 1;
	route(t, n, NVTXABI_CORE2_DomainMarkEx, domain_mark_ex);
	route(t, n, NVTXABI_CORE2_DomainRangeStartEx, domain_range_start_ex);
	route(t, n, NVTXABI_CORE2_DomainRangeEnd, domain_range_end);
	route(t, n, NVTXABI_CORE2_DomainRangePushEx, domain_range_push_ex);
	route(t, n, NVTXABI_CORE2_DomainRangePop, domain_range_pop);
	route(t, n, NVTXABI_CORE2_DomainNameCategoryA, domain_name_category_a);
	route(t, n, NVTXABI_CORE2_DomainNameCategoryW, domain_name_category_w);
	route(t, n, NVTXABI_CORE2_DomainRegisterStringA, domain_register_string_a);
	route(t, n, NVTXABI_CORE2_DomainRegisterStringW, domain_register_string_w);
	route(t, n, NVTXABI_CORE2_DomainCreateA, domain_create_a);
	route(t, n, NVTXABI_CORE2_DomainCreateW, domain_create_w);
	route(t, n, NVTXABI_CORE2_DomainDestroy, domain_destroy);
	return 1;
}
