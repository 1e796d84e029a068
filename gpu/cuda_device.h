#pragma once
// Firewall between CUDA and the rest of Lossbound: plain C++ only, no CUDA types, so that Qt,
// Eigen and the app can ask about the GPU without including CUDA headers.

#include <QString>

namespace lossbound::gpu {

/// Returns true when this build has CUDA support and a usable device exists; otherwise false and,
/// if `reason` is non-null, a sentence saying what is missing (toolkit, driver or device).
bool cudaDeviceAvailable(QString* reason);

/// Returns the name of the device the CUDA backend would use, or an empty string if none.
QString cudaDeviceName();

/// Returns true when the library was compiled with nvcc (whether or not a device is present).
bool builtWithCuda();

}  // namespace lossbound::gpu
