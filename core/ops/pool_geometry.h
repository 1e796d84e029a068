#pragma once
// Window geometry of the pooling ops (max_pool2d/3d_with_indices, avg_pool2d/3d,
// _adaptive_avg_pool2d and their backward ops) as PyTorch 1.13 / 2.x computes it: output sizes from
// pooling_output_shape (aten/src/ATen/native/Pool.h, ceil_mode included), adaptive windows from
// start = ⌊o·I/O⌋, end = ⌈(o+1)·I/O⌉ (AdaptivePooling.h), and windows scanned as the CPU and CUDA
// kernels scan them (depth, then rows, then columns). A (N, C, H, W) or (C, H, W) tensor is N·C
// (or C) independent H×W planes with the same windows; a (N, C, D, H, W) or (C, D, H, W) tensor,
// D×H×W volumes ("planes" below too). 1-d pooling (MaxPool1d, AvgPool1d, AdaptiveAvgPool1d)
// reaches these ops through unsqueeze as a 1×L plane.

#include "core/ops/op_rule.h"
#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lossbound::ops {

/// One output element's window within a plane.
struct PoolWindow {
  /// Input offsets h·W + w in scan order (ascending).
  std::vector<std::int64_t> offsets;
  /// The divisor of an average: avg_pool2d/3d's divide_factor, kH·kW for adaptive pooling.
  std::int64_t divisor = 1;
  /// The window's extents in the last two dims (adaptive pooling's CUDA kernels divide by kH,
  /// then by kW; the other averages read only the divisor).
  std::int64_t kH = 1, kW = 1;
  /// max pooling: the index the kernels report when no element beats −inf (first valid position).
  std::int64_t start = 0;
};

/// The windows of one pooling node.
struct PoolLayout {
  /// The number of planes (N·C or C) and the input and output extents of each (depths: 3-d
  /// pooling, 1 otherwise).
  std::int64_t planes = 0, inH = 0, inW = 0, outH = 0, outW = 0, inD = 1, outD = 1;
  /// The pooled dims: 2 (H, W) or 3 (D, H, W).
  int dims = 2;
  /// The input shape and the output shape (the input's leading dims, then the pooled extents).
  Shape inShape, outShape;
  /// outH·outW windows, row-major; the same for every plane.
  std::vector<PoolWindow> windows;
  /// Returns, for each input offset of a plane, the windows (output offsets) that contain it.
  std::vector<std::vector<std::int64_t>> inverse() const;
  /// Returns the number of elements of one input plane (a D×H×W volume in 3-d pooling).
  std::int64_t inPlane() const { return inD * inH * inW; }
  /// Returns the number of elements of one output plane.
  std::int64_t outPlane() const { return outD * outH * outW; }
  /// Returns the input plane's extents for messages: "H x W" or "D x H x W".
  std::string inPlaneText() const;
  /// Returns the largest window's element count.
  std::int64_t windowSize() const;
  /// Returns the windows' plane offsets in scan order as rows of windowSize(), -1 past a window's
  /// end (shape-only: what the backend's window hooks and kernel bodies read).
  std::vector<double> windowOffsets() const;
};

/// Copies the elements of one window of plane `pl` of x (its k offsets `off`, -1 past its end)
/// into lo[i], hi[i]; entries past the end are left as they are.
void windowElements(const Tensor& x, const PoolLayout& l, std::int64_t pl, const double* off,
                    std::int64_t k, double* lo, double* hi);

/// Returns the layout of max_pool2d_with_indices (dims 2) or max_pool3d_with_indices (dims 3), or
/// of their backward ops, on input shape `in`, reading kernel_size, stride, padding, dilation,
/// ceil_mode from positions first, first + 1, ...; fails through `a` on bad arguments (what
/// PyTorch checks: positive sizes, padding at most half the kernel, a non-empty output). 3-d
/// windows are scanned depth, then rows, then columns, with offsets (d·H + h)·W + w in the
/// volume, as DilatedMaxPool3d.cpp and the CUDA kernels scan and report them.
PoolLayout maxPoolLayout(const OpArgs& a, const Shape& in, std::size_t first, int dims = 2);
/// Returns the layout of avg_pool2d (dims 2) or avg_pool3d (dims 3), or of their backward ops:
/// kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override from positions
/// first, first + 1, ...; the checks and the scan order of maxPoolLayout, and (3-d, as
/// avg_pool3d checks) no kernel larger than the input in any dim.
PoolLayout avgPoolLayout(const OpArgs& a, const Shape& in, std::size_t first, int dims = 2);
/// Returns the layout of _adaptive_avg_pool2d (or its backward) from `in` to oH × oW outputs.
PoolLayout adaptivePoolLayout(const OpArgs& a, const Shape& in, std::int64_t oH, std::int64_t oW);
/// Fails through `a` unless a gradient of shape `grad` matches the layout's output shape.
void requireOutputShape(const OpArgs& a, const PoolLayout& l, const Shape& grad);

}  // namespace lossbound::ops
