// Elementwise ops: arithmetic (tensor and scalar forms, alpha, in-place variants), exp log sqrt
// rsqrt sin cos pow (Tensor_Scalar, Tensor_Tensor, Scalar) reciprocal abs neg, comparisons,
// logical and bitwise ops (not, and, or, xor: exact), where, masked_fill, clamp, nan_to_num.
//
// Error model of "any reasonable implementation" (PyTorch CPU/CUDA kernels):
// - + − × ÷ sqrt are correctly rounded in the compute format C (fp32 "opmath" for bf16/fp16/fp32
//   storage, fp64 for fp64), then rounded to nearest in the storage format F (IEEE 754-2019 §5.4);
//   since F-values are C-values, RO_F (outward rounding to F) encloses both C-then-F and direct-F
//   results, so interval rules round intermediates and results outward to F.
// - a Python scalar operand is used as s, RN_fp32(s) or RN_F(s) (cast to opmath or to the dtype);
// - alpha·b + a may be fused (FMA) or rounded twice; division by a 0-d divisor may be computed as
//   a · RN(1/b) (PyTorch's CUDA div_true kernel does this for CPU scalars): the hull is taken;
// - exp, log, rsqrt, pow, sin, cos use the candidate's libm ulp table (libm_model.h:
//   publishedUlps + 1) around the exact value's enclosure (core/interval/elementary.h; sin and
//   cos are not monotone: the enclosure takes ±1 where a turning point kπ/2 may lie in the input
//   interval). The first-order local error of sin/cos is the same ulp bound relative to |y|.
// - local errors (exact operands): zero where the op is exact: add, sub, rsub and mul whose
//   products and sums are exact in binary64, whose operands and result are F values and whose
//   operands the execution holds exactly (OpContext::exactOperands: an attention mask's 1 − m
//   and (1 − m)·finfo.min), and selections (where, clamp) of F values.
// - an integer tensor operand of a floating op is converted to F first (TensorIterator's common
//   dtype): rounded outward in the interval rule, to nearest in the random rule, and its
//   conversion error in the local error.
#include "core/interval/elementary.h"
#include "core/kernels/kernel_bodies.h"
#include "core/ops/arg_readers.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// An operand that is either a tensor argument or a Python scalar.
struct Operand {
  Tensor t;             // the tensor (a 0-d float64 tensor for scalars)
  bool scalar = false;  // a Python number: converted to the compute type by the candidate
  double value = 0.0;   // the number, for scalars
};

Operand operand(const OpArgs& a, std::size_t i) {
  Operand o;
  if (a.isTensor(i)) {
    o.t = a.tensor(i);
  } else {
    o.scalar = true;
    o.value = a.numberArg(i, i == 1 ? "other" : "");
    o.t = Tensor::scalar(o.value, DType::Float64);
  }
  return o;
}

/// The interval rounding step RO_F (identity for integral outputs).
/// Rounds outward into f; an exact ±inf point (a selected literal -inf mask value) is kept, as it
/// is representable in every format (roundOutward would read it as an overflow past DBL_MAX).
Interval ro(Interval x, Format f, bool integral) {
  if (integral || (x.lo == x.hi && std::isinf(x.lo))) return x;
  return roundOutward(x, f);
}

/// Operand enclosure for interval rules: scalars become scalarEnclosure(s, F).
Tensor enclosureOf(const Operand& o, Format f, bool integral) {
  if (!o.scalar || integral) return o.t;
  const Interval e = scalarEnclosure(o.value, f);
  return Tensor::interval({}, DType::Float64, {e.lo}, {e.hi});
}
/// True for an integer (or bool) tensor operand of an op with a floating output: PyTorch's
/// kernels convert it to the output dtype first (TensorIterator's common dtype).
bool promoted(const Operand& o, bool integral) {
  return !integral && !o.scalar && isIntegral(o.t.dtype());
}

/// A promoted operand's enclosure converted to F outward, with the cast rule's body (the
/// identity on the F values it usually holds: masks, counts below 2^24 in fp32).
Tensor promotedEnclosure(Backend& backend, const Operand& o, Tensor e, Format f, DType t,
                         bool integral) {
  if (!promoted(o, integral)) return e;
  const kernels::ElementwiseModel model{f, f, 0};
  if (auto r = offerUnary(backend, kernels::UnaryOp::Round, model, e, t)) return std::move(*r);
  return mapInterval(
      e, t, [&](Interval v) { return kernels::unaryBody(kernels::UnaryOp::Round, v, model); });
}

/// Operand value for random rules: scalars become s, RN_fp32(s) or RN_F(s) at random; a
/// promoted tensor RN_F of its values.
Tensor randomOf(const Operand& o, Format f, bool integral, std::mt19937_64& rng) {
  if (promoted(o, integral))
    return mapPoint(o.t, DType::Float64, [f](double v) { return roundNearest(v, f); });
  if (!o.scalar || integral) return o.t;
  return Tensor::scalar(randomScalar(o.value, f, rng), DType::Float64);
}

/// Picks the compute format of one random execution: opmath then F, or F directly.
Format randomCompute(Format f, std::mt19937_64& rng) {
  if (f == Format::Fp64) return f;
  return (rng() & 1) ? Format::Fp32 : f;
}

std::optional<Tensor> gradFor(const Tensor& input, Tensor g) {
  if (!isFloating(input.dtype())) return std::nullopt;
  return sumToShape(g, input.shape()).withDtype(input.dtype());
}

// ---------------------------------------------------------------------------------------------
// Binary arithmetic

enum class Arith { Add, Sub, Rsub, Mul, Div };

