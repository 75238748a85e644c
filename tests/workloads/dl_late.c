/* SPDX-License-Identifier: MIT */
/*
 * dl_late: a program that does not link libcuda but dlopen()s it late, as
 * Python frameworks do, and calls it through dlsym()ed pointers.
 *
 * Usage: dl_late [--lib PATH] [--after-dlopen-ms MS] [--iters N] [--exit-file F]
 *        defaults: libcuda.so.1 (found through LD_LIBRARY_PATH), 300, 50
 *
 * --exit-file: after its last call (and the manifest) it waits for F to
 * exist (at most 30 s) before it exits, so a test can see what a tracer
 * does about it while it is still alive.
 *
 * Order: start gate (CGBPF_WAIT_FILE / CGBPF_START_DELAY_MS), dlopen, dlsym,
 * sleep MS, first CUDA call. The sleep is there because a tracer that only
 * attaches its uprobes once it sees libcuda.so.1 mapped needs some time
 * to do so; calls made before it has are simply not seen. That is true of
 * real programs too: this workload gives the tracer a fair window rather
 * than testing the race. Use --after-dlopen-ms 0 to test the race.
 *
 * Calls (exported names, as dlsym()ed): cuInit, cuDeviceGet,
 * cuCtxCreate_v2 (the pre-CUDA-13 three-argument form), cuModuleLoadData,
 * cuModuleGetFunction, cuMemAlloc_v2, cuGetProcAddress_v2 (for
 * "cuMemsetD8" at version 12000, which resolves to cuMemsetD8_v2), then
 * per iteration cuMemcpyHtoD_v2 (8192 bytes), cuLaunchKernel of
 * _Z8late_fwdPfi (grid 3,1,1, block 128,1,1, smem 0, NULL stream),
 * cuMemsetD8_v2 through the cuGetProcAddress pointer, cuMemcpyDtoH_v2
 * (8192 bytes, checked); then cuCtxSynchronize, cuMemFree_v2,
 * cuModuleUnload, cuCtxDestroy_v2.
 *
 * Manifest: the common fields, plus "lib" (the path given to dlopen),
 * "after_dlopen_ms", "iters" and "sigcont": how many SIGCONTs it got (a
 * tracer that stops a process to attach must continue it: this counts).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <signal.h>

#include "manifest.h"

#define K_LATE "_Z8late_fwdPfi"
#define BUF_BYTES 8192

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf dl_late";

/* name, parameter list: the exported functions this program looks up. */
#define DL_FUNCS(X) \
	X(cuInit, (unsigned int)) \
	X(cuDeviceGet, (CUdevice *, int)) \
	X(cuCtxCreate_v2, (CUcontext *, unsigned int, CUdevice)) \
	X(cuModuleLoadData, (CUmodule *, const void *)) \
	X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *)) \
	X(cuMemAlloc_v2, (CUdeviceptr *, size_t)) \
	X(cuGetProcAddress_v2, (const char *, void **, int, cuuint64_t, \
				CUdriverProcAddressQueryResult *)) \
	X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t)) \
	X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t)) \
	X(cuLaunchKernel, (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, \
			   unsigned int, unsigned int, unsigned int, CUstream, void **, void **)) \
	X(cuCtxSynchronize, (void)) \
	X(cuMemFree_v2, (CUdeviceptr)) \
	X(cuModuleUnload, (CUmodule)) \
	X(cuCtxDestroy_v2, (CUcontext))

#define DL_DECLARE(name, params) static CUresult(*p_##name) params;
DL_FUNCS(DL_DECLARE)
#undef DL_DECLARE

/* As CHECK, through the dlsym()ed pointer, counted under the looked-up name. */
#define DCHECK(fn, ...) ({ \
	CUresult dl_r_ = p_##fn(__VA_ARGS__); \
	wl_call(#fn, (int)dl_r_); \
	if (dl_r_ != CUDA_SUCCESS) \
		wl_die("%s failed: %d (%s:%d)", #fn, (int)dl_r_, __FILE__, __LINE__); \
})

static volatile sig_atomic_t sigconts;

static void on_sigcont(int sig)
{
	(void)sig;
	sigconts++;
}

struct opts {
	const char *lib;
	const char *exit_file;
	unsigned long after_ms;
	unsigned long iters;
};

