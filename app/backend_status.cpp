#include "app/backend_status.h"

#include "core/device_backend.h"
#include "core/host_device.h"
#include "gpu/cuda_device.h"

#include <memory>
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
  if (requested == "host-device") {
    c.factory = [](int threads) -> std::unique_ptr<Backend> {
      return std::make_unique<DeviceBackend>(createCpuBackend(threads),
                                             std::make_unique<HostDevice>());
    };
    c.description = "host device: an orchestration check, not a speed-up";
    return c;
  }
  QString reason;
  if (gpu::createCudaBackend(&reason)) {
    c.factory = [](int /*threads: the device backend runs host loops on the whole pool*/)
        -> std::unique_ptr<Backend> {
      QString why;
      auto b = gpu::createCudaBackend(&why);
      if (!b) throw std::runtime_error(why.toStdString());
      // The interval method keeps its tensors on the GPU (core/program/resident_replay.h); the
      // other methods use the backend's per-op offers. Without a resident device, per-op only.
      auto device = gpu::createCudaDevice(&why);
      if (!device) return b;
      return std::make_unique<DeviceBackend>(std::move(b), std::move(device));
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
