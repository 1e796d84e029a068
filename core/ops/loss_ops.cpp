// Loss ops: nll_loss_forward nll_loss_backward nll_loss2d_forward nll_loss2d_backward.
// Input (C) with a 0-d target, (N, C) with target (N), or (N, C, d1, ...) with target
// (N, d1, ...) (nll_loss2d); reduction 0 = none, 1 = mean, 2 = sum; ignore_index; weight None or
// a (C) tensor. Outputs of the forward op: (output, total_weight).
//
// Error model ("any reasonable implementation", PyTorch 1.13 CPU/CUDA kernels), stored in s.
// The CUDA kernels accumulate in c = acc_type (fp32 for fp32/bf16/fp16, fp64 for fp64); the CPU
// kernels (aten/src/ATen/native/LossNLL.cpp nll_loss_out_frame, LossNLL2d.cpp) keep their cascade
// partial sums in scalar_t, i.e. in s, and without weights divide by static_cast<scalar_t>(count)
// (bf16 counts above 256 are not exact). Both are enclosed, with a = the coarser of c and s:
//  - each kept term is −w_t·x[n, t] (one rounding in c or s when a weight is given, exact without);
//  - output (sum) = Σ terms in any order and bracketing in c or s: |error| ≤ γ_m^a Σ|w x| + m·η_a
//    (Higham 2002, eq. 3.5; without weights γ_{m−1}^a Σ|x|, eq. 4.4), m = number of kept terms
//    (γ^a is infinite once m·u_a ≥ 1: bf16 with 256 or more kept targets is unbounded);
//  - total_weight = Σ w_t in any order in c or s (γ_{m−1}^a Σ|w|), or RN_s(count) without weights;
//  - mean = fl(sum / total_weight) in c, then s; all-ignored mean is 0/0 = NaN: the
//    enclosure is then the entire line (nothing can be said about a NaN);
//  - backward: grad_input[n, t] = −w_t·g / total_weight computed as (−w)·fl(g / tw) (CPU) or
//    fl(−w·g) / tw, two roundings in c, then stored in s; every other element is exactly 0.
//  - probabilistic term (probabilisticLocalError, unweighted sum/mean in c = s, round to nearest):
//    the m − 1 roundings of the partial sums in quadrature, u·sqrt(Σ_k P_k²) <= sqrt(m − 1)·u·Σ|x|
//    (P_k the sum of the k largest |x|; + m·η), over the
//    count for the mean, with the division's u·|out| in quadrature: √m instead of the worst
//    case's m (the Higham–Mary 2019 model: independent mean-zero roundings; not a guarantee).
// The log-softmax → nll composition (cross-entropy) is tight because the log-softmax enclosure
// is dependency-aware (softmax_ops.cpp); this op only adds the order-free sum bound.

#include "core/kernels/nll_loss.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

enum Reduction { kNone = 0, kMean = 1, kSum = 2 };

/// One kept (not ignored) target: the flat offset in self, the class, and the output offset.
struct Entry {
  std::int64_t self;
  std::int64_t cls;
  std::int64_t out;
};

/// The layout of a call: shapes, reduction, kept entries.
struct Layout {
  Shape outShape;  // shape of `output` for reduction none
  std::int64_t outCount = 1;
  int reduction = kMean;
  std::int64_t ignore = -100;
  std::int64_t batch = 1, classes = 0, inner = 1;  // self viewed as (batch, classes, inner)
  std::vector<Entry> kept;
};

