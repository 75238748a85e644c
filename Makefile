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
.DELETE_ON_ERROR:
.SECONDARY:
.PHONY: all inject test-bins deps test unit-test integration-test demo bench bench-bins clean install

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
USER_SRCS := $(wildcard user/*.c)
USER_OBJS := $(patsubst user/%.c,$(OUT)/user/%.o,$(USER_SRCS))
LIBS_STATIC := -Wl,-Bstatic -lbpf -lelf -lz -lzstd -Wl,-Bdynamic
LDFLAGS_CGBPF := -static

$(OUT)/user/%.o: user/%.c $(OUT)/cgbpf.skel.h | $(OUT)/user
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(WARN) $(CPPFLAGS_CGBPF) $(DEPFLAGS) -c $< -o $@

$(OUT)/cgbpf: $(USER_OBJS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS_CGBPF) $^ -o $@ -lbpf -lelf -lz -lzstd -lstdc++ -lm -lpthread

all: $(OUT)/cgbpf fakes workloads unit-bins inject test-bins

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

# The fake libnccl.so.2 needs the toolkit's nccl.h (and cuda_runtime.h).
ifeq ($(HAVE_CUDA_TOOLKIT),1)
$(OUT)/fake/libnccl.so.2: tests/fake/libnccl.c | $(OUT)/fake
	$(call msg,CC,$@)
	$(Q)$(CC) $(FAKE_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libnccl.so.2 $< -o $@ -lpthread
	$(Q)ln -sf libnccl.so.2 $(OUT)/fake/libnccl.so

fakes: $(OUT)/fake/libnccl.so.2
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
WL_TOOLKIT_ONLY := tests/workloads/nvtx_ranges.c tests/workloads/nccl_ranks.c
ifeq ($(HAVE_CUDA_TOOLKIT),0)
WL_SRCS := $(filter-out $(WL_TOOLKIT_ONLY),$(WL_SRCS))
endif
WL_BINS := $(patsubst tests/workloads/%.c,$(OUT)/workloads/%,$(WL_SRCS))
WL_CFLAGS := -O2 -g -pthread $(WARN) $(CUDA_INC) -Itests/workloads

$(OUT)/workloads/dl_%: tests/workloads/dl_%.c $(OUT)/fake/libcuda.so.1 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -ldl -lpthread

$(OUT)/workloads/nccl_%: tests/workloads/nccl_%.c $(OUT)/fake/libcuda.so.1 $(OUT)/fake/libnccl.so.2 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -lnccl -lcuda -Wl,-rpath,'$$ORIGIN/../fake' -lpthread

$(OUT)/workloads/%: tests/workloads/%.c $(OUT)/fake/libcuda.so.1 | $(OUT)/workloads
	$(call msg,CC,$@)
	$(Q)$(CC) $(WL_CFLAGS) $(DEPFLAGS) $< -o $@ -L$(OUT)/fake -lcuda -Wl,-rpath,'$$ORIGIN/../fake' -lpthread

workloads: $(WL_BINS)

# ---------------------------------------------------------------- inject
# libcgbpf-nvtx.so, the NVTX v3 injection library that fires USDT probes
# (inject/cgbpf_nvtx_probes.h); needs <sys/sdt.h> (systemtap-sdt-dev).
HAVE_SDT := $(shell echo '\#include <sys/sdt.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
INJECT_CFLAGS := -O2 -g -fPIC -pthread -fvisibility=hidden -mtls-dialect=gnu2 $(WARN) -Iinject

$(OUT)/inject/libcgbpf-nvtx.so: inject/nvtx.c | $(OUT)/inject
	$(call msg,CC,$@)
	$(Q)$(CC) $(INJECT_CFLAGS) $(DEPFLAGS) -shared -Wl,-soname,libcgbpf-nvtx.so -Wl,-z,defs $< -o $@ -lpthread

ifeq ($(HAVE_SDT),1)
inject: $(OUT)/inject/libcgbpf-nvtx.so
else
inject:
	@echo "  SKIP      libcgbpf-nvtx.so: <sys/sdt.h> missing (make deps installs systemtap-sdt-dev)"
endif

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

test-bins: $(TEST_BINS)

# ---------------------------------------------------------------- unit tests
# tests/unit/test_NAME.c links with every user/ module except main.c, under
# ASan and UBSan.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/unit/%,$(UNIT_SRCS))
UNIT_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer $(WARN) \
	$(CPPFLAGS_CGBPF) -Itests/unit
UNIT_LIB_SRCS := $(filter-out user/main.c,$(USER_SRCS))

$(OUT)/unit/%: tests/unit/%.c $(UNIT_LIB_SRCS) $(OUT)/cgbpf.skel.h | $(OUT)/unit
	$(call msg,CC,$@)
	$(Q)$(CC) $(UNIT_CFLAGS) $(DEPFLAGS) $< $(UNIT_LIB_SRCS) -o $@ -lbpf -lelf -lz -lstdc++ -lm -lpthread

unit-bins: $(UNIT_BINS)

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
	$(Q)$(CC) $(CFLAGS) $(WARN) -D_GNU_SOURCE -I$(OUT)/bench $(DEPFLAGS) -static $< -o $@ \
		-lbpf -lelf -lz -lzstd -lpthread

bench-bins: $(BENCH_BINS)

$(OUT)/bench:
	$(Q)mkdir -p $@

# ---------------------------------------------------------------- entry points
deps:
	$(Q)bash scripts/install-deps.sh

test: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bash tests/run.sh

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bash scripts/demo.sh

bench:
	$(Q)bash scripts/install-deps.sh --bench
	$(Q)$(MAKE) --no-print-directory all bench-bins
	$(Q)bash bench/run.sh

clean:
	$(call msg,CLEAN,$(OUT))
	$(Q)rm -rf $(OUT)

$(OUT)/bpf $(OUT)/user $(OUT)/fake $(OUT)/workloads $(OUT)/unit $(OUT)/inject $(OUT)/tests:
	$(Q)mkdir -p $@

-include $(wildcard $(OUT)/*/*.d)