static void write_extra(FILE *f, void *arg)
{
	struct opts *o = arg;

	fputs(",\n  \"lib\": ", f);
	wl_json_str(f, o->lib);
	fprintf(f, ",\n  \"after_dlopen_ms\": %lu,\n  \"iters\": %lu,\n  \"sigcont\": %d",
		o->after_ms, o->iters, (int)sigconts);
}

int main(int argc, char **argv)
{
	struct opts o = { "libcuda.so.1", NULL, 300, 50 };
	CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
	CUdriverProcAddressQueryResult status;
	unsigned char host[BUF_BYTES], back[BUF_BYTES];
	struct timespec ts;
	CUfunction fn;
	CUdeviceptr d;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	void *lib, *sym;
	int n = BUF_BYTES;
	void *args[] = { &d, &n };
	struct sigaction sa = { .sa_handler = on_sigcont, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCONT, &sa, NULL))
		wl_die("sigaction: %s", strerror(errno));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			o.lib = argv[++i];
		else if (!strncmp(argv[i], "--lib=", 6))
			o.lib = argv[i] + 6;
		else if (!strcmp(argv[i], "--exit-file") && i + 1 < argc)
			o.exit_file = argv[++i];
		else if (!wl_arg_ul(argc, argv, &i, "--after-dlopen-ms", &o.after_ms) &&
			 !wl_arg_ul(argc, argv, &i, "--iters", &o.iters))
			wl_die("usage: dl_late [--lib PATH] [--after-dlopen-ms MS] [--iters N] "
			       "[--exit-file F]");
	}

	wl_gate();

	if (!(lib = dlopen(o.lib, RTLD_NOW | RTLD_LOCAL)))
		wl_die("dlopen %s: %s", o.lib, dlerror());
#define DL_LOOKUP(name, params) \
	if (!(sym = dlsym(lib, #name))) \
		wl_die("dlsym %s: %s", #name, dlerror()); \
	memcpy(&p_##name, &sym, sizeof(sym));
	DL_FUNCS(DL_LOOKUP)
#undef DL_LOOKUP

	ts.tv_sec = (time_t)(o.after_ms / 1000);
	ts.tv_nsec = (long)(o.after_ms % 1000) * 1000000;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;

	DCHECK(cuInit, 0);
	DCHECK(cuDeviceGet, &dev, 0);
	DCHECK(cuCtxCreate_v2, &ctx, 0, dev);
	DCHECK(cuModuleLoadData, &mod, module_image);
	DCHECK(cuModuleGetFunction, &fn, mod, K_LATE);
	DCHECK(cuMemAlloc_v2, &d, BUF_BYTES);
	wl_dev_alloc(BUF_BYTES);
	DCHECK(cuGetProcAddress_v2, "cuMemsetD8", &sym, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
	       &status);
	memcpy(&memset_d8, &sym, sizeof(sym));

	for (unsigned long i = 0; i < o.iters; i++) {
		unsigned char v = (unsigned char)(i * 7 + 1);
		CUresult r;

		memset(host, (int)i, sizeof(host));
		DCHECK(cuMemcpyHtoD_v2, d, host, sizeof(host));
		wl_bytes(WL_HTOD, sizeof(host));
		DCHECK(cuLaunchKernel, fn, 3, 1, 1, 128, 1, 1, 0, NULL, args, NULL);
		wl_kernel(K_LATE, 1);
		r = memset_d8(d, v, sizeof(host));
		wl_call("cuMemsetD8_v2", (int)r);
		if (r != CUDA_SUCCESS)
			wl_die("cuMemsetD8_v2 failed: %d", (int)r);
		wl_bytes(WL_MEMSET, sizeof(host));
		DCHECK(cuMemcpyDtoH_v2, back, d, sizeof(back));
		wl_bytes(WL_DTOH, sizeof(back));
		if (back[0] != v || back[sizeof(back) - 1] != v)
			wl_die("iteration %lu: read back 0x%x, expected 0x%x", i, back[0], v);
	}

	DCHECK(cuCtxSynchronize);
	DCHECK(cuMemFree_v2, d);
	wl_dev_free(BUF_BYTES);
	DCHECK(cuModuleUnload, mod);
	DCHECK(cuCtxDestroy_v2, ctx);

	wl_manifest_write(write_extra, &o);
	if (o.exit_file) {
		struct timespec ms = { 0, 1000000 };
		int i;

		for (i = 0; i < 30000 && access(o.exit_file, F_OK) != 0; i++)
			nanosleep(&ms, NULL);
	}
	return 0;
}
