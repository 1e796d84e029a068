#pragma once
// Index maps of the resampling ops, shared by their forward gathers (upsample_ops.cpp) and
// backward scatters: pixel_shuffle / pixel_unshuffle, and nearest upsampling with PyTorch's
// source index min(floor(dst · scale), in − 1) (scale = 1/factor when a scale factor is given,
// else in/out). The kernels differ: the 2-D CPU forward and the backward copy when out == in and
// halve when out == 2·in, the 1-D and 3-D CPU forward do not, and some compute dst · scale in
// double where CUDA uses float. A gather cannot hold two indices, so an index on which these
// variants disagree is an error naming it.

#include "core/ops/index_map.h"
#include "core/ops/op_rule.h"

#include <cstdint>
#include <optional>

namespace lossbound::ops {

/// pixel_shuffle(r): (*, C·r², H, W) -> (*, C, H·r, W·r); pixel_unshuffle(r) the inverse.
IndexMap pixelShuffleMap(const OpArgs& a, const Shape& in, std::int64_t r, bool unshuffle);

/// The nearest source index of output index `dst` along one dim, or nullopt when PyTorch's
/// kernels disagree on it (the header comment's variants).
std::optional<std::int64_t> nearestSource(std::int64_t dst, std::int64_t in, std::int64_t out,
                                          std::optional<double> scale);

/// Nearest upsampling of the trailing `dims` dims of `in` to `out` (same leading dims), with the
/// scale factors given per dim (nullopt: in/out).
IndexMap nearestUpsampleMap(const OpArgs& a, const Shape& in, const Shape& out,
                            const std::vector<std::optional<double>>& scales);

/// floor(in · scale) as an output size; fails unless it is in [1, 2^31).
std::int64_t scaledSize(const OpArgs& a, std::int64_t in, double scale);

/// The output shape of an upsample node with input shape `in`: output_size (argument 1) for the
/// trailing `dims` dims, else floor(in · scale) with the .vec overload's scale factors.
Shape upsampleOutputShape(const OpArgs& a, const Shape& in, int dims);

/// The scale factors of an upsample node: the .vec overload's float list at argument `listArg`,
/// or the .default overload's scales_h / scales_w (or scales_d, _h, _w) from argument
/// `firstScalar` on; `dims` entries, nullopt where absent or None.
std::vector<std::optional<double>> upsampleScales(const OpArgs& a, std::size_t listArg,
                                                  std::size_t firstScalar, int dims);

}  // namespace lossbound::ops
