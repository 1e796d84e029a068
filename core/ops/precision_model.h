#pragma once
// The precision model: which arithmetic the candidate is assumed to perform, op by op. By default
// each op rounds to the format of its output dtype in the trace; the user may override the
// format of every floating op (fp32/tf32/bf16/fp16).

#include "core/interval/precision.h"
#include "core/tensor/dtype.h"

#include <optional>

namespace lossbound {

/// How the candidate computed: formats per op, matmul input rounding, accumulation.
struct PrecisionModel {
  /// When set, every floating op computes and stores in this format instead of its traced dtype
  /// (Tf32 means fp32 storage with tf32 matmul inputs).
  std::optional<Format> override;
  /// fp32 matmuls round their inputs to tf32 (torch float32_matmul_precision "high"/"medium").
  bool tf32Matmul = false;
  /// Tensor-core accumulation that truncates: modelled with 2u instead of u.
  bool truncatingAccumulation = false;

  /// Returns the format an op whose traced output dtype is `dtype` stores its result in.
  Format storageFor(DType dtype) const {
    if (override) return *override == Format::Tf32 ? Format::Fp32 : *override;
    return storageFormat(dtype).value_or(Format::Fp64);
  }
  /// Returns the format matmul inputs are rounded to before the products.
  Format matmulInputFor(DType dtype) const {
    const Format s = storageFor(dtype);
    if (s == Format::Fp32 && (tf32Matmul || override == Format::Tf32)) return Format::Tf32;
    return s;
  }
  /// Returns the unit roundoff of accumulation (sums, dot products) for an op of this dtype:
  /// fp32 accumulation for bf16/fp16/tf32 (as cuBLAS and PyTorch CPU kernels do), else storage.
  double accumulationRoundoff(DType dtype) const {
    const Format s = storageFor(dtype);
    const Format acc = (s == Format::Bf16 || s == Format::Fp16) ? Format::Fp32 : s;
    return unitRoundoff(acc) * (truncatingAccumulation ? 2.0 : 1.0);
  }
};

}  // namespace lossbound
