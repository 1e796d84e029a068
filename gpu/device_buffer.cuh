#pragma once
// DeviceBuffer<T>: an owning, move-only array in device memory (RAII around cudaMalloc/cudaFree)
// with checked, stream-ordered copies from and to the host. Device-side code only.

#include "gpu/cuda_check.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <utility>

namespace lossbound::gpu {

/// An array of `size()` elements of T in device memory; freed by the destructor.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `count` elements (uninitialised); throws std::runtime_error naming cudaMalloc.
  explicit DeviceBuffer(std::size_t count) : mCount(count) {
    if (count > 0) LB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&mData), count * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : mData(std::exchange(other.mData, nullptr)), mCount(std::exchange(other.mCount, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      mData = std::exchange(other.mData, nullptr);
      mCount = std::exchange(other.mCount, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  /// Returns the device pointer (nullptr when empty).
  T* data() const { return mData; }
  /// Returns the number of elements.
  std::size_t size() const { return mCount; }

  /// Copies n <= size() elements from host memory, ordered on `stream`.
  void copyFromHost(const T* host, std::size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LB_CUDA_CHECK(cudaMemcpyAsync(mData, host, n * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  /// Copies n <= size() elements to host memory, ordered on `stream` (synchronise before use).
  void copyToHost(T* host, std::size_t n, cudaStream_t stream) const {
    if (n == 0) return;
    LB_CUDA_CHECK(cudaMemcpyAsync(host, mData, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  }
  /// Sets every byte of the first n elements to zero, ordered on `stream`.
  void zero(std::size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LB_CUDA_CHECK(cudaMemsetAsync(mData, 0, n * sizeof(T), stream));
  }

 private:
  void release() noexcept {
    if (!mData) return;
    // A destructor must not throw: report a failed free instead (it means the context is gone).
    const cudaError_t err = cudaFree(mData);
    if (err != cudaSuccess)
      std::fprintf(stderr, "lossbound: cudaFree failed: %s\n", cudaGetErrorName(err));
    mData = nullptr;
    mCount = 0;
  }

  T* mData = nullptr;
  std::size_t mCount = 0;
};

}  // namespace lossbound::gpu
