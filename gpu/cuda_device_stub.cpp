// The CUDA firewall when Lossbound is built without a CUDA compiler.
#include "gpu/cuda_device.h"

namespace lossbound::gpu {

bool cudaDeviceAvailable(QString* reason) {
  if (reason)
    *reason = QStringLiteral("this build of Lossbound has no CUDA support (no CUDA compiler "
                             "was found at build time)");
  return false;
}

QString cudaDeviceName() { return {}; }

bool builtWithCuda() { return false; }

}  // namespace lossbound::gpu
