#pragma once
// Which backend computes and why: one choice for the CLI and the GUI, and one sentence for the
// status bar, the About box and the CLI.

#include "core/backend.h"

#include <QString>

#include <functional>
#include <memory>
#include <string>

namespace lossbound::app {

/// Returns e.g. "CUDA — NVIDIA A100" or "CPU — no CUDA device: <reason>".
QString backendStatusLine();

/// The outcome of chooseBackend().
struct BackendChoice {
  bool ok = true;  ///< false only for "cuda" without a usable CUDA backend
  QString error;   ///< why, when !ok
  std::function<std::unique_ptr<Backend>(int threads)> factory;  ///< empty: CPU backends
  std::string description;  ///< "CUDA — <device>", "CPU", or "CPU — no CUDA device: <reason>"
};

/// Chooses the backend for `requested` ("auto", "cpu", "cuda" or "host-device": the CPU with the
/// interval method's device-resident replay on the host's counting device, a check of the
/// orchestration where no GPU exists): CUDA when asked for or when
/// "auto" and a CUDA backend can really be created (one is created to check, so a device that is
/// present but unusable falls back with its reason); otherwise the CPU, saying why.
BackendChoice chooseBackend(const std::string& requested);

}  // namespace lossbound::app
