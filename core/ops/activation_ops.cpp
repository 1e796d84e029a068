// Activation ops: relu threshold_backward gelu gelu_backward silu silu_backward sigmoid
// sigmoid_backward tanh tanh_backward.
//
// Error model ("any reasonable implementation", PyTorch 1.13 CPU and CUDA kernels as the
// reference), per element:
// - inputs are the stored values; arithmetic is done in the opmath format c (fp32 for
//   fp32/bf16/fp16 storage, fp64 for fp64), each + − × ÷ correctly rounded in c (Higham 2002,
//   §2.2, the standard model fl(a op b) = (a op b)(1 + δ), |δ| ≤ u_c, here enclosed exactly by
//   rounding the binary64 enclosure outward to c);
// - exp, tanh, erf are the candidate's libm in c: within modelUlps (published + 1) ulps of the
//   exact value (libm_model.h table: CUDA 13 and glibc 2.36, measured, not proven);
// - constants (1/√2, √(2/π), 0.044715, ...) are the binary64 values PyTorch uses rounded to c;
// - the formulas are PyTorch's, with the bracketing variants listed at each op (the interval
//   rule encloses the hull of the variants, the random rule picks one per execution);
// - the result is rounded to nearest in the output's storage format s.
// relu and threshold_backward are exact (selections), up to the storage rounding.
// Cancellations are real and enclosed, not assumed away: gelu through 1 + erf(x/√2) for x ≪ 0
// has an absolute error of a few ulps of 1 in c (the interval is then wide relative to the
// tiny exact value), as the fp32 kernels do.

#include "core/kernels/kernel_bodies.h"
#include "core/ops/broadcasting.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

// The formulas, their bracketings and PyTorch's constants: core/kernels/smooth_activation.h,
// shared with the kernel bodies. The unary activations are kernels::UnaryOp values (Sigmoid, Tanh,
// Silu, GeluErf, GeluTanh), the backward ops kernels::BinaryOp values (SigmoidBackward,
// TanhBackward, SiluBackward, GeluBackward, GeluTanhBackward).
using Unary = kernels::UnaryOp;
using Binary = kernels::BinaryOp;

std::string approximateArg(const OpArgs& args, std::size_t pos) {
  if (args.arg(pos).kind == IrValue::Kind::String) return args.arg(pos).stringValue;
  if (const IrValue* v = args.kwarg("approximate"); v && v->kind == IrValue::Kind::String)
    return v->stringValue;
  return "none";
}

Unary geluKind(const OpArgs& args) {
  const std::string a = approximateArg(args, 1);
  if (a == "none") return Unary::GeluErf;
  if (a == "tanh") return Unary::GeluTanh;
  args.fail("approximate should be 'none' or 'tanh', found '" + a + "'");
}

Binary geluBackwardKind(const OpArgs& args) {
  const std::string a = approximateArg(args, 2);
  if (a == "none") return Binary::GeluBackward;
  if (a == "tanh") return Binary::GeluTanhBackward;
  args.fail("approximate should be 'none' or 'tanh', found '" + a + "'");
}

void requireFloating(const OpArgs& args, const Tensor& t) {
  if (!isFloating(t.dtype()))
    args.fail("expected a floating tensor, found " + std::string(dtypeName(t.dtype())));
}

/// The model of the candidate's arithmetic for an activation op in compute format c stored in
/// s: the ulps of its libm function (kernels::activationLibm), and exp's for gelu's backward.
template <class Op>
kernels::ElementwiseModel activationModel(Op op, Format c, Format s) {
  kernels::ElementwiseModel m{c, s, modelUlps(libmFn(kernels::activationLibm(op)), c)};
  m.expUlps = modelUlps(LibmFn::Exp, c);
  return m;
}

