#pragma once
// CudaResources: the one CUDA stream and the one cuBLAS handle of a CUDA backend, created on a
// chosen device and destroyed together. Every kernel and cuBLAS call of the backend is ordered on
// this stream. Device-side code only.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace lossbound::gpu {

/// Owns a non-blocking stream and a cuBLAS handle bound to it on one device.
class CudaResources {
 public:
  /// Selects `device`, creates the stream and the handle (pedantic math: no TF32 or other reduced
  /// precision anywhere); throws std::runtime_error naming the failed call.
  explicit CudaResources(int device);
  CudaResources(const CudaResources&) = delete;
  CudaResources& operator=(const CudaResources&) = delete;
  ~CudaResources();

  /// Returns the device ordinal.
  int device() const { return mDevice; }
  /// Returns the device's name as the driver reports it.
  const std::string& deviceName() const { return mDeviceName; }
  /// Returns the stream every operation is ordered on.
  cudaStream_t stream() const { return mStream; }
  /// Returns the cuBLAS handle (bound to stream()).
  cublasHandle_t cublas() const { return mCublas; }
  /// Makes the device current for the calling thread (the backend may be used from any thread).
  void makeCurrent() const;
  /// Blocks until all work on the stream is done; throws on an asynchronous kernel error.
  void synchronize() const;

 private:
  int mDevice = 0;
  std::string mDeviceName;
  cudaStream_t mStream = nullptr;
  cublasHandle_t mCublas = nullptr;
};

}  // namespace lossbound::gpu
