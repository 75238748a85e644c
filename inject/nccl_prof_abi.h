/* SPDX-License-Identifier: MIT */
/*
 * The binary interface of NCCL's profiler plugin, versions 5 (NCCL
 * 2.28; 2.29 adds v6 and still takes v5) and 4 (NCCL 2.27), typed here from the facts in
 * NCCL's public ext-profiler headers (profiler.h, profiler_v5.h,
 * common.h, err.h) and its loader (src/plugin/profiler.cc) so that the
 * injection library and the test fake build without NCCL's sources.
 *
 * Loading: at a communicator's init NCCL dlopens NCCL_PROFILER_PLUGIN (a
 * path, or NAME for libnccl-profiler-NAME.so), looks up the newest
 * version it knows (ncclProfiler_v6, then _v5, _v4, _v3, _v2, _v1: 2.28.9
 * looks up v5, v4, v3 and v1) and calls init once per communicator with
 * a pointer to its one process-wide event mask. NCCL reads that mask at
 * every API call (relaxed): a plugin may change it at any time, and 0
 * costs NCCL one load and a branch per call.
 *
 * Event nesting as NCCL 2.28 calls them: Coll and P2p (the tasks of one
 * launch, on the calling thread; parentObj: the CollApi/P2pApi event, or
 * NULL when those are off) start before the kernel launch and stop after
 * it; ProxyOp (the proxy thread; parentObj: the task's handle) and
 * KernelCh (the proxy thread; parentObj: the task's handle; pTimer: the
 * GPU's %globaltimer at the channel's start, then at its end through
 * recordEventState(KernelChStop)) come later, often after the task
 * stopped; ProxyStep (parentObj: the ProxyOp's handle) inside ProxyOp.
 */
#ifndef CGBPF_NCCL_PROF_ABI_H
#define CGBPF_NCCL_PROF_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ncclResult_t, as the plugin returns it (err.h). */
typedef enum {
	NPA_SUCCESS = 0,
	NPA_INTERNAL_ERROR = 3,
	NPA_INVALID_ARGUMENT = 4,
} npa_result_t;

/* Event types: bits of the activation mask and eDescr->type. */
enum {
	NPA_GROUP = 1 << 0,
	NPA_COLL = 1 << 1,
	NPA_P2P = 1 << 2,
	NPA_PROXY_OP = 1 << 3,
	NPA_PROXY_STEP = 1 << 4,
	NPA_PROXY_CTRL = 1 << 5,
	NPA_KERNEL_CH = 1 << 6,
	NPA_NET_PLUGIN = 1 << 7,
	NPA_GROUP_API = 1 << 8,
	NPA_COLL_API = 1 << 9,
	NPA_P2P_API = 1 << 10,
	NPA_KERNEL_LAUNCH = 1 << 11,
};

/* ncclProfilerEventState_t: the values the library looks at. */
enum {
	NPA_STEP_SEND_GPU_WAIT = 8,
	NPA_STEP_SEND_WAIT = 9,
	NPA_STEP_RECV_WAIT = 10,
	NPA_STEP_RECV_FLUSH_WAIT = 11,
	NPA_STEP_RECV_GPU_WAIT = 12,
	NPA_STEP_SEND_PEER_WAIT = 20,
	NPA_KERNEL_CH_STOP = 22,
};

/* ncclDebugLogger_t */
typedef void (*npa_logger_t)(int level, unsigned long flags, const char *file, int line,
			     const char *fmt, ...);

/* ncclProfilerEventDescr_v5_t */
struct npa_descr_v5 {
	uint64_t type;
	void *parent;		/* parentObj */
	int rank;
	union {
		struct {
			int graph_captured;
			int group_depth;
		} group_api;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			bool graph_captured;
		} coll_api;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			bool graph_captured;
		} p2p_api;
		struct {
			void *stream;
		} kernel_launch;
		struct {
			uint64_t seq;	/* seqNumber: per communicator and function */
			const char *func;
			const void *send_buff;
			void *recv_buff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nchannels;
			uint8_t nwarps;
			const char *algo;
			const char *proto;
			void *parent_group;
		} coll;
		struct {
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
			uint8_t nchannels;
			void *parent_group;
		} p2p;
		struct {
			pid_t pid;
			uint8_t channel;
			int peer;
			int nsteps;
			int chunk_size;
			int is_send;
		} proxy_op;
		struct {
			int step;
		} proxy_step;
		struct {
			uint8_t channel;
			uint64_t ptimer;
		} kernel_ch;
		struct {
			int64_t id;
			void *data;
		} net_plugin;
	};
};

