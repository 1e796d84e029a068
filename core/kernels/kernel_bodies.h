#pragma once
// Kernel bodies: the per-element work of every interval kernel a Backend may offer, as LB_HD
// inline functions built only from the shared rules of core/interval. The CUDA kernels (gpu/)
// call them on the device (directed rounding = CUDA intrinsics); tests call the very same
// functions on the host (directed rounding = the exact emulation of core/interval/rounding.h),
// which is how the GPU code is tested on machines without a GPU. Plain C++: no CUDA types, any
// compiler can include it.
//
// Invariants: every body returns an enclosure (never a NaN endpoint); an unknown or unbounded
// operand gives a wider result, never a narrower one.

#include "core/interval/elementary.h"
#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_types.h"
#include "core/kernels/piecewise_activation.h"
#include "core/kernels/smooth_activation.h"

namespace lossbound::kernels {

/// Returns x widened outward by `ulps` ulps of f in relative terms, exactly as the CPU rules'
/// ops::widenUlps (core/ops/libm_model.cpp): [lo − (rel·|lo| + ulps·η_f), hi + (rel·|hi| +
/// ulps·η_f)] with rel = 2·ulps·u_f·(1 + 2^-10) rounded up (ulp(y) <= 2u|y| + η for any y).
/// Returns [x.lo − e, x.hi + e] rounded outward in binary64 (an enclosure widened by an error
/// bound).
LB_HD inline Interval widenBy(Interval x, double e) { return {sub_down(x.lo, e), add_up(x.hi, e)}; }

/// Stores v as element i of out.
LB_HD inline void store(IntervalSpan out, std::int64_t i, Interval v) {
  out.lo[i] = v.lo;
  out.hi[i] = v.hi;
}

LB_HD inline Interval widenUlps(Interval x, int ulps, Format f) {
  x = sanitize(x);
  if (isEmpty(x) || ulps <= 0) return x;
  const double rel = mul_up(mul_up(2.0 * ulps, unitRoundoff(f)), 1.0 + 0x1p-10);
  const double eta = mul_up(static_cast<double>(ulps), smallestSubnormal(f));
  const double lo = sub_down(x.lo, add_up(mul_up(rel, ::fabs(x.lo)), eta));
  const double hi = add_up(x.hi, add_up(mul_up(rel, ::fabs(x.hi)), eta));
  return {lo, hi};
}

/// Returns the enclosure of what the candidate stores for an exact result in r: r widened by the
/// implementation's ulps in the compute format, then rounded outward to the storage format (for
/// ulps > 0 this is ops::libmEnclosure; RN in compute then in storage lies in the outward
/// rounding to the coarser storage format, since the formats are nested).
LB_HD inline Interval storeResult(Interval r, const ElementwiseModel& model) {
  return roundOutward(widenUlps(r, model.ulps, model.compute), model.storage);
}

/// Returns max(|lo|, |hi|), the magnitude of x (ops::nn::mag).
LB_HD inline double magnitude(Interval x) { return ::fmax(::fabs(x.lo), ::fabs(x.hi)); }

/// Returns true when v is neither infinite nor NaN (std::isfinite).
LB_HD inline bool isFiniteValue(double v) {
  return v > -interval_detail::inf() && v < interval_detail::inf();
}

/// Encloses the Python scalar s as an op computing in f reads it (ops::scalarEnclosure). A
/// literal ±inf (e.g. masked_fill(scores, mask, -inf)) is the IEEE value itself, and converting
/// it to any format is exact (IEEE 754-2019 §5.4.2): the point is kept, which roundOutward would
/// read as "overflowed past the largest double" and widen. In fp64 s is used as it is; otherwise
/// RO_f({s}) contains s, RN_f(s) and RN_fp32(s) (bf16/fp16 values are fp32 values).
LB_HD inline Interval scalarEnclosure(double s, Format f) {
  if (s == interval_detail::inf() || s == -interval_detail::inf()) return Interval{s, s};
  if (f == Format::Fp64) return point(s);
  return roundOutward(point(s), f);
}

/// Arithmetic "in the compute format": every operation enclosed with directed rounding, then
/// rounded outward to c, which encloses the correctly rounded result in c (the CPU activation
/// rules' ops::nn::IntervalDomain, core/ops/nn_support.h, operation for operation).
struct ComputeDomain {
  using V = Interval;
  Format c;
  LB_HD Interval round(Interval x) const { return roundOutward(x, c); }
  /// max, min: exact selections; gt, ge: the outcomes some pair of values can give; select: the
  /// branch a sure outcome picks, the hull of both otherwise (IntervalDomain's).
  LB_HD Interval max(Interval a, Interval b) const { return lossbound::max(a, b); }
  LB_HD Interval min(Interval a, Interval b) const { return lossbound::min(a, b); }
  LB_HD Tri gt(Interval a, Interval b) const { return {a.hi > b.lo, !(a.lo > b.hi)}; }
  LB_HD Tri ge(Interval a, Interval b) const { return {a.hi >= b.lo, !(a.lo >= b.hi)}; }
  LB_HD Interval select(Tri t, Interval a, Interval b) const {
    if (t.canTrue && t.canFalse) return hull(a, b);
    return t.canTrue ? a : b;
  }
  LB_HD Interval lit(double v) const { return round(point(v)); }
  LB_HD Interval add(Interval a, Interval b) const { return round(lossbound::add(a, b)); }
  LB_HD Interval sub(Interval a, Interval b) const { return round(lossbound::sub(a, b)); }
  LB_HD Interval mul(Interval a, Interval b) const { return round(lossbound::mul(a, b)); }
  LB_HD Interval div(Interval a, Interval b) const { return round(lossbound::div(a, b)); }
  LB_HD Interval sqr(Interval a) const { return round(lossbound::sqr(a)); }
  /// exp in the candidate's libm: `ulps` ulps of c around the exact value, clamped at 0.
  LB_HD Interval exp(Interval a, int ulps) const {
    Interval e = widenUlps(lossbound::exp(a), ulps, c);
    e.lo = ::fmax(e.lo, 0.0);
    return round(e);
  }
  /// tanh in the candidate's libm: `ulps` ulps of c around the exact value, clamped to [-1, 1].
  LB_HD Interval tanh(Interval a, int ulps) const {
    return round(intersect(widenUlps(lossbound::tanh(a), ulps, c), Interval{-1.0, 1.0}));
  }
  /// erf in the candidate's libm: `ulps` ulps of c around the exact value, clamped to [-1, 1].
  LB_HD Interval erf(Interval a, int ulps) const {
    return round(intersect(widenUlps(lossbound::erf(a), ulps, c), Interval{-1.0, 1.0}));
  }
};

/// Encloses {x^p} exactly (binary64 directed rounding; the real-valued domain only): an integer
/// power by repeated outward-rounded products, sqrt for p = ½, else exp(p·log x) on x > 0
/// (monotone in x, its direction given by the sign of p) with x^p → 0 or +inf as x → 0⁺. The
/// pow.Tensor_Scalar rule (core/ops/elementwise_ops.cpp) and UnaryOp::PowScalar share it.
LB_HD inline Interval powScalarExact(Interval x, double p) {
  if (p == ::floor(p) && ::fabs(p) < 1 << 20) return lossbound::pow(x, static_cast<int>(p));
  if (p == 0.5) return lossbound::sqrt(x);
  const Interval l = lossbound::log(x);
  if (isEmpty(l)) return l;
  Interval e = lossbound::exp(lossbound::mul(point(p), l));
  const double inf = interval_detail::inf();
  if (x.lo <= 0.0) e = hull(e, p > 0 ? Interval{0.0, 0.0} : Interval{inf, inf});
  return e;
}

/// Returns the exact-arithmetic interval extension of a unary op (before storage rounding).
LB_HD inline Interval unaryExact(UnaryOp op, Interval x) {
  const Interval one{1.0, 1.0};
  switch (op) {
    case UnaryOp::Neg:
      return lossbound::neg(x);
    case UnaryOp::Abs:
      return lossbound::abs(x);
    case UnaryOp::Sqr:
      return lossbound::sqr(x);
    case UnaryOp::Sqrt:
      return lossbound::sqrt(x);
    case UnaryOp::Rsqrt:
      return lossbound::div(one, lossbound::sqrt(x));
    case UnaryOp::Reciprocal:
      return lossbound::div(one, x);
    case UnaryOp::Exp:
      return lossbound::exp(x);
    case UnaryOp::Expm1:
      return lossbound::expm1(x);
    case UnaryOp::Log:
      return lossbound::log(x);
    case UnaryOp::Log1p:
      return lossbound::log1p(x);
    case UnaryOp::Tanh:
      return lossbound::tanh(x);
    case UnaryOp::Erf:
      return lossbound::erf(x);
    case UnaryOp::Sigmoid:
      return lossbound::sigmoid(x);
    case UnaryOp::Relu:
      return lossbound::max(x, Interval{0.0, 0.0});
    case UnaryOp::Sin:
      return lossbound::sin(x);
    case UnaryOp::Cos:
      return lossbound::cos(x);
    case UnaryOp::Round:  // exact: the storage rounding is the cast
      return x;
    case UnaryOp::Trunc:  // an integer no larger in magnitude than a value of F is one: exact
      return {::trunc(x.lo), ::trunc(x.hi)};
    case UnaryOp::Floor:
      return {::floor(x.lo), ::floor(x.hi)};
    case UnaryOp::Ceil:
      return {::ceil(x.lo), ::ceil(x.hi)};
    case UnaryOp::RoundEven:  // the default rounding mode: half to even, as torch.round
      return {::rint(x.lo), ::rint(x.hi)};
    case UnaryOp::Sign: {  // nondecreasing, exact; a NaN endpoint may be any value: [-1, 1]
      if (lossbound::hasNan(x)) return {-1.0, 1.0};
      const auto sgn = [](double v) { return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0); };
      return {sgn(x.lo), sgn(x.hi)};
    }
    case UnaryOp::NonZero:
      if (x.lo == 0.0 && x.hi == 0.0) return {0.0, 0.0};
      return contains(x, 0.0) ? Interval{0.0, 1.0} : Interval{1.0, 1.0};
    case UnaryOp::GeluErf:
    case UnaryOp::Silu:
    case UnaryOp::PowScalar:
    case UnaryOp::Hardswish:
    case UnaryOp::Hardsigmoid:
    case UnaryOp::GeluTanh:
    case UnaryOp::Hardtanh:
    case UnaryOp::Clamp:
      break;  // composed in the compute format, or reading the model: unaryBody only
  }
  return entireInterval();
}

