#pragma once
// Readers of op arguments shared by several families beyond OpArgs' typed accessors: reduction
// dims, the dtype keyword, a tensor-or-number operand.

#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace lossbound::ops {

/// Returns the reduction dims of argument i / kwarg `name` normalized to [0, rank), sorted,
/// without duplicates; None, a missing argument or an empty list mean all dims.
std::vector<int> reduceDims(const OpArgs& args, std::size_t i, std::string_view name, int rank);
/// Returns the `dtype` keyword (or positional i when it is a DType constant), if given.
std::optional<DType> dtypeArg(const OpArgs& args, std::size_t i, std::string_view name = "dtype");
/// Returns argument i as a tensor: the referenced tensor, or a 0-d point tensor for a number.
Tensor tensorOrScalar(const OpArgs& args, std::size_t i, DType scalarDtype);
/// Returns true when argument i is a Python number (not a tensor).
bool isNumber(const OpArgs& args, std::size_t i);
/// Returns number argument i (else keyword `name`), or nullopt when it is absent or None.
std::optional<double> optionalNumber(const OpArgs& args, std::size_t i, std::string_view name);

}  // namespace lossbound::ops
