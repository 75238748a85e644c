// SPDX-License-Identifier: MIT
// kernels: known GPU work for tests/gpu (run.sh builds it with nvcc on a GPU
// host, records it, and tests/gpu/check.py compares the trace with the
// manifest this program writes).
//
// Setup (before the pause, so cgbpf's collection has started before any
// checked operation): CUDA initialized, one k_warmup launch (not checked),
// two non-blocking streams s1 and s2, buffers (device, pinned host), a CUDA
// graph built node by node (no stream capture, so no launch call ever queues
// nothing) holding k_graph_a -> k_graph_b -> k_graph_c, instantiated.
//
// Then, after CGBPF_PAUSE_FILE (see pause()): kernels on the legacy default
// stream, s1 and s2 with distinct names and known launch configurations,
// copies HtoD/DtoH/DtoD (pinned, one DMA each) and memsets of known sizes,
// the graph launched on s2, stream and device synchronizations. Every
// number below is what the manifest says and check.py expects.
//
// Manifest (CGBPF_MANIFEST=path): {"program": "kernels", "pid", "device",
// "gpu": {"streams", "launches", "graphs", "copies", "memsets", "syncs",
// "unchecked_kernels", "checked_from_ns", "checked_until_ns"}}
// (tests/gpu/README.md describes the fields).
//
// kernels --windows: capture windows instead (run.sh records it with
// --capture-range cudaProfilerApi --capture-range-end repeat). After the
// pause, WINDOWS times: 2 k_out on s1 and a synchronization (outside), then
// cudaProfilerStart, IN_PER_WINDOW k_in on s1, one k_spin that runs
// SPIN_NS on the GPU, and cudaProfilerStop at once, while k_spin still
// runs; then the stream is synchronized and the program sleeps GAP_MS
// (outside). Manifest: {"program": "windows", "pid", "device", "spin_ns",
// "names": {"in", "spin", "out"} (the kernels' names), "windows": [{"in",
// "spin" (launches), "from_ns", "until_ns"}], "outside": launches of out}.
#include <cuda_profiler_api.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

#define CK(call) ck((call), #call, __LINE__)

static void ck(cudaError_t e, const char *what, int line)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "kernels: %s failed at line %d: %s (%s)\n", what, line,
			cudaGetErrorName(e), cudaGetErrorString(e));
		exit(1);
	}
}

extern "C" __global__ void k_warmup(int *p)
{
	if (threadIdx.x == 0)
		*p = 1;
}

extern "C" __global__ void k_default_fill(float *x, float v, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] = v;
}

// Uses its dynamic shared memory (the launch gives 3072 bytes).
extern "C" __global__ void k_s1_axpy(float *y, const float *x, float a, int n)
{
	extern __shared__ float stage[];
	int stride = gridDim.x * gridDim.y * blockDim.x;
	int first = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;

	for (int i = first; i < n; i += stride) {
		stage[threadIdx.x] = x[i];
		y[i] += a * stage[threadIdx.x];
	}
}

// 1024 bytes of static shared memory.
extern "C" __global__ void k_s2_reduce(const float *x, float *out, int n)
{
	__shared__ float part[256];
	float s = 0;

	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		s += x[i];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			part[threadIdx.x] += part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = part[0];
}

// A C++ template in a namespace: the trace shows it demangled.
namespace cgbpf_gpu {
template <typename T> __global__ void scale(T *x, T a, int n)
{
	extern __shared__ unsigned char pad[];
	int per = blockDim.x * blockDim.y;
	int b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
	int stride = per * gridDim.x * gridDim.y * gridDim.z;

	if (threadIdx.x == 0 && threadIdx.y == 0)
		pad[0] = 1;
	for (int i = b * per + threadIdx.y * blockDim.x + threadIdx.x; i < n; i += stride)
		x[i] *= a;
}
template __global__ void scale<float>(float *, float, int);
}

extern "C" __global__ void k_graph_a(float *x, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] += 1.0f;
}

extern "C" __global__ void k_graph_b(float *x, int n)
{
	extern __shared__ float t[];

	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		t[threadIdx.x] = x[i];
		x[i] = t[threadIdx.x] * 2.0f;
	}
}

extern "C" __global__ void k_graph_c(float *x, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] -= 0.5f;
}

// Spins until ns have passed on the GPU's global timer.
extern "C" __global__ void k_spin(unsigned long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}

extern "C" __global__ void k_in(float *x, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] += 1.0f;
}