/// add sub rsub mul div (Tensor and Scalar forms, alpha, in place): one correctly rounded op in
/// opmath C (alpha·b + a fused or not; a 0-d divisor maybe as a·RN(1/b)), stored in F.
class ArithRule final : public OpRule {
 public:
  explicit ArithRule(Arith op) : mOp(op) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    checkMode(a);
    const Operand x = operand(a, 0), y = operand(a, 1);
    const double alpha = alphaOf(a);
    const DType t = a.outSpec().dtype;
    return {mapPoint2(a, x.t, y.t, t, [&](double p, double q) { return exact(p, q, alpha); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    checkMode(a);
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const Operand ox = operand(a, 0), oy = operand(a, 1);
    const Tensor x = promotedEnclosure(ctx.backend, ox, enclosureOf(ox, f, integral), f, t,
                                       integral),
                 y = promotedEnclosure(ctx.backend, oy, enclosureOf(oy, f, integral), f, t,
                                       integral);
    const double alpha = alphaOf(a);
    const Interval al = integral ? lossbound::point(alpha) : scalarEnclosure(alpha, f);
    const bool recip = divisorIsScalar(oy) && !integral;
    // Offered to the backend when the arithmetic is one binary body: alpha 1, true division or
    // its reciprocal variant (tests/gpu/test_kernel_offload checks bit-identity).
    if (const auto k = kernelOf(); k && !integral && alpha == 1.0)
      if (auto r = offerBinary(ctx.backend, recip ? kernels::BinaryOp::DivRecip : *k, {f, f, 0}, x,
                               y, broadcastAll(a, {x.shape(), y.shape()}), t))
        return {std::move(*r)};
    return {mapInterval2(a, x, y, t, [&](Interval p, Interval q) -> Interval {
      switch (mOp) {
        case Arith::Add:
          return ro(add(p, alpha == 1.0 ? q : ro(mul(al, q), f, integral)), f, integral);
        case Arith::Sub:
          return ro(sub(p, alpha == 1.0 ? q : ro(mul(al, q), f, integral)), f, integral);
        case Arith::Rsub:
          return ro(sub(q, alpha == 1.0 ? p : ro(mul(al, p), f, integral)), f, integral);
        case Arith::Mul:
          return ro(mul(p, q), f, integral);
        case Arith::Div: {
          const Interval d = ro(div(p, q), f, integral);
          if (!recip) return d;
          return hull(d, ro(mul(p, ro(div(Interval{1.0, 1.0}, q), f, false)), f, false));
        }
      }
      return entireInterval();
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    checkMode(a);
    std::mt19937_64& rng = *ctx.rng;
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const Operand ox = operand(a, 0), oy = operand(a, 1);
    const Tensor x = randomOf(ox, f, integral, rng), y = randomOf(oy, f, integral, rng);
    const double alpha = integral ? alphaOf(a) : randomScalar(alphaOf(a), f, rng);
    const Format c = randomCompute(f, rng);
    const bool fused = (rng() & 1) != 0;
    const bool recip = divisorIsScalar(oy) && !integral && (rng() & 1);
    return {mapPoint2(a, x, y, t, [&](double p, double q) -> double {
      if (integral) return exact(p, q, alpha);
      double r = 0.0;
      switch (mOp) {
        case Arith::Add:
        case Arith::Sub:
        case Arith::Rsub: {
          const double base = mOp == Arith::Rsub ? q : p, other = mOp == Arith::Rsub ? p : q;
          const double sa = mOp == Arith::Add ? alpha : -alpha;
          if (alpha == 1.0)
            r = addIn(base, sa * other, c);
          else if (fused)
            r = fmaIn(sa, other, base, c);
          else
            r = addIn(base, mulIn(sa, other, c), c);
          break;
        }
        case Arith::Mul:
          r = mulIn(p, q, c);
          break;
        case Arith::Div:
          r = recip ? mulIn(p, roundNearest(1.0 / q, c), c) : roundNearest(p / q, c);
          break;
      }
      return roundNearest(r, f);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Operand x = operand(a, 0), y = operand(a, 1);
    const double alpha = alphaOf(a);
    const Tensor& go = g[0];
    std::vector<std::optional<Tensor>> out;
    auto scaled = [&](double s) {
      return mapPoint(go, go.dtype(), [s](double v) { return s * v; });
    };
    std::optional<Tensor> gx, gy;
    switch (mOp) {
      case Arith::Add:
        gx = gradFor(x.t, go);
        gy = gradFor(y.t, scaled(alpha));
        break;
      case Arith::Sub:
        gx = gradFor(x.t, go);
        gy = gradFor(y.t, scaled(-alpha));
        break;
      case Arith::Rsub:
        gx = gradFor(x.t, scaled(-alpha));
        gy = gradFor(y.t, go);
        break;
      case Arith::Mul:
        gx = gradFor(x.t,
                     mapPoint2(a, go, y.t, go.dtype(), [](double gv, double q) { return gv * q; }));
        gy = gradFor(y.t,
                     mapPoint2(a, go, x.t, go.dtype(), [](double gv, double p) { return gv * p; }));
        break;
      case Arith::Div: {
        gx = gradFor(x.t,
                     mapPoint2(a, go, y.t, go.dtype(), [](double gv, double q) { return gv / q; }));
        const Tensor q2 =
            mapPoint2(a, x.t, y.t, go.dtype(), [](double p, double q) { return -p / (q * q); });
        gy = gradFor(y.t,
                     mapPoint2(a, go, q2, go.dtype(), [](double gv, double d) { return gv * d; }));
        break;
      }
    }
    if (!x.scalar) out.push_back(gx);
    if (!y.scalar) out.push_back(gy);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t)) return zeroLocalError(outs);
    const Format f = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    const Operand x = operand(a, 0), y = operand(a, 1);
    const double alpha = alphaOf(a);
    const bool recip = divisorIsScalar(y);
    // A scalar s is used as s' in {s, RN_fp32(s), RN_F(s)}: relative change <= eps(s), computed
    // exactly (subnormal scalars in fp16/bf16 have large relative errors).
    auto eps = [&](double v) {
      // A Python float is a double: an fp64 op uses it as it is (as scalarEnclosure does).
      if (v == 0.0 || f == Format::Fp64) return 0.0;
      double e = 0.0;
      for (double w : {roundNearest(v, Format::Fp32), roundNearest(v, f)})
        if (w != 0.0)
          e = std::max(e, std::fabs(w - v) / std::min(std::fabs(v), std::fabs(w)));
        else
          e = kInf;
      return e;
    };
    const double exs = x.scalar ? eps(x.value) : 0.0, eys = y.scalar ? eps(y.value) : 0.0;
    // Tensor operands held exactly by the execution bounded (OpContext::exactOperands).
    const bool xHeld = x.scalar || ctx.operandExact(0),
               yHeld = y.scalar || ctx.operandExact(x.scalar ? 0 : 1);
    // Intermediates may round in opmath or directly in F (the coarser): u_F bounds both.
    const double ea = eps(alpha), uc = unitRoundoff(f);
    // Operands converted exactly and an exact result that is an F value: no rounding at all
    // (1 − mask and mask·finfo.min of an attention mask, whose adjoints are ~1e38).
    constexpr double kExact = -1;  // the inner map's mark of an exact element
    const Tensor ys = mapPoint2(
        a, outs[0],
        mapPoint2(a, x.t, y.t, t,
                  [&](double p, double q) {
                    // a promoted integer converts like a scalar: relative change <= eps
                    const double ex = promoted(x, false) ? eps(p) : exs,
                                 ey = promoted(y, false) ? eps(q) : eys;
                    if (xHeld && yHeld && ex == 0 && ey == 0 && ea == 0 && exactIn(p, q, alpha, f))
                      return kExact;
                    double extra = 0.0;
                    if (mOp == Arith::Add || mOp == Arith::Sub || mOp == Arith::Rsub) {
                      const double other = mOp == Arith::Rsub ? p : q;
                      const double eo = mOp == Arith::Rsub ? ex : ey,
                                   eb = mOp == Arith::Rsub ? ey : ex;
                      const double base = mOp == Arith::Rsub ? q : p;
                      // alpha·other: alpha's conversion, other's conversion, and its rounding when
                      // not fused
                      extra += ((1 + ea) * (1 + eo) * (1 + uc) - 1) * std::fabs(alpha * other);
                      extra += eb * std::fabs(base);
                    } else {
                      const double e1 = (1 + ex) * (1 + ey) - 1;
                      extra +=
                          (recip ? (e1 + 2 * uc) * (1 + 2 * uc) : e1) * std::fabs(exact(p, q, 1.0));
                    }
                    return extra;
                  }),
        t, [&](double yv, double extra) {
          if (extra == kExact) return 0.0;
          return add_up(roundingError(yv, c, f), extra * (1 + 4 * uc));
        });
    return {ys};
  }

 private:
  double alphaOf(const OpArgs& a) const {
    if (mOp == Arith::Mul || mOp == Arith::Div) return 1.0;
    return a.numberArg(2, "alpha", 1.0);
  }

  bool divisorIsScalar(const Operand& b) const {
    return mOp == Arith::Div && (b.scalar || b.t.rank() == 0);
  }

  void checkMode(const OpArgs& a) const {
    if (mOp != Arith::Div) return;
    const IrValue* m = a.kwarg("rounding_mode");
    if (m && m->kind == IrValue::Kind::String)
      a.fail("rounding_mode '" + m->stringValue + "' is not supported (only true division)");
  }

  /// The backend kernel computing x op y (alpha aside), if any (rsub swaps its operands: none).
  std::optional<kernels::BinaryOp> kernelOf() const {
    switch (mOp) {
      case Arith::Add:
        return kernels::BinaryOp::Add;
      case Arith::Sub:
        return kernels::BinaryOp::Sub;
      case Arith::Mul:
        return kernels::BinaryOp::Mul;
      case Arith::Div:
        return kernels::BinaryOp::Div;
      case Arith::Rsub:
        return std::nullopt;
    }
    return std::nullopt;
  }

  /// Returns true when every evaluation of the op on the exact operands x, y is exact: the
  /// product (alpha·other, or x·y) is exact in binary64 (its FMA residual is 0) and an F value,
  /// the sum is exact in binary64 (its TwoSum residual is 0, Knuth; Higham 2002 §4.3), and the
  /// operands and the result are F values, so that every rounding, fused or not, in C or F, is of a
  /// representable value (IEEE 754-2019 §4.3). Division: never claimed.
  bool exactIn(double x, double y, double alpha, Format f) const {
    const auto productExact = [](double u, double v, double w) {
      return std::isfinite(w) && std::fma(u, v, -w) == 0.0;
    };
    // Operands that are F values: an integer tensor promoted to F converts exactly
    if (roundNearest(x, f) != x || roundNearest(y, f) != y) return false;
    if (mOp == Arith::Mul) {
      const double r = x * y;
      return productExact(x, y, r) && roundNearest(r, f) == r;
    }
    if (mOp == Arith::Div) return false;
    const double base = mOp == Arith::Rsub ? y : x, other = mOp == Arith::Rsub ? x : y;
    const double t = alpha * other;
    // alpha·other may be rounded in C or directly in F (the coarser: F values are C values)
    if (!productExact(alpha, other, t) || roundNearest(t, f) != t) return false;
    const double b = mOp == Arith::Add ? t : -t, r = base + b, bb = r - base;
    return std::isfinite(r) && (base - (r - bb)) + (b - bb) == 0.0 && roundNearest(r, f) == r;
  }

  double exact(double x, double y, double alpha) const {
    switch (mOp) {
      case Arith::Add:
        return x + alpha * y;
      case Arith::Sub:
        return x - alpha * y;
      case Arith::Rsub:
        return y - alpha * x;
      case Arith::Mul:
        return x * y;
      case Arith::Div:
        return x / y;
    }
    return x;
  }

  Arith mOp;
};

// ---------------------------------------------------------------------------------------------
// Unary functions

enum class Unary {
  Neg,
  Abs,
  Reciprocal,
  Sqrt,
  Rsqrt,
  Exp,
  Expm1,
  Log,
  Log1p,
  Sin,
  Cos,
  PowScalar,
  Floor,
  Ceil,
  Trunc,
  Round,
  Sign
};

/// floor ceil trunc round sign: an integer-valued result, exact in the input's format.
bool roundsToInteger(Unary op) {
  return op == Unary::Floor || op == Unary::Ceil || op == Unary::Trunc || op == Unary::Round ||
         op == Unary::Sign;
}

/// Encloses {x^p} exactly (binary64 directed rounding; real-valued domain only): the body
/// devices run too.
Interval powExact(Interval x, double p) { return kernels::powScalarExact(x, p); }

/// neg abs reciprocal sqrt rsqrt exp expm1 log log1p sin cos pow.Tensor_Scalar floor ceil trunc
/// round sign: exact, one correctly rounded op, or the candidate's libm within modelUlps, computed
/// in opmath C and stored in F. floor, ceil, trunc and round (half to even, std::nearbyint) are
/// exact (an integer no larger in magnitude than a value of F is a value of F) and nondecreasing,
/// so an interval maps to [f(lo), f(hi)]; so is sign ((0 < x) − (x < 0): −1, 0 or 1, NaN giving
/// 0 as PyTorch's CPU and CUDA kernels do; DeBERTa's log-bucket positions). Their derivative is 0,
/// taken at the point (a first-order envelope does not cover a jump to the next integer, as with
/// comparisons; intervals do).
class UnaryRule final : public OpRule {
 public:
  explicit UnaryRule(Unary op) : mOp(op) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const double p = exponent(a);
    return {
        mapPoint(a.tensor(0), a.outSpec().dtype, [&](double x) { return exactValue(mOp, x, p); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const double p = exponent(a);
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    const auto fn = libmOf(mOp, p);
    // The same arithmetic as below: kernels::unaryBody = libmEnclosure / roundOutward of the exact
    // extension (tests/gpu/test_kernel_offload checks bit-identity in every format).
    // pow(x, 2) is x·x rounded once: the exact square (UnaryOp::Sqr), stored; another exponent
    // is UnaryOp::PowScalar with p in the model.
    const auto k = mOp == Unary::PowScalar && p == 2.0 ? kernels::UnaryOp::Sqr : kernelOf(mOp);
    if (k && !integral)
      if (auto r =
              offerUnary(ctx.backend, *k, {c, f, fn ? modelUlps(*fn, c) : 0, p}, a.tensor(0), t))
        return {std::move(*r)};
    return {mapInterval(a.tensor(0), t, [&](Interval x) {
      const Interval e = exactEnclosure(mOp, x, p);
      if (integral) return e;
      // log(±0), log1p(-1): the pole's -inf, what every libm returns (unaryBody's rule too).
      if ((mOp == Unary::Log || mOp == Unary::Log1p) && isPoleValue(e)) return e;
      if (fn) return libmEnclosure(e, *fn, c, f);
      return roundOutward(e, f);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    std::mt19937_64& rng = *ctx.rng;
    const DType t = a.outSpec().dtype;
    const double p = exponent(a);
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const Format c = randomCompute(f, rng) == Format::Fp64 ? Format::Fp64 : Format::Fp32;
    const auto fn = libmOf(mOp, p);
    return {mapPoint(a.tensor(0), t, [&](double x) {
      const double v = exactValue(mOp, x, p);
      if (integral) return v;
      if (fn) return libmRandom(v, *fn, c, f, rng);
      if (mOp == Unary::PowScalar && p == 2.0) return roundNearest(mulIn(x, x, c), f);
      return roundNearest(roundNearest(v, c), f);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return {std::nullopt};
    const double p = exponent(a);
    const Tensor& y = outs[0];
    const Tensor d = mapPoint2(a, x, y, x.dtype(), [&](double xv, double yv) -> double {
      switch (mOp) {
        case Unary::Neg:
          return -1.0;
        case Unary::Abs:
          return xv > 0 ? 1.0 : (xv < 0 ? -1.0 : 0.0);
        case Unary::Reciprocal:
          return -yv * yv;
        case Unary::Sqrt:
          return 0.5 / yv;
        case Unary::Rsqrt:
          return -0.5 * yv * yv * yv;
        case Unary::Exp:
          return yv;
        case Unary::Expm1:
          return yv + 1.0;
        case Unary::Log:
          return 1.0 / xv;
        case Unary::Log1p:
          return 1.0 / (1.0 + xv);
        case Unary::Floor:
        case Unary::Ceil:
        case Unary::Trunc:
        case Unary::Round:
        case Unary::Sign:
          return 0.0;
        case Unary::Sin:
          return std::cos(xv);
        case Unary::Cos:
          return -std::sin(xv);
        case Unary::PowScalar:
          return p == 0.0 ? 0.0 : p * std::pow(xv, p - 1.0);
      }
      return 0.0;
    });
    return {mapPoint2(a, g[0], d, x.dtype(), [](double gv, double dv) { return gv * dv; })};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t) || mOp == Unary::Neg || mOp == Unary::Abs || roundsToInteger(mOp))
      return zeroLocalError(outs);
    const double p = exponent(a);
    const Format f = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    const auto fn = libmOf(mOp, p);
    return {mapPoint(outs[0], t, [&](double y) {
      return fn ? libmLocalError(y, *fn, c, f) : roundingError(y, c, f);
    })};
  }

 private:
  double exponent(const OpArgs& a) const {
    return mOp == Unary::PowScalar ? a.numberArg(1, "exponent") : 0.0;
  }

  static double exactValue(Unary op, double x, double p) {
    switch (op) {
      case Unary::Neg:
        return -x;
      case Unary::Abs:
        return std::fabs(x);
      case Unary::Reciprocal:
        return 1.0 / x;
      case Unary::Sqrt:
        return std::sqrt(x);
      case Unary::Rsqrt:
        return 1.0 / std::sqrt(x);
      case Unary::Exp:
        return std::exp(x);
      case Unary::Expm1:
        return std::expm1(x);
      case Unary::Log:
        return std::log(x);
      case Unary::Log1p:
        return std::log1p(x);
      case Unary::Floor:
        return std::floor(x);
      case Unary::Ceil:
        return std::ceil(x);
      case Unary::Trunc:
        return std::trunc(x);
      case Unary::Round:
        return std::nearbyint(x);  // half to even in the default rounding mode, as torch.round
      case Unary::Sign:
        return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);  // NaN: 0, as PyTorch
      case Unary::Sin:
        return std::sin(x);
      case Unary::Cos:
        return std::cos(x);
      case Unary::PowScalar:
        return std::pow(x, p);
    }
    return x;
  }

  /// How the candidate computes: exact (neg/abs), one correctly rounded op, or a libm function.
  static std::optional<LibmFn> libmOf(Unary op, double p) {
    switch (op) {
      case Unary::Rsqrt:
        return LibmFn::Rsqrt;
      case Unary::Exp:
        return LibmFn::Exp;
      case Unary::Expm1:
        return LibmFn::Expm1;
      case Unary::Log:
        return LibmFn::Log;
      case Unary::Log1p:
        return LibmFn::Log1p;
      case Unary::Sin:
        return LibmFn::Sin;
      case Unary::Cos:
        return LibmFn::Cos;
      case Unary::PowScalar:
        // PyTorch special-cases 0.5 (sqrt), 1, 2 (x·x), -1 (reciprocal): correctly rounded.
        if (p == 0.5 || p == 1.0 || p == 2.0 || p == -1.0 || p == 0.0) return std::nullopt;
        return LibmFn::Pow;
      default:
        return std::nullopt;
    }
  }

  static Interval exactEnclosure(Unary op, Interval x, double p) {
    switch (op) {
      case Unary::Neg:
        return neg(x);
      case Unary::Abs:
        return abs(x);
      case Unary::Reciprocal:
        return div(Interval{1.0, 1.0}, x);
      case Unary::Sqrt:
        return lossbound::sqrt(x);
      case Unary::Rsqrt:
        return div(Interval{1.0, 1.0}, lossbound::sqrt(x));
      case Unary::Exp:
        return exp(x);
      case Unary::Expm1:
        return lossbound::expm1(x);
      case Unary::Log:
        return log(x);
      case Unary::Log1p:
        return lossbound::log1p(x);
      case Unary::Floor:
      case Unary::Ceil:
      case Unary::Trunc:
      case Unary::Round:
        return {exactValue(op, x.lo, p), exactValue(op, x.hi, p)};
      case Unary::Sign:
        return kernels::unaryExact(kernels::UnaryOp::Sign, x);
      case Unary::Sin:
        return lossbound::sin(x);
      case Unary::Cos:
        return lossbound::cos(x);
      case Unary::PowScalar:
        return powExact(x, p);
    }
    return x;
  }

  /// The backend kernel computing this op (pow: its exponent in the model; 2 is Sqr).
  static std::optional<kernels::UnaryOp> kernelOf(Unary op) {
    switch (op) {
      case Unary::Neg:
        return kernels::UnaryOp::Neg;
      case Unary::Abs:
        return kernels::UnaryOp::Abs;
      case Unary::Reciprocal:
        return kernels::UnaryOp::Reciprocal;
      case Unary::Sqrt:
        return kernels::UnaryOp::Sqrt;
      case Unary::Rsqrt:
        return kernels::UnaryOp::Rsqrt;
      case Unary::Exp:
        return kernels::UnaryOp::Exp;
      case Unary::Expm1:
        return kernels::UnaryOp::Expm1;
      case Unary::Log:
        return kernels::UnaryOp::Log;
      case Unary::Log1p:
        return kernels::UnaryOp::Log1p;
      case Unary::Floor:
        return kernels::UnaryOp::Floor;
      case Unary::Ceil:
        return kernels::UnaryOp::Ceil;
      case Unary::Trunc:
        return kernels::UnaryOp::Trunc;
      case Unary::Round:
        return kernels::UnaryOp::RoundEven;
      case Unary::Sign:
        return kernels::UnaryOp::Sign;
      case Unary::Sin:
        return kernels::UnaryOp::Sin;
      case Unary::Cos:
        return kernels::UnaryOp::Cos;
      case Unary::PowScalar:
        return kernels::UnaryOp::PowScalar;
    }
    return std::nullopt;
  }

  Unary mOp;
};

/// pow.Tensor_Tensor: x^y with the libm pow error (x > 0 expected).
class PowTensorTensorRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return std::vector<Tensor>{mapPoint2(a, a.tensor(0), a.tensor(1), a.outSpec().dtype,
                                         [](double x, double y) { return std::pow(x, y); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    return std::vector<Tensor>{
        mapInterval2(a, a.tensor(0), a.tensor(1), t, [&](Interval x, Interval y) {
          if (y.lo == y.hi && y.lo == std::floor(y.lo)) {
            const Interval e = powExact(x, y.lo);
            return isIntegral(t) ? e : libmEnclosure(e, LibmFn::Pow, c, fo);
          }
          // exp(y · log x): monotone pieces are covered by interval arithmetic on x > 0.
          const Interval l = log(x);
          if (isEmpty(l)) return l;
          Interval e = exp(mul(y, l));
          if (x.lo <= 0.0) return entireInterval();
          return isIntegral(t) ? e : libmEnclosure(e, LibmFn::Pow, c, fo);
        })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx);
    const Format c = opmathFormat(ctx.precision, t);
    return std::vector<Tensor>{mapPoint2(a, a.tensor(0), a.tensor(1), t, [&](double x, double y) {
      const double v = std::pow(x, y);
      return isIntegral(t) ? v : libmRandom(v, LibmFn::Pow, c, fo, *ctx.rng);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> o,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor &x = a.tensor(0), &y = a.tensor(1);
    const DType t = o[0].dtype();
    const Tensor dx = mapPoint3(a, g[0], x, y, t, [](double gv, double xv, double yv) {
      return yv == 0.0 ? 0.0 : gv * yv * std::pow(xv, yv - 1.0);
    });
    const Tensor dy = mapPoint3(a, g[0], x, y, t, [](double gv, double xv, double yv) {
      return xv > 0 ? gv * std::pow(xv, yv) * std::log(xv) : 0.0;
    });
    return std::vector<std::optional<Tensor>>{gradFor(x, dx), gradFor(y, dy)};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t)) return zeroLocalError(o);
    const Format fo = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    return std::vector<Tensor>{
        mapPoint(o[0], t, [&](double y) { return libmLocalError(y, LibmFn::Pow, c, fo); })};
  }
};

/// pow.Scalar: a ** x for a Python scalar base a and a tensor exponent x. PyTorch 1.13 calls
/// pow(wrapped_scalar_tensor(a), x) (base 1: full_like(x, 1)), so the base reaches the kernel as
/// a, RN_fp32(a) (CUDA opmath) or RN_F(a) (CPU scalar_t): the enclosure of scalarEnclosure.
class PowScalarBaseRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const double base = a.numberArg(0, "self");
    return std::vector<Tensor>{
        mapPoint(a.tensor(1), a.outSpec().dtype, [&](double x) { return std::pow(base, x); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    const double base = a.numberArg(0, "self");
    const Interval b = isIntegral(t) ? lossbound::point(base) : scalarEnclosure(base, fo);
    return std::vector<Tensor>{mapInterval(a.tensor(1), t, [&](Interval x) {
      const Interval e = exact(b, x);
      if (isIntegral(t) || (b.lo == 1.0 && b.hi == 1.0)) return e;
      // The candidate's libm pow in c within modelUlps (libm_model.h table), then stored in fo.
      return libmEnclosure(e, LibmFn::Pow, c, fo);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    const double base = a.numberArg(0, "self");
    if (isIntegral(t) || base == 1.0)
      return std::vector<Tensor>{
          mapPoint(a.tensor(1), t, [&](double x) { return std::pow(base, x); })};
    const double b = randomScalar(base, fo, *ctx.rng);
    return std::vector<Tensor>{mapPoint(a.tensor(1), t, [&](double x) {
      return libmRandom(std::pow(b, x), LibmFn::Pow, c, fo, *ctx.rng);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    // d(a^x)/dx = a^x·ln a (a > 0; PyTorch's pow backward, 0 for other bases here).
    const double base = a.numberArg(0, "self");
    const Tensor& x = a.tensor(1);
    const Tensor d = mapPoint2(a, g[0], x, x.dtype(), [&](double gv, double xv) {
      return base > 0.0 ? gv * std::pow(base, xv) * std::log(base) : 0.0;
    });
    return std::vector<std::optional<Tensor>>{gradFor(x, d)};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    // The enclosure on exact inputs includes the base's cast to fo, which a ulp model of y alone
    // would miss (|x|·u_F relative): localError is its distance to the point value.
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Encloses {b^x : b in B, x in X} exactly: exp(x·ln b) for b > 0 (interval arithmetic covers the
  /// monotone pieces); a base that may be <= 0 is bounded only for a point integer exponent.
  static Interval exact(Interval b, Interval x) {
    if (b.lo == 1.0 && b.hi == 1.0) return Interval{1.0, 1.0};
    if (b.lo > 0.0) return exp(mul(x, log(b)));
    if (x.lo == x.hi && x.lo == std::floor(x.lo)) return powExact(b, x.lo);
    return entireInterval();  // a negative base with a fractional exponent is NaN
  }
};

// ---------------------------------------------------------------------------------------------
// Comparisons and logical ops (exact; uncertain outcomes are [0, 1])

using kernels::BinaryOp;

double cmpPoint(BinaryOp c, double x, double y) {
  switch (c) {
    case BinaryOp::Eq:
      return x == y;
    case BinaryOp::Ne:
      return x != y;
    case BinaryOp::Lt:
      return x < y;
    case BinaryOp::Gt:
      return x > y;
    case BinaryOp::Le:
      return x <= y;
    case BinaryOp::Ge:
      return x >= y;
    default:
      return 0.0;
  }
}

/// eq ne lt gt le ge (Tensor and Scalar): exact (kernels::compareBody); an uncertain outcome of
/// interval inputs is [0, 1]; a scalar other is enclosed as it is converted to the tensor's format.
class CompareRule final : public OpRule {
 public:
  explicit CompareRule(BinaryOp cmp) : mCmp(cmp) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Operand x = operand(a, 0), y = operand(a, 1);
    return std::vector<Tensor>{
        mapPoint2(a, x.t, y.t, a.outSpec().dtype,
                  [this](double p, double q) { return cmpPoint(mCmp, p, q); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Operand x = operand(a, 0), y = operand(a, 1);
    const Format fmt = tensorFormat(a, ctx);
    const Tensor yt = enclosureOf(y, fmt, false);
    const DType t = a.outSpec().dtype;
    if (auto r = offerBinary(ctx.backend, mCmp, {fmt, fmt, 0}, x.t, yt,
                             broadcastAll(a, {x.t.shape(), yt.shape()}), t))
      return {std::move(*r)};
    return std::vector<Tensor>{mapInterval2(a, x.t, yt, t, [this](Interval p, Interval q) {
      return kernels::compareBody(mCmp, p, q);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Operand x = operand(a, 0), y = operand(a, 1);
    const Tensor yt = randomOf(y, tensorFormat(a, ctx), false, *ctx.rng);
    return std::vector<Tensor>{mapPoint2(a, x.t, yt, a.outSpec().dtype, [this](double p, double q) {
      return cmpPoint(mCmp, p, q);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// A scalar other is converted to the tensor's format before comparing (RN), in some kernels
  /// compared in opmath: enclosure scalarEnclosure(s, F of the tensor).
  static Format tensorFormat(const OpArgs& a, OpContext& ctx) {
    const DType t = a.tensor(0).dtype();
    return isFloating(t) ? ctx.precision.storageFor(t) : Format::Fp64;
  }

  BinaryOp mCmp;
};

enum class Logic { BitwiseNot, LogicalNot };

double logicPoint(Logic op, double x, DType t) {
  if (op == Logic::LogicalNot || t == DType::Bool) return x == 0.0 ? 1.0 : 0.0;
  return -x - 1.0;  // two's complement ~x
}

/// bitwise_not logical_not: exact; an uncertain outcome of interval inputs is [0, 1].
class LogicRule final : public OpRule {
 public:
  explicit LogicRule(Logic op) : mOp(op) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (mOp == Logic::BitwiseNot && isFloating(x.dtype()))
      a.fail("bitwise_not needs an integer or bool tensor, found " +
             std::string(dtypeName(x.dtype())));
    return std::vector<Tensor>{mapInterval(x, a.outSpec().dtype, [&](Interval v) -> Interval {
      if (mOp == Logic::BitwiseNot && x.dtype() != DType::Bool) return {-v.hi - 1.0, -v.lo - 1.0};
      if (v.lo == v.hi) return lossbound::point(v.lo == 0.0 ? 1.0 : 0.0);
      return contains(v, 0.0) ? Interval{0.0, 1.0} : Interval{0.0, 0.0};
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    return std::vector<std::optional<Tensor>>(a.tensorInputs().size());
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// Returns the exact result (the same in the point and random domains).
  std::vector<Tensor> apply(const OpArgs& a, OpContext&) const {
    const Tensor& x = a.tensor(0);
    if (mOp == Logic::BitwiseNot && isFloating(x.dtype()))
      a.fail("bitwise_not needs an integer or bool tensor, found " +
             std::string(dtypeName(x.dtype())));
    return std::vector<Tensor>{
        mapPoint(x, a.outSpec().dtype, [&](double v) { return logicPoint(mOp, v, x.dtype()); })};
  }

  Logic mOp;
};

// ---------------------------------------------------------------------------------------------
// Selection: where, masked_fill (a condition that may be either selects the hull)

/// Returns true / false / nothing (uncertain) for a condition enclosure.
std::optional<bool> truth(Interval c) {
  if (c.lo == 0.0 && c.hi == 0.0) return false;
  if (!contains(c, 0.0)) return true;
  return std::nullopt;
}

enum class Logic2 { And, Or, Xor };

/// a op b on truth values (0 or 1).
bool logic2Truth(Logic2 op, bool p, bool q) {
  switch (op) {
    case Logic2::And:
      return p && q;
    case Logic2::Or:
      return p || q;
    case Logic2::Xor:
      return p != q;
  }
  return false;
}

/// logical_and/or/xor of any dtypes, bitwise_and/or/xor (.Tensor, .Scalar) of bool or integer
/// tensors: exact. An operand enclosure that holds both 0 and a nonzero value is "unknown", and
/// the result is [0, 1] unless the other operand decides it (false AND x, true OR x). Bitwise
/// ops of integers (not bool) need point operands: they are exact integers in every replay
/// (integers are never rounded), so a wider enclosure is refused rather than hulled.
class Logic2Rule final : public OpRule {
 public:
  Logic2Rule(Logic2 op, bool bitwise) : mOp(op), mBitwise(bitwise) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override { return apply(a); }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    const Operand x = operand(a, 0), y = operand(a, 1);
    check(a, x, y);
    const bool integers = bitwiseIntegers(x, y);
    return std::vector<Tensor>{
        mapInterval2(a, x.t, y.t, a.outSpec().dtype, [&](Interval p, Interval q) -> Interval {
          if (integers) {
            if (p.lo != p.hi || q.lo != q.hi)
              a.fail("bitwise ops of integer tensors need exact operands, found [" +
                     std::to_string(p.lo) + ", " + std::to_string(p.hi) + "] and [" +
                     std::to_string(q.lo) + ", " + std::to_string(q.hi) + "]");
            return lossbound::point(integerPoint(p.lo, q.lo));
          }
          const std::optional<bool> tp = truth(p), tq = truth(q);
          if (tp && tq) return lossbound::point(logic2Truth(mOp, *tp, *tq) ? 1.0 : 0.0);
          if (mOp == Logic2::And && ((tp && !*tp) || (tq && !*tq))) return lossbound::point(0.0);
          if (mOp == Logic2::Or && ((tp && *tp) || (tq && *tq))) return lossbound::point(1.0);
          return Interval{0.0, 1.0};
        })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext&) const override { return apply(a); }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    return std::vector<std::optional<Tensor>>(a.tensorInputs().size());
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// Returns true when a bitwise op works on integer bits (no operand is bool or logical).
  bool bitwiseIntegers(const Operand& x, const Operand& y) const {
    return mBitwise && x.t.dtype() != DType::Bool && (y.scalar || y.t.dtype() != DType::Bool);
  }

  void check(const OpArgs& a, const Operand& x, const Operand& y) const {
    if (!mBitwise) return;
    for (const Operand* o : {&x, &y})
      if (!o->scalar && isFloating(o->t.dtype()))
        a.fail("bitwise ops need integer or bool tensors, found " +
               std::string(dtypeName(o->t.dtype())));
  }

  double integerPoint(double p, double q) const {
    const auto i = static_cast<std::int64_t>(p), j = static_cast<std::int64_t>(q);
    switch (mOp) {
      case Logic2::And:
        return static_cast<double>(i & j);
      case Logic2::Or:
        return static_cast<double>(i | j);
      case Logic2::Xor:
        return static_cast<double>(i ^ j);
    }
    return 0.0;
  }

  /// Returns the exact result (the same in the point and random domains).
  std::vector<Tensor> apply(const OpArgs& a) const {
    const Operand x = operand(a, 0), y = operand(a, 1);
    check(a, x, y);
    const bool integers = bitwiseIntegers(x, y);
    return std::vector<Tensor>{mapPoint2(a, x.t, y.t, a.outSpec().dtype, [&](double p, double q) {
      if (integers) return integerPoint(p, q);
      return logic2Truth(mOp, p != 0.0, q != 0.0) ? 1.0 : 0.0;
    })};
  }

  Logic2 mOp;
  bool mBitwise;
};

/// where(cond, a, b) with operand positions; scalars take the output format's enclosure.
class SelectRule final : public OpRule {
 public:
  /// Takes the positions of the condition and of the operands selected where it is true / false.
  SelectRule(std::size_t condIdx, std::size_t aIdx, std::size_t bIdx)
      : mCondIdx(condIdx), mAIdx(aIdx), mBIdx(bIdx) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& c = a.tensor(mCondIdx);
    const Operand x = operand(a, mAIdx), y = operand(a, mBIdx);
    return {mapPoint3(a, c, x.t, y.t, a.outSpec().dtype,
                      [](double cv, double p, double q) { return cv != 0.0 ? p : q; })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const Operand x = operand(a, mAIdx), y = operand(a, mBIdx);
    const Tensor xt = enclosureOf(x, f, integral), yt = enclosureOf(y, f, integral);
    // Offered to the backend (the same selection and storage: kernels::selectBody).
    if (!integral)
      if (auto r =
              offerSelect(ctx.backend, {f, f, 0}, a.tensor(mCondIdx), xt, yt,
                          broadcastAll(a, {a.tensor(mCondIdx).shape(), xt.shape(), yt.shape()}), t))
        return {std::move(*r)};
    return {mapInterval3(a, a.tensor(mCondIdx), xt, yt, t, [&](Interval c, Interval p, Interval q) {
      const auto tv = truth(c);
      const Interval r = tv ? (*tv ? p : q) : hull(p, q);
      return ro(r, f, integral);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const Operand x = operand(a, mAIdx), y = operand(a, mBIdx);
    const Tensor xt = randomOf(x, f, integral, *ctx.rng), yt = randomOf(y, f, integral, *ctx.rng);
    return {mapPoint3(a, a.tensor(mCondIdx), xt, yt, t, [&](double cv, double p, double q) {
      const double r = cv != 0.0 ? p : q;
      return integral ? r : roundNearest(r, f);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& c = a.tensor(mCondIdx);
    // tensorInputs() order follows the positional order of the tensor arguments.
    std::vector<std::pair<std::size_t, std::optional<Tensor>>> byPos;
    for (std::size_t i : {mCondIdx, mAIdx, mBIdx}) {
      if (!a.isTensor(i)) continue;
      std::optional<Tensor> gi;
      if (i != mCondIdx) {
        const bool takeWhenTrue = i == mAIdx;
        const Tensor masked = mapPoint2(a, g[0], c, g[0].dtype(), [&](double gv, double cv) {
          return (cv != 0.0) == takeWhenTrue ? gv : 0.0;
        });
        gi = gradFor(a.tensor(i), masked);
      }
      byPos.emplace_back(i, gi);
    }
    std::sort(byPos.begin(), byPos.end(),
              [](const auto& l, const auto& r) { return l.first < r.first; });
    std::vector<std::optional<Tensor>> out;
    for (auto& [i, gi] : byPos) out.push_back(gi);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Operand x = operand(a, mAIdx), y = operand(a, mBIdx);
    if (isIntegral(t) || (!x.scalar && !y.scalar)) return zeroLocalError(o);
    const Format f = outFormat(a, ctx);
    // Only a selected Python scalar is converted: its error is |RN(s) - s| exactly (0 for ±inf,
    // e.g. masked_fill with -inf).
    auto conv = [f](double s) {
      if (!std::isfinite(s) || f == Format::Fp64) return 0.0;
      return std::max(std::fabs(roundNearest(s, f) - s),
                      std::fabs(roundNearest(s, Format::Fp32) - s));
    };
    const double ex = x.scalar ? conv(x.value) : 0.0, ey = y.scalar ? conv(y.value) : 0.0;
    return {mapPoint3(a, a.tensor(mCondIdx), x.t, y.t, t,
                      [&](double cv, double, double) { return cv != 0.0 ? ex : ey; })};
  }

 private:
  std::size_t mCondIdx, mAIdx, mBIdx;  // masked_fill(self, mask, value) = where(mask, value, self)
};

// ---------------------------------------------------------------------------------------------
// clamp / clamp_min / clamp_max (scalar bounds) and maximum / minimum (tensors): exact.

enum class Clamp { Both, Min, Max };

/// The local error of an exact selection stored in the output format: its storage rounding
/// (zero for integers).
std::vector<Tensor> selectionLocalError(const OpArgs& a, std::span<const Tensor> o,
                                        OpContext& ctx) {
  const Format fo = outFormat(a, ctx);
  if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
  return std::vector<Tensor>{
      mapPoint(o[0], o[0].dtype(), [&](double v) { return storageRoundingError(v, fo); })};
}

/// clamp clamp_min clamp_max with scalar bounds (enclosed as converted to F): exact selection,
/// then storage rounding.
class ClampRule final : public OpRule {
 public:
  explicit ClampRule(Clamp kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const auto [lo, hi] = bounds(a);
    return std::vector<Tensor>{mapPoint(a.tensor(0), a.outSpec().dtype, [&](double x) {
      if (lo && x < *lo) x = *lo;
      if (hi && x > *hi) x = *hi;
      return x;
    })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const auto [lo, hi] = bounds(a);
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format fo = outFormat(a, ctx);
    if (integral)
      return std::vector<Tensor>{mapInterval(a.tensor(0), t, [&](Interval x) {
        if (lo) x = max(x, lossbound::point(*lo));
        if (hi) x = min(x, lossbound::point(*hi));
        return x;
      })};
    // The body a device runs (kernels::unaryBody, UnaryOp::Clamp): an absent bound is ±inf, and
    // an explicit infinite bound is read as absent (an exact ±inf input then stays exact; the
    // rule before the body widened it to [largest finite, inf]), a NaN bound gives the line.
    kernels::ElementwiseModel m{opmathFormat(ctx.precision, t), fo, 0};
    m.clampLo = lo.value_or(-kInf);
    m.clampHi = hi.value_or(kInf);
    if (auto r = offerUnary(ctx.backend, kernels::UnaryOp::Clamp, m, a.tensor(0), t))
      return {std::move(*r)};
    return std::vector<Tensor>{mapInterval(a.tensor(0), t, [&](Interval x) {
      return kernels::unaryBody(kernels::UnaryOp::Clamp, x, m);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const auto [lo, hi] = bounds(a);
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format fo = outFormat(a, ctx);
    const double l = lo ? (integral ? *lo : randomScalar(*lo, fo, *ctx.rng)) : 0.0;
    const double h = hi ? (integral ? *hi : randomScalar(*hi, fo, *ctx.rng)) : 0.0;
    return std::vector<Tensor>{mapPoint(a.tensor(0), t, [&](double x) {
      if (lo && x < l) x = l;
      if (hi && x > h) x = h;
      return integral ? x : roundNearest(x, fo);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const auto [lo, hi] = bounds(a);
    const Tensor& x = a.tensor(0);
    const Tensor d = mapPoint2(a, g[0], x, g[0].dtype(), [&](double gv, double xv) {
      return ((lo && xv < *lo) || (hi && xv > *hi)) ? 0.0 : gv;
    });
    return std::vector<std::optional<Tensor>>{gradFor(x, d)};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return selectionLocalError(a, o, ctx);
  }

 private:
  std::pair<std::optional<double>, std::optional<double>> bounds(const OpArgs& a) const {
    std::optional<double> lo, hi;
    if (mKind == Clamp::Min)
      lo = a.numberArg(1, "min");
    else if (mKind == Clamp::Max)
      hi = a.numberArg(1, "max");
    else {
      if (isNumber(a, 1) || (a.kwarg("min") && a.kwarg("min")->kind != IrValue::Kind::None))
        lo = a.numberArg(1, "min");
      if (isNumber(a, 2) || (a.kwarg("max") && a.kwarg("max")->kind != IrValue::Kind::None))
        hi = a.numberArg(2, "max");
    }
    return std::pair{lo, hi};
  }

  Clamp mKind;
};

/// clamp.Tensor clamp_.Tensor (self, min: Tensor?, max: Tensor?, broadcast): min(max(x, lo), hi)
/// as PyTorch's kernel computes it (a NaN self stays NaN), an exact selection stored in the
/// output format. The gradient goes to self where lo <= x <= hi, to min where x < lo < hi and to
/// max where x > hi or hi < lo (then the result is hi), as PyTorch's clamp backward.
class ClampTensorRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Bounds b = bounds(a);
    const Shape s = broadcastAll(a, {a.tensor(0).shape(), b.lo.shape(), b.hi.shape()});
    const Tensor x = broadcastTo(a, a.tensor(0), s), lo = broadcastTo(a, b.lo, s),
                 hi = broadcastTo(a, b.hi, s);
    return std::vector<Tensor>{mapPoint3(a, x, lo, hi, a.outSpec().dtype, clampPoint)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Bounds b = bounds(a);
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx);
    const Shape s = broadcastAll(a, {a.tensor(0).shape(), b.lo.shape(), b.hi.shape()});
    const Tensor x = broadcastTo(a, a.tensor(0), s), lo = broadcastTo(a, b.lo, s),
                 hi = broadcastTo(a, b.hi, s);
    std::vector<double> ol(static_cast<std::size_t>(x.numel())), oh(ol.size());
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const Interval r =
          tensorElement(ro(min(max(x.at(i), lo.at(i)), hi.at(i)), fo, isIntegral(t)));
      ol[static_cast<std::size_t>(i)] = r.lo;
      oh[static_cast<std::size_t>(i)] = r.hi;
    }
    return std::vector<Tensor>{Tensor::interval(s, t, std::move(ol), std::move(oh))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx);
    const Tensor p = point(a, ctx)[0];
    return std::vector<Tensor>{
        mapPoint(p, t, [&](double v) { return isIntegral(t) ? v : roundNearest(v, fo); })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Bounds b = bounds(a);
    const Tensor& x0 = a.tensor(0);
    const Shape& s = g[0].shape();
    const Tensor x = broadcastTo(a, x0, s), lo = broadcastTo(a, b.lo, s),
                 hi = broadcastTo(a, b.hi, s);
    const auto n = static_cast<std::size_t>(g[0].numel());
    std::vector<double> gx(n), gl(n), gh(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = x.values()[i], l = lo.values()[i], h = hi.values()[i], gv = g[0].values()[i];
      // PyTorch's clamp backward: max where x > hi or hi < lo, min where x < lo < hi.
      if (v > h || h < l)
        gh[i] = gv;
      else if (v < l)
        gl[i] = gv;
      else
        gx[i] = gv;
    }
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    // Each operand's share, added up where one tensor is several operands (clamp(x, x)).
    const auto put = [&](const Tensor* t, std::vector<double>& d) {
      if (!isFloating(t->dtype())) return;
      const Tensor share = sumToShape(Tensor::point(s, g[0].dtype(), std::move(d)), t->shape());
      for (std::size_t k = 0; k < out.size(); ++k) {
        if (a.tensorInputs()[k] != t) continue;
        std::vector<double> v(share.values().begin(), share.values().end());
        if (out[k])
          for (std::size_t i = 0; i < v.size(); ++i) v[i] += out[k]->values()[i];
        out[k] = Tensor::point(t->shape(), t->dtype(), std::move(v));
        break;
      }
    };
    put(&x0, gx);
    if (b.loRef) put(b.loRef, gl);
    if (b.hiRef) put(b.hiRef, gh);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return selectionLocalError(a, o, ctx);
  }

 private:
  /// The bounds as tensors (an absent one as ∓inf) and the inputs they came from.
  struct Bounds {
    Tensor lo, hi;
    const Tensor *loRef = nullptr, *hiRef = nullptr;
  };

  static double clampPoint(double x, double lo, double hi) {
    if (std::isnan(x)) return x;
    return std::min(std::max(x, lo), hi);
  }

  /// Returns bound `name` (positional i, else keyword), or nullptr when absent or None.
  static const Tensor* bound(const OpArgs& a, std::size_t i, const std::string& name) {
    if (a.isTensor(i)) return &a.tensor(i);
    if (i < a.size() && a.arg(i).kind != IrValue::Kind::None)
      a.fail("clamp.Tensor: " + name + " should be a tensor or None");
    const IrValue* k = a.kwarg(name);
    if (!k || k->kind == IrValue::Kind::None) return nullptr;
    if (k->kind != IrValue::Kind::Ref) a.fail("clamp.Tensor: " + name + " should be a tensor");
    // Keyword tensors follow the positional ones in tensorInputs(), in keyword order.
    std::size_t pos = 0;
    for (std::size_t j = 0; j < a.size(); ++j) pos += a.arg(j).kind == IrValue::Kind::Ref;
    for (const auto& [kn, kv] : a.node().kwargs) {
      if (kn == name) break;
      pos += kv.kind == IrValue::Kind::Ref;
    }
    return a.tensorInputs().at(pos);
  }

  static Bounds bounds(const OpArgs& a) {
    Bounds b;
    b.loRef = bound(a, 1, "min");
    b.hiRef = bound(a, 2, "max");
    if (!b.loRef && !b.hiRef) a.fail("clamp.Tensor: at least one of min and max must be given");
    const double inf = std::numeric_limits<double>::infinity();
    b.lo = b.loRef ? *b.loRef : Tensor::scalar(-inf, DType::Float64);
    b.hi = b.hiRef ? *b.hiRef : Tensor::scalar(inf, DType::Float64);
    return b;
  }
};

/// maximum minimum (NaN propagates): exact selection; ties split the gradient evenly.
class ExtremumRule final : public OpRule {
 public:
  explicit ExtremumRule(bool isMax) : mIsMax(isMax) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return std::vector<Tensor>{
        mapPoint2(a, a.tensor(0), a.tensor(1), a.outSpec().dtype, [this](double x, double y) {
          if (std::isnan(x) || std::isnan(y)) return x + y;
          return mIsMax ? std::max(x, y) : std::min(x, y);
        })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx);
    return std::vector<Tensor>{
        mapInterval2(a, a.tensor(0), a.tensor(1), t, [&](Interval x, Interval y) {
          return ro(mIsMax ? max(x, y) : min(x, y), fo, isIntegral(t));
        })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return point(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor &x = a.tensor(0), &y = a.tensor(1);
    // Ties split the gradient evenly (as PyTorch does for maximum/minimum).
    const Tensor gx = mapPoint3(a, g[0], x, y, g[0].dtype(), [this](double gv, double p, double q) {
      if (p == q) return gv / 2;
      return (mIsMax ? p > q : p < q) ? gv : 0.0;
    });
    const Tensor gy = mapPoint3(a, g[0], x, y, g[0].dtype(), [this](double gv, double p, double q) {
      if (p == q) return gv / 2;
      return (mIsMax ? q > p : q < p) ? gv : 0.0;
    });
    return std::vector<std::optional<Tensor>>{gradFor(x, gx), gradFor(y, gy)};
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  bool mIsMax;  // maximum (else minimum)
};

// ---------------------------------------------------------------------------------------------
// nan_to_num: NaN, +inf, -inf replaced by numbers stored in F; finite values pass unchanged.

/// nan_to_num(x, nan=0, posinf=max_F, neginf=-max_F): exact for finite x; a replacement value v
/// is stored as static_cast<scalar_t>(v) (RN_F, for bf16/fp16 through float): enclosed by
/// roundOutward(v, F). An interval endpoint at ±inf may hold the infinity (its replacement) or
/// any finite F value; the entire line may also be NaN.
class NanToNumRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    const Replacements r = replacements(a, ctx);
    return {mapPoint(a.tensor(0), a.outSpec().dtype,
                     [&](double x) { return pick(x, r.nan, r.pos, r.neg); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t)) return {a.tensor(0)};
    const Format f = outFormat(a, ctx);
    const Replacements r = replacements(a, ctx);
    const Interval nan = stored(r.nan, f), pos = stored(r.pos, f), neg = stored(r.neg, f);
    const double big = largestFinite(f);
    return {mapInterval(a.tensor(0), t, [&](Interval x) {
      if (hasNan(x)) x = entireInterval();
      Interval out = emptyInterval();
      // the finite values inside x (F values: |v| <= max_F)
      const Interval finite = intersect(x, Interval{-big, big});
      if (!isEmpty(finite)) out = finite;
      if (x.hi == kInf) out = hull(out, pos);
      if (x.lo == -kInf) out = hull(out, neg);
      if (x.lo == -kInf && x.hi == kInf) out = hull(out, nan);
      return out;
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t)) return {a.tensor(0)};
    const Format f = outFormat(a, ctx);
    const Replacements r = replacements(a, ctx);
    return {mapPoint(a.tensor(0), t, [&](double x) {
      return pick(x, roundNearest(r.nan, f), roundNearest(r.pos, f), roundNearest(r.neg, f));
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    // PyTorch: grad · isfinite(x)
    return {gradFor(x, mapPoint2(a, g[0], x, g[0].dtype(), [](double gv, double xv) {
                      return std::isfinite(xv) ? gv : 0.0;
                    }))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  struct Replacements {
    double nan, pos, neg;
  };

  static Replacements replacements(const OpArgs& a, const OpContext& ctx) {
    const double big = isIntegral(a.outSpec().dtype) ? 0.0 : largestFinite(outFormat(a, ctx));
    return {optionalNumber(a, 1, "nan").value_or(0.0), optionalNumber(a, 2, "posinf").value_or(big),
            optionalNumber(a, 3, "neginf").value_or(-big)};
  }

  static double pick(double x, double nan, double pos, double neg) {
    if (std::isnan(x)) return nan;
    if (x == kInf) return pos;
    if (x == -kInf) return neg;
    return x;
  }

  /// The enclosure of static_cast<scalar_t>(v) in f (directly or through float).
  static Interval stored(double v, Format f) { return roundOutward(lossbound::point(v), f); }
};

}  // namespace

void registerElementwiseOps(OpRegistry& r) {
  const std::pair<const char*, Arith> arith[] = {
      {"add", Arith::Add}, {"sub", Arith::Sub}, {"mul", Arith::Mul}, {"div", Arith::Div}};
  for (const auto& [name, op] : arith) {
    const auto rule = std::make_shared<const ArithRule>(op);
    for (const char* suffix : {".Tensor", ".Scalar"}) {
      r.add(std::string("aten.") + name + suffix, rule);
      r.add(std::string("aten.") + name + "_" + suffix, rule);
    }
  }
  registerIntegerDivisionOps(r);  // floor_divide, and div with a rounding mode (after div)
  r.add("aten.rsub.Tensor", std::make_shared<const ArithRule>(Arith::Rsub));
  r.add("aten.rsub.Scalar", std::make_shared<const ArithRule>(Arith::Rsub));

  const std::pair<const char*, Unary> unary[] = {
      {"neg", Unary::Neg},     {"abs", Unary::Abs},     {"reciprocal", Unary::Reciprocal},
      {"sqrt", Unary::Sqrt},   {"rsqrt", Unary::Rsqrt}, {"exp", Unary::Exp},
      {"log", Unary::Log},     {"sin", Unary::Sin},     {"cos", Unary::Cos},
      {"expm1", Unary::Expm1}, {"log1p", Unary::Log1p}, {"floor", Unary::Floor},
      {"ceil", Unary::Ceil},   {"trunc", Unary::Trunc}, {"round", Unary::Round},
      {"sign", Unary::Sign}};
  for (const auto& [name, op] : unary) {
    const auto rule = std::make_shared<const UnaryRule>(op);
    r.add(std::string("aten.") + name + ".default", rule);
    r.add(std::string("aten.") + name + "_.default", rule);
  }
  r.add("aten.pow.Tensor_Scalar", std::make_shared<const UnaryRule>(Unary::PowScalar));
  r.add("aten.pow_.Scalar", std::make_shared<const UnaryRule>(Unary::PowScalar));
  r.add("aten.pow.Tensor_Tensor", std::make_shared<const PowTensorTensorRule>());
  r.add("aten.pow.Scalar", std::make_shared<const PowScalarBaseRule>());

  const std::pair<const char*, BinaryOp> cmps[] = {{"eq", BinaryOp::Eq}, {"ne", BinaryOp::Ne},
                                                   {"lt", BinaryOp::Lt}, {"gt", BinaryOp::Gt},
                                                   {"le", BinaryOp::Le}, {"ge", BinaryOp::Ge}};
  for (const auto& [name, op] : cmps) {
    const auto rule = std::make_shared<const CompareRule>(op);
    r.add(std::string("aten.") + name + ".Tensor", rule);
    r.add(std::string("aten.") + name + ".Scalar", rule);
  }
  r.add("aten.bitwise_not.default", std::make_shared<const LogicRule>(Logic::BitwiseNot));
  r.add("aten.logical_not.default", std::make_shared<const LogicRule>(Logic::LogicalNot));
  const std::pair<const char*, Logic2> logic2[] = {
      {"and", Logic2::And}, {"or", Logic2::Or}, {"xor", Logic2::Xor}};
  for (const auto& [name, op] : logic2) {
    r.add(std::string("aten.logical_") + name + ".default",
          std::make_shared<const Logic2Rule>(op, false));
    const auto bitwise = std::make_shared<const Logic2Rule>(op, true);
    r.add(std::string("aten.bitwise_") + name + ".Tensor", bitwise);
    r.add(std::string("aten.bitwise_") + name + ".Scalar", bitwise);
  }

  const auto where = std::make_shared<const SelectRule>(0, 1, 2);
  r.add("aten.where.self", where);
  r.add("aten.where.ScalarSelf", where);
  r.add("aten.where.ScalarOther", where);
  r.add("aten.where.Scalar", where);
  const auto maskedFill = std::make_shared<const SelectRule>(1, 2, 0);
  r.add("aten.masked_fill.Scalar", maskedFill);
  r.add("aten.masked_fill.Tensor", maskedFill);
  r.add("aten.masked_fill_.Scalar", maskedFill);
  r.add("aten.masked_fill_.Tensor", maskedFill);

  r.add("aten.clamp.default", std::make_shared<const ClampRule>(Clamp::Both));
  r.add("aten.clamp_.default", std::make_shared<const ClampRule>(Clamp::Both));
  r.add("aten.clamp.Tensor", std::make_shared<const ClampTensorRule>());
  r.add("aten.clamp_.Tensor", std::make_shared<const ClampTensorRule>());
  r.add("aten.clamp_min.default", std::make_shared<const ClampRule>(Clamp::Min));
  r.add("aten.clamp_min_.default", std::make_shared<const ClampRule>(Clamp::Min));
  r.add("aten.clamp_max.default", std::make_shared<const ClampRule>(Clamp::Max));
  r.add("aten.clamp_max_.default", std::make_shared<const ClampRule>(Clamp::Max));
  r.add("aten.nan_to_num.default", std::make_shared<const NanToNumRule>());
  r.add("aten.nan_to_num_.default", std::make_shared<const NanToNumRule>());
  r.add("aten.maximum.default", std::make_shared<const ExtremumRule>(true));
  r.add("aten.minimum.default", std::make_shared<const ExtremumRule>(false));
}

}  // namespace lossbound
