#pragma once
// Index maps of the resampling ops, shared by their forward gathers (view_ops.cpp) and backward
// scatters (upsample_ops.cpp): pixel_shuffle / pixel_unshuffle, and nearest upsampling with
// PyTorch's source index floor(dst · scale) computed in float (min(·, in − 1); scale = 1/factor
// when a scale factor is given, else in/out), which the CPU and CUDA kernels share.

#include "core/ops/index_map.h"
#include "core/ops/op_rule.h"

#include <cstdint>
#include <optional>

namespace lossbound::ops {

/// pixel_shuffle(r): (*, C·r², H, W) -> (*, C, H·r, W·r); pixel_unshuffle(r) the inverse.
IndexMap pixelShuffleMap(const OpArgs& a, const Shape& in, std::int64_t r, bool unshuffle);

/// The nearest source index of output index `dst` along one dim (PyTorch's nearest_idx).
std::int64_t nearestSource(std::int64_t dst, std::int64_t in, std::int64_t out,
                           std::optional<double> scale);

/// Nearest upsampling of the trailing `dims` dims of `in` to `out` (same leading dims), with the
/// scale factors given per dim (nullopt: in/out).
IndexMap nearestUpsampleMap(const OpArgs& a, const Shape& in, const Shape& out,
                            const std::vector<std::optional<double>>& scales);

/// The output shape of an upsample node with input shape `in`: output_size (argument 1) for the
/// trailing `dims` dims, else floor(in · scale) with the .vec overload's scale factors.
Shape upsampleOutputShape(const OpArgs& a, const Shape& in, int dims);

/// The scale factors of an upsample node: the .vec overload's float list at argument `listArg`,
/// or the .default overload's scales_h / scales_w (or scales_d, _h, _w) from argument
/// `firstScalar` on; `dims` entries, nullopt where absent or None.
std::vector<std::optional<double>> upsampleScales(const OpArgs& a, std::size_t listArg,
                                                  std::size_t firstScalar, int dims);

}  // namespace lossbound::ops
