// Reduced shapes and the flat offsets of a reduction over some dims.
#include "core/ops/reduction_layout.h"

#include <algorithm>

namespace lossbound::ops {

Shape reducedShape(const Shape& s, const std::vector<int>& dims, bool keepdim) {
  Shape out;
  for (std::size_t d = 0; d < s.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
    if (!reduced)
      out.push_back(s[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

ReductionLayout reductionLayout(const Shape& s, const std::vector<int>& dims) {
  const auto strides = contiguousStrides(s);
  Shape keptShape, redShape;
  std::vector<std::int64_t> keptStride, redStride;
  for (std::size_t d = 0; d < s.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
    (reduced ? redShape : keptShape).push_back(s[d]);
    (reduced ? redStride : keptStride).push_back(strides[d]);
  }
  auto offsets = [](const Shape& shape, const std::vector<std::int64_t>& stride) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(numel(shape)));
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t rem = static_cast<std::int64_t>(i), off = 0;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        const auto du = static_cast<std::size_t>(d);
        off += (rem % shape[du]) * stride[du];
        rem /= shape[du];
      }
      out[i] = off;
    }
    return out;
  };
  return {offsets(keptShape, keptStride), offsets(redShape, redStride)};
}

}  // namespace lossbound::ops
