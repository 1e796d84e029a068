#pragma once
// Elementwise activation rules built from one formula written against the domains of
// core/ops/nn_support.h, with the first-order treatment of breakpoints shared by the piecewise
// activations (hardswish, hardsigmoid, leaky_relu, elu, softplus and their backward ops).
//
// A formula type F provides
//   struct Params;                                     constants read from the node
//   static Params params(const OpArgs&);
//   static int variants(const Params&);                kernels / bracketings modelled (>= 1)
//   static std::vector<double> kinks(const Params&);   breakpoints in x (may be empty)
//   template <class D> static typename D::V eval(const D&, const Params&, V x, int variant);
// and, for a binary (backward) formula z = f(grad, x), also
//   static constexpr std::size_t kGradArg, kXArg;      positions of grad and x in the node
//   template <class D> static typename D::V eval(const D&, const Params&, V g, V x, int variant);
// and, optionally, kKernel: the kernels::UnaryOp / BinaryOp whose body is the same formula
// (the hull of every variant in kernels::ComputeDomain), to which the interval rule offers its
// elements (core/ops/kernel_offload.h), with kernelModel(params, model) writing the formula's
// constants into the body's model.
//
// Domains: point = variant 0 in binary64; interval = hull of every variant in the IntervalDomain
// of the opmath format c (fp32 for fp32/bf16/fp16 storage, fp64 for fp64), rounded outward to the
// storage format; random = one variant per execution in the RandomDomain; vjp = reverse-mode AD
// of variant 0; localError = distance from the point value to the interval rule's enclosure at
// the (exact) inputs, which bounds |computed − exact| including the storage rounding.
//
// Breakpoints and the first-order method (a linearization): where F is not differentiable, the
// adjoint follows the branch of the point value (PyTorch's backward op takes the same branch at
// the breakpoint itself). An element whose x lies within ρ(x) = u_s·|x|·(1 + u_s) + η_s/2 of a
// breakpoint (one rounding of x in its storage format s: x may sit on either side of the kink by
// the rounding that produced it) gets localError = dist(y, F([x − ρ, x + ρ])) + |∂F/∂x(x)|·ρ:
// F of the neighbourhood (interval rule, every branch) contains every computed F(x + δ) for
// |δ| ≤ ρ, so |F_computed(x + δ) − F(x) − F'(x)·δ| is bounded by it; for a backward op whose
// value jumps at the breakpoint (hardswish_backward at ±3) this includes the jump. A perturbation
// larger than ρ that crosses a breakpoint (an upstream error of many ulps) is outside what a
// first-order term can cover, as for relu; the interval method covers it.

#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/nn_support.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lossbound::ops::nn {

/// Returns the distance from a point value y to the farther endpoint of an enclosure r, rounded
/// up (0 when r is exactly {y}; +inf for NaN).
inline double distanceToEnclosure(double y, Interval r) {
  if (r.lo == y && r.hi == y) return 0.0;
  const double d = std::fmax(sub_up(r.hi, y), sub_up(y, r.lo));
  return std::isnan(d) ? HUGE_VAL : std::fmax(d, 0.0);
}

/// Returns ρ(x) (one rounding of x in format s) when x lies within it of one of `kinks`, else 0.
inline double kinkRadius(double x, Format s, std::span<const double> kinks) {
  if (kinks.empty() || !std::isfinite(x)) return 0.0;
  const double rho = roundingError(x, s, s);
  for (double k : kinks)
    if (std::fabs(x - k) <= rho) return rho;
  return 0.0;
}

/// Returns [x − r, x + r] rounded outward in binary64.
inline Interval neighbourhood(double x, double r) { return {sub_down(x, r), add_up(x, r)}; }

/// Throws through args unless tensor t is floating.
inline void requireFloatingInput(const OpArgs& args, const Tensor& t) {
  if (!isFloating(t.dtype()))
    args.fail("expected a floating tensor, found " + std::string(dtypeName(t.dtype())));
}

/// The model of F's kernel body: compute and storage formats, and the constants F writes into it
/// (kernelModel: hardtanh's min_val and max_val).
template <class F>
kernels::ElementwiseModel kernelModel(const typename F::Params& p, Format compute, Format storage) {
  kernels::ElementwiseModel m{compute, storage, 0};
  if constexpr (requires { F::kernelModel(p, m); }) F::kernelModel(p, m);
  return m;
}