/// Returns the exact-arithmetic interval extension of a binary op (before storage rounding).
LB_HD inline Interval binaryExact(BinaryOp op, Interval x, Interval y) {
  switch (op) {
    case BinaryOp::Add:
      return lossbound::add(x, y);
    case BinaryOp::Sub:
      return lossbound::sub(x, y);
    case BinaryOp::Mul:
      return lossbound::mul(x, y);
    case BinaryOp::Div:
    case BinaryOp::DivRecip:  // the exact value; binaryBody adds the reciprocal variant
      return lossbound::div(x, y);
    case BinaryOp::Min:
      return lossbound::min(x, y);
    case BinaryOp::Max:
      return lossbound::max(x, y);
    default:
      break;  // the comparisons: compareBody; the activations' backward ops: binaryBody
  }
  return entireInterval();
}

/// Encloses op(a, b) ∈ {0, 1} of a comparison for a in x, b in y: exact (the comparison rule,
/// core/ops/elementwise_ops.cpp): 1 when it holds for every pair, 0 when for none, [0, 1]
/// otherwise. Eq holds surely only for two equal points.
LB_HD inline Interval compareBody(BinaryOp op, Interval x, Interval y) {
  const Interval yes{1.0, 1.0}, no{0.0, 0.0}, maybe{0.0, 1.0};
  if (op == BinaryOp::Gt || op == BinaryOp::Ge) {  // y < x, y <= x
    const Interval t = x;
    x = y;
    y = t;
    op = op == BinaryOp::Gt ? BinaryOp::Lt : BinaryOp::Le;
  }
  switch (op) {
    case BinaryOp::Eq:
    case BinaryOp::Ne: {
      const bool equal = x.lo == x.hi && y.lo == y.hi && x.lo == y.lo;
      const bool apart = x.hi < y.lo || y.hi < x.lo;
      if (!equal && !apart) return maybe;
      return (equal == (op == BinaryOp::Eq)) ? yes : no;
    }
    case BinaryOp::Lt:
      return x.hi < y.lo ? yes : (x.lo >= y.hi ? no : maybe);
    case BinaryOp::Le:
      return x.hi <= y.lo ? yes : (x.lo > y.hi ? no : maybe);
    default:
      return maybe;
  }
}

