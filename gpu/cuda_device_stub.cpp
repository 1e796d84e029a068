// The CUDA firewall when Lossbound is built without a CUDA compiler.
#include "gpu/cuda_device.h"

namespace lossbound::gpu {

bool cudaDeviceAvailable(QString* reason) {
  if (reason)
    *reason = QStringLiteral(
        "no CUDA device: this build of Lossbound has no CUDA support (no "
        "CUDA compiler was found at build time)");
  return false;
}

QString cudaDeviceName() { return {}; }

bool builtWithCuda() { return false; }

std::unique_ptr<Backend> createCudaBackend(QString* reason) {
  cudaDeviceAvailable(reason);
  return nullptr;
}

std::unique_ptr<Device> createCudaDevice(QString* reason) {
  cudaDeviceAvailable(reason);
  return nullptr;
}

}  // namespace lossbound::gpu