/// Bounds |y − gelu(x)| for y = point()'s binary64 gelu of a finite x, the formula
/// fl(fl(x·0.5)·fl(1 + erf_libm(fl(x·c)))) with c = RN(√½), u = 2^-53, η = 2^-1074, k =
/// modelUlps(erf, fp64). Each step's error, times what it is multiplied by (Higham 2002 §2.2,
/// |fl(z) − z| <= u|z| + η for + − × in binary64):
/// - the product, and fl(1 + e') (its error u|p| times |h| = |x|/2): u|y|(1 + 2u) + η each;
/// - erf_libm(t) within k ulps of erf(t) (glibc 2.36 libm-test-ulps, + 1 as the model), ulp(v)
///   <= 2u|v| + η (slack 1 + 2^-10), |erf(t)| <= min(1, (2/√π)|t|): |h|·k·(2u·E + η);
/// - t = fl(x·c) against s = x/√2: |t − s| <= 2.42u|s| + η (c within 2^-53 of √½, the product
///   within u), so |erf(t) − erf(s)| <= |t − s|·(2/√π)·e^(−ξ²) with ξ² >= s²(1 − 6u); times
///   |h| that is u·x²·0.9655·e^(−x²(1 − 6u)/2) + 0.565|x|η, and x²e^(−x²(1−6u)/2) <= min(x²,
///   2/(e(1 − 6u))) <= min(x², 0.7358);
/// - h = fl(x·0.5) is exact but when x is subnormal: η·|p| <= 2η.
/// The sum, evaluated to nearest, is scaled by 1 + 2^-40 (its own few roundings) plus 4η.
/// Tested against MPFR (tests/core/ops/test_activation_ops: geluPointErrorBoundsTheBinary64Value).
/// 2/√π, √½ and their product √(2/π) (erf′(0), the argument's scale, erf′(0)·√½), to nearest.
constexpr double kTwoOverSqrtPi = 1.1283791670955126, kSqrtHalf = 0.7071067811865476,
                 kSqrtTwoOverPi = 0.7978845608028654;

double geluErfPointError(double x, double y) {
  constexpr double u = 0x1p-53, eta = 0x1p-1074;
  static const double k = modelUlps(LibmFn::Erf, Format::Fp64);
  const double ax = std::fabs(x), h = 0.5 * ax;
  const double e = std::fmin(1.0, kSqrtTwoOverPi * ax * (1.0 + 0x1p-30));
  const double rounding = 2.0 * u * std::fabs(y) * (1.0 + 2.0 * u) + 2.0 * eta;
  const double libmTerm = h * k * (2.0 * u * (1.0 + 0x1p-10) * e + eta);
  const double argTerm = u * 0.9655 * std::fmin(ax * ax, 0.7358) + 0.565 * ax * eta;
  return (rounding + libmTerm + argTerm) * (1.0 + 0x1p-40) + 6.0 * eta;
}

/// Inputs up to this magnitude take gelu's closed-form local error: the candidate's result is
/// finite in every storage format (fp16's largest is 65504), the rest take the interval rule.
constexpr double kGeluClosedFormRange = 0x1p14;