/// ComputeDomain with the libm functions and constants of the activation formulas
/// (core/kernels/smooth_activation.h), as the host rules' ops::nn::IntervalDomain: fn(f, a) is
/// f's exact value widened by `ulps` ulps of c for the op's own function `primary` (exp: by
/// `expUlps` when exp is not it; another function: entire) and clamped to f's range; k(x) the
/// constant's enclosure with its binary64 value, rounded to c.
struct ActivationDomain : ComputeDomain {
  Fn primary = Fn::Exp;
  int ulps = 0;
  int expUlps = 0;
  LB_HD Interval fn(Fn f, Interval a) const {
    const int n = f == primary ? ulps : expUlps;
    if (f == Fn::Exp && (f == primary || expUlps > 0)) return exp(a, n);
    if (f == primary && f == Fn::Tanh) return tanh(a, n);
    if (f == primary && f == Fn::Erf) return erf(a, n);
    return entireInterval();
  }
  LB_HD Interval k(const Const& x) const { return round(hull(x.exact, point(x.value))); }
};

/// Encloses every value the candidate stores for the activation op (sigmoid tanh silu gelu
/// gelu-tanh) of a in x, or for the backward op (sigmoid tanh silu gelu gelu-tanh backward) of
/// (g, v): the formula of core/kernels/smooth_activation.h with every step in the compute format
/// (the hull of its bracketings), rounded outward to the storage format; model.ulps are the
/// ulps of the op's libm function (kernels::activationLibm), model.expUlps exp's for gelu's
/// backward.
LB_HD inline Interval activationBody(UnaryOp op, Interval x, const ElementwiseModel& model) {
  const ActivationDomain d{{model.compute}, activationLibm(op), model.ulps, model.expUlps};
  Interval r = activationF(d, op, x, 0);
  for (int v = 1; v < activationVariants(op); ++v) r = hull(r, activationF(d, op, x, v));
  return roundOutward(r, model.storage);
}
LB_HD inline Interval activationBackwardBody(BinaryOp op, Interval g, Interval v,
                                             const ElementwiseModel& model) {
  const ActivationDomain d{{model.compute}, activationLibm(op), model.ulps, model.expUlps};
  return roundOutward(activationBackwardF(d, op, g, v), model.storage);
}

