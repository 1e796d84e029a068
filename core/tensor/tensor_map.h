#pragma once
// Named tensors: the inputs of a step program ("param:wte", "batch:ids") and its outputs.

#include "core/tensor/tensor.h"

#include <map>
#include <string>

namespace lossbound {

/// Tensors by name, sorted by name.
using TensorMap = std::map<std::string, Tensor>;

}  // namespace lossbound
