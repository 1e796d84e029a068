#pragma once
// Checked CUDA and cuBLAS calls (device-side code only: includes CUDA headers). Every runtime and
// cuBLAS call of lossbound_gpu goes through LB_CUDA_CHECK / LB_CUBLAS_CHECK, so a failure throws
// std::runtime_error naming the call, the error (or cuBLAS status) name and the source line.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace lossbound::gpu {

/// Throws std::runtime_error("CUDA call <call> failed: <name> (<text>) at <file>:<line>") unless
/// err is cudaSuccess.
inline void checkCuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA call ") + call + " failed: " + cudaGetErrorName(err) +
                           " (" + cudaGetErrorString(err) + ") at " + file + ":" +
                           std::to_string(line));
}

/// Throws std::runtime_error("cuBLAS call <call> failed: <status name> ...") unless the status is
/// CUBLAS_STATUS_SUCCESS.
inline void checkCublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(
      std::string("cuBLAS call ") + call + " failed: " + cublasGetStatusName(status) + " (" +
      cublasGetStatusString(status) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace lossbound::gpu

/// Runs a CUDA runtime call and throws, naming the call, if it fails.
#define LB_CUDA_CHECK(call) ::lossbound::gpu::checkCuda((call), #call, __FILE__, __LINE__)
/// Runs a cuBLAS call and throws, naming the call and the status, if it fails.
#define LB_CUBLAS_CHECK(call) ::lossbound::gpu::checkCublas((call), #call, __FILE__, __LINE__)
/// Checks the launch of `kernel` (configuration errors surface here, execution errors at the
/// next synchronising call).
#define LB_CUDA_CHECK_LAUNCH(kernel) \
  ::lossbound::gpu::checkCuda(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__)