/// Encloses every value the candidate can store for op(a), a in x: the activations through
/// activationBody, hardswish and hardsigmoid the hull of their variants, hardtanh its formula
/// (core/kernels/piecewise_activation.h); the others are the exact extension through storeResult
/// (model.ulps are the function's own).
LB_HD inline Interval unaryBody(UnaryOp op, Interval x, const ElementwiseModel& model) {
  switch (op) {
    case UnaryOp::Sigmoid:
    case UnaryOp::Tanh:
    case UnaryOp::GeluErf:
    case UnaryOp::GeluTanh:
    case UnaryOp::Silu:
      return activationBody(op, x, model);
    case UnaryOp::PowScalar:  // model.ulps: the libm pow's, 0 where PyTorch rounds once
      return storeResult(powScalarExact(x, model.exponent), model);
    case UnaryOp::Hardswish:
    case UnaryOp::Hardsigmoid: {  // the hull of the CPU and CUDA variants (the activation rule)
      const ComputeDomain d{model.compute};
      const bool swish = op == UnaryOp::Hardswish;
      Interval r = swish ? hardswishF(d, x, 0) : hardsigmoidF(d, x, 0);
      for (int v = 1; v < kPiecewiseVariants; ++v)
        r = hull(r, swish ? hardswishF(d, x, v) : hardsigmoidF(d, x, v));
      return roundOutward(r, model.storage);
    }
    case UnaryOp::Hardtanh:
      return roundOutward(hardtanhF(ComputeDomain{model.compute}, x, model.clampLo, model.clampHi),
                          model.storage);
    case UnaryOp::Clamp: {  // max then min with the bounds as the op reads them: exact selections
      const double inf = interval_detail::inf();
      // A NaN bound makes every result NaN (PyTorch's clamp propagates it): the whole line.
      if (!(model.clampLo == model.clampLo) || !(model.clampHi == model.clampHi))
        return entireInterval();
      if (model.clampLo > -inf)
        x = lossbound::max(x, scalarEnclosure(model.clampLo, model.storage));
      if (model.clampHi < inf) x = lossbound::min(x, scalarEnclosure(model.clampHi, model.storage));
      const bool infinitePoint = x.lo == x.hi && (x.lo == inf || x.lo == -inf);
      return infinitePoint ? x : roundOutward(x, model.storage);  // an exact ±inf stays exact
    }
    case UnaryOp::Log:
    case UnaryOp::Log1p: {  // the pole's -inf is what every libm returns: kept exact
      const Interval r = unaryExact(op, x);
      return isPoleValue(r) ? r : storeResult(r, model);
    }
    default:
      return storeResult(unaryExact(op, x), model);
  }
}

