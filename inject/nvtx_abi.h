/* SPDX-License-Identifier: MIT */
/*
 * The binary interface between an application's NVTX v3 headers and an
 * injection library, written from the facts in the toolkit's
 * nvtx3/nvtxDetail/nvtxTypes.h, nvtxImpl.h and nvtxInit.h so that the
 * library builds without the toolkit. tests/inject/abi_check.c compiles
 * these definitions next to the real headers and checks every value and
 * offset when the toolkit is installed.
 *
 * Loading: the application's first NVTX call dlopens NVTX_INJECTION64_PATH,
 * looks up InitializeInjectionNvtx2 and calls it with its own
 * nvtxGetExportTable. Each copy of the NVTX headers in a process (every
 * shared object compiled with them, every NVTX version) does this once, so
 * the entry point runs once per copy. The injection asks the CALLBACKS
 * export table for a module's function table: an array of pointers to the
 * application's function-pointer slots, indexed by callback id, whose size
 * is the module's number of ids (slot 0 unused). Writing a slot routes
 * that NVTX call to the injection; slots left alone become no-ops.
 */
#ifndef CGBPF_NVTX_ABI_H
#define CGBPF_NVTX_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

/* NvtxExportTableID */
#define NVTXABI_ETID_CALLBACKS 1
#define NVTXABI_ETID_VERSIONINFO 3

/* NvtxCallbackModule */
#define NVTXABI_MODULE_CORE 1
#define NVTXABI_MODULE_CORE2 5

/* NvtxCallbackIdCore */
enum {
	NVTXABI_CORE_MarkEx = 1,
	NVTXABI_CORE_MarkA = 2,
	NVTXABI_CORE_MarkW = 3,
	NVTXABI_CORE_RangeStartEx = 4,
	NVTXABI_CORE_RangeStartA = 5,
	NVTXABI_CORE_RangeStartW = 6,
	NVTXABI_CORE_RangeEnd = 7,
	NVTXABI_CORE_RangePushEx = 8,
	NVTXABI_CORE_RangePushA = 9,
	NVTXABI_CORE_RangePushW = 10,
	NVTXABI_CORE_RangePop = 11,
	NVTXABI_CORE_NameCategoryA = 12,
	NVTXABI_CORE_NameCategoryW = 13,
	NVTXABI_CORE_NameOsThreadA = 14,
	NVTXABI_CORE_NameOsThreadW = 15,
};

/* NvtxCallbackIdCore2 */
enum {
	NVTXABI_CORE2_DomainMarkEx = 1,
	NVTXABI_CORE2_DomainRangeStartEx = 2,
	NVTXABI_CORE2_DomainRangeEnd = 3,
	NVTXABI_CORE2_DomainRangePushEx = 4,
	NVTXABI_CORE2_DomainRangePop = 5,
	NVTXABI_CORE2_DomainResourceCreate = 6,
	NVTXABI_CORE2_DomainResourceDestroy = 7,
	NVTXABI_CORE2_DomainNameCategoryA = 8,
	NVTXABI_CORE2_DomainNameCategoryW = 9,
	NVTXABI_CORE2_DomainRegisterStringA = 10,
	NVTXABI_CORE2_DomainRegisterStringW = 11,
	NVTXABI_CORE2_DomainCreateA = 12,
	NVTXABI_CORE2_DomainCreateW = 13,
	NVTXABI_CORE2_DomainDestroy = 14,
	NVTXABI_CORE2_Initialize = 15,
};

/* nvtxColorType_t, nvtxMessageType_t, nvtxPayloadType_t */
#define NVTXABI_COLOR_ARGB 1
#define NVTXABI_MESSAGE_UNKNOWN 0
#define NVTXABI_MESSAGE_ASCII 1
#define NVTXABI_MESSAGE_UNICODE 2
#define NVTXABI_MESSAGE_REGISTERED 3
#define NVTXABI_PAYLOAD_UNSIGNED_INT64 1
#define NVTXABI_PAYLOAD_INT64 2
#define NVTXABI_PAYLOAD_DOUBLE 3
#define NVTXABI_PAYLOAD_UNSIGNED_INT32 4
#define NVTXABI_PAYLOAD_INT32 5
#define NVTXABI_PAYLOAD_FLOAT 6

/* nvtxEventAttributes_v2 (version 1 has the same layout up to message). */
struct nvtxabi_event_attributes {
	uint16_t version;
	uint16_t size;
	uint32_t category;
	int32_t color_type;
	uint32_t color;
	int32_t payload_type;
	int32_t reserved0;
	union {
		uint64_t u64;
		int64_t i64;
		double d;
		uint32_t u32;
		int32_t i32;
		float f;
	} payload;
	int32_t message_type;
	union {
		const char *ascii;
		const wchar_t *unicode;
		const void *registered;
	} message;
};

typedef void (*nvtxabi_fnptr)(void);

/* NvtxExportTableCallbacks */
struct nvtxabi_etbl_callbacks {
	size_t struct_size;
	int (*get_module_function_table)(int module, nvtxabi_fnptr ***out_table,
					 unsigned int *out_size);
};

/* NvtxExportTableVersionInfo */
struct nvtxabi_etbl_version {
	size_t struct_size;
	uint32_t version;
	uint32_t reserved0;
	void (*set_injection_nvtx_version)(uint32_t version);
};

typedef const void *(*nvtxabi_get_export_table)(uint32_t id);

/* NVTX_VERSION of the headers this library was written against. */
#define NVTXABI_VERSION 3

#endif /* CGBPF_NVTX_ABI_H */