extern "C" __global__ void k_out(float *x, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		x[i] -= 1.0f;
}

enum { N = 1 << 20 };			// floats per device buffer (4 MiB)

struct launch {
	const char *name, *stream;
	dim3 grid, block;
	unsigned smem;
	int count;
};

// The checked launches (counts are filled in as they are made).
static launch L_FILL = { "k_default_fill", "default", dim3(64, 1, 1), dim3(128, 1, 1), 0, 0 };
static launch L_AXPY = { "k_s1_axpy", "s1", dim3(32, 2, 1), dim3(256, 1, 1), 3072, 0 };
static launch L_REDUCE = { "k_s2_reduce", "s2", dim3(16, 1, 1), dim3(256, 1, 1), 0, 0 };
static launch L_SCALE = { "cgbpf_gpu::scale<float>", "s2", dim3(8, 4, 2), dim3(32, 4, 1), 512, 0 };
static launch *const launches[] = { &L_FILL, &L_AXPY, &L_REDUCE, &L_SCALE };

static launch G_A = { "k_graph_a", "s2", dim3(4, 1, 1), dim3(64, 1, 1), 0, 0 };
static launch G_B = { "k_graph_b", "s2", dim3(4, 1, 1), dim3(64, 1, 1), 256, 0 };
static launch G_C = { "k_graph_c", "s2", dim3(4, 1, 1), dim3(64, 1, 1), 0, 0 };
static launch *const graph_nodes[] = { &G_A, &G_B, &G_C };

struct op {
	const char *kind, *stream;
	size_t bytes;
	int count;
};

static op copies[] = {
	{ "HtoD", "s1", 4u << 20, 0 },
	{ "DtoH", "s2", 1u << 20, 0 },
	{ "DtoD", "default", 2u << 20, 0 },
	{ "HtoD", "default", 65536, 0 },	// the synchronous cudaMemcpy
};
static op memsets[] = {
	{ "memset", "s1", 1u << 20, 0 },
	{ "memset", "default", 4096, 0 },	// the synchronous cudaMemset
};
static int graph_launches, stream_syncs, device_syncs;
static unsigned long long t_from, t_until;	// the checked part, CLOCK_BOOTTIME

static unsigned long long boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

// CGBPF_PAUSE_FILE set: creates "<it>.ready" once the setup is done, then
// waits (at most 120 s) for the file itself, so the recording script starts
// the checked part once cgbpf's GPU collection is known to run.
static void pause_point(void)
{
	const char *file = getenv("CGBPF_PAUSE_FILE");
	char ready[4096];
	struct timespec ms = { 0, 1000000 };
	int fd, i;

	if (!file || !*file)
		return;
	snprintf(ready, sizeof(ready), "%s.ready", file);
	fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "kernels: cannot create %s: %s\n", ready, strerror(errno));
		exit(1);
	}
	close(fd);
	for (i = 0; i < 120000 && access(file, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	if (i == 120000) {
		fprintf(stderr, "kernels: %s did not appear within 120 s\n", file);
		exit(1);
	}
}

static void put_dim(FILE *f, const char *key, dim3 d)
{
	fprintf(f, "\"%s\": [%u, %u, %u]", key, d.x, d.y, d.z);
}

static void put_launch(FILE *f, const launch *l, bool last)
{
	fprintf(f, "      {\"name\": \"%s\", \"stream\": \"%s\", ", l->name, l->stream);
	put_dim(f, "grid", l->grid);
	fprintf(f, ", ");
	put_dim(f, "block", l->block);
	fprintf(f, ", \"shared_dynamic\": %u", l->smem);
	if (l == &L_REDUCE)
		fprintf(f, ", \"shared_static_min\": 1024");
	fprintf(f, ", \"count\": %d}%s\n", l->count, last ? "" : ",");
}

static void put_ops(FILE *f, const char *key, const op *v, size_t n, bool last)
{
	fprintf(f, "    \"%s\": [\n", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "      {\"kind\": \"%s\", \"stream\": \"%s\", \"bytes\": %zu, \"count\": %d}%s\n",
			v[i].kind, v[i].stream, v[i].bytes, v[i].count, i + 1 < n ? "," : "");
	fprintf(f, "    ]%s\n", last ? "" : ",");
}

static void write_manifest(const cudaDeviceProp &prop)
{
	const char *path = getenv("CGBPF_MANIFEST");
	char tmp[4096];
	FILE *f;
	int rt = 0, drv = 0;

	if (!path || !*path)
		return;
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "kernels: cannot write %s: %s\n", tmp, strerror(errno));
		exit(1);
	}
	fprintf(f, "{\n  \"program\": \"kernels\",\n  \"pid\": %d,\n", (int)getpid());
	fprintf(f, "  \"device\": \"%s\",\n  \"runtime_version\": %d,\n  \"driver_version\": %d,\n",
		prop.name, rt, drv);
	fprintf(f, "  \"gpu\": {\n    \"streams\": [\"default\", \"s1\", \"s2\"],\n");
	fprintf(f, "    \"launches\": [\n");
	for (size_t i = 0; i < sizeof(launches) / sizeof(launches[0]); i++)
		put_launch(f, launches[i], i + 1 == sizeof(launches) / sizeof(launches[0]));
	fprintf(f, "    ],\n    \"graphs\": [\n      {\"stream\": \"s2\", \"launches\": %d, "
		"\"kernels\": [\n", graph_launches);
	for (size_t i = 0; i < 3; i++)
		put_launch(f, graph_nodes[i], i == 2);
	fprintf(f, "      ]}\n    ],\n");
	put_ops(f, "copies", copies, sizeof(copies) / sizeof(copies[0]), false);
	put_ops(f, "memsets", memsets, sizeof(memsets) / sizeof(memsets[0]), false);
	fprintf(f, "    \"syncs\": {\"stream\": %d, \"device\": %d},\n", stream_syncs,
		device_syncs);
	fprintf(f, "    \"unchecked_kernels\": [\"k_warmup\"],\n");
	fprintf(f, "    \"checked_from_ns\": %llu,\n    \"checked_until_ns\": %llu\n  }\n}\n",
		t_from, t_until);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "kernels: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static void go(launch *l, cudaStream_t s, void **args, const void *fn)
{
	CK(cudaLaunchKernel(fn, l->grid, l->block, args, l->smem, s));
	l->count++;
}

