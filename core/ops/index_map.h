#pragma once
// Index maps of ops that only move values (views, slices, flips, pads, gathers): output element i
// takes input element offsets[i] (-1: a value that is not read from the input), and the pieces
// shared by their rules: applying a map in the point or interval form, scattering a gradient back
// through it, reading dim / slice / select arguments, and reading index tensors that must be exact.

#include "core/ops/op_rule.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace lossbound::ops {

/// Output element i takes input element offsets[i]; -1 marks an element not read from the input.
struct IndexMap {
  Shape shape;
  std::vector<std::int64_t> offsets;
};

/// Returns the map of the row-major elements of a strided view (sizes, strides, base offset) of a
/// contiguous tensor.
IndexMap stridedMap(const Shape& sizes, const std::vector<std::int64_t>& strides,
                    std::int64_t base);
/// Returns the identity map of shape s.
IndexMap identityMap(const Shape& s);
/// Returns x gathered through m; elements with offset -1 get `fill`. The result is an interval
/// tensor when x is one or fill is not a point.
Tensor applyIndexMap(const Tensor& x, const IndexMap& m, DType dtype, Interval fill = {0.0, 0.0});
/// Returns applyIndexMap(x, m, dtype, fill), by the backend's gather hook when it offers one
/// (device-resident replays keep views on the device; the map depends on shapes and IR arguments
/// only), else on the host: the same values either way.
Tensor gatherVia(Backend& backend, const Tensor& x, const IndexMap& m, DType dtype,
                 Interval fill = {0.0, 0.0});
/// Returns zeros of shape `in` with grad added at the offsets m reads (the adjoint of
/// applyIndexMap; point arithmetic; elements with offset -1 are dropped).
Tensor scatterAddThrough(const Tensor& grad, const IndexMap& m, const Shape& in, DType dtype);

/// Returns dim argument i (else keyword `name`, else `fallback`) normalized to [0, rank); fails
/// through args when out of range.
int dimArg(const OpArgs& args, std::size_t i, std::string_view name, std::size_t rank,
           std::optional<std::int64_t> fallback = std::nullopt);

/// Python slice bounds clamped to [0, extent] (None start = 0, None end = extent).
struct SliceBounds {
  std::int64_t start, len, step;
};
/// Reads (start, end, step) from arguments startIdx .. startIdx + 2 for a dim of size extent.
SliceBounds sliceBounds(const OpArgs& args, std::size_t startIdx, std::int64_t extent);
/// Returns the map of x[..., start:end:step, ...] along dim for input shape s.
IndexMap sliceMap(const Shape& s, int dim, const SliceBounds& b);
/// Returns the map of select(x, dim, index) with dim at argument dimIdx and index after it.
IndexMap selectMap(const OpArgs& args, const Shape& s, std::size_t dimIdx);

/// Returns the values of an integer or bool index tensor, which must be exact: an interval
/// element with lo != hi (an index that depends on rounded values) fails through args, naming
/// `what`.
std::vector<std::int64_t> exactIndices(const OpArgs& args, const Tensor& t, std::string_view what);

}  // namespace lossbound::ops