/// Encloses every value the candidate can store for op(a, b), a in x, b in y (a comparison:
/// compareBody).
LB_HD inline Interval binaryBody(BinaryOp op, Interval x, Interval y,
                                 const ElementwiseModel& model) {
  if (isComparison(op)) return compareBody(op, x, y);  // exact: no storage rounding
  if (op == BinaryOp::GeluBackward || op == BinaryOp::GeluTanhBackward ||
      op == BinaryOp::SigmoidBackward || op == BinaryOp::TanhBackward ||
      op == BinaryOp::SiluBackward)
    return activationBackwardBody(op, x, y, model);
  if (op == BinaryOp::HardswishBackward || op == BinaryOp::HardsigmoidBackward) {
    // (grad, self): the hull of the variants (the activation rule's), stored.
    const ComputeDomain d{model.compute};
    const bool swish = op == BinaryOp::HardswishBackward;
    Interval r = swish ? hardswishBackwardF(d, x, y, 0) : hardsigmoidBackwardF(d, x, y, 0);
    for (int v = 1; v < kPiecewiseVariants; ++v)
      r = hull(r, swish ? hardswishBackwardF(d, x, y, v) : hardsigmoidBackwardF(d, x, y, v));
    return roundOutward(r, model.storage);
  }
  if (op == BinaryOp::HardtanhBackward)  // (grad, self)
    return roundOutward(
        hardtanhBackwardF(ComputeDomain{model.compute}, x, y, model.clampLo, model.clampHi),
        model.storage);
  const Interval r = storeResult(binaryExact(op, x, y), model);
  if (op != BinaryOp::DivRecip) return r;
  // x · RN_c(1/y), stored: the hull with the true quotient covers both ways of dividing (the
  // arithmetic rule ArithRule, core/ops/elementwise_ops.cpp).
  const Interval inv = roundOutward(lossbound::div(Interval{1.0, 1.0}, y), model.compute);
  return hull(r, storeResult(lossbound::mul(x, inv), model));
}

/// Encloses every value of format f that storing a value of x with round-to-nearest gives.
LB_HD inline Interval storeBody(Interval x, Format f) { return roundOutward(x, f); }

/// The value a device kernel stores in the replay's flag for an index out of range (the
/// non-finite check stores 1).
inline constexpr double kBadIndexFlag = 2.0;

/// Returns the row of table[rows×dim] that the index value v names, or -1 when v is not an integer
/// in [0, rows) (embedding: the host rule reports such an index as an error).
LB_HD inline std::int64_t tableRow(double v, std::int64_t rows) {
  if (!(v >= 0.0 && v < static_cast<double>(rows))) return -1;
  const auto k = static_cast<std::int64_t>(v);
  return static_cast<double>(k) == v ? k : -1;
}

/// where(cond, p, q) stored in f (the selection rule of core/ops/elementwise_ops.cpp): p where
/// the condition is surely true, q where it is surely false (exactly [0, 0]), the hull where it
/// may be either; an exact ±inf point (a masked_fill(-inf) value) is kept, as converting it to
/// any format is exact (IEEE 754-2019 §5.4.2); anything else is rounded outward to f.
LB_HD inline Interval selectBody(Interval cond, Interval p, Interval q, Format f) {
  const bool surelyFalse = cond.lo == 0.0 && cond.hi == 0.0;
  const bool surelyTrue = !(cond.lo <= 0.0 && cond.hi >= 0.0);
  const Interval r = surelyFalse ? q : surelyTrue ? p : hull(p, q);
  if (r.lo == r.hi && !isFiniteValue(r.lo)) return r;
  return roundOutward(r, f);
}

// ---- Midpoint–radius matrix product (Rump 1999; Revol–Théveny 2013) --------------------------
// The same arithmetic as the CPU rule's intervalGemm (core/ops/matmul_ops.cpp, alpha = 1, no
// bias), on three round-to-nearest binary64 GEMMs that the caller runs (cuBLAS on the device):
//   g1 = fl(mA · mB),  g2 = fl(|mA| · |mB|),  g4 = fl((|mA| + rA) · (|mB| + rB))
// then per element, with directed rounding only (matmulFinish):
//   s2 ∈ [(g2 − kη)/(1 + γ_k), (g2 + kη)/(1 − γ_k)], s4 <= (g4 + kη)/(1 − γ_k)
//   (a non-negative RN GEMM is within γ_k·S + kη of S: Higham Thm 3.5 + one underflow per
//   product), spread = s4 − s2 >= |mA| rB + rA (|mB| + rB) (Rump 1999), centre error
//   γ_k s2 + kη, candidate error γ_k^acc s4 + kη_acc in any order, entire when a partial sum may
//   overflow the accumulator. No rounding mode is ever set inside cuBLAS.

