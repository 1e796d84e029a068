#include "app/backend_status.h"

#include "gpu/cuda_device.h"

#include <stdexcept>

namespace lossbound::app {

QString backendStatusLine() {
  QString reason;
  if (gpu::cudaDeviceAvailable(&reason))
    return QStringLiteral("CUDA — %1").arg(gpu::cudaDeviceName());
  return QStringLiteral("CPU — %1").arg(reason);
}

BackendChoice chooseBackend(const std::string& requested) {
  BackendChoice c;
  if (requested == "cpu") {
    c.description = "CPU";
    return c;
  }
  QString reason;
  if (gpu::createCudaBackend(&reason)) {
    c.factory = [](int /*threads: the device backend runs host loops on the whole pool*/) {
      QString why;
      auto b = gpu::createCudaBackend(&why);
      if (!b) throw std::runtime_error(why.toStdString());
      return b;
    };
    c.description = QStringLiteral("CUDA — %1").arg(gpu::cudaDeviceName()).toStdString();
    return c;
  }
  if (requested == "cuda") {
    c.ok = false;
    c.error = reason;
    return c;
  }
  c.description = ("CPU — " + reason).toStdString();
  return c;
}

}  // namespace lossbound::app
