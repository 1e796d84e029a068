#pragma once
// The geometry of a reduction of a row-major tensor over some dims: the reduced shape and the
// flat offsets of each output's group of input elements.

#include "core/tensor/shape.h"

#include <cstdint>
#include <vector>

namespace lossbound::ops {

/// Returns the shape of reducing `s` over `dims` (keepdim keeps them as size 1).
Shape reducedShape(const Shape& s, const std::vector<int>& dims, bool keepdim);

/// Flat offsets of a reduction of a row-major tensor over `dims`: element j of the group of
/// output element i is at outer[i] + inner[j] (outputs in row-major order of the kept dims).
struct ReductionLayout {
  std::vector<std::int64_t> outer;
  std::vector<std::int64_t> inner;
};
/// Returns the layout of reducing shape s over dims (sorted, normalized).
ReductionLayout reductionLayout(const Shape& s, const std::vector<int>& dims);

}  // namespace lossbound::ops
