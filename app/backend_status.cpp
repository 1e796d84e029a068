#include "app/backend_status.h"

#include "gpu/cuda_device.h"

namespace lossbound::app {

QString backendStatusLine() {
  QString reason;
  if (gpu::cudaDeviceAvailable(&reason))
    return QStringLiteral("CUDA — %1").arg(gpu::cudaDeviceName());
  return QStringLiteral("CPU — %1").arg(reason);
}

}  // namespace lossbound::app