/// Splits [lo, hi], rounded outward to `input` (the format the candidate's GEMM reads), into a
/// midpoint m (nearest) and a radius r (rounded up) with [lo, hi] ⊆ [m - r, m + r]; returns false
/// when an endpoint is not finite (the CPU rule then makes the whole product entire).
LB_HD inline bool midRad(double lo, double hi, Format input, double* m, double* r) {
  Interval x{lo, hi};
  if (input != Format::Fp64) x = roundOutward(x, input);
  const double inf = interval_detail::inf();
  if (!(x.lo > -inf && x.lo < inf && x.hi > -inf && x.hi < inf)) {
    *m = 0.0;
    *r = inf;
    return false;
  }
  const double c = midpoint(x);
  const double a = sub_up(x.hi, c), b = sub_up(c, x.lo);
  *m = c;
  *r = a < b ? b : a;  // std::max(a, b)
  return true;
}

/// Returns |m| + r rounded up (the magnitude bound of an operand in midpoint–radius form).
LB_HD inline double magnitudeUp(double m, double r) { return add_up(m < 0.0 ? -m : m, r); }

/// Returns γ_n = n u / (1 - n u) rounded up, 0 for n <= 0, +inf when n u >= 1 (Higham 2002,
/// Lemma 3.1); the same bits as ops::gammaUp.
LB_HD inline double gammaUp(double n, double u) {
  if (n <= 0.0) return 0.0;
  const double nu = mul_up(n, u);
  if (nu >= 1.0) return interval_detail::inf();
  return div_up(nu, sub_down(1.0, nu));
}

/// Returns an upper bound of |fl(Σ x_i) − Σ x_i| for n terms summed in any order and bracketing
/// with unit roundoff u, given absSumUp ≥ Σ|x_i|: γ_(n−1)·Σ|x_i| rounded up (Higham 2002 eq. 4.4;
/// additions are exact in the subnormal range); the same bits as ops::sumErrorBound.
LB_HD inline double sumErrorBound(double n, double absSumUp, double u) {
  if (n <= 1.0 || absSumUp == 0.0) return 0.0;
  return mul_up(gammaUp(n - 1.0, u), absSumUp);
}

/// Returns an upper bound of |fl(x·y) − x·y| for a length-n dot product in any order, with or
/// without FMA, given absDotUp ≥ |x|·|y| and eta the format's smallest subnormal:
/// γ_n·|x|·|y| + n·eta rounded up (Higham 2002 eq. 3.5); the same bits as ops::dotErrorBound.
LB_HD inline double dotErrorBound(double n, double absDotUp, double u, double eta) {
  if (n <= 0.0) return 0.0;
  const double g = absDotUp == 0.0 ? 0.0 : mul_up(gammaUp(n, u), absDotUp);
  return add_up(g, mul_up(n, eta));
}

/// Per-product constants of matmulFinish, computed once per GEMM shape and precision model.
struct MatmulBound {
  double g64;      ///< γ_k(binary64)
  double kEta;     ///< k η(binary64)
  double up;       ///< 1/(1 − γ_k) rounded up
  double down;     ///< 1/(1 + γ_k) rounded down
  double gAcc;     ///< γ_k of the candidate's accumulation
  double kEtaAcc;  ///< k η of the accumulation format
  double maxAcc;   ///< largest finite value of the accumulation format
  bool points;     ///< both operands are points after input rounding (no spread GEMM)
};

/// Returns the MatmulBound for inner dimension k, the candidate's accumulation format and unit
/// roundoff (2u when truncating), and whether both operands are points.
LB_HD inline MatmulBound makeMatmulBound(double k, Format accumulation, double accumulationRoundoff,
                                         bool points) {
  MatmulBound b{};
  b.g64 = gammaUp(k, 0x1p-53);
  b.kEta = mul_up(k, 0x1p-1074);
  b.up = div_up(1.0, sub_down(1.0, b.g64));
  b.down = div_down(1.0, add_up(1.0, b.g64));
  b.gAcc = gammaUp(k, accumulationRoundoff);
  b.kEtaAcc = mul_up(k, smallestSubnormal(accumulation));
  b.maxAcc = largestFinite(accumulation);
  b.points = points;
  return b;
}

