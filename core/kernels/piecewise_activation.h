#pragma once
// The formulas of hardswish, hardsigmoid and their backward ops, written once against a domain
// (point, AD, random and interval on the host: core/ops/nn_support.h; kernels::ComputeDomain on a
// device). The piecewise activation rules (core/ops/piecewise_activation_ops.cpp, whose file
// comment gives the contracts and the kernels each variant models) evaluate them in every domain,
// and unaryBody / binaryBody (UnaryOp::Hardswish, Hardsigmoid, BinaryOp::HardswishBackward,
// HardsigmoidBackward) take the hull of their variants in ComputeDomain, so the host rule and a
// device compute the same bits; likewise hardtanh and its backward (one variant; UnaryOp::Hardtanh,
// BinaryOp::HardtanhBackward, min_val and max_val in the ElementwiseModel).

#include "core/interval/hd.h"

namespace lossbound::kernels {

/// RN_fp32(1/6): the `one_sixth(1.0f / 6.0f)` constant of PyTorch's CUDA kernels.
inline constexpr double kOneSixthF32 = 0x1.555556p-3;

/// The number of variants each formula below models.
inline constexpr int kPiecewiseVariants = 2;

/// hardswish(x): x·m/6 (variant 0, CPU) or x·m·RN32(1/6) (1, CUDA), m = min(max(x + 3, 0), 6)
/// with the branch chosen on x itself, so that AD differentiates the branch of the exact x
/// (RN(x + 3) can tie with 6 for x just above 3; the value is the same either way): slopes −1/2
/// at −3 and 3/2 at 3, as hardswish_backward's.
template <class D>
LB_HD typename D::V hardswishF(const D& d, typename D::V x, int variant) {
  const auto three = d.lit(3.0), six = d.lit(6.0), zero = d.lit(0.0);
  const auto mid = d.min(d.max(d.add(x, three), zero), six);
  const auto m = d.select(d.gt(x, three), six, d.select(d.gt(d.lit(-3.0), x), zero, mid));
  const auto xm = d.mul(x, m);
  return variant == 0 ? d.div(xm, six) : d.mul(xm, d.lit(kOneSixthF32));
}

/// hardsigmoid(x): m/6 (variant 0) or m·RN32(1/6) (1), as hardswish, but the constant branches
/// include ±3 (hardsigmoid_backward is 0 there).
template <class D>
LB_HD typename D::V hardsigmoidF(const D& d, typename D::V x, int variant) {
  const auto six = d.lit(6.0), zero = d.lit(0.0);
  const auto mid = d.min(d.max(d.add(x, d.lit(3.0)), zero), six);
  const auto m = d.select(d.ge(x, d.lit(3.0)), six, d.select(d.ge(d.lit(-3.0), x), zero, mid));
  return variant == 0 ? d.div(m, six) : d.mul(m, d.lit(kOneSixthF32));
}

/// hardswish_backward(g, x): 0 for x < −3, g·(x/3 + 1/2) in the middle (x clamped to [−3, 3]:
/// the identity there, which keeps intervals tight), g above; variant 0: the scalar CPU path and
/// CUDA (x <= 3 is the middle), 1: the CPU vectorized path (x >= 3 gives g).
template <class D>
LB_HD typename D::V hardswishBackwardF(const D& d, typename D::V g, typename D::V x, int variant) {
  const auto three = d.lit(3.0), negThree = d.lit(-3.0);
  const auto xc = d.min(d.max(x, negThree), three);
  const auto mid = d.mul(g, d.add(d.div(xc, three), d.lit(0.5)));
  const auto upper = variant == 0 ? d.gt(x, three) : d.ge(x, three);
  return d.select(d.gt(negThree, x), d.lit(0.0), d.select(upper, g, mid));
}

/// hardsigmoid_backward(g, x): the slope for −3 < x < 3, else 0; variant 0: g/6 (the exact
/// slope, the point reference), 1: g·RN32(1/6) (the CPU and CUDA kernels).
template <class D>
LB_HD typename D::V hardsigmoidBackwardF(const D& d, typename D::V g, typename D::V x,
                                         int variant) {
  const auto mid = variant == 0 ? d.div(g, d.lit(6.0)) : d.mul(g, d.lit(kOneSixthF32));
  const auto zero = d.lit(0.0);
  return d.select(d.gt(x, d.lit(-3.0)), d.select(d.gt(d.lit(3.0), x), mid, zero), zero);
}

/// hardtanh(x, lo, hi) = min(max(x, lo), hi) (ReLU6: lo 0, hi 6), lo and hi converted to the
/// compute format as the kernels do. The selections give PyTorch's derivative at the kinks (0 at
/// lo and at hi, as hardtanh_backward) and keep a NaN (the clamp in the middle).
template <class D>
LB_HD typename D::V hardtanhF(const D& d, typename D::V x, double lo, double hi) {
  const auto l = d.lit(lo), h = d.lit(hi);
  const auto mid = d.min(d.max(x, l), h);
  return d.select(d.ge(x, h), h, d.select(d.ge(l, x), l, mid));
}

/// hardtanh_backward(g, x, lo, hi) = x <= lo or x >= hi ? 0 : g.
template <class D>
LB_HD typename D::V hardtanhBackwardF(const D& d, typename D::V g, typename D::V x, double lo,
                                      double hi) {
  const auto zero = d.lit(0.0);
  return d.select(d.gt(x, d.lit(lo)), d.select(d.ge(x, d.lit(hi)), zero, g), zero);
}

}  // namespace lossbound::kernels
