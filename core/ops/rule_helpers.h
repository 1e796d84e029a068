#pragma once
// Ready-made pieces of an OpRule for ops without rounding or without gradients (views, copies,
// comparisons, index outputs).

#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <optional>
#include <span>
#include <vector>

namespace lossbound::ops {

/// Returns a localError result reporting zero error (exact ops: views, copies, comparisons).
std::vector<Tensor> zeroLocalError(std::span<const Tensor> outputs);
/// Returns zero gradients of input shapes for differentiable float inputs, nullopt for others.
std::vector<std::optional<Tensor>> noGradients(const OpArgs& args);

}  // namespace lossbound::ops
