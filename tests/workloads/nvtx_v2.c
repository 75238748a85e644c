/* SPDX-License-Identifier: MIT */
/*
 * nvtx_v2: a legacy NVTX v2 program linked against libnvToolsExt.so.1
 * (the fake in tests/fake). In order, on the main thread:
 *   nvtxNameOsThreadA(tid, "v2-main"); push A "v2-outer"; push W
 *   "v2-wide-é"; mark A "v2-mark"; pop; pop; pushEx {"v2-attr", ARGB
 *   0xff00ff00, category 5, i64 payload -7}; pop; start A "v2-range" ..
 *   end; startEx {W "v2-wide-range", u64 payload 11} .. end;
 *   domain "v2-dom": domain pushEx {"v2-dom-push"}; domain pop; domain
 *   markEx {"v2-dom-mark"}; domain startEx {"v2-dom-range"} .. domain end.
 * Prints {"pid": N, "main_tid": T} at the end, then lives 300 ms more:
 * strings whose page the program never touched (literals only passed to
 * NVTX) are read by cgbpf from the live process, as in a real job.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "nvtx_v2.h"

static nvtxEventAttributes_t attr(void)
{
	nvtxEventAttributes_t a;

	memset(&a, 0, sizeof(a));
	a.version = 2;
	a.size = sizeof(a);
	return a;
}

int main(void)
{
	nvtxEventAttributes_t a;
	nvtxRangeId_t id;
	nvtxDomainHandle_t d;

	nvtxNameOsThreadA((uint32_t)gettid(), "v2-main");
	nvtxRangePushA("v2-outer");
	nvtxRangePushW(L"v2-wide-\u00e9");
	nvtxMarkA("v2-mark");
	nvtxRangePop();
	nvtxRangePop();
	a = attr();
	a.messageType = 1;
	a.message.ascii = "v2-attr";
	a.colorType = 1;
	a.color = 0xff00ff00;
	a.category = 5;
	a.payloadType = 2;
	a.payload.llValue = -7;
	nvtxRangePushEx(&a);
	nvtxRangePop();
	id = nvtxRangeStartA("v2-range");
	nvtxRangeEnd(id);
	a = attr();
	a.messageType = 2;
	a.message.unicode = L"v2-wide-range";
	a.payloadType = 1;
	a.payload.ullValue = 11;
	id = nvtxRangeStartEx(&a);
	nvtxRangeEnd(id);
	d = nvtxDomainCreateA("v2-dom");
	a = attr();
	a.messageType = 1;
	a.message.ascii = "v2-dom-push";
	nvtxDomainRangePushEx(d, &a);
	nvtxDomainRangePop(d);
	a.message.ascii = "v2-dom-mark";
	nvtxDomainMarkEx(d, &a);
	a.message.ascii = "v2-dom-range";
	id = nvtxDomainRangeStartEx(d, &a);
	nvtxDomainRangeEnd(d, id);
	nvtxDomainDestroy(d);
	printf("{\"pid\": %d, \"main_tid\": %d}\n", getpid(), gettid());
	fflush(stdout);
	usleep(300000);
	return 0;
}