/// Returns the enclosure of every product the candidate can compute, from the round-to-nearest
/// GEMM results g1, g2, g4 of one element (see above), rounded outward to the storage format.
LB_HD inline Interval matmulFinish(double g1, double g2, double g4, const MatmulBound& b,
                                   Format storage) {
  const double inf = interval_detail::inf();
  const double s2up = mul_up(add_up(g2, b.kEta), b.up);
  const double s4up = b.points ? s2up : mul_up(add_up(g4, b.kEta), b.up);
  const double s2lo = mul_down(sub_down(g2, b.kEta), b.down);
  const double s2down = 0.0 < s2lo ? s2lo : 0.0;  // std::max(0.0, s2lo)
  const double width = b.points ? 0.0 : sub_up(s4up, s2down);
  const double midErr = add_up(mul_up(b.g64, s2up), b.kEta);
  const double r = add_up(width, midErr);
  const bool finite = g1 > -inf && g1 < inf && r > -inf && r < inf;
  Interval exact = finite ? Interval{sub_down(g1, r), add_up(g1, r)} : entireInterval();
  const double candErr = add_up(mul_up(b.gAcc, s4up), b.kEtaAcc);
  if (!(add_up(s4up, candErr) < b.maxAcc))
    exact = entireInterval();
  else
    exact = Interval{sub_down(exact.lo, candErr), add_up(exact.hi, candErr)};
  return roundOutward(exact, storage);
}

// ---- Reductions (order-free) ------------------------------------------------------------------
// Any order of add_down over the lower endpoints is a lower bound of the exact sum (and add_up of
// the upper ones an upper bound), so a parallel tree reduction is as sound as a sequential loop.

/// The running state of an order-free sum: the directed-rounding enclosure of Σ x and an upper
/// bound of Σ|x| (the layout of ops::SumEnclosure).
struct SumState {
  Interval sum{0.0, 0.0};
  double absSumUp = 0.0;
};

/// Adds one summand to a SumState (the same arithmetic as ops::accumulate).
LB_HD inline void accumulate(SumState& s, Interval x) {
  s.sum.lo = add_down(s.sum.lo, x.lo);
  s.sum.hi = add_up(s.sum.hi, x.hi);
  const double m = x.hi > -x.lo ? x.hi : -x.lo;
  s.absSumUp = add_up(s.absSumUp, m);
}

/// Merges two partial SumStates (tree reductions); sound in any order.
LB_HD inline SumState merge(SumState a, const SumState& b) {
  a.sum.lo = add_down(a.sum.lo, b.sum.lo);
  a.sum.hi = add_up(a.sum.hi, b.sum.hi);
  a.absSumUp = add_up(a.absSumUp, b.absSumUp);
  return a;
}

/// Encloses every result of summing n terms from the summands in any order and bracketing in
/// accumulation format acc (2u when truncating), then storing in `store`: sum ± γ_(n−1)·Σ|x|
/// (Higham 2002 eq. 4.4), the entire line when a partial sum may overflow acc. The same
/// arithmetic as ops::roundedSumEnclosure.
LB_HD inline Interval sumFinish(const SumState& s, double n, Format acc, Format store,
                                bool truncating) {
  const double u = unitRoundoff(acc) * (truncating ? 2.0 : 1.0);
  const double e = sumErrorBound(n, s.absSumUp, u);
  if (!(add_up(s.absSumUp, e) < largestFinite(acc))) return entireInterval();
  const Interval r{sub_down(s.sum.lo, e), add_up(s.sum.hi, e)};
  return roundOutward(r, store);
}

/// Encloses every mean of n > 0 terms the candidate can store: the sum (any order, in acc) kept
/// in acc or first stored in `store` (PyTorch 1.13's CPU mean = sum_out into the result, then
/// div_), divided by n or multiplied by RN_acc(1/n), then stored — the hull of the four (the
/// reduction rule, core/ops/reduction_ops.cpp).
LB_HD inline Interval meanFinish(const SumState& s, double n, Format acc, Format store,
                                 bool truncating) {
  const Interval sum =
      hull(sumFinish(s, n, acc, acc, truncating), sumFinish(s, n, acc, store, truncating));
  const Interval nn{n, n};
  const Interval q1 = roundOutward(lossbound::div(sum, nn), acc);
  const Interval q2 = roundOutward(
      lossbound::mul(sum, roundOutward(lossbound::div(Interval{1.0, 1.0}, nn), acc)), acc);
  return roundOutward(hull(q1, q2), store);
}