/// Reads and validates the shapes of self (argument selfPos), target and weight, the reduction
/// and ignore_index; fails with what was expected. Leaves `kept` empty (keepTargets fills it).
Layout shapeLayout(const OpArgs& a, std::size_t selfPos, std::size_t reductionPos) {
  const Tensor& x = a.tensor(selfPos);
  const Tensor& target = a.tensor(selfPos + 1);
  Layout l;
  l.reduction = static_cast<int>(a.intArg(reductionPos, "reduction", kMean));
  if (l.reduction < 0 || l.reduction > 2)
    a.fail("reduction should be 0 (none), 1 (mean) or 2 (sum), found " +
           std::to_string(l.reduction));
  l.ignore = a.intArg(reductionPos + 1, "ignore_index", -100);
  if (!isFloating(x.dtype())) a.fail("self should be a floating tensor");
  if (isFloating(target.dtype())) a.fail("target should be an integer tensor");
  std::int64_t n = 1, c = 0, inner = 1;
  if (x.rank() == 1) {
    c = x.shape()[0];
    if (target.rank() != 0)
      a.fail("a 1-D input needs a 0-d target, found " + shapeString(target.shape()));
    l.outShape = {};
  } else if (x.rank() >= 2) {
    n = x.shape()[0];
    c = x.shape()[1];
    Shape ts{n};
    for (int d = 2; d < x.rank(); ++d) {
      inner *= x.shape()[static_cast<std::size_t>(d)];
      ts.push_back(x.shape()[static_cast<std::size_t>(d)]);
    }
    if (target.shape() != ts)
      a.fail("target should have shape " + shapeString(ts) + " for input " +
             shapeString(x.shape()) + ", found " + shapeString(target.shape()));
    l.outShape = ts;
  } else {
    a.fail("self should have 1 or more dimensions, found a 0-d tensor");
  }
  l.outCount = numel(l.outShape);
  if (a.isTensor(selfPos + 2)) {
    const Tensor& w = a.tensor(selfPos + 2);
    if (w.shape() != Shape{c})
      a.fail("weight should have shape [" + std::to_string(c) + "], found " +
             shapeString(w.shape()));
  }
  l.batch = n;
  l.classes = c;
  l.inner = inner;
  return l;
}

/// Fills l.kept from the target (argument selfPos + 1); fails on a target out of range.
void keepTargets(const OpArgs& a, std::size_t selfPos, Layout& l) {
  const Tensor& target = a.tensor(selfPos + 1);
  l.kept.clear();
  for (std::int64_t i = 0; i < l.batch; ++i)
    for (std::int64_t s = 0; s < l.inner; ++s) {
      const std::int64_t o = i * l.inner + s;
      const double tv = target.values()[static_cast<std::size_t>(o)];
      const auto t = static_cast<std::int64_t>(tv);
      if (t == l.ignore) continue;
      if (t < 0 || t >= l.classes)
        a.fail("target " + std::to_string(t) + " at " + std::to_string(o) +
               " is out of bounds [0, " + std::to_string(l.classes) + ")");
      l.kept.push_back({(i * l.classes + t) * l.inner + s, t, o});
    }
}

/// Reads and validates self, target and weight, and the kept targets; fails with what was
/// expected.
Layout layoutOf(const OpArgs& a, std::size_t selfPos, std::size_t reductionPos) {
  Layout l = shapeLayout(a, selfPos, reductionPos);
  keepTargets(a, selfPos, l);
  return l;
}

const Tensor* weightOf(const OpArgs& a, std::size_t pos) {
  return a.isTensor(pos) ? &a.tensor(pos) : nullptr;
}

Tensor intervalScalar(Interval v, DType t) { return Tensor::interval({}, t, {v.lo}, {v.hi}); }

// ---------------------------------------------------------------------------------------------
// nll_loss_forward(self, target, weight, reduction, ignore_index) -> (output, total_weight)

