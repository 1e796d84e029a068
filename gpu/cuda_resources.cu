// The stream and cuBLAS handle of a CUDA backend.
#include "gpu/cuda_check.cuh"
#include "gpu/cuda_resources.cuh"

#include <cstdio>

namespace lossbound::gpu {

CudaResources::CudaResources(int device) : mDevice(device) {
  LB_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  LB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  mDeviceName = prop.name;
  LB_CUDA_CHECK(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking));
  try {
    LB_CUBLAS_CHECK(cublasCreate(&mCublas));
    LB_CUBLAS_CHECK(cublasSetStream(mCublas, mStream));
    // Pedantic math: cuBLAS must not trade precision for speed (TF32, reduced-precision
    // reductions): the bounds assume binary64 round-to-nearest GEMMs.
    LB_CUBLAS_CHECK(cublasSetMathMode(mCublas, CUBLAS_PEDANTIC_MATH));
    LB_CUBLAS_CHECK(cublasSetPointerMode(mCublas, CUBLAS_POINTER_MODE_HOST));
  } catch (...) {
    if (mCublas) cublasDestroy(mCublas);
    cudaStreamDestroy(mStream);
    throw;
  }
}

CudaResources::~CudaResources() {
  // Destructors must not throw: report failures instead.
  if (mCublas) {
    const cublasStatus_t s = cublasDestroy(mCublas);
    if (s != CUBLAS_STATUS_SUCCESS)
      std::fprintf(stderr, "lossbound: cublasDestroy failed: %s\n", cublasGetStatusName(s));
  }
  if (mStream) {
    const cudaError_t e = cudaStreamDestroy(mStream);
    if (e != cudaSuccess)
      std::fprintf(stderr, "lossbound: cudaStreamDestroy failed: %s\n", cudaGetErrorName(e));
  }
}

void CudaResources::makeCurrent() const { LB_CUDA_CHECK(cudaSetDevice(mDevice)); }

void CudaResources::synchronize() const { LB_CUDA_CHECK(cudaStreamSynchronize(mStream)); }

}  // namespace lossbound::gpu
