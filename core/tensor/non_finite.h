#pragma once
// Finding NaN and ±inf in stored tensors (checkpoints): a replay from such a state gives an
// unbounded envelope, and the user needs to know which tensor, at which step, to look at. One pass
// over the values, no allocation: cheap next to any replay, and bounded by the caller for
// `lossbound-cli info`.

#include "core/tensor/tensor.h"
#include "core/tensor/tensor_map.h"

#include <cstdint>
#include <string>
#include <vector>

namespace lossbound {

/// The non-finite values of one tensor.
struct NonFiniteValues {
  std::string name;         ///< the tensor's name ("param:fc.bias"), or its dataset path
  std::int64_t numel = 0;   ///< elements in the tensor
  std::int64_t nan = 0;     ///< elements that are NaN (either endpoint of an interval)
  std::int64_t inf = 0;     ///< elements that are +inf or -inf and not NaN
  std::int64_t first = -1;  ///< flat (row-major) index of the first non-finite element
  double firstValue = 0;    ///< its value (the lower endpoint unless only the upper one is bad)
};

/// Returns the count and first position of the NaN and ±inf elements of `t` (both endpoints of
/// an interval tensor are looked at); nan == inf == 0 when every element is finite.
NonFiniteValues findNonFinite(const Tensor& t);

/// Returns one entry per tensor of `tensors` that holds a NaN or ±inf, in name order.
std::vector<NonFiniteValues> findNonFinite(const TensorMap& tensors);

/// Returns "fc.bias: NaN at 1 of 64 elements (first at flat index 3)" for one entry, naming it by
/// `name` (the entry's own name when empty).
std::string describeNonFinite(const NonFiniteValues& v, const std::string& name = {});

}  // namespace lossbound