/// Bounds |ŷ − y| for every ŷ the candidate can store for gelu(x) (erf form) computing in c and
/// storing in s, y = point()'s binary64 value, |x| <= kGeluClosedFormRange: the steps of
/// geluErfPointError in c (u_c, η_c, k_c = modelUlps(erf, c)), with h = fl_c(x·0.5) rounded too,
/// the constant RN_c(RN(√½)) (relative error ρ = u_c + 1.415·2^-53), t within ρ_t = ρ + u_c(1 +
/// ρ) of s = x/√2, then the storage rounding u_s|ŷ| + η_s when s differs from c; G = gelu(x) and P
/// = 1 + erf(x/√2) are bounded from y and its point error pe (|G| <= |y| + pe, P <= 2|G|/|x|),
/// and pe is added (the bound is on the distance to y, localError's contract). Per step, with
/// D1 = |1 + e' − P| <= k_c·(2u_c·E + η_c)(1 + 2^-10) + |erf t − erf s|:
///   |p − P| <= u_c(P + D1) + D1 + η_c,  |h·p − G| <= (u_c|x|/2 + η_c)(P + |p − P|) + (|x|/2)|p −
///   P|, |z − G| <= |h·p − G| + u_c(|G| + |h·p − G|) + η_c,
/// with (|x|/2)|erf t − erf s| <= ρ_t·0.39895·min(x², 0.7358) + 0.565|x|η_c as in
/// geluErfPointError. Evaluated to nearest and scaled by 1 + 2^-30. Its soundness rests on this
/// derivation: it is often below the interval rule's bound (that rule rounds every step outward
/// where the model rounds to nearest), so it is checked against every execution of the model
/// (tests/core/ops/test_activation_ops: geluLocalErrorBoundsEveryModelledExecution) and against
/// the randomized executor (gelu()).
double geluErfLocalError(double x, double y, Format c, Format s) {
  const double uc = unitRoundoff(c), ec = smallestSubnormal(c);
  const double k = modelUlps(LibmFn::Erf, c);
  const double ax = std::fabs(x), hx = 0.5 * ax;
  const double pe = geluErfPointError(x, y);
  const double g = std::fabs(y) + pe;                                                // >= |G|
  const double p = ax > 0.0 ? std::fmin(2.0, 2.0 * g / ax * (1.0 + 0x1p-40)) : 1.0;  // >= P
  const double rho = uc + 1.415 * 0x1p-53;
  const double rhoT = rho + uc * (1.0 + rho);
  const double e = std::fmin(1.0, kTwoOverSqrtPi * (kSqrtHalf * ax * (1.0 + rhoT) + ec));
  const double lib = k * (2.0 * uc * e + ec) * (1.0 + 0x1p-10);
  const double argHalf = rhoT * 0.39895 * std::fmin(ax * ax, 0.7358) + 0.565 * ax * ec;
  const double arg = std::fmin(2.0, kTwoOverSqrtPi * (rhoT * kSqrtHalf * ax + ec));
  const double d1 = lib + arg;
  const double dp = uc * (p + d1) + d1 + ec;
  const double hdp = hx * (uc * (p + d1) + ec) + hx * lib + argHalf;  // (|x|/2)·|p − P|
  const double hp = (uc * hx + ec) * (p + dp) + hdp;
  double z = hp + uc * (g + hp) + ec;
  if (s != c) z = z * (1.0 + unitRoundoff(s)) + unitRoundoff(s) * g + smallestSubnormal(s);
  return (z + pe) * (1.0 + 0x1p-30) + 8.0 * 0x1p-1074;
}

