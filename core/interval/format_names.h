#pragma once
// Names of formats as they appear in traces, on the command line and in reports.

#include "core/interval/precision.h"

#include <optional>
#include <string>
#include <string_view>

namespace lossbound {

/// Returns the short name of a format: "fp64", "fp32", "tf32", "bf16", "fp16".
std::string_view formatName(Format f);

/// Returns the format named by `name` (short names, or torch dtype names such as "float32",
/// "torch.bfloat16", "half"), or nothing if the name is not a floating-point format.
std::optional<Format> parseFormat(std::string_view name);

}  // namespace lossbound