/* ncclProfilerEventStateArgs_v5_t */
union npa_state_args_v5 {
	struct {
		size_t trans_size;
	} proxy_step;
	struct {
		int appended_proxy_ops;
	} proxy_ctrl;
	struct {
		void *data;
	} net_plugin;
	struct {
		uint64_t ptimer;
	} kernel_ch;
};

/* ncclProfiler_v5_t, exported as the symbol ncclProfiler_v5. */
struct npa_profiler_v5 {
	const char *name;
	npa_result_t (*init)(void **context, uint64_t comm_id, int *mask, const char *comm_name,
			     int nnodes, int nranks, int rank, npa_logger_t log);
	npa_result_t (*start_event)(void *context, void **handle, struct npa_descr_v5 *d);
	npa_result_t (*stop_event)(void *handle);
	npa_result_t (*record_event_state)(void *handle, int state, union npa_state_args_v5 *a);
	npa_result_t (*finalize)(void *context);
};

/*
 * Version 4 (NCCL 2.27): the same but for three things. init takes the
 * communicator's name before its hash and the mask second; the
 * descriptor's type is one byte (then padding to the pointer); its coll
 * and p2p structs end without parent_group. Event bits, states, state
 * arguments and call order are v5's.
 */
struct npa_descr_v4 {
	uint8_t type;
	void *parent;
	int rank;
	union {
		struct {
			uint64_t seq;
			const char *func;
			const void *send_buff;
			void *recv_buff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nchannels;
			uint8_t nwarps;
			const char *algo;
			const char *proto;
		} coll;
		struct {
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
			uint8_t nchannels;
		} p2p;
		struct {
			pid_t pid;
			uint8_t channel;
			int peer;
			int nsteps;
			int chunk_size;
			int is_send;
		} proxy_op;
		struct {
			int step;
		} proxy_step;
		struct {
			uint8_t channel;
			uint64_t ptimer;
		} kernel_ch;
		struct {
			int64_t id;
			void *data;
		} net_plugin;
	};
};

typedef union npa_state_args_v5 npa_state_args_v4;

/* ncclProfiler_v4_t, exported as the symbol ncclProfiler_v4. */
struct npa_profiler_v4 {
	const char *name;
	npa_result_t (*init)(void **context, int *mask, const char *comm_name, uint64_t comm_id,
			     int nnodes, int nranks, int rank, npa_logger_t log);
	npa_result_t (*start_event)(void *context, void **handle, struct npa_descr_v4 *d);
	npa_result_t (*stop_event)(void *handle);
	npa_result_t (*record_event_state)(void *handle, int state, npa_state_args_v4 *a);
	npa_result_t (*finalize)(void *context);
};

/* The layout is what NCCL's compiler made of the C struct: x86-64 LP64. */
_Static_assert(offsetof(struct npa_descr_v5, rank) == 16, "descr rank");
_Static_assert(offsetof(struct npa_descr_v5, coll) == 24, "descr union");
_Static_assert(offsetof(struct npa_descr_v5, coll.seq) == 24, "coll seq");
_Static_assert(offsetof(struct npa_descr_v5, coll.datatype) == 72, "coll datatype");
_Static_assert(offsetof(struct npa_descr_v5, coll.nchannels) == 80, "coll nchannels");
_Static_assert(offsetof(struct npa_descr_v5, coll.algo) == 88, "coll algo");
_Static_assert(offsetof(struct npa_descr_v5, coll.parent_group) == 104, "coll parent");
_Static_assert(offsetof(struct npa_descr_v5, p2p.peer) == 56, "p2p peer");
_Static_assert(offsetof(struct npa_descr_v5, proxy_op.is_send) == 44, "proxy op");
_Static_assert(offsetof(struct npa_descr_v5, kernel_ch.ptimer) == 32, "kernel ch");
_Static_assert(sizeof(struct npa_descr_v5) == 112, "descr size");
_Static_assert(offsetof(struct npa_descr_v4, rank) == 16, "v4 descr rank");
_Static_assert(offsetof(struct npa_descr_v4, coll.proto) == 96, "v4 coll proto");
_Static_assert(offsetof(struct npa_descr_v4, p2p.nchannels) == 60, "v4 p2p nchannels");
_Static_assert(offsetof(struct npa_descr_v4, kernel_ch.ptimer) == 32, "v4 kernel ch");
_Static_assert(sizeof(struct npa_descr_v4) == 104, "v4 descr size");

#endif /* CGBPF_NCCL_PROF_ABI_H */