/// Returns the enclosure of a row term as model says: x, or a vector norm's |x| or x² (exact
/// enclosures; directed rounding).
LB_HD inline Interval normTerm(Interval x, const SumModel& model) {
  if (model.norm == 1) {  // + 0.0: |−0| is +0 (abs keeps [−0, −0]; an extremum keeps its sign)
    const Interval a = lossbound::abs(x);
    return {a.lo + 0.0, a.hi + 0.0};
  }
  if (model.norm == 2) return lossbound::sqr(x);
  return x;
}

/// Encloses every 2-norm the candidate can compute from the sum state of the squares of n terms,
/// summed in format f (2u when truncating) in any order, with or without FMA, then the square root
/// in f, stored in `store`: Σx² ± γ_n·Σx² + n·η (Higham 2002, eq. 3.5: the products' roundings
/// count too), clipped at 0, overflowing when the bound passes f's largest value; sqrt correctly
/// rounded (IEEE 754).
LB_HD inline Interval normTwoFinish(const SumState& s, double n, Format f, Format store,
                                    bool truncating) {
  // every partial sum is <= the computed total (the terms are >= 0), so it overflows only when
  // the total's bound does
  const double u = unitRoundoff(f) * (truncating ? 2.0 : 1.0);
  const double err = dotErrorBound(n, s.absSumUp, u, smallestSubnormal(f));
  const double lo = sub_down(s.sum.lo, err);
  Interval sum{lo > 0.0 ? lo : 0.0, add_up(s.sum.hi, err)};
  if (sum.hi > largestFinite(f)) sum.hi = interval_detail::inf();
  return roundOutward(roundOutward(lossbound::sqrt(roundOutward(sum, f)), f), store);
}

/// Encloses the vector norm (model.norm 1 or 2) of a row of n terms from their sum state: in
/// the accumulation format, or for 16-bit storage the hull with accumulating in the storage
/// format itself (PyTorch 1.13's CPU norm kernels; core/ops/vector_norm_ops.cpp).
LB_HD inline Interval normFinish(const SumState& s, double n, const SumModel& m) {
  if (m.norm == 1) {
    const Interval r = sumFinish(s, n, m.accumulation, m.storage, m.truncating);
    return m.storage == m.accumulation
               ? r
               : hull(r, sumFinish(s, n, m.storage, m.storage, m.truncating));
  }
  const Interval r = normTwoFinish(s, n, m.accumulation, m.storage, m.truncating);
  return m.storage == m.accumulation
             ? r
             : hull(r, normTwoFinish(s, n, m.storage, m.storage, m.truncating));
}

/// Encloses the maximum (model.extremum 1) or minimum (-1) of the n > 0 elements x[0], x[stride],
/// ...: the elementwise interval max (min) folded from the first element in order (exact
/// selections; the reduction rule, core/ops/reduction_ops.cpp), rounded outward to the storage
/// unless the result is an integer (model.exact).
LB_HD inline Interval rowExtremum(const double* lo, const double* hi, std::int64_t n,
                                  std::int64_t stride, const SumModel& model) {
  Interval r = normTerm(Interval{lo[0], hi[0]}, model);
  for (std::int64_t i = 0; i < n; ++i) {
    const Interval e = normTerm(Interval{lo[i * stride], hi[i * stride]}, model);
    r = model.extremum > 0 ? lossbound::max(r, e) : lossbound::min(r, e);
  }
  return model.exact ? r : roundOutward(r, model.storage);
}

/// Returns sumFinish, meanFinish or normFinish of a row of n terms as `model` says; an integer sum
/// (exact) is the directed-rounding sum itself (exact, hence the same in any order, below 2^53).
LB_HD inline Interval rowFinish(const SumState& s, double n, const SumModel& model) {
  if (model.exact) return s.sum;
  if (model.norm != 0) return normFinish(s, n, model);
  return model.mean ? meanFinish(s, n, model.accumulation, model.storage, model.truncating)
                    : sumFinish(s, n, model.accumulation, model.storage, model.truncating);
}

}  // namespace lossbound::kernels
