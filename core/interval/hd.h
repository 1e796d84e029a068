#pragma once
// LB_HD marks functions that compile for both the host and a CUDA device, so that one rule body
// serves the CPU backend, the host tests and the GPU kernels.

#if defined(__CUDACC__)
#define LB_HD __host__ __device__
#else
#define LB_HD
#endif

// LB_DEVICE_CODE is 1 in the device pass of nvcc, 0 elsewhere (usable in #if: a macro that
// expands to `defined(...)` is not).
#if defined(__CUDA_ARCH__)
#define LB_DEVICE_CODE 1
#else
#define LB_DEVICE_CODE 0
#endif
