#pragma once
// One sentence for the status bar, the About box and the CLI: which backend computes and why.

#include <QString>

namespace lossbound::app {

/// Returns e.g. "CUDA — NVIDIA A100" or "CPU — no CUDA device: <reason>".
QString backendStatusLine();

}  // namespace lossbound::app
