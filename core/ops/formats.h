#pragma once
// Formats of an op under the precision model (storage, opmath, accumulation, PyTorch type
// promotion) and rounding to a storage format: to nearest, toward zero, outward over a tensor,
// and what a Python scalar argument becomes in an op.

#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <random>

namespace lossbound::ops {

/// Returns the storage format of output k of the node under the precision model (Fp64 for ints).
Format outFormat(const OpArgs& args, const OpContext& ctx, std::size_t k = 0);
/// Returns the format in which an elementwise op with this output dtype computes intermediates
/// (PyTorch's "opmath": fp32 for bf16/fp16/fp32 storage, fp64 for fp64 storage).
Format opmathFormat(const PrecisionModel& pm, DType dtype);
/// Returns the accumulation format of reductions for this output dtype (fp32 for bf16/fp16).
Format accumulationFormat(const PrecisionModel& pm, DType dtype);
/// Returns true for Bool and integer dtypes (no rounding; casts truncate).
bool isIntegral(DType t);
/// Returns the result dtype of a binary op on tensors a and b (PyTorch promotion; 0-d tensors
/// do not promote a dimensioned float tensor of the same category).
DType promoteTypes(const Tensor& a, const Tensor& b);

/// Returns x rounded to nearest (ties to even) in f: (double)(float)x for fp32 in the float range
/// (the cast is correctly rounded; beyond the range it would be undefined behaviour);
/// roundToFormat(x, f, Nearest) for the rest; x itself for fp64. Inline: the random executor
/// rounds every operation (a call took 11% of a randomized execution of the scale ladder's s0).
inline double roundNearest(double x, Format f) {
  if (f == Format::Fp64) return x;
  if (f == Format::Fp32 && std::fabs(x) <= static_cast<double>(FLT_MAX))
    return static_cast<double>(static_cast<float>(x));
  return roundToFormat(x, f, RoundingDirection::Nearest);
}
/// Returns x rounded toward zero in f (tensor cores' tf32 truncation, for the random domain).
double roundTowardZero(double x, Format f);
/// Returns an interval tensor whose elements are roundOutward(t_i, f): encloses every value of
/// an enclosure stored in f with any rounding direction. Integral dtypes are returned unchanged.
Tensor roundOutwardTensor(const Tensor& t, Format f);
/// Returns a point tensor with every element rounded to nearest in f (random domain).
Tensor roundNearestTensor(const Tensor& t, Format f);
/// Returns the enclosure of what a Python scalar s becomes in an op computing in storage f:
/// {s} hull RN_fp32(s) hull RN_f(s) (PyTorch casts scalars to opmath or to the tensor dtype).
Interval scalarEnclosure(double s, Format f);
/// Returns one of s, RN_fp32(s), RN_f(s) at random (the random-domain counterpart).
double randomScalar(double s, Format f, std::mt19937_64& rng);

}  // namespace lossbound::ops
