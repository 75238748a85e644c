# SPDX-License-Identifier: MIT
# cgbpf top-level Makefile. All outputs go under $(OUT). V=1 for verbose.

OUT ?= build
ARCH ?= $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
CC ?= gcc
CLANG ?= clang
BPFTOOL ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
CUDA_HOME ?= /usr/local/cuda
PYTHON ?= /usr/bin/python3

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-9s %s\n' "$(1)" "$(2)";
endif

.DEFAULT_GOAL := all
# As many jobs as CPUs unless -j was given; a sub-make shares its
# parent's jobs.
ifeq ($(MAKELEVEL),0)
ifeq ($(filter -j% j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
endif
.DELETE_ON_ERROR:
.SECONDARY:
.PHONY: all portable inject test-bins deps test test-slow unit-test integration-test demo demo-bins bench bench-bins stacks stack-bins clean install \
	fuzz fuzz-bins fuzz-run asan asan-test layers

CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers
CPPFLAGS_CGBPF := -D_GNU_SOURCE -Iuser -Ibpf -I$(OUT)
DEPFLAGS = -MMD -MP

# cuda.h from the toolkit when present, the fake's own minimal header otherwise.
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
CUDA_INC := -I$(CUDA_HOME)/include
HAVE_CUDA_TOOLKIT := 1
else
CUDA_INC := -Itests/fake/include
HAVE_CUDA_TOOLKIT := 0
endif

# ---------------------------------------------------------------- BPF
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) -Ibpf \
	-Wall -Werror -Wno-unused-function
# <bpf/usdt.bpf.h> (bpf/nvtx.bpf.c) includes <sys/sdt.h>-free headers that
# want the target's asm types: Debian keeps them in the multiarch folder.
BPF_CFLAGS += -I/usr/include/$(shell $(CC) -dumpmachine)

$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c | $(OUT)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

$(OUT)/cgbpf.bpf.o: $(BPF_OBJS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/cgbpf.skel.h: $(OUT)/cgbpf.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name cgbpf_bpf > $@

# ---------------------------------------------------------------- cgbpf
# user/ is layered in folders (docs/design.md); every source is compiled
# once per flavour, and everything that needs user/ code links those
# objects (the binary) or an archive of them (tests, benches):
#   release   $(OUT)/obj/      gcc $(CFLAGS): cgbpf, the benches
#   san       $(OUT)/san/      gcc -O1, ASan+UBSan, any report aborts: the
#                              unit tests and make asan's cgbpf
#   fuzz      $(OUT)/fuzz/obj/ clang, ASan+UBSan, libFuzzer coverage
USER_SRCS := $(sort $(shell find user -name '*.c'))
USER_LIB_SRCS := $(filter-out user/cli/main.c,$(USER_SRCS))
USER_OBJS := $(patsubst user/%.c,$(OUT)/obj/%.o,$(USER_SRCS))
USER_LIB_OBJS := $(patsubst user/%.c,$(OUT)/obj/%.o,$(USER_LIB_SRCS))
LIBS_STATIC := -Wl,-Bstatic -lbpf -lelf -lz -lzstd -Wl,-Bdynamic
LDFLAGS_CGBPF := -static

$(OUT)/obj/%.o: user/%.c $(OUT)/cgbpf.skel.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) $(DEPFLAGS) -c $< -o $@

# Everything but main.o, for the benches that drive modules alone.
$(OUT)/obj/libcgbpf.a: $(USER_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# libdw (the symbolizer) statically too; its debuginfod client (a dlopen of
# libdebuginfod) is wrapped out: no network lookups, no dlopen in a static
# binary (see user/lib/elf/symbolize.c).
LIBS_DW := -ldw -lelf -lz -lzstd -llzma -lbz2
DW_WRAP := -Wl,--wrap=__libdwfl_debuginfod_find_debuginfo \
	-Wl,--wrap=__libdwfl_debuginfod_find_executable -Wl,--wrap=__libdwfl_debuginfod_end

$(OUT)/cgbpf: $(USER_OBJS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS_CGBPF) $(DW_WRAP) $^ -o $@ -lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

# ---------------------------------------------------------------- san flavour
SAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_OBJS := $(patsubst user/%.c,$(OUT)/san/%.o,$(USER_SRCS))
SAN_LIB_OBJS := $(patsubst user/%.c,$(OUT)/san/%.o,$(USER_LIB_SRCS))

$(OUT)/san/%.o: user/%.c $(OUT)/cgbpf.skel.h
	$(call msg,CC-SAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(SAN_CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) $(DEPFLAGS) -c $< -o $@

$(OUT)/san/libcgbpf.a: $(SAN_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# What a user needs: the binary, the injection library, the portable folder.
all: $(OUT)/cgbpf inject portable

# What the tests need besides.
test-bins: fakes workloads unit-bins stacks stack-bins

# ---------------------------------------------------------------- fakes
# Frame pointers give every exported function a "push %rbp" first
# instruction, which uprobes emulate; a RIP-relative first instruction
# would be single-stepped (~15 us here), unlike NVIDIA's own builds.
FAKE_CFLAGS := -O2 -g -fPIC -pthread -fno-omit-frame-pointer -fno-shrink-wrap -fno-optimize-sibling-calls $(WARN) $(CUDA_INC) -Itests/fake

$(OUT)/fake/libcuda.so.1: tests/fake/libcuda.c $(wildcard tests/fake/*.h) | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libcuda.so.1 $< -o $@ -lpthread
	$(Q)ln -sf libcuda.so.1 $(OUT)/fake/libcuda.so

fakes: $(OUT)/fake/libcuda.so.1

# A legacy NVTX v2 library (CUDA 13 no longer ships libnvToolsExt.so.1).
$(OUT)/fake/libnvToolsExt.so.1: tests/fake/libnvtoolsext.c tests/fake/nvtx_v2.h | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libnvToolsExt.so.1 $< -o $@

fakes: $(OUT)/fake/libnvToolsExt.so.1

# The fake libnccl.so.2 needs the toolkit's nccl.h (and cuda_runtime.h).
ifeq ($(HAVE_CUDA_TOOLKIT),1)
$(OUT)/fake/libnccl.so.2: tests/fake/libnccl.c | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libnccl.so.2 $< -o $@ -lpthread
	$(Q)ln -sf libnccl.so.2 $(OUT)/fake/libnccl.so

fakes: $(OUT)/fake/libnccl.so.2

# The fake CUDA runtime: the toolkit's cuda_runtime_api.h, on the fake driver.
$(OUT)/fake/libcudart.so.13: tests/fake/libcudart.c $(OUT)/fake/libcuda.so.1 | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libcudart.so.13 $< -o $@ -L$(OUT)/fake -lcuda -Wl,-rpath,'$$ORIGIN' -lpthread
	$(Q)ln -sf libcudart.so.13 $(OUT)/fake/libcudart.so

fakes: $(OUT)/fake/libcudart.so.13

# The fake CUPTI (the toolkit's cupti.h), fed by the fake driver.
ifneq ($(wildcard $(CUDA_HOME)/include/cupti.h),)
$(OUT)/fake/libcupti.so.13: tests/fake/libcupti.c tests/fake/fake_activity.h | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libcupti.so.13 $< -o $@ -lpthread -ldl

fakes: $(OUT)/fake/libcupti.so.13

# A CUPTI tool arriving mid-run (what Kineto does), LD_PRELOADed by
# test_gpu.py into a workload; it loads whatever CGBPF_CUPTI_PATH names.
$(OUT)/fake/libcupti_tool.so: tests/fake/cupti_tool.c | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared $< -o $@ -lpthread -ldl

fakes: $(OUT)/fake/libcupti_tool.so
endif
else
fakes:
	@echo "  SKIP      fake libnccl.so.2 and the nvtx/nccl workloads: no CUDA toolkit at $(CUDA_HOME)"
endif

# ---------------------------------------------------------------- workloads
# Every tests/workloads/NAME.c becomes $(OUT)/workloads/NAME, linked against
# the fake libcuda like a real application; NAME starting with dl_ does not
# link it (it dlopens libcuda.so.1 itself).
WL_SRCS := $(wildcard tests/workloads/*.c)
# Workloads built on the toolkit's own headers (NVTX v3, nccl.h).
WL_TOOLKIT_ONLY := tests/workloads/nvtx_ranges.c tests/workloads/nccl_ranks.c \
	tests/workloads/cap_steps.c tests/workloads/crt_capture.c \
	tests/workloads/nccl_bench.c tests/workloads/crt_app.c tests/workloads/rank_steps.c
ifeq ($(HAVE_CUDA_TOOLKIT),0)
WL_SRCS := $(filter-out $(WL_TOOLKIT_ONLY),$(WL_SRCS))
endif
WL_BINS := $(patsubst tests/workloads/%.c,$(OUT)/workloads/%,$(WL_SRCS))
WL_CFLAGS := -O2 -g -pthread $(WARN) $(CUDA_INC) -Itests/workloads

$(OUT)/workloads/nvtx_v2 $(OUT)/workloads/nvtx_v2cap: $(OUT)/workloads/%: tests/workloads/%.c $(OUT)/fake/libnvToolsExt.so.1 $(OUT)/fake/libcuda.so.1 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -Itests/fake $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -l:libnvToolsExt.so.1 -lcuda -Wl,-rpath,'$$ORIGIN/../fake'

$(OUT)/workloads/dl_%: tests/workloads/dl_%.c $(OUT)/fake/libcuda.so.1 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -ldl -lpthread

$(OUT)/workloads/nccl_%: tests/workloads/nccl_%.c $(OUT)/fake/libcuda.so.1 $(OUT)/fake/libnccl.so.2 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -lnccl -lcuda -Wl,-rpath,'$$ORIGIN/../fake' -lpthread

# With the toolkit the demo is a 2-rank data-parallel job: NCCL and NVTX.
ifeq ($(HAVE_CUDA_TOOLKIT),1)
$(OUT)/workloads/demo: tests/workloads/demo.c $(OUT)/fake/libcuda.so.1 $(OUT)/fake/libnccl.so.2 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) -DCGBPF_DEMO_DIST $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -lnccl -lcuda -Wl,-rpath,'$$ORIGIN/../fake' -lpthread
endif

$(OUT)/workloads/crt_%: tests/workloads/crt_%.c $(OUT)/fake/libcuda.so.1 $(OUT)/fake/libcudart.so.13 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -lcudart -lcuda -Wl,-rpath,'$$ORIGIN/../fake' -lpthread

$(OUT)/workloads/%: tests/workloads/%.c $(OUT)/fake/libcuda.so.1 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -lcuda -Wl,-rpath,'$$ORIGIN/../fake' -lpthread

workloads: $(WL_BINS)

# ---------------------------------------------------------------- stack tests
# tests/stacks/api_chain.c (a call chain ending in a slow CUDA call) in the
# flavours tests/integration/test_stacks.py records: frame pointers or not,
# PIE or not, the chain in a shared library, and a stripped program whose
# symbols are in a .gnu_debuglink file.
ST := $(OUT)/apichain
ST_CFLAGS := -O2 -g -fno-optimize-sibling-calls $(WARN) $(CUDA_INC)
ST_LINK = -L$(OUT)/fake -lcuda -Wl,-rpath,'$$ORIGIN/../fake'
ST_FP := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
ST_BINS := $(ST)/chain_fp_pie $(ST)/chain_fp_nopie $(ST)/chain_nofp $(ST)/chain_lib \
	$(ST)/libchain.so $(ST)/chain_stripped $(ST)/chain_stripped.debug

$(ST)/chain_fp_pie: tests/stacks/api_chain.c $(OUT)/fake/libcuda.so.1 | $(ST)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ST_CFLAGS) $(ST_FP) -fPIE -pie $< -o $@ $(ST_LINK)

$(ST)/chain_fp_nopie: tests/stacks/api_chain.c $(OUT)/fake/libcuda.so.1 | $(ST)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ST_CFLAGS) $(ST_FP) -fno-pie -no-pie $< -o $@ $(ST_LINK)

$(ST)/chain_nofp: tests/stacks/api_chain.c $(OUT)/fake/libcuda.so.1 | $(ST)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ST_CFLAGS) -fomit-frame-pointer -fPIE -pie $< -o $@ $(ST_LINK)

$(ST)/libchain.so: tests/stacks/api_chain.c $(OUT)/fake/libcuda.so.1 | $(ST)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ST_CFLAGS) $(ST_FP) -fPIC -shared -DCHAIN_LIB_ONLY $< -o $@ $(ST_LINK)

$(ST)/chain_lib: tests/stacks/api_chain.c $(ST)/libchain.so | $(ST)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ST_CFLAGS) $(ST_FP) -DCHAIN_MAIN_ONLY $< -o $@ -L$(ST) -lchain \
		-Wl,-rpath,'$$ORIGIN' $(ST_LINK)

$(ST)/chain_stripped $(ST)/chain_stripped.debug &: tests/stacks/api_chain.c $(OUT)/fake/libcuda.so.1 | $(ST)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ST_CFLAGS) $(ST_FP) -fPIE -pie $< -o $(ST)/chain_stripped $(ST_LINK)
	$(Q)objcopy --only-keep-debug $(ST)/chain_stripped $(ST)/chain_stripped.debug
	$(Q)strip --strip-all $(ST)/chain_stripped
	$(Q)cd $(ST) && objcopy --add-gnu-debuglink=chain_stripped.debug chain_stripped

stack-bins: $(ST_BINS)

$(ST):
	$(Q)mkdir -p $@
# ---------------------------------------------------------------- inject
# libcgbpf-inject.so, cgbpf's injection library: NVTX v3 ranges as USDT
# probes (inject/nvtx.c, needs <sys/sdt.h> from systemtap-sdt-dev) and,
# with the CUDA toolkit's CUPTI headers, CUDA_INJECTION64_PATH's GPU
# activity (inject/gpu.c; CUPTI itself is dlopen'ed at run time).
# libcgbpf-nvtx.so, its former name, is a link to it.
HAVE_SDT := $(shell echo '\#include <sys/sdt.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
HAVE_CUPTI := $(if $(wildcard $(CUDA_HOME)/include/cupti.h),1,0)
INJECT_CFLAGS := -O2 -g -fPIC -pthread -fvisibility=hidden -mtls-dialect=gnu2 $(WARN) -Iinject -Ibpf
INJECT_SRCS := inject/nvtx.c
ifeq ($(HAVE_CUPTI),1)
INJECT_SRCS += inject/gpu.c inject/ncclprof.c
INJECT_CFLAGS += -I$(CUDA_HOME)/include -I$(OUT)/inject
endif

# The CUPTI callback ids of the calls that queue GPU work (launches, graph
# launches, copies, memsets), from this toolkit's headers.
$(OUT)/inject/gpu_cbids.h: $(CUDA_HOME)/include/cupti_driver_cbid.h $(CUDA_HOME)/include/cupti_runtime_cbid.h | $(OUT)/inject
	$(call msg,GEN,$@)
	$(Q){ echo '/* Generated by the Makefile from $(CUDA_HOME)/include. */'; \
	  echo 'static const CUpti_CallbackId driver_cbids[] = {'; \
	  sed -n 's/^ *CUPTI_DRIVER_TRACE_CBID_\(cu\(Launch\|Memcpy\|Memset\|GraphLaunch\)[A-Za-z0-9_]*\) *= *\([0-9]*\),.*/\t\3, \/* \1 *\//p' $(CUDA_HOME)/include/cupti_driver_cbid.h; \
	  echo '};'; echo 'static const CUpti_CallbackId runtime_cbids[] = {'; \
	  sed -n 's/^ *CUPTI_RUNTIME_TRACE_CBID_\(cuda\(Launch\|Memcpy\|Memset\|GraphLaunch\)[A-Za-z0-9_]*\) *= *\([0-9]*\),.*/\t\3, \/* \1 *\//p' $(CUDA_HOME)/include/cupti_runtime_cbid.h; \
	  echo '};'; } > $@.tmp && mv $@.tmp $@

$(OUT)/inject/libcgbpf-inject.so: $(INJECT_SRCS) $(wildcard inject/*.h) bpf/gpu_rec.h $(if $(filter 1,$(HAVE_CUPTI)),$(OUT)/inject/gpu_cbids.h) | $(OUT)/inject
	$(call msg,CC,$@)
	$(Q)$(CC) $(INJECT_CFLAGS) -shared -Wl,-soname,libcgbpf-inject.so -Wl,-z,defs -Wl,-z,nodelete $(INJECT_SRCS) -o $@ -lpthread -ldl
	$(Q)ln -sf libcgbpf-inject.so $(OUT)/inject/libcgbpf-nvtx.so

ifeq ($(HAVE_SDT),1)
inject: $(OUT)/inject/libcgbpf-inject.so
ifeq ($(HAVE_CUPTI),0)
	@echo "  SKIP      libcgbpf-inject.so without GPU activity: no $(CUDA_HOME)/include/cupti.h"
endif
else
inject:
	@echo "  SKIP      libcgbpf-inject.so: <sys/sdt.h> missing (make deps installs systemtap-sdt-dev)"
endif

# ---------------------------------------------------------------- portable
# $(OUT)/portable: cgbpf (static) and the injection library, checked to need
# nothing a GPU host may lack; copy the folder there (tests/gpu/README.md).
portable: $(OUT)/cgbpf inject
	$(call msg,PORTABLE,$(OUT)/portable)
	$(Q)bash scripts/portable.sh $(OUT) $(OUT)/portable

# ---------------------------------------------------------------- test tools
# tests/bpf/NAME.bpf.c + NAME.c -> $(OUT)/tests/NAME: test-only BPF loaders.
TEST_BPF_SRCS := $(wildcard tests/bpf/*.bpf.c)
TEST_BINS := $(patsubst tests/bpf/%.bpf.c,$(OUT)/tests/%,$(TEST_BPF_SRCS))

$(OUT)/tests/%.bpf.o: tests/bpf/%.bpf.c | $(OUT)/tests
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -Itests/bpf -I/usr/include/$(shell $(CC) -dumpmachine) -MMD -MP -c $< -o $@

$(OUT)/tests/%.skel.h: $(OUT)/tests/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(OUT)/tests/%: tests/bpf/%.c $(OUT)/tests/%.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) -D_GNU_SOURCE -I$(OUT)/tests -Itests/bpf $(DEPFLAGS) $< -o $@ -lbpf -lelf -lz

# An LD_AUDIT library that holds the loader after it maps libpython
# (test_python: an interpreter found before its relocation).
$(OUT)/tests/slowreloc.so: tests/workloads/py/slowreloc.c | $(OUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) -fPIC -shared $< -o $@

test-bins: $(TEST_BINS) $(OUT)/tests/slowreloc.so

# ---------------------------------------------------------------- unit tests
# tests/unit/test_NAME.c, built in the san flavour, links the archive of
# every user/ module but main.c.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/unit/%,$(UNIT_SRCS))
UNIT_CFLAGS := $(SAN_CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) -Itests/unit

$(OUT)/unit/%: tests/unit/%.c $(OUT)/san/libcgbpf.a | $(OUT)/unit
	$(call msg,CC,$@)
	$(Q)$(CC) $(UNIT_CFLAGS) $(DEPFLAGS) $< $(OUT)/san/libcgbpf.a -o $@ -lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

unit-bins: $(UNIT_BINS)

# ---------------------------------------------------------------- stack test binaries
# tests/stacks/chain.c (main -> level_a -> level_b -> level_c) in the
# flavours test_symbolize unwinds and symbolizes: frame pointers, no frame
# pointers (CFI only), frame pointers without any CFI, non-PIE, C++, the
# levels in a shared library (linked, or dlopened later), stripped with a
# .gnu_debuglink file.
STK := $(OUT)/stacks
STK_CFLAGS := -O2 $(WARN) -Itests/stacks -fno-optimize-sibling-calls -fno-inline
STK_NOFP := -g -fomit-frame-pointer -fasynchronous-unwind-tables
STK_BINS := $(addprefix $(STK)/,chain_fp chain_nofp chain_nopie chain_nopie_fp chain_fp_nocfi chain_cxx \
	chain_lib chain_dl libchain.so chain_stripped chain_stripped.debug)
STK_DEPS := tests/stacks/chain.c tests/stacks/capture.h

$(STK)/chain_fp: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) -g -fno-omit-frame-pointer -fPIE -pie $< -o $@
$(STK)/chain_nofp: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_NOFP) -fPIE -pie $< -o $@
$(STK)/chain_nopie: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_NOFP) -fno-pie -no-pie $< -o $@
$(STK)/chain_nopie_fp: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) -g -fno-omit-frame-pointer -fno-pie -no-pie $< -o $@
# -g0: -g would emit .debug_frame, which is CFI too.
$(STK)/chain_fp_nocfi: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) -g0 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables \
		-fno-unwind-tables -fPIE -pie $< -o $@
$(STK)/chain_cxx: $(STK_DEPS) | $(STK)
	$(call msg,CXX,$@)
	$(Q)$(CXX) -x c++ $(STK_CFLAGS) $(STK_NOFP) -fPIE -pie $< -o $@
$(STK)/libchain.so: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_NOFP) -DCHAIN_LIB -fPIC -shared $< -o $@
$(STK)/chain_lib: $(STK_DEPS) $(STK)/libchain.so | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_NOFP) -DCHAIN_MAIN_ONLY -fPIE -pie $< -o $@ \
		-L$(STK) -lchain -Wl,-rpath,'$$ORIGIN'
$(STK)/chain_dl: $(STK_DEPS) $(STK)/libchain.so | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_NOFP) -DCHAIN_MAIN_ONLY -DCHAIN_DL -fPIE -pie $< -o $@ -ldl
$(STK)/chain_stripped.debug: $(STK)/chain_stripped
$(STK)/chain_stripped: $(STK_DEPS) | $(STK)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STK_CFLAGS) $(STK_NOFP) -fPIE -pie $< -o $@.full
	$(Q)objcopy --only-keep-debug $@.full $@.debug
	$(Q)objcopy --strip-all --add-gnu-debuglink=$@.debug $@.full $@
	$(Q)rm -f $@.full

stacks: $(STK_BINS)

# ---------------------------------------------------------------- bench
# bench/NAME.bpf.c + bench/NAME.c -> $(OUT)/bench/NAME, loaders for the
# baselines bench/run.sh measures cgbpf against; built by `make bench` only.
BENCH_BPF_SRCS := $(wildcard bench/*.bpf.c)
BENCH_BINS := $(patsubst bench/%.bpf.c,$(OUT)/bench/%,$(BENCH_BPF_SRCS))

$(OUT)/bench/%.bpf.o: bench/%.bpf.c | $(OUT)/bench
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

$(OUT)/bench/%.skel.h: $(OUT)/bench/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(OUT)/bench/%: bench/%.c $(OUT)/bench/%.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) -D_GNU_SOURCE -I$(OUT)/bench -Iuser $(DEPFLAGS) -static $< -o $@ \
		-lbpf -lelf -lz -lzstd -lpthread

# bench/symbolize.c: the unwinder and symbolizer alone (no BPF), on the
# chain binaries of tests/stacks.
$(OUT)/bench/symbolize: bench/symbolize.c $(OUT)/obj/libcgbpf.a | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) -Itests/stacks $(DEPFLAGS) -static $(DW_WRAP) \
		$^ -o $@ -lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

# bench/gpubytes.c: GPU activity records through user/sources/gpu/gpu.c alone.
$(OUT)/bench/gpubytes: bench/gpubytes.c $(OUT)/obj/libcgbpf.a | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) $(DEPFLAGS) -static $(DW_WRAP) \
		$^ -o $@ -lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

# bench/pycode.c: CPython discovery and code-object symbolization alone.
$(OUT)/bench/pycode: bench/pycode.c $(OUT)/obj/libcgbpf.a | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) $(DEPFLAGS) -static $(DW_WRAP) \
		$^ -o $@ -lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

bench-bins: $(BENCH_BINS) $(OUT)/bench/symbolize $(OUT)/bench/gpubytes $(OUT)/bench/pycode stacks

$(OUT)/bench:
	$(Q)mkdir -p $@

# ---------------------------------------------------------------- fuzzing
# fuzz/fuzz_NAME.c -> $(OUT)/fuzz/fuzz_NAME: libFuzzer harnesses over the
# parsers of input that traced processes, containers and users control
# (docs/security.md), on every user/ module built again by clang with
# ASan and UBSan (any report aborts). Built by `make fuzz` only; `make
# fuzz-run FUZZ_SECONDS=N` runs each for N seconds from fuzz/corpus/NAME.
FUZZ_SRCS := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst fuzz/%.c,$(OUT)/fuzz/%,$(FUZZ_SRCS))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -O1 -g $(FUZZ_SAN) $(WARN) $(CPPFLAGS_CGBPF) -Ifuzz
FUZZ_OBJS := $(patsubst user/%.c,$(OUT)/fuzz/obj/%.o,$(USER_LIB_SRCS))
FUZZ_SECONDS ?= 60

$(OUT)/fuzz/obj/%.o: user/%.c $(OUT)/cgbpf.skel.h
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(DEPFLAGS) -c $< -o $@

$(OUT)/fuzz/libcgbpf.a: $(FUZZ_OBJS) | $(OUT)/fuzz
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# A harness that #includes a user/ module (to reach its static functions)
# defines every symbol of it, so the archive's copy is never pulled in.
$(OUT)/fuzz/fuzz_%: fuzz/fuzz_%.c $(OUT)/fuzz/libcgbpf.a | $(OUT)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(DEPFLAGS) $< $(OUT)/fuzz/libcgbpf.a -o $@ \
		-lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

fuzz: deps
	$(Q)$(MAKE) --no-print-directory fuzz-bins

fuzz-bins: $(FUZZ_BINS)
	@:

fuzz-run: fuzz
	$(Q)bash fuzz/run.sh $(OUT) $(FUZZ_SECONDS)

$(OUT)/fuzz:
	$(Q)mkdir -p $@

# ---------------------------------------------------------------- sanitized cgbpf
# cgbpf in the san flavour, for a pass of integration tests against it
# (tests/asan.sh; the harness runs CGBPF_BIN instead of $(OUT)/cgbpf).
# Linked dynamically: the sanitizer runtimes do not link statically.

$(OUT)/san/cgbpf: $(SAN_OBJS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(SAN_CFLAGS) $(DW_WRAP) $^ -o $@ -lbpf $(LIBS_DW) -lstdc++ -lm -lpthread

# cgbpf looks for the injection library beside itself (inject/): the one
# library serves both builds.
$(OUT)/san/inject: | inject
	$(Q)mkdir -p $(OUT)/san && ln -sfn ../inject $@

asan: $(OUT)/san/cgbpf inject $(OUT)/san/inject

# The fast integration pass against it (the workloads and fakes of $(OUT)).
asan-test: deps
	$(Q)$(MAKE) --no-print-directory all test-bins asan
	$(Q)ASAN_OUT=$(OUT)/san bash tests/asan.sh

test: deps
	$(Q)$(MAKE) --no-print-directory all test-bins
	$(Q)bash tests/run.sh

# The slow tier: long versions of tests whose default run is short (not
# in CI; run before a release or after touching what they cover).
test-slow: deps
	$(Q)$(MAKE) --no-print-directory all test-bins
	$(Q)CGBPF_INJECT_CYCLES=100 $(PYTHON) tests/integration/run.py \
		test_inject::test_attach_detach_cycles

# The demo needs the binary, the injection library, the fakes and its workload.
demo-bins: $(OUT)/cgbpf inject fakes $(OUT)/workloads/demo

demo: deps
	$(Q)$(MAKE) --no-print-directory demo-bins
	$(Q)bash scripts/demo.sh

bench:
	$(Q)bash scripts/install-deps.sh --bench
	$(Q)$(MAKE) --no-print-directory all test-bins bench-bins
	$(Q)bash bench/run.sh

# The layer rule of user/ (docs/design.md), also a suite of make test.
layers: $(USER_OBJS)
	$(Q)$(PYTHON) scripts/check-layers.py $(OUT)

clean:
	$(call msg,CLEAN,$(OUT))
	$(Q)rm -rf $(OUT)

$(OUT)/bpf $(OUT)/fake $(OUT)/workloads $(OUT)/unit $(OUT)/stacks $(OUT)/inject $(OUT)/tests:
	$(Q)mkdir -p $@

-include $(shell find $(OUT) -name '*.d' 2>/dev/null)