enum { WINDOWS = 3, IN_PER_WINDOW = 5, GAP_MS = 600 };
static const unsigned long long SPIN_NS = 50000000;	// 50 ms

// The --windows program (see the top).
static int windows(const cudaDeviceProp &prop)
{
	unsigned long long from[WINDOWS], until[WINDOWS];
	const char *path = getenv("CGBPF_MANIFEST");
	struct timespec gap = { GAP_MS / 1000, (GAP_MS % 1000) * 1000000L };
	cudaStream_t s;
	float *d;
	int n = 4096, outside = 0;
	FILE *f;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&d, n * sizeof(float)));
	pause_point();
	for (int w = 0; w < WINDOWS; w++) {
		for (int i = 0; i < 2; i++, outside++)
			k_out<<<4, 128, 0, s>>>(d, n);
		CK(cudaGetLastError());
		CK(cudaStreamSynchronize(s));
		from[w] = boottime_ns();
		CK(cudaProfilerStart());
		for (int i = 0; i < IN_PER_WINDOW; i++)
			k_in<<<4, 128, 0, s>>>(d, n);
		k_spin<<<1, 32, 0, s>>>(SPIN_NS);
		CK(cudaGetLastError());
		CK(cudaProfilerStop());
		until[w] = boottime_ns();
		CK(cudaStreamSynchronize(s));
		nanosleep(&gap, NULL);
	}
	CK(cudaFree(d));
	CK(cudaStreamDestroy(s));
	if (!path || !*path)
		return 0;
	if (!(f = fopen(path, "w"))) {
		fprintf(stderr, "kernels: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(f, "{\"program\": \"windows\", \"pid\": %d, \"device\": \"%s\", "
		"\"spin_ns\": %llu, \"names\": {\"in\": \"k_in\", \"spin\": \"k_spin\", "
		"\"out\": \"k_out\"}, \"windows\": [", (int)getpid(), prop.name, SPIN_NS);
	for (int w = 0; w < WINDOWS; w++)
		fprintf(f, "%s{\"in\": %d, \"spin\": 1, \"from_ns\": %llu, \"until_ns\": %llu}",
			w ? ", " : "", IN_PER_WINDOW, from[w], until[w]);
	fprintf(f, "], \"outside\": %d}\n", outside);
	if (fclose(f) != 0) {
		fprintf(stderr, "kernels: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	printf("kernels --windows: done on %s\n", prop.name);
	return 0;
}

int main(int argc, char **argv)
{
	cudaStream_t s1, s2;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	cudaGraphNode_t nodes[3];
	cudaDeviceProp prop;
	float *d_a, *d_b, *d_c, *d_red, *h_in, *h_out;
	int *d_flag, n = N;
	float v = 1.0f, a = 0.5f, two = 2.0f;

	CK(cudaSetDevice(0));
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaMalloc(&d_flag, sizeof(int)));
	k_warmup<<<1, 32>>>(d_flag);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	if (argc > 1 && !strcmp(argv[1], "--windows"))
		return windows(prop);

	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaMalloc(&d_a, N * sizeof(float)));
	CK(cudaMalloc(&d_b, N * sizeof(float)));
	CK(cudaMalloc(&d_c, N * sizeof(float)));
	CK(cudaMalloc(&d_red, 1024 * sizeof(float)));
	CK(cudaMallocHost(&h_in, N * sizeof(float)));
	CK(cudaMallocHost(&h_out, N * sizeof(float)));
	for (int i = 0; i < N; i++)
		h_in[i] = (float)(i & 1023);

	// The graph, node by node: a -> b -> c on d_c.
	void *gargs[] = { &d_c, &n };
	CK(cudaGraphCreate(&graph, 0));
	for (int i = 0; i < 3; i++) {
		static const void *const fns[] = { (const void *)k_graph_a, (const void *)k_graph_b,
						   (const void *)k_graph_c };
		cudaKernelNodeParams p = {};

		p.func = (void *)fns[i];
		p.gridDim = graph_nodes[i]->grid;
		p.blockDim = graph_nodes[i]->block;
		p.sharedMemBytes = graph_nodes[i]->smem;
		p.kernelParams = gargs;
		CK(cudaGraphAddKernelNode(&nodes[i], graph, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &p));
	}
	CK(cudaGraphInstantiate(&exec, graph, 0));

	pause_point();

	// The checked part.
	t_from = boottime_ns();
	CK(cudaMemcpy(d_a, h_in, copies[3].bytes, cudaMemcpyHostToDevice));
	copies[3].count++;
	CK(cudaMemset(d_red, 0, memsets[1].bytes));
	memsets[1].count++;
	void *fill_args[] = { &d_b, &v, &n };
	void *axpy_args[] = { &d_a, &d_b, &a, &n };
	void *red_args[] = { &d_a, &d_red, &n };
	void *scale_args[] = { &d_b, &two, &n };
	for (int it = 0; it < 8; it++) {
		if (it < 3) {
			CK(cudaMemcpyAsync(d_a, h_in, copies[0].bytes, cudaMemcpyHostToDevice, s1));
			copies[0].count++;
			CK(cudaMemsetAsync(d_c, 0, memsets[0].bytes, s1));
			memsets[0].count++;
		}
		if (it < 5)
			go(&L_FILL, 0, fill_args, (const void *)k_default_fill);
		go(&L_AXPY, s1, axpy_args, (const void *)k_s1_axpy);
		if (it < 6)
			go(&L_REDUCE, s2, red_args, (const void *)k_s2_reduce);
		if (it < 4)
			go(&L_SCALE, s2, scale_args, (const void *)cgbpf_gpu::scale<float>);
		if (it < 2) {
			CK(cudaMemcpyAsync(h_out, d_b, copies[1].bytes, cudaMemcpyDeviceToHost, s2));
			copies[1].count++;
			CK(cudaMemcpyAsync(d_c, d_a, copies[2].bytes, cudaMemcpyDeviceToDevice, 0));
			copies[2].count++;
		}
		if (it % 3 == 0) {
			CK(cudaGraphLaunch(exec, s2));
			graph_launches++;
		}
		if (it % 4 == 3) {
			CK(cudaStreamSynchronize(s1));
			CK(cudaStreamSynchronize(s2));
			stream_syncs += 2;
		}
	}
	CK(cudaDeviceSynchronize());
	device_syncs++;
	t_until = boottime_ns();
	for (int i = 0; i < 3; i++)
		graph_nodes[i]->count = graph_launches;

	write_manifest(prop);

	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	CK(cudaFreeHost(h_in));
	CK(cudaFreeHost(h_out));
	CK(cudaFree(d_a));
	CK(cudaFree(d_b));
	CK(cudaFree(d_c));
	CK(cudaFree(d_red));
	CK(cudaFree(d_flag));
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	printf("kernels: done on %s\n", prop.name);
	return 0;
}
