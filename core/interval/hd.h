#pragma once
// LB_HD marks functions that compile for both the host and a CUDA device, so that one rule body
// serves the CPU backend, the host tests and the GPU kernels.

#if defined(__CUDACC__)
#define LB_HD __host__ __device__
#define LB_DEVICE_CODE (defined(__CUDA_ARCH__))
#else
#define LB_HD
#endif
