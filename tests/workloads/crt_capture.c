/* SPDX-License-Identifier: MIT */
/* crt_capture: cap_profiler with cudaProfilerStart/Stop of the (fake) CUDA
 * runtime, which enter cuProfilerStart/Stop as NVIDIA's do. */
#define CAP_RUNTIME 1
#include "cap_profiler.c"
