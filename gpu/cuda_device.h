#pragma once
// Firewall between CUDA and the rest of Lossbound: plain C++ only, no CUDA types, so that Qt,
// Eigen and the app can ask about the GPU without including CUDA headers.

#include "core/backend.h"
#include "core/device.h"

#include <QString>

#include <memory>

namespace lossbound::gpu {

/// Returns true when this build has CUDA support and a usable device exists; otherwise false and,
/// if `reason` is non-null, a sentence saying what is missing (toolkit, driver or device).
bool cudaDeviceAvailable(QString* reason);

/// Returns the name of the device the CUDA backend would use, or an empty string if none.
QString cudaDeviceName();

/// Returns true when the library was compiled with nvcc (whether or not a device is present).
bool builtWithCuda();

/// Returns the CUDA backend on device 0, or nullptr and, if `reason` is non-null, a sentence
/// starting "no CUDA device: " that says what is missing (CUDA support in this build, the driver,
/// a device, code for the device's architecture) or which CUDA/cuBLAS call failed.
std::unique_ptr<Backend> createCudaBackend(QString* reason);

/// Returns the Device of the resident replay (core/program/resident_replay.h) on CUDA device 0,
/// or nullptr and, if `reason` is non-null, a sentence starting "no CUDA device: " (as
/// createCudaBackend).
std::unique_ptr<Device> createCudaDevice(QString* reason);

}  // namespace lossbound::gpu