/// sigmoid tanh silu gelu: y = f(x) elementwise in opmath c (hull of the bracketing variants),
/// stored in s; vjp by AD through the formula; localError from the enclosure on exact inputs.
class UnaryActivationRule final : public OpRule {
 public:
  /// Takes the function that reads which activation a node computes (gelu reads `approximate`).
  explicit UnaryActivationRule(Unary (*kind)(const OpArgs&)) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x);
    const Unary op = mKind(a);
    const PointDomain d;
    return std::vector<Tensor>{mapPoint(
        x, a.outSpec(0).dtype, [&](double v) { return kernels::activationF(d, op, v, 0); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x);
    const Unary op = mKind(a);
    const DType t = a.outSpec(0).dtype;
    const Format c = opmathFormat(ctx.precision, t);
    // kernels::activationBody: the formula in the compute format, offered to the backend (a
    // device), or run here per element (tests/gpu/test_kernel_bodies).
    const kernels::ElementwiseModel model = activationModel(op, c, outFormat(a, ctx));
    if (auto r = offerUnary(ctx.backend, op, model, x, t))
      return std::vector<Tensor>{std::move(*r)};
    return std::vector<Tensor>{
        mapInterval(x, t, [&](Interval v) { return kernels::activationBody(op, v, model); })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloating(a, x);
    const Unary op = mKind(a);
    const DType t = a.outSpec(0).dtype;
    const RandomDomain d{opmathFormat(ctx.precision, t), ctx.rng};
    const Format s = outFormat(a, ctx);
    const int variant =
        static_cast<int>((*ctx.rng)() % static_cast<unsigned>(kernels::activationVariants(op)));
    return std::vector<Tensor>{mapPoint(
        x, t, [&](double v) { return roundNearest(kernels::activationF(d, op, v, variant), s); })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const Unary op = mKind(a);
    Tape tape;
    const AdDomain d{&tape};
    std::vector<double> out(static_cast<std::size_t>(x.numel())), adj;
    for (std::size_t i = 0; i < out.size(); ++i) {
      tape.clear();
      const Var xv = d.leaf(x.values()[i]);
      const Var y = kernels::activationF(d, op, xv, 0);
      tape.backward(y.id, g[0].values()[i], adj);
      out[i] = adj[static_cast<std::size_t>(xv.id)];
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(x.shape(), x.dtype(), std::move(out))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    if (!o.empty() && mKind(a) == Unary::GeluErf && isFloating(x.dtype())) {
      // gelu in closed form (geluErfLocalError) where the input is finite and moderate; the
      // interval rule's bound for the other elements.
      const DType t = a.outSpec(0).dtype;
      const Format c = opmathFormat(ctx.precision, t), s = outFormat(a, ctx);
      const auto xv = x.values();
      const auto yv = o[0].values();
      std::vector<double> e(xv.size());
      std::optional<std::vector<Tensor>> enclosure;
      for (std::size_t i = 0; i < e.size(); ++i) {
        if (std::fabs(xv[i]) <= kGeluClosedFormRange && std::isfinite(yv[i])) {
          e[i] = geluErfLocalError(xv[i], yv[i], c, s);
          continue;
        }
        if (!enclosure) enclosure = localErrorVia(*this, a, o, ctx);
        e[i] = (*enclosure)[0].values()[i];
      }
      return std::vector<Tensor>{Tensor::point(x.shape(), t, std::move(e))};
    }
    return localErrorVia(*this, a, o, ctx);
  }

  // point()'s own error in closed form for gelu (erf form, geluErfPointError); the others use the
  // binary64 model's enclosure.
  std::vector<Tensor> pointError(const OpArgs& a, std::span<const Tensor> o) const override {
    const Tensor& x = a.tensor(0);
    if (o.empty() || mKind(a) != Unary::GeluErf || !isFloating(x.dtype())) return {};
    std::vector<double> e(static_cast<std::size_t>(x.numel()));
    const auto xv = x.values();
    const auto yv = o[0].values();
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (!std::isfinite(xv[i]) || !std::isfinite(yv[i])) return {};
      e[i] = geluErfPointError(xv[i], yv[i]);
    }
    return std::vector<Tensor>{Tensor::point(x.shape(), o[0].dtype(), std::move(e))};
  }

 private:
  Unary (*mKind)(const OpArgs&);
};

/// sigmoid_backward tanh_backward silu_backward gelu_backward: z = f(grad, v) elementwise with
/// broadcasting, as UnaryActivationRule; vjp by AD through the formula.
class ActivationBackwardRule final : public OpRule {
 public:
  /// Takes the function that reads which backward op a node computes.
  explicit ActivationBackwardRule(Binary (*kind)(const OpArgs&)) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Binary op = mKind(a);
    const PointDomain d;
    return std::vector<Tensor>{
        mapPoint2(a, a.tensor(0), a.tensor(1), a.outSpec(0).dtype,
                  [&](double g, double v) { return kernels::activationBackwardF(d, op, g, v); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Binary op = mKind(a);
    const DType t = a.outSpec(0).dtype;
    // kernels::activationBackwardBody, offered to the backend or run here per element.
    const kernels::ElementwiseModel model =
        activationModel(op, opmathFormat(ctx.precision, t), outFormat(a, ctx));
    const Tensor &g = a.tensor(0), &v = a.tensor(1);
    if (auto r =
            offerBinary(ctx.backend, op, model, g, v, broadcastAll(a, {g.shape(), v.shape()}), t))
      return std::vector<Tensor>{std::move(*r)};
    return std::vector<Tensor>{mapInterval2(a, g, v, t, [&](Interval gv, Interval vv) {
      return kernels::activationBackwardBody(op, gv, vv, model);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Binary op = mKind(a);
    const DType t = a.outSpec(0).dtype;
    const RandomDomain d{opmathFormat(ctx.precision, t), ctx.rng};
    const Format s = outFormat(a, ctx);
    // One draw per node, as the forward rule's choice of bracketing (the backward ops have one):
    // the executor's stream, and so every seed's execution, stays what it was.
    (*ctx.rng)();
    return std::vector<Tensor>{mapPoint2(a, a.tensor(0), a.tensor(1), t, [&](double g, double v) {
      return roundNearest(kernels::activationBackwardF(d, op, g, v), s);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const Binary op = mKind(a);
    const Tensor& g = a.tensor(0);
    const Tensor& x = a.tensor(1);
    const Shape s = broadcastAll(a, {g.shape(), x.shape()});
    const BroadcastIndex ix(s, {g.shape(), x.shape()});
    std::vector<double> dg(static_cast<std::size_t>(ix.size())), dx(dg.size());
    Tape tape;
    const AdDomain d{&tape};
    std::int64_t off[2];
    std::vector<double> adj;
    for (std::int64_t i = 0; i < ix.size(); ++i) {
      ix.offsets(i, off);
      tape.clear();
      const Var gv = d.leaf(g.values()[static_cast<std::size_t>(off[0])]);
      const Var xv = d.leaf(x.values()[static_cast<std::size_t>(off[1])]);
      const Var z = kernels::activationBackwardF(d, op, gv, xv);
      tape.backward(z.id, h[0].values()[static_cast<std::size_t>(i)], adj);
      dg[static_cast<std::size_t>(i)] = adj[static_cast<std::size_t>(gv.id)];
      dx[static_cast<std::size_t>(i)] = adj[static_cast<std::size_t>(xv.id)];
    }
    return std::vector<std::optional<Tensor>>{
        sumToShape(Tensor::point(s, g.dtype(), std::move(dg)), g.shape()).withDtype(g.dtype()),
        sumToShape(Tensor::point(s, x.dtype(), std::move(dx)), x.shape()).withDtype(x.dtype())};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

 private:
  Binary (*mKind)(const OpArgs&);
};

/// relu(x) = max(x, 0): exact; storage rounding only.
class ReluRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return std::vector<Tensor>{
        mapPoint(a.tensor(0), a.outSpec(0).dtype, [](double v) { return v > 0.0 ? v : 0.0; })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Format s = outFormat(a, ctx);
    if (auto r = offerUnary(ctx.backend, kernels::UnaryOp::Relu, {s, s, 0}, a.tensor(0),
                            a.outSpec(0).dtype))
      return std::vector<Tensor>{std::move(*r)};
    return std::vector<Tensor>{mapInterval(a.tensor(0), a.outSpec(0).dtype, [s](Interval v) {
      return roundOutward(lossbound::max(v, Interval{0.0, 0.0}), s);
    })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Format s = outFormat(a, ctx);
    return std::vector<Tensor>{mapPoint(a.tensor(0), a.outSpec(0).dtype, [s](double v) {
      return roundNearest(v > 0.0 ? v : 0.0, s);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    std::vector<double> out(static_cast<std::size_t>(x.numel()));
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = x.values()[i] > 0.0 ? g[0].values()[i] : 0.0;
    return std::vector<std::optional<Tensor>>{Tensor::point(x.shape(), x.dtype(), std::move(out))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }
};

/// threshold_backward(grad, self, threshold) = self <= threshold ? 0 : grad (exact selection;
/// an interval self straddling the threshold gives the hull of 0 and grad; kernels::selectBody
/// of kernels::compareBody, so an exact ±inf gradient stays exact).
class ThresholdBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const double th = a.numberArg(2, "threshold");
    return std::vector<Tensor>{mapPoint2(a, a.tensor(0), a.tensor(1), a.outSpec(0).dtype,
                                         [th](double g, double v) { return v <= th ? 0.0 : g; })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const double th = a.numberArg(2, "threshold");
    const Format s = outFormat(a, ctx);
    const Tensor &g = a.tensor(0), &v = a.tensor(1);
    // where(self > threshold, grad, 0): the comparison and selection bodies, offered to the
    // backend (a device) as two launches, or run here per element.
    const kernels::ElementwiseModel model{s, s, 0};
    const Tensor thT = Tensor::point({}, v.dtype(), {th}),
                 zero = Tensor::point({}, g.dtype(), {0.0});
    if (auto cond =
            offerBinary(ctx.backend, kernels::BinaryOp::Gt, model, v, thT, v.shape(), DType::Bool))
      if (auto r = offerSelect(ctx.backend, model, *cond, g, zero,
                               broadcastAll(a, {g.shape(), v.shape()}), a.outSpec(0).dtype))
        return std::vector<Tensor>{std::move(*r)};
    return std::vector<Tensor>{
        mapInterval2(a, g, v, a.outSpec(0).dtype, [th, s](Interval gv, Interval vv) {
          const Interval above = kernels::compareBody(kernels::BinaryOp::Gt, vv, Interval{th, th});
          return kernels::selectBody(above, gv, Interval{0.0, 0.0}, s);
        })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const double th = a.numberArg(2, "threshold");
    const Format s = outFormat(a, ctx);
    return std::vector<Tensor>{
        mapPoint2(a, a.tensor(0), a.tensor(1), a.outSpec(0).dtype,
                  [th, s](double g, double v) { return roundNearest(v <= th ? 0.0 : g, s); })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const double th = a.numberArg(2, "threshold");
    const Tensor& g = a.tensor(0);
    const Tensor& x = a.tensor(1);
    const Shape s = broadcastAll(a, {g.shape(), x.shape()});
    const BroadcastIndex ix(s, {g.shape(), x.shape()});
    std::vector<double> dg(static_cast<std::size_t>(ix.size()));
    std::int64_t off[2];
    for (std::int64_t i = 0; i < ix.size(); ++i) {
      ix.offsets(i, off);
      dg[static_cast<std::size_t>(i)] = x.values()[static_cast<std::size_t>(off[1])] <= th
                                            ? 0.0
                                            : h[0].values()[static_cast<std::size_t>(i)];
    }
    // The selection is locally constant in self: zero gradient (almost everywhere).
    return std::vector<std::optional<Tensor>>{
        sumToShape(Tensor::point(s, g.dtype(), std::move(dg)), g.shape()).withDtype(g.dtype()),
        zerosLike(x, x.dtype())};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }
};

template <Unary U>
Unary fixedUnary(const OpArgs&) {
  return U;
}
template <Binary B>
Binary fixedBinary(const OpArgs&) {
  return B;
}

}  // namespace

void registerActivationOps(OpRegistry& r) {
  // In-place variants (relu_ sigmoid_ tanh_) have the rules of their out-of-place forms: the
  // evaluator gives every node a fresh value (as for add_, exp_).
  const auto relu = std::make_shared<const ReluRule>();
  r.add("aten.relu", relu);
  r.add("aten.relu_.default", relu);
  r.add("aten.threshold_backward", std::make_shared<const ThresholdBackwardRule>());
  r.add("aten.gelu", std::make_shared<const UnaryActivationRule>(geluKind));
  r.add("aten.gelu_backward", std::make_shared<const ActivationBackwardRule>(geluBackwardKind));
  r.add("aten.silu", std::make_shared<const UnaryActivationRule>(fixedUnary<Unary::Silu>));
  r.add("aten.silu_backward",
        std::make_shared<const ActivationBackwardRule>(fixedBinary<Binary::SiluBackward>));
  const auto sigmoid = std::make_shared<const UnaryActivationRule>(fixedUnary<Unary::Sigmoid>);
  r.add("aten.sigmoid", sigmoid);
  r.add("aten.sigmoid_.default", sigmoid);
  r.add("aten.sigmoid_backward",
        std::make_shared<const ActivationBackwardRule>(fixedBinary<Binary::SigmoidBackward>));
  const auto tanh = std::make_shared<const UnaryActivationRule>(fixedUnary<Unary::Tanh>);
  r.add("aten.tanh", tanh);
  r.add("aten.tanh_.default", tanh);
  r.add("aten.tanh_backward",
        std::make_shared<const ActivationBackwardRule>(fixedBinary<Binary::TanhBackward>));
}

}  // namespace lossbound