/// y = F(x) elementwise (see the file comment).
template <class F>
class UnaryActivationRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    requireFloatingInput(a, x);
    const auto p = F::params(a);
    const PointDomain d;
    return {mapPoint(x, a.outSpec(0).dtype, [&](double v) { return F::eval(d, p, v, 0); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloatingInput(a, x);
    const auto p = F::params(a);
    const DType t = a.outSpec(0).dtype;
    const IntervalDomain d{opmathFormat(ctx.precision, t)};
    const Format s = outFormat(a, ctx);
    if constexpr (requires { F::kKernel; }) {  // a kernel body of the same formula
      if (auto r = offerUnary(ctx.backend, F::kKernel, kernelModel<F>(p, d.c, s), x, t))
        return {std::move(*r)};
    }
    return {mapInterval(x, t, [&](Interval v) { return enclose(d, p, v, s); })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    requireFloatingInput(a, x);
    const auto p = F::params(a);
    const DType t = a.outSpec(0).dtype;
    const RandomDomain d{opmathFormat(ctx.precision, t), ctx.rng};
    const Format s = outFormat(a, ctx);
    const int variant = pickVariant(F::variants(p), *ctx.rng);
    return {mapPoint(x, t, [&](double v) { return roundNearest(F::eval(d, p, v, variant), s); })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const auto p = F::params(a);
    std::vector<double> out(static_cast<std::size_t>(x.numel()));
    Tape tape;
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = g[0].values()[i] * slope(tape, p, x.values()[i]);
    return {Tensor::point(x.shape(), x.dtype(), std::move(out))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const auto p = F::params(a);
    const DType t = a.outSpec(0).dtype;
    const IntervalDomain d{opmathFormat(ctx.precision, t)};
    const Format s = outFormat(a, ctx), sx = ctx.precision.storageFor(x.dtype());
    const std::vector<double> kinks = F::kinks(p);
    std::vector<double> e(static_cast<std::size_t>(x.numel()));
    Tape tape;
    for (std::size_t i = 0; i < e.size(); ++i) {
      const double xi = x.values()[i], y = outs[0].values()[i];
      const double rho = kinkRadius(xi, sx, kinks);
      if (rho == 0.0) {
        e[i] = distanceToEnclosure(y, enclose(d, p, lossbound::point(xi), s));
        continue;
      }
      const double branch = distanceToEnclosure(y, enclose(d, p, neighbourhood(xi, rho), s));
      e[i] = add_up(branch, mul_up(std::fabs(slope(tape, p, xi)), rho));
    }
    return {Tensor::point(outs[0].shape(), t, std::move(e))};
  }

 private:
  static int pickVariant(int n, std::mt19937_64& rng) {
    return static_cast<int>(rng() % static_cast<std::uint64_t>(n));
  }
  static Interval enclose(const IntervalDomain& d, const typename F::Params& p, Interval x,
                          Format s) {
    Interval r = F::eval(d, p, x, 0);
    for (int k = 1; k < F::variants(p); ++k) r = hull(r, F::eval(d, p, x, k));
    return roundOutward(r, s);
  }
  /// dF/dx at x along the branch of the point value (variant 0).
  static double slope(Tape& tape, const typename F::Params& p, double x) {
    tape.clear();
    const AdDomain d{&tape};
    const Var xv = d.leaf(x);
    const Var y = F::eval(d, p, xv, 0);
    if (y.id < 0) return 0.0;
    return tape.backward({{y.id, 1.0}})[static_cast<std::size_t>(xv.id)];
  }
};

/// z = F(grad, x) elementwise with broadcasting (see the file comment); x is the forward input or
/// result, the breakpoints are in x.
template <class F>
class BinaryActivationRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const auto p = F::params(a);
    const PointDomain d;
    return {mapPoint2(a, grad(a), self(a), a.outSpec(0).dtype,
                      [&](double g, double v) { return F::eval(d, p, g, v, 0); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const auto p = F::params(a);
    const DType t = a.outSpec(0).dtype;
    const IntervalDomain d{opmathFormat(ctx.precision, t)};
    const Format s = outFormat(a, ctx);
    if constexpr (requires { F::kKernel; }) {  // a kernel body of the same formula
      const Shape shape = broadcastAll(a, {grad(a).shape(), self(a).shape()});
      if (auto r = offerBinary(ctx.backend, F::kKernel, kernelModel<F>(p, d.c, s), grad(a), self(a),
                               shape, t))
        return {std::move(*r)};
    }
    return {mapInterval2(a, grad(a), self(a), t,
                         [&](Interval g, Interval v) { return enclose(d, p, g, v, s); })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const auto p = F::params(a);
    const DType t = a.outSpec(0).dtype;
    const RandomDomain d{opmathFormat(ctx.precision, t), ctx.rng};
    const Format s = outFormat(a, ctx);
    const int variant = static_cast<int>((*ctx.rng)() % static_cast<std::uint64_t>(F::variants(p)));
    return {mapPoint2(a, grad(a), self(a), t, [&](double g, double v) {
      return roundNearest(F::eval(d, p, g, v, variant), s);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const auto p = F::params(a);
    const Tensor& g = grad(a);
    const Tensor& x = self(a);
    const Shape s = broadcastAll(a, {g.shape(), x.shape()});
    const BroadcastIndex ix(s, {g.shape(), x.shape()});
    std::vector<double> dg(static_cast<std::size_t>(ix.size())), dx(dg.size());
    Tape tape;
    std::int64_t off[2];
    for (std::int64_t i = 0; i < ix.size(); ++i) {
      ix.offsets(i, off);
      const auto [pg, px] = partials(tape, p, g.values()[static_cast<std::size_t>(off[0])],
                                     x.values()[static_cast<std::size_t>(off[1])]);
      const double hi = h[0].values()[static_cast<std::size_t>(i)];
      dg[static_cast<std::size_t>(i)] = hi * pg;
      dx[static_cast<std::size_t>(i)] = hi * px;
    }
    // tensorInputs() lists grad and x in the order of their positions in the node.
    std::optional<Tensor> gg =
        sumToShape(Tensor::point(s, g.dtype(), std::move(dg)), g.shape()).withDtype(g.dtype());
    std::optional<Tensor> gx =
        sumToShape(Tensor::point(s, x.dtype(), std::move(dx)), x.shape()).withDtype(x.dtype());
    if (F::kGradArg < F::kXArg) return {std::move(gg), std::move(gx)};
    return {std::move(gx), std::move(gg)};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const auto p = F::params(a);
    const Tensor& g = grad(a);
    const Tensor& x = self(a);
    const DType t = a.outSpec(0).dtype;
    const IntervalDomain d{opmathFormat(ctx.precision, t)};
    const Format s = outFormat(a, ctx), sx = ctx.precision.storageFor(x.dtype());
    const std::vector<double> kinks = F::kinks(p);
    const Shape sh = broadcastAll(a, {g.shape(), x.shape()});
    const BroadcastIndex ix(sh, {g.shape(), x.shape()});
    std::vector<double> e(static_cast<std::size_t>(ix.size()));
    Tape tape;
    std::int64_t off[2];
    for (std::int64_t i = 0; i < ix.size(); ++i) {
      ix.offsets(i, off);
      const double gi = g.values()[static_cast<std::size_t>(off[0])];
      const double xi = x.values()[static_cast<std::size_t>(off[1])];
      const double y = outs[0].values()[static_cast<std::size_t>(i)];
      const double rho = kinkRadius(xi, sx, kinks);
      auto& ei = e[static_cast<std::size_t>(i)];
      if (rho == 0.0) {
        ei = distanceToEnclosure(y, enclose(d, p, lossbound::point(gi), lossbound::point(xi), s));
        continue;
      }
      const double branch =
          distanceToEnclosure(y, enclose(d, p, lossbound::point(gi), neighbourhood(xi, rho), s));
      ei = add_up(branch, mul_up(std::fabs(partials(tape, p, gi, xi).second), rho));
    }
    return {Tensor::point(sh, t, std::move(e))};
  }

 private:
  static const Tensor& grad(const OpArgs& a) { return a.tensor(F::kGradArg); }
  static const Tensor& self(const OpArgs& a) { return a.tensor(F::kXArg); }
  static Interval enclose(const IntervalDomain& d, const typename F::Params& p, Interval g,
                          Interval x, Format s) {
    Interval r = F::eval(d, p, g, x, 0);
    for (int k = 1; k < F::variants(p); ++k) r = hull(r, F::eval(d, p, g, x, k));
    return roundOutward(r, s);
  }
  /// (∂z/∂grad, ∂z/∂x) at (g, x) along the branch of the point value (variant 0).
  static std::pair<double, double> partials(Tape& tape, const typename F::Params& p, double g,
                                            double x) {
    tape.clear();
    const AdDomain d{&tape};
    const Var gv = d.leaf(g);
    const Var xv = d.leaf(x);
    const Var z = F::eval(d, p, gv, xv, 0);
    if (z.id < 0) return {0.0, 0.0};
    const auto adj = tape.backward({{z.id, 1.0}});
    return {adj[static_cast<std::size_t>(gv.id)], adj[static_cast<std::size_t>(xv.id)]};
  }
};

}  // namespace lossbound::ops::nn
