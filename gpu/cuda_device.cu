// Device discovery for the CUDA firewall: asks the runtime for a device and explains a failure.
#include "gpu/cuda_backend.h"
#include "gpu/cuda_device.h"
#include "gpu/cuda_resident_device.h"

#include <cuda_runtime.h>

#include <exception>

namespace lossbound::gpu {

bool cudaDeviceAvailable(QString* reason) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason)
      *reason = QStringLiteral("no CUDA device: cudaGetDeviceCount failed (%1: %2)")
                    .arg(QString::fromLatin1(cudaGetErrorName(err)),
                         QString::fromLatin1(cudaGetErrorString(err)));
    return false;
  }
  if (count == 0) {
    if (reason) *reason = QStringLiteral("no CUDA device: the driver reports 0 devices");
    return false;
  }
  return true;
}

QString cudaDeviceName() {
  if (!cudaDeviceAvailable(nullptr)) return {};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {};
  return QString::fromLatin1(prop.name);
}

bool builtWithCuda() { return true; }

std::unique_ptr<Backend> createCudaBackend(QString* reason) {
  if (!cudaDeviceAvailable(reason)) return nullptr;
  try {
    return std::make_unique<CudaBackend>(0);
  } catch (const std::exception& e) {
    // E.g. no code for this architecture (the probe launch), out of memory, cuBLAS init failure.
    if (reason)
      *reason = QStringLiteral("no CUDA device: the CUDA backend could not start on %1: %2")
                    .arg(cudaDeviceName(), QString::fromUtf8(e.what()));
    return nullptr;
  }
}

std::unique_ptr<Device> createCudaDevice(QString* reason) {
  if (!cudaDeviceAvailable(reason)) return nullptr;
  try {
    return std::make_unique<CudaDevice>(0);
  } catch (const std::exception& e) {
    if (reason)
      *reason = QStringLiteral("no CUDA device: the CUDA device could not start on %1: %2")
                    .arg(cudaDeviceName(), QString::fromUtf8(e.what()));
    return nullptr;
  }
}

}  // namespace lossbound::gpu
