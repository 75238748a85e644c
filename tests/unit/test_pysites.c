// SPDX-License-Identifier: MIT
/* user/sources/python/pysites.c: the monitor's Python call-site table: top N by time,
 * the rest and evicted sites in "other", totals kept, the per-process
 * bound, label escaping, processes forgotten after two sweeps. */
#include <stdlib.h>
#include <string.h>
#include "sources/python/pysites.h"
#include "tap.h"
#include "sources/sources.h"

static char *text;
static size_t tlen;

static void out(void *ctx, const char *line)
{
	size_t n = strlen(line);

	(void)ctx;
	text = realloc(text, tlen + n + 1);
	memcpy(text + tlen, line, n + 1);
	tlen += n;
}

static void comm(void *ctx, uint32_t pid, char *buf, size_t len)
{
	(void)ctx;
	snprintf(buf, len, "p%u", pid);
}

static void render(struct pysites *ps)
{
	free(text);
	text = NULL;
	tlen = 0;
	pysites__render(ps, out, comm, NULL);
}

/* The value of the line that starts with prefix, -1 if none. */
static double value(const char *prefix)
{
	for (const char *p = text; p && (p = strstr(p, prefix)); p++)
		if (p == text || p[-1] == '\n')
			return strtod(p + strlen(prefix), NULL);
	return -1;
}

static int count(const char *s)
{
	int n = 0;

	for (const char *p = text; p && (p = strstr(p, s)); p += strlen(s))
		n++;
	return n;
}

static bool alive_none(uint32_t pid)
{
	(void)pid;
	return false;
}

static bool alive_all(uint32_t pid)
{
	(void)pid;
	return true;
}

int main(void)
{
	sources__init();
	struct pysites *ps = pysites__new(2);
	char site[64];
	uint64_t calls = 0;

	check(ps != NULL, "new");
	check(pysites__cap(2) == PYSITES_CAP_MIN && pysites__cap(50) == 400 &&
	      pysites__cap(100) == 800 && pysites__cap(1000) == PYSITES_CAP_MAX, "cap: 8N in [64, 1024]");
	pysites__add(ps, 7, "/a.py:1 f", 10, 1000);
	pysites__add(ps, 7, "/a.py:2 g", 5, 3000);
	pysites__add(ps, 7, "/a.py:3 h", 1, 10);
	pysites__add(ps, 7, "/a.py:1 f", 10, 1000);
	pysites__add(ps, 7, NULL, 4, 40);
	render(ps);
	check(value("cgbpf_python_site_calls_total{pid=\"7\",comm=\"p7\",site=\"/a.py:2 g\"}") == 5,
	      "g named (most time)");
	check(value("cgbpf_python_site_calls_total{pid=\"7\",comm=\"p7\",site=\"/a.py:1 f\"}") == 20,
	      "f named, counts added");
	check(value("cgbpf_python_site_calls_total{pid=\"7\",comm=\"p7\",site=\"/a.py:3 h\"}") == -1,
	      "h not named (third)");
	check(value("cgbpf_python_site_calls_total{pid=\"7\",comm=\"p7\",site=\"other\"}") == 5,
	      "other: h and the unknown site");
	check(value("cgbpf_python_site_seconds_total{pid=\"7\",comm=\"p7\",site=\"other\"}") == 50e-9,
	      "other's time");
	check(value("cgbpf_python_sites_tracked{pid=\"7\",comm=\"p7\"}") == 3, "3 sites tracked");
	/* Past the bound: the least time goes, totals stay. */
	for (int i = 0; i < 200; i++) {
		snprintf(site, sizeof(site), "/b.py:%d k", i);
		pysites__add(ps, 8, site, 1, 100 + i);
		calls++;
	}
	render(ps);
	check(value("cgbpf_python_sites_tracked{pid=\"8\",comm=\"p8\"}") == PYSITES_CAP_MIN,
	      "tracked at the bound");
	check(value("cgbpf_python_sites_evicted_total") == 200 - PYSITES_CAP_MIN, "evictions counted");
	check(value("cgbpf_python_site_calls_total{pid=\"8\",comm=\"p8\",site=\"/b.py:199 k\"}") == 1 &&
	      value("cgbpf_python_site_calls_total{pid=\"8\",comm=\"p8\",site=\"/b.py:198 k\"}") == 1,
	      "the two of most time named");
	check(value("cgbpf_python_site_calls_total{pid=\"8\",comm=\"p8\",site=\"other\"}") ==
	      (double)calls - 2, "other holds the evicted and the unnamed");
	check(count("pid=\"8\"") == 2 * 3 + 1, "N + 1 series per metric, one tracked gauge");
	/* Label escaping. */
	pysites__add(ps, 9, "/x\"y\\z\n.py:1 f", 1, 1);
	render(ps);
	check(strstr(text, "site=\"/x\\\"y\\\\z\\n.py:1 f\"") != NULL, "label escaped");
	/* Forgotten at the second sweep that finds them gone. */
	pysites__sweep(ps, alive_all);
	pysites__sweep(ps, alive_none);
	render(ps);
	check(count("pid=\"7\"") > 0, "kept one sweep after its exit");
	pysites__sweep(ps, alive_none);
	render(ps);
	check(count("pid=") == 0, "gone at the second");
	check(value("cgbpf_python_sites_evicted_total") == 200 - PYSITES_CAP_MIN,
	      "evictions of forgotten processes still counted");
	pysites__free(ps);
	pysites__free(NULL);
	free(text);
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
