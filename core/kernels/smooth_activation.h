#pragma once
// The formulas of sigmoid, tanh, silu, gelu (erf and tanh forms) and their backward ops, written
// once against a domain (point, AD, random and interval on the host: core/ops/nn_support.h;
// kernels::ActivationDomain on a device). The activation rules (core/ops/activation_ops.cpp,
// whose file comment gives the error model and the kernels modelled) evaluate them in every
// domain, and unaryBody / binaryBody (kernel_bodies.h) evaluate them in ActivationDomain, so the
// host rule and a device compute the same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/kernels/kernel_types.h"

namespace lossbound::kernels {

/// The libm functions of the formulas (and of the other nn rules of core/ops).
enum class Fn { Exp, Log, Tanh, Erf, Expm1, Log1p };

/// A mathematical constant: the binary64 value implementations use and an enclosure of the
/// exact value (PyTorch computes some constants in double, e.g. M_SQRT2 * M_2_SQRTPI * 0.5).
struct Const {
  double value;
  Interval exact;
};

// PyTorch's constants (aten/src/ATen/native/cpu/Activation.cpp, 1.13): the binary64 value and
// the values `ulps` binary64 ulps away each side (ops::nn::nearConst(v, ulps) gives the same:
// tests/core/ops/test_activation_ops checks it).
/// 1/√2 = M_SQRT1_2, 1 ulp.
LB_HD constexpr Const sqrtHalfConst() {
  return {0x1.6a09e667f3bcdp-1, {0x1.6a09e667f3bccp-1, 0x1.6a09e667f3bcep-1}};
}
/// 1/√(2π) = M_2_SQRTPI · M_SQRT1_2 · 0.5, 4 ulps.
LB_HD constexpr Const geluBetaNoneConst() {
  return {0x1.9884533d43651p-2, {0x1.9884533d4364dp-2, 0x1.9884533d43655p-2}};
}
/// √(2/π) = M_SQRT2 · M_2_SQRTPI · 0.5, 4 ulps.
LB_HD constexpr Const geluBetaTanhConst() {
  return {0x1.9884533d43651p-1, {0x1.9884533d4364dp-1, 0x1.9884533d43655p-1}};
}
/// 0.044715, 1 ulp.
LB_HD constexpr Const geluKappaConst() {
  return {0x1.6e4e26d4801f7p-5, {0x1.6e4e26d4801f6p-5, 0x1.6e4e26d4801f8p-5}};
}
/// 3 · 0.044715, 2 ulps.
LB_HD constexpr Const geluKappa3Const() {
  return {0x1.12ba9d1f60179p-3, {0x1.12ba9d1f60177p-3, 0x1.12ba9d1f6017bp-3}};
}

/// The number of bracketings an activation's formula models (silu: x / e and x · (1 / e)).
LB_HD inline int activationVariants(UnaryOp op) { return op == UnaryOp::Silu ? 2 : 1; }

/// The libm function whose ulps ElementwiseModel::ulps carries for an activation.
LB_HD inline Fn activationLibm(UnaryOp op) {
  if (op == UnaryOp::Tanh || op == UnaryOp::GeluTanh) return Fn::Tanh;
  if (op == UnaryOp::GeluErf) return Fn::Erf;
  return Fn::Exp;  // sigmoid, silu
}

/// The libm function whose ulps ElementwiseModel::ulps carries for a backward op (gelu's erf
/// form: erf, with exp's in expUlps; sigmoid's and tanh's call none: exp, unused).
LB_HD inline Fn activationLibm(BinaryOp op) {
  if (op == BinaryOp::GeluBackward) return Fn::Erf;
  if (op == BinaryOp::GeluTanhBackward) return Fn::Tanh;
  return Fn::Exp;
}

/// The forward formulas (sigmoid tanh silu gelu gelu-tanh); variant selects a bracketing.
template <class D>
LB_HD typename D::V activationF(const D& d, UnaryOp op, typename D::V x, int variant) {
  using V = typename D::V;
  const V one = d.lit(1.0), half = d.lit(0.5);
  switch (op) {
    case UnaryOp::Sigmoid:  // 1 / (1 + exp(-x))
      return d.div(one, d.add(one, d.fn(Fn::Exp, d.sub(d.lit(0.0), x))));
    case UnaryOp::Tanh:
      return d.fn(Fn::Tanh, x);
    case UnaryOp::Silu: {
      const V e = d.add(one, d.fn(Fn::Exp, d.sub(d.lit(0.0), x)));
      // CPU and CUDA: x / (1 + exp(-x)); variant: x * sigmoid(x).
      return variant == 0 ? d.div(x, e) : d.mul(x, d.div(one, e));
    }
    case UnaryOp::GeluErf:  // x * 0.5 * (1 + erf(x * M_SQRT1_2))
      return d.mul(d.mul(x, half), d.add(one, d.fn(Fn::Erf, d.mul(x, d.k(sqrtHalfConst())))));
    case UnaryOp::GeluTanh: {  // 0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3)))
      const V cube = d.mul(d.mul(x, x), x);
      const V inner = d.mul(d.k(geluBetaTanhConst()), d.add(x, d.mul(d.k(geluKappaConst()), cube)));
      return d.mul(d.mul(half, x), d.add(one, d.fn(Fn::Tanh, inner)));
    }
    default:
      return x;  // not an activation of this file
  }
}

/// The backward formulas f(grad, v) where v is the forward input (silu, gelu) or output
/// (sigmoid, tanh).
template <class D>
LB_HD typename D::V activationBackwardF(const D& d, BinaryOp op, typename D::V g, typename D::V x) {
  using V = typename D::V;
  const V one = d.lit(1.0), half = d.lit(0.5);
  switch (op) {
    case BinaryOp::SigmoidBackward:  // a * (1 - b) * b
      return d.mul(d.mul(g, d.sub(one, x)), x);
    case BinaryOp::TanhBackward:  // a * (1 - b * b)
      return d.mul(g, d.sub(one, d.sqr(x)));
    case BinaryOp::SiluBackward: {  // s = 1/(1+exp(-x)); dy * s * (1 + x * (1 - s))
      const V s = d.div(one, d.add(one, d.fn(Fn::Exp, d.sub(d.lit(0.0), x))));
      return d.mul(d.mul(g, s), d.add(one, d.mul(x, d.sub(one, s))));
    }
    case BinaryOp::GeluBackward: {  // approximate='none'
      const V cdf = d.mul(half, d.add(one, d.fn(Fn::Erf, d.mul(x, d.k(sqrtHalfConst())))));
      const V pdf = d.mul(d.k(geluBetaNoneConst()), d.fn(Fn::Exp, d.mul(d.sqr(x), d.lit(-0.5))));
      return d.mul(g, d.add(cdf, d.mul(x, pdf)));
    }
    case BinaryOp::GeluTanhBackward: {
      const V beta = d.k(geluBetaTanhConst());
      const V xsq = d.sqr(x);
      const V cube = d.mul(xsq, x);
      const V inner = d.mul(beta, d.add(x, d.mul(d.k(geluKappaConst()), cube)));
      const V t = d.fn(Fn::Tanh, inner);
      const V left = d.mul(half, x);
      const V right = d.add(one, t);
      const V leftDerivative = d.mul(half, right);
      const V tanhDerivative = d.sub(one, d.mul(t, t));
      const V innerDerivative = d.mul(beta, d.add(one, d.mul(d.k(geluKappa3Const()), xsq)));
      const V rightDerivative = d.mul(tanhDerivative, innerDerivative);
      return d.mul(g, d.add(leftDerivative, d.mul(left, rightDerivative)));
    }
    default:
      return g;  // not a backward op of this file
  }
}

}  // namespace lossbound::kernels