/// nll_loss_forward / nll_loss2d_forward → (output, total_weight): the order-free sum bounds of
/// the file comment in the coarser of c and s; localError from the enclosure on exact inputs.
class NllLossRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Layout l = layoutOf(a, 0, 3);
    const Tensor& x = a.tensor(0);
    const Tensor* w = weightOf(a, 2);
    const DType t0 = a.outSpec(0).dtype, t1 = a.node().outputs.size() > 1 ? a.outSpec(1).dtype : t0;
    long double sum = 0, tw = 0;
    std::vector<double> none(static_cast<std::size_t>(l.outCount), 0.0);
    for (const Entry& e : l.kept) {
      const double wt = w ? w->values()[static_cast<std::size_t>(e.cls)] : 1.0;
      const long double term =
          -static_cast<long double>(wt) * x.values()[static_cast<std::size_t>(e.self)];
      sum += term;
      tw += wt;
      none[static_cast<std::size_t>(e.out)] = static_cast<double>(term);
    }
    if (l.reduction == kNone)
      return std::vector<Tensor>{Tensor::point(l.outShape, t0, std::move(none)),
                                 Tensor::scalar(0.0, t1)};
    const double out = static_cast<double>(l.reduction == kSum ? sum : sum / tw);
    return std::vector<Tensor>{Tensor::scalar(out, t0),
                               Tensor::scalar(static_cast<double>(tw), t1)};
  }

  // The pass and the finish are kernels::nllLossForward (core/kernels/nll_loss.h), offered to
  // the backend first: a device gives the same bits, and declines a target out of range, which
  // keepTargets then reports.
  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    Layout l = shapeLayout(a, 0, 3);
    const Tensor& x = a.tensor(0);
    const Tensor& target = a.tensor(1);
    const Tensor* w = weightOf(a, 2);
    const DType t0 = a.outSpec(0).dtype, t1 = a.node().outputs.size() > 1 ? a.outSpec(1).dtype : t0;
    const Format s0 = outFormat(a, ctx, 0);
    const Format s1 = a.node().outputs.size() > 1 ? outFormat(a, ctx, 1) : s0;
    const Format c = accumulationFormat(ctx.precision, t0);
    // The CPU kernel accumulates in s0 (coarser than c for bf16/fp16): bound with the coarser.
    const Format acc = unitRoundoff(s0) > unitRoundoff(c) ? s0 : c;
    kernels::NllLossModel m;
    m.c = c;
    m.acc = acc;
    m.outStorage = s0;
    m.weightStorage = s1;
    m.u = unitRoundoff(acc) * (ctx.precision.truncatingAccumulation ? 2.0 : 1.0);
    m.eta = std::fmax(smallestSubnormal(c), smallestSubnormal(acc));
    m.reduction = l.reduction;
    m.weighted = w != nullptr;
    m.ignore = static_cast<double>(l.ignore);
    m.classes = l.classes;
    m.inner = l.inner;
    if (auto r = offerNllLoss(ctx.backend, m, x, target, w, l.batch, l.outShape, t0, t1))
      return std::move(*r);
    const std::size_t n = l.reduction == kNone ? static_cast<std::size_t>(l.outCount) : 1;
    std::vector<double> lo(n), hi(n);
    Interval tw;
    const kernels::ConstIntervalSpan ws =
        w ? kernels::ConstIntervalSpan{w->lo().data(), w->hi().data()}
          : kernels::ConstIntervalSpan{};
    if (!kernels::nllLossForward(m, {x.lo().data(), x.hi().data()}, target.values().data(), ws,
                                 l.batch, {lo.data(), hi.data()}, {&tw.lo, &tw.hi}))
      keepTargets(a, 0, l);  // reports the target out of range
    return std::vector<Tensor>{Tensor::interval(l.reduction == kNone ? l.outShape : Shape{}, t0,
                                                std::move(lo), std::move(hi)),
                               intervalScalar(tw, t1)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Layout l = layoutOf(a, 0, 3);
    const Tensor& x = a.tensor(0);
    const Tensor* w = weightOf(a, 2);
    const DType t0 = a.outSpec(0).dtype, t1 = a.node().outputs.size() > 1 ? a.outSpec(1).dtype : t0;
    const Format s0 = outFormat(a, ctx, 0);
    const Format s1 = a.node().outputs.size() > 1 ? outFormat(a, ctx, 1) : s0;
    // Half of the executions model the CPU kernel: products, partial sums and the count in s0.
    const bool storageAcc =
        unitRoundoff(s0) > unitRoundoff(accumulationFormat(ctx.precision, t0)) &&
        ((*ctx.rng)() & 1) != 0;
    const Format c = storageAcc ? s0 : accumulationFormat(ctx.precision, t0);
    std::vector<double> terms, ws, none(static_cast<std::size_t>(l.outCount), 0.0);
    for (const Entry& e : l.kept) {
      const double wt = w ? w->values()[static_cast<std::size_t>(e.cls)] : 1.0;
      const double term = w ? -roundNearest(wt * x.values()[static_cast<std::size_t>(e.self)], c)
                            : -x.values()[static_cast<std::size_t>(e.self)];
      terms.push_back(term);
      ws.push_back(wt);
      none[static_cast<std::size_t>(e.out)] = roundNearest(term, s0);
    }
    if (l.reduction == kNone)
      return std::vector<Tensor>{Tensor::point(l.outShape, t0, std::move(none)),
                                 Tensor::scalar(0.0, t1)};
    const double sum = randomSum(terms, c, *ctx.rng);
    const double tw = storageAcc && !w ? roundNearest(static_cast<double>(ws.size()), s0)
                                       : randomSum(ws, c, *ctx.rng);
    // fl_s(a / b) of two s values: computed in fp32, then rounded (innocuous, Figueroa 1995).
    const double out = l.reduction == kSum ? sum : roundNearest(sum / tw, c);
    return std::vector<Tensor>{Tensor::scalar(roundNearest(out, s0), t0),
                               Tensor::scalar(roundNearest(tw, s1), t1)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outputs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Layout l = layoutOf(a, 0, 3);
    const Tensor& x = a.tensor(0);
    const Tensor* w = weightOf(a, 2);
    std::vector<double> dx(static_cast<std::size_t>(x.numel()), 0.0);
    std::vector<double> dw(w ? static_cast<std::size_t>(w->numel()) : 0, 0.0);
    const double tw = l.reduction == kNone ? 1.0 : outputs[1].values()[0];
    const double out = l.reduction == kNone ? 0.0 : outputs[0].values()[0];
    const double gTw = g.size() > 1 && l.reduction != kNone ? g[1].values()[0] : 0.0;
    for (const Entry& e : l.kept) {
      const double wt = w ? w->values()[static_cast<std::size_t>(e.cls)] : 1.0;
      const double go =
          l.reduction == kNone ? g[0].values()[static_cast<std::size_t>(e.out)] : g[0].values()[0];
      const double scale = l.reduction == kMean ? go / tw : go;
      dx[static_cast<std::size_t>(e.self)] += -wt * scale;
      if (w) {
        // d sum/d w_c = −x; d mean/d w_c = (−x − mean)/tw; d total_weight/d w_c = 1.
        const double xv = x.values()[static_cast<std::size_t>(e.self)];
        double dwi = l.reduction == kMean ? (-xv - out) * go / tw : -xv * go;
        if (l.reduction != kNone) dwi += gTw;
        dw[static_cast<std::size_t>(e.cls)] += dwi;
      }
    }
    std::vector<std::optional<Tensor>> res{Tensor::point(x.shape(), x.dtype(), std::move(dx)),
                                           std::nullopt};
    if (w) res.emplace_back(Tensor::point(w->shape(), w->dtype(), std::move(dw)));
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

  // The sum of m unweighted terms in any order makes m − 1 roundings, each of a partial sum p_i:
  // sqrt(Σ(u·p_i)²) <= u·partialSumsRootSquares(|x|) (the k-th largest partial sum is at most the
  // sum of the m − k + 1 largest terms; ~√3 below sqrt(m − 1)·u·Σ|x| for terms of one size) (the
  // Higham–Mary 2019 model the probabilistic method uses, applied to each rounding inside the
  // sum), plus m·η for underflow;
  // mean: that over the exact count, and the division's rounding u·|out|. Only where the count is
  // exact and nothing else rounds: no weights (their products round too), c = s (no partial sums or
  // count in a coarser storage format), round to nearest (truncating accumulation is biased: not
  // mean-zero), m·u < 1.
  std::vector<Tensor> probabilisticLocalError(const OpArgs& a, std::span<const Tensor> o,
                                              OpContext& ctx) const override {
    const Layout l = layoutOf(a, 0, 3);
    if (l.reduction == kNone || weightOf(a, 2) || ctx.precision.truncatingAccumulation) return {};
    const DType t0 = a.outSpec(0).dtype, t1 = a.node().outputs.size() > 1 ? a.outSpec(1).dtype : t0;
    const Format s0 = outFormat(a, ctx, 0);
    const Format c = accumulationFormat(ctx.precision, t0);
    const double u = unitRoundoff(c);
    const auto m = static_cast<double>(l.kept.size());
    if (s0 != c || !(m * u < 0.5) || m == 0) return {};
    const Tensor& x = a.tensor(0);
    std::vector<double> terms;
    terms.reserve(l.kept.size());
    for (const Entry& e : l.kept) terms.push_back(x.values()[static_cast<std::size_t>(e.self)]);
    double r = add_up(mul_up(u, partialSumsRootSquares(terms)), mul_up(m, smallestSubnormal(c)));
    if (l.reduction == kMean) {
      const double out = std::fabs(o[0].values()[0]);
      r = div_up(r, m);
      r = sqrt_up(add_up(mul_up(r, r), mul_up(mul_up(u, out), mul_up(u, out))));
    }
    if (!std::isfinite(r)) return {};
    // Never above the worst case (an exact division by a count of 1, say, has no rounding).
    r = std::fmin(r, localError(a, o, ctx)[0].hi()[0]);
    return std::vector<Tensor>{Tensor::scalar(r, t0), Tensor::scalar(0.0, t1)};
  }
};

// ---------------------------------------------------------------------------------------------
// nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)

/// nll_loss_backward / nll_loss2d_backward → grad_input: −w_t·g / total_weight at the kept
/// targets (two roundings in c, then s), exactly 0 elsewhere; localError from the enclosure.
class NllLossBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Layout l = layoutOf(a, 1, 4);
    checkGrad(a, l);
    const Tensor& g = a.tensor(0);
    const Tensor& x = a.tensor(1);
    const Tensor* w = weightOf(a, 3);
    const double tw = a.tensor(6).values()[0];
    std::vector<double> out(static_cast<std::size_t>(x.numel()), 0.0);
    for (const Entry& e : l.kept) {
      const double wt = w ? w->values()[static_cast<std::size_t>(e.cls)] : 1.0;
      const double go = gradAt(g, l, e).lo;
      out[static_cast<std::size_t>(e.self)] = l.reduction == kMean ? -wt * go / tw : -wt * go;
    }
    return std::vector<Tensor>{Tensor::point(x.shape(), a.outSpec(0).dtype, std::move(out))};
  }

  // Each kept target's element is kernels::nllBackwardElement (core/kernels/nll_loss.h), offered
  // to the backend first: a device gives the same bits, and declines a target out of range,
  // which keepTargets then reports.
  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    Layout l = shapeLayout(a, 1, 4);
    checkGrad(a, l);
    const Tensor& g = a.tensor(0);
    const Tensor& x = a.tensor(1);
    const Tensor* w = weightOf(a, 3);
    const Tensor& twT = a.tensor(6);
    const DType t = a.outSpec(0).dtype;
    kernels::NllLossModel m;
    m.c = accumulationFormat(ctx.precision, t);
    m.outStorage = outFormat(a, ctx);
    m.reduction = l.reduction;
    m.weighted = w != nullptr;
    m.ignore = static_cast<double>(l.ignore);
    m.classes = l.classes;
    m.inner = l.inner;
    if (auto r =
            offerNllLossBackward(ctx.backend, m, g, a.tensor(2), w, twT, l.batch, x.shape(), t))
      return {std::move(*r)};
    keepTargets(a, 1, l);  // reports a target out of range
    const Interval tw = twT.at(0);
    std::vector<double> lo(static_cast<std::size_t>(x.numel()), 0.0), hi(lo);
    for (const Entry& e : l.kept) {
      const Interval r = kernels::nllBackwardElement(w ? w->at(e.cls) : Interval{1.0, 1.0},
                                                     gradAt(g, l, e), tw, m);
      lo[static_cast<std::size_t>(e.self)] = r.lo;
      hi[static_cast<std::size_t>(e.self)] = r.hi;
    }
    return std::vector<Tensor>{Tensor::interval(x.shape(), t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Layout l = layoutOf(a, 1, 4);
    checkGrad(a, l);
    const Tensor& g = a.tensor(0);
    const Tensor& x = a.tensor(1);
    const Tensor* w = weightOf(a, 3);
    const double tw = a.tensor(6).values()[0];
    const DType t = a.outSpec(0).dtype;
    const Format s = outFormat(a, ctx);
    const RandomDomain d{accumulationFormat(ctx.precision, t), ctx.rng};
    const bool scaleFirst = (*ctx.rng)() & 1;
    std::vector<double> out(static_cast<std::size_t>(x.numel()), 0.0);
    for (const Entry& e : l.kept) {
      const double nw = -(w ? w->values()[static_cast<std::size_t>(e.cls)] : 1.0);
      const double go = gradAt(g, l, e).lo;
      double r;
      if (l.reduction != kMean)
        r = d.mul(nw, go);
      else
        r = scaleFirst ? d.mul(nw, d.div(go, tw)) : d.div(d.mul(nw, go), tw);
      out[static_cast<std::size_t>(e.self)] = roundNearest(r, s);
    }
    return std::vector<Tensor>{Tensor::point(x.shape(), t, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    // out[self_e] = −w·g / tw (mean) or −w·g: linear in g; self does not enter the values.
    const Layout l = layoutOf(a, 1, 4);
    const Tensor& g = a.tensor(0);
    const Tensor& x = a.tensor(1);
    const Tensor* w = weightOf(a, 3);
    const Tensor& twT = a.tensor(6);
    const double tw = twT.values()[0];
    std::vector<double> dg(static_cast<std::size_t>(g.numel()), 0.0);
    std::vector<double> dw(w ? static_cast<std::size_t>(w->numel()) : 0, 0.0);
    double dtw = 0.0;
    for (const Entry& e : l.kept) {
      const double wt = w ? w->values()[static_cast<std::size_t>(e.cls)] : 1.0;
      const double he = h[0].values()[static_cast<std::size_t>(e.self)];
      const double go = gradAt(g, l, e).lo;
      const double div = l.reduction == kMean ? tw : 1.0;
      dg[static_cast<std::size_t>(l.reduction == kNone ? e.out : 0)] += -wt * he / div;
      if (w) dw[static_cast<std::size_t>(e.cls)] += -go * he / div;
      if (l.reduction == kMean) dtw += wt * go * he / (tw * tw);
    }
    std::vector<std::optional<Tensor>> res{Tensor::point(g.shape(), g.dtype(), std::move(dg)),
                                           zerosLike(x, x.dtype()), std::nullopt};
    if (w) res.emplace_back(Tensor::point(w->shape(), w->dtype(), std::move(dw)));
    res.emplace_back(Tensor::point(twT.shape(), twT.dtype(), {dtw}));
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Returns the incoming gradient of entry e (one per target for reduction none, else the 0-d).
  static Interval gradAt(const Tensor& g, const Layout& l, const Entry& e) {
    return l.reduction == kNone ? g.at(e.out) : g.at(0);
  }

  /// Checks that grad_output has one element per target (reduction none) or one in all.
  static void checkGrad(const OpArgs& a, const Layout& l) {
    const Tensor& g = a.tensor(0);
    const std::int64_t want = l.reduction == kNone ? l.outCount : 1;
    if (g.numel() != want)
      a.fail("grad_output should have " + std::to_string(want) + " elements, found " +
             shapeString(g.shape()));
  }
};

}  // namespace

void registerLossOps(OpRegistry& r) {
  const auto fwd = std::make_shared<const NllLossRule>();
  const auto bwd = std::make_shared<const NllLossBackwardRule>();
  r.add("aten.nll_loss_forward", fwd);
  r.add("aten.nll_loss2d_forward", fwd);
  r.add("aten.nll_loss_backward", bwd);
  r.add("aten.nll_loss2d_backward", bwd);
}

}  // namespace lossbound
