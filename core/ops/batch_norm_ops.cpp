// Batch norm ops: native_batch_norm, _native_batch_norm_legit (.default and .no_stats),
// _native_batch_norm_legit_no_training, _native_batch_norm_legit_functional (PyTorch 2.x names of
// the same math) and native_batch_norm_backward. Input x of shape N×C×* (rank >= 2); a channel's
// n = N·∏spatial elements form one row, gathered from its strided positions.
//
// Contracts, one line per op:
// - native_batch_norm(x, w?, b?, rm?, rv?, training, momentum, eps) → (out, save_mean,
//   save_invstd): training: μ̂, r = 1/sqrt(var + eps) from the channel's batch moments (biased
//   var), out = (x − μ̂)·r·w + b, save_mean = μ̂, save_invstd = r; rm/rv are not read, and their
//   in-place momentum update is a side effect, not an output of the program (a later read of the
//   buffers is a graph input of its own). eval (training=False, rm and rv required): μ̂ = rm,
//   r = 1/sqrt(rv + eps); save_mean/save_invstd are empty ([0], PyTorch CPU), or rm and r when
//   the trace says [C] (CUDA, decompositions) — the only place a rule reads a traced shape.
// - _native_batch_norm_legit(x, w?, b?, rm, rv, training, momentum, eps): the same;
//   .no_stats(x, w?, b?, training, momentum, eps): training only (eval without stats is an
//   error, as in PyTorch); _native_batch_norm_legit_no_training(x, w?, b?, rm, rv, momentum,
//   eps): eval.
// - _native_batch_norm_legit_functional(x, w?, b?, rm, rv, training, momentum, eps) → (out,
//   save_mean, save_invstd, rm', rv'): training: rm' = m·μ̂ + (1 − m)·rm, rv' = m·ŝ/(n − 1) +
//   (1 − m)·rv (unbiased; entire when n = 1, where PyTorch gives NaN or inf); eval: rm' = rm,
//   rv' = rv.
// - native_batch_norm_backward(dy, x, w?, rm?, rv?, save_mean?, save_invstd?, train, eps, mask)
//   → (gI, gW, gB), with (μ, r) = (save_mean, save_invstd) in training and (rm, 1/sqrt(rv + eps))
//   in eval: train gI = r·w·(dy − Σdy/n − (x − μ)·r²·Σdy(x − μ)/n), eval gI = dy·r·w;
//   gW = r·Σdy(x − μ), gB = Σdy (per channel); outputs masked off are zeros.
//
// Error model ("any implementation" = PyTorch's CPU kernels in 1.13 and 2.x, contiguous,
// channels-last and strided paths; the CUDA kernels; the torch/_decomp decompositions; in any
// reduction order). Compute format c = fp32 for fp32/bf16/fp16, fp64 for fp64 (CPU kernels
// accumulating fp32 in binary64 are inside: every bound below is monotone in the precision):
//  - the channel moments are the layer-norm row bound (core/ops/norm_ops.cpp file comment;
//    two-pass: Higham 2002 Lemma 3.1 and eq. 4.4; Welford/pairwise: Chan, Golub, LeVeque 1983)
//    run on the gathered channel by kernels::rowMoments (core/kernels/layer_norm_row.h);
//  - "stored statistics": PyTorch's CPU kernels keep save_mean/save_invstd in the parameter
//    dtype and normalize with those stored values (measured, torch 1.13 and 2.15, all-bf16:
//    output errors of 0.2 at |out| ~ 4 from a mean rounded to bf16), and their strided
//    backward computes with tensor ops in the input dtype (at::sum, elementwise products;
//    measured with fp16 on 2.15: gI, gW 1–4 ulps outside an opmath-only enclosure). So in the
//    forward the mean, the sum of squared deviations, rstd, α and β may be stored in s = the
//    statistics' dtype (with fp32 parameters PyTorch keeps them in fp32 on every layout,
//    measured), and in the backward the per-channel sums and scalars and the per-element
//    operations may round to s = the coarsest of the input, parameter and statistic dtypes
//    (no effect when s is c): the mean within γ_2(s)(A + E) + 2η_s more (fl_s(μ̂) or
//    fl_s(fl_s(Σx)/n); only the two-pass variance reuses it), the rest rounded outward to s or
//    enclosed with a relative error 2u_s per operation (a neighbour in s of the exact value,
//    ops::norm::statRoundoff); a stored β that may overflow in s makes the element entire;
//  - rstd: two correctly rounded steps, or an rsqrt within modelUlps(Rsqrt) ulps (covers the
//    binary64 1/std::sqrt of the CPU kernels), eps read as a Python scalar (ops::scalarEnclosure);
//  - the affine part: the hull of ((x − μ̂)·r)·w + b, (w·(x − μ̂))·r + b (CUDA), (x − μ̂)·(r·w) + b
//    and the CPU form x·α + β, α = r·w, β = b − μ̂·α, with its cancellation enclosed through
//    the exact centred values (ops::norm::affineEnclosure);
//  - running stats: m·μ̂ + (1 − m)·rm and m·U + (1 − m)·rv with U = ŝ/(n − 1) (CPU),
//    var·(n/(n − 1)) (decomposition) or (var·n)/(n − 1), interval arithmetic in the stat format;
//  - backward: Σdy in any order (Higham 2002 eq. 4.4: γ_{n−1}Σ|dy|), Σdy·(x − μ) as a dot
//    product of the rounded differences (eq. 3.5: γ_{n+1}Σ|dy||x − μ| + (n + 1)η), then the
//    per-channel scalars k = Σdy(x − μ)·r²/n in the three bracketings of the CPU kernels
//    (((D·r)·r)/n), CUDA (((D·(1/n))·r)·r) and the decomposition ((D·(1/n))·(r·r)), Σdy/n or
//    Σdy·(1/n), and per element (dy − gm) − p or (dy − p) − gm with p = fl(x − μ)·k, times r
//    then w or times fl(r·w): the hull of these interval evaluations.
// Not covered (outside the precision model, measured in tests/core/ops/test_norm_torch_cases):
// torch 1.13's bf16 sums over several non-contiguous dims accumulate partly in bf16 (its strided
// backward's grad_bias is off by up to 1 bf16 ulp; 2.15 is inside).
// Limit: the any-order bound includes Welford chains, whose worst case is quadratic in n; in
// fp32 the rstd enclosure of unit-range channels is ~22% wide at n = 16,384, ~77% at 32,768 and
// entire from ~60,000 elements per channel (bench-norm).
// vjp: reverse-mode AD through the two-pass formula (point arithmetic); localError: the interval
// rule on the exact point inputs (ops::norm::localErrorFromInterval); adjointLocalError
// (training): a channel's shared statistics weighed by the signed adjoint sums
// (ops::norm::normRowAdjoint, core/ops/norm_row_adjoint.cpp).

#include "core/backend.h"
#include "core/kernels/batch_norm_row.h"
#include "core/kernels/layer_norm_row.h"
#include "core/ops/broadcasting.h"
#include "core/ops/channel_norm_support.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/norm_row_adjoint.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;
using namespace ops::norm;

/// The channel layout of an N×C×* tensor: element k of channel c (k = sample·HW + spatial).
struct BnLayout {
  std::int64_t samples = 0, channels = 0, spatial = 1;
  /// Returns the number of elements per channel.
  std::int64_t n() const { return samples * spatial; }
  /// Returns the flat offset of element k of channel c.
  std::int64_t at(std::int64_t c, std::int64_t k) const {
    return ((k / spatial) * channels + c) * spatial + k % spatial;
  }
};

BnLayout bnLayout(const OpArgs& a, const Tensor& x) {
  if (x.rank() < 2)
    a.fail("batch norm expects an input of rank >= 2 (N×C×...), found " + shapeString(x.shape()));
  BnLayout l;
  l.samples = x.shape()[0];
  l.channels = x.shape()[1];
  for (int d = 2; d < x.rank(); ++d) l.spatial *= x.shape()[static_cast<std::size_t>(d)];
  return l;
}

const Tensor* channelTensor(const OpArgs& a, std::size_t pos, std::int64_t c, const char* what) {
  if (!a.isTensor(pos)) return nullptr;
  const Tensor& t = a.tensor(pos);
  if (t.numel() != c)
    a.fail(std::string(what) + " should have " + std::to_string(c) +
           " elements (one per channel), " + "found " + shapeString(t.shape()));
  return &t;
}

/// The overloads that share the forward rule, by argument layout.
enum class BnVariant { Native, Legit, LegitNoStats, LegitNoTraining, LegitFunctional };

struct BnArgs {
  const Tensor* x = nullptr;
  const Tensor *w = nullptr, *b = nullptr, *rm = nullptr, *rv = nullptr;
  bool training = true, functional = false;
  double momentum = 0.1, eps = 1e-5;
  BnLayout l;
};

BnArgs bnArgs(const OpArgs& a, BnVariant v) {
  BnArgs r;
  r.x = &a.tensor(0);
  r.l = bnLayout(a, *r.x);
  const std::int64_t c = r.l.channels;
  r.w = channelTensor(a, 1, c, "weight");
  r.b = channelTensor(a, 2, c, "bias");
  switch (v) {
    case BnVariant::Native:
    case BnVariant::Legit:
    case BnVariant::LegitFunctional:
      r.rm = channelTensor(a, 3, c, "running_mean");
      r.rv = channelTensor(a, 4, c, "running_var");
      r.training = a.boolArg(5, "training");
      r.momentum = a.numberArg(6, "momentum");
      r.eps = a.numberArg(7, "eps");
      break;
    case BnVariant::LegitNoStats:
      r.training = a.boolArg(3, "training");
      r.momentum = a.numberArg(4, "momentum");
      r.eps = a.numberArg(5, "eps");
      break;
    case BnVariant::LegitNoTraining:
      r.rm = channelTensor(a, 3, c, "running_mean");
      r.rv = channelTensor(a, 4, c, "running_var");
      r.training = false;
      r.momentum = a.numberArg(5, "momentum");
      r.eps = a.numberArg(6, "eps");
      break;
  }
  r.functional = v == BnVariant::LegitFunctional;
  if (!r.training && (!r.rm || !r.rv))
    a.fail("running_mean and running_var must be given in evaluation mode (training=False)");
  if (r.functional && (!r.rm || !r.rv))
    a.fail("_native_batch_norm_legit_functional needs running_mean and running_var");
  return r;
}

/// Returns the shape of save_mean/save_invstd: [C] in training; in eval [0] unless the trace
/// declares [C] (the CUDA and decomposition convention).
Shape statShape(const OpArgs& a, const BnArgs& ba) {
  const Shape perChannel{ba.l.channels};
  if (ba.training) return perChannel;
  return a.node().outputs.size() > 1 && a.outSpec(1).shape == perChannel ? perChannel : Shape{0};
}

/// Returns the format the forward's per-channel statistics may be stored in: the coarsest of the
/// statistic outputs' storage formats (the parameter dtype; with fp32 parameters PyTorch keeps
/// bf16/fp16 inputs' statistics in fp32, measured on every layout).
Format forwardStatFormat(const OpArgs& a, const OpContext& ctx, Format c) {
  return coarser(coarser(c, outFormat(a, ctx, 1)), outFormat(a, ctx, 2));
}

std::vector<double> valuesOf(const Tensor* t) {
  return t ? std::vector<double>(t->values().begin(), t->values().end()) : std::vector<double>{};
}

// ---------------------------------------------------------------------------------------------
// Forward formula in a point-like domain (binary64 or AD), two-pass.

template <class D>
struct BnOutputs {
  std::vector<typename D::V> out, mean, rstd, newMean, newVar;
};

template <class D>
void bnForwardFormula(const D& d, const BnArgs& ba, bool statsOut,
                      const std::vector<typename D::V>& x, const std::vector<typename D::V>* w,
                      const std::vector<typename D::V>* b, const std::vector<typename D::V>* rm,
                      const std::vector<typename D::V>* rv, BnOutputs<D>& o) {
  using V = typename D::V;
  const BnLayout& l = ba.l;
  const std::int64_t n = l.n();
  const auto cs = static_cast<std::size_t>(l.channels);
  o.out.assign(x.size(), d.lit(0.0));
  if (statsOut) {
    o.mean.assign(cs, d.lit(0.0));
    o.rstd.assign(cs, d.lit(0.0));
  }
  if (ba.functional) {
    o.newMean.assign(cs, d.lit(0.0));
    o.newVar.assign(cs, d.lit(0.0));
  }
  const V nv = d.lit(static_cast<double>(n)), eps = d.lit(ba.eps), one = d.lit(1.0);
  const V mom = d.lit(ba.momentum), keep = d.lit(1.0 - ba.momentum);
  for (std::int64_t c = 0; c < l.channels; ++c) {
    const auto cu = static_cast<std::size_t>(c);
    V mu, rs, ss = d.lit(0.0);
    if (ba.training) {
      V s = d.lit(0.0);
      for (std::int64_t k = 0; k < n; ++k) s = d.add(s, x[static_cast<std::size_t>(l.at(c, k))]);
      mu = d.div(s, nv);
      for (std::int64_t k = 0; k < n; ++k)
        ss = d.add(ss, d.sqr(d.sub(x[static_cast<std::size_t>(l.at(c, k))], mu)));
      rs = d.div(one, d.sqrtV(d.add(d.div(ss, nv), eps)));
    } else {
      mu = (*rm)[cu];
      rs = d.div(one, d.sqrtV(d.add((*rv)[cu], eps)));
    }
    for (std::int64_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(l.at(c, k));
      V y = d.mul(d.sub(x[i], mu), rs);
      if (w) y = d.mul(y, (*w)[cu]);
      if (b) y = d.add(y, (*b)[cu]);
      o.out[i] = y;
    }
    if (statsOut) {
      o.mean[cu] = mu;
      o.rstd[cu] = rs;
    }
    if (ba.functional) {
      if (ba.training) {
        o.newMean[cu] = d.add(d.mul(mom, mu), d.mul(keep, (*rm)[cu]));
        o.newVar[cu] =
            d.add(d.mul(mom, d.div(ss, d.lit(static_cast<double>(n - 1)))), d.mul(keep, (*rv)[cu]));
      } else {
        o.newMean[cu] = (*rm)[cu];
        o.newVar[cu] = (*rv)[cu];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

/// Returns a forward (out, save_mean, save_invstd) computed through the backend's hooks,
/// or nothing when it declines: the channels gathered into rows through an index map,
/// Backend::batchNormRows (kernels::batchNormRow per row, the body the host loop below runs), the
/// rows gathered back into x's layout. The same bits as the host loop.
/// The index maps that gather the channels of a tensor of layout l into rows (channel ch's
/// element k at ch·n + k) and back.
struct ChannelMaps {
  std::vector<std::int64_t> toRows, back;
};
ChannelMaps channelMaps(const BnLayout& l) {
  const std::int64_t n = l.n(), rows = l.channels;
  ChannelMaps m{std::vector<std::int64_t>(static_cast<std::size_t>(rows * n)),
                std::vector<std::int64_t>(static_cast<std::size_t>(rows * n))};
  for (std::int64_t ch = 0; ch < rows; ++ch)
    for (std::int64_t k = 0; k < n; ++k) {
      m.toRows[static_cast<std::size_t>(ch * n + k)] = l.at(ch, k);
      m.back[static_cast<std::size_t>(l.at(ch, k))] = ch * n + k;
    }
  return m;
}

std::optional<std::vector<Tensor>> offerRows(const OpArgs& a, const BnArgs& ba, const Shape& ss,
                                             const kernels::BatchNormModel& bn, Backend& be) {
  const BnLayout& l = ba.l;
  const std::int64_t n = l.n(), rows = l.channels;
  if (!be.offersIntervalKernels() || n == 0 || rows == 0 || (numel(ss) != rows && numel(ss) != 0) ||
      (!ba.training && (!ba.rm || !ba.rv)))
    return std::nullopt;
  const auto [toRows, back] = channelMaps(l);
  const auto x = offerGather(be, *ba.x, toRows, Shape{rows, n}, ba.x->dtype(), Interval{0.0, 0.0});
  if (!x) return std::nullopt;
  const auto r = static_cast<std::size_t>(rows);
  std::vector<double> olo(r * static_cast<std::size_t>(n)), ohi(olo.size()), mlo(r), mhi(r), rlo(r),
      rhi(r);
  auto spanOf = [](const Tensor* t) {
    return t ? kernels::ConstIntervalSpan{t->lo().data(), t->hi().data()}
             : kernels::ConstIntervalSpan{};
  };
  if (!be.batchNormRows(bn, spanOf(&*x), spanOf(ba.w), spanOf(ba.b),
                        ba.training ? kernels::ConstIntervalSpan{} : spanOf(ba.rm),
                        ba.training ? kernels::ConstIntervalSpan{} : spanOf(ba.rv),
                        {olo.data(), ohi.data()}, {mlo.data(), mhi.data()},
                        {rlo.data(), rhi.data()}, rows, n))
    return std::nullopt;
  const Tensor outRows =
      Tensor::interval(Shape{rows, n}, a.outSpec(0).dtype, std::move(olo), std::move(ohi));
  auto out = offerGather(be, outRows, back, ba.x->shape(), a.outSpec(0).dtype, Interval{0.0, 0.0});
  if (!out) return std::nullopt;
  if (numel(ss) == 0)  // eval on PyTorch's CPU: save_mean and save_invstd are empty
    return std::vector<Tensor>{std::move(*out), Tensor::interval(ss, a.outSpec(1).dtype, {}, {}),
                               Tensor::interval(ss, a.outSpec(2).dtype, {}, {})};
  return std::vector<Tensor>{
      std::move(*out), Tensor::interval(ss, a.outSpec(1).dtype, std::move(mlo), std::move(mhi)),
      Tensor::interval(ss, a.outSpec(2).dtype, std::move(rlo), std::move(rhi))};
}

class BatchNormForwardRule final : public OpRule {
 public:
  explicit BatchNormForwardRule(BnVariant v) : mVariant(v) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const BnArgs ba = bnArgs(a, mVariant);
    const Shape ss = statShape(a, ba);
    const PointDomain d;
    const std::vector<double> x = valuesOf(ba.x), w = valuesOf(ba.w), b = valuesOf(ba.b),
                              rm = valuesOf(ba.rm), rv = valuesOf(ba.rv);
    BnOutputs<PointDomain> o;
    bnForwardFormula(d, ba, numel(ss) > 0, x, ba.w ? &w : nullptr, ba.b ? &b : nullptr,
                     ba.rm ? &rm : nullptr, ba.rv ? &rv : nullptr, o);
    return outputs(a, ba, ss, o.out, o.mean, o.rstd, o.newMean, o.newVar);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const BnArgs ba = bnArgs(a, mVariant);
    const Shape ss = statShape(a, ba);
    const BnLayout& l = ba.l;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format stat = forwardStatFormat(a, ctx, c);
    const Format sOut = outFormat(a, ctx, 0), sMean = outFormat(a, ctx, 1),
                 sRstd = outFormat(a, ctx, 2);
    const IntervalDomain ds{coarser(c, stat)};
    const std::int64_t n = l.n();
    const auto cs = static_cast<std::size_t>(l.channels);
    std::vector<Interval> out(static_cast<std::size_t>(ba.x->numel())), mean(cs), rstd(cs),
        newMean(cs), newVar(cs);
    const kernels::RowMomentsModel model{c, ba.eps, modelUlps(LibmFn::Rsqrt, c), stat};
    const kernels::BatchNormModel bn{model, sOut, sMean, sRstd, ba.training};
    if (!ba.functional)
      if (auto r = offerRows(a, ba, ss, bn, ctx.backend)) return std::move(*r);
    // Running statistics: momentum m and 1 − m as the kernels read them (Python doubles, or
    // 1 − m computed in c).
    const Interval mom = scalarEnclosure(ba.momentum, c);
    const Interval keep =
        hull(ds.sub(Interval{1.0, 1.0}, mom), scalarEnclosure(1.0 - ba.momentum, c));
    ctx.backend.parallelFor(l.channels, [&](std::int64_t begin, std::int64_t end) {
      std::vector<double> xlo(static_cast<std::size_t>(n)), xhi(xlo.size()), clo(xlo.size()),
          chi(xlo.size());
      for (std::int64_t ch = begin; ch < end; ++ch) {
        const auto cu = static_cast<std::size_t>(ch);
        const Interval wc = ba.w ? ba.w->at(ch) : Interval{}, bc = ba.b ? ba.b->at(ch) : Interval{};
        // The channel's row through the body a device runs too (kernels/batch_norm_row.h).
        for (std::int64_t k = 0; k < n; ++k) {
          const Interval v = ba.x->at(l.at(ch, k));
          xlo[static_cast<std::size_t>(k)] = v.lo;
          xhi[static_cast<std::size_t>(k)] = v.hi;
        }
        const kernels::RowMoments mo = kernels::batchNormRow(
            xlo.data(), xhi.data(), n, ba.w ? &wc : nullptr, ba.b ? &bc : nullptr,
            ba.rm ? ba.rm->at(ch) : Interval{}, ba.rv ? ba.rv->at(ch) : Interval{}, bn, clo.data(),
            chi.data(), &mean[cu], &rstd[cu]);
        for (std::int64_t k = 0; k < n; ++k)
          out[static_cast<std::size_t>(l.at(ch, k))] =
              Interval{clo[static_cast<std::size_t>(k)], chi[static_cast<std::size_t>(k)]};
        if (ba.training && !mo.bounded) {
          newMean[cu] = newVar[cu] = entireInterval();
          continue;
        }
        if (ba.functional) {
          if (!ba.training) {
            newMean[cu] = ba.rm->at(ch);
            newVar[cu] = ba.rv->at(ch);
            continue;
          }
          newMean[cu] = ds.add(ds.mul(mom, mo.mean), ds.mul(keep, ba.rm->at(ch)));
          if (n < 2) {
            newVar[cu] = entireInterval();
          } else {
            const Interval nI = ds.lit(static_cast<double>(n)),
                           n1 = ds.lit(static_cast<double>(n - 1));
            const Interval unbiased = hull(
                hull(ds.div(mo.m2, n1),
                     ds.mul(mo.var,
                            hull(ds.div(nI, n1),
                                 scalarEnclosure(
                                     static_cast<double>(n) / static_cast<double>(n - 1), c)))),
                ds.div(ds.mul(mo.var, nI), n1));
            newVar[cu] = ds.add(ds.mul(mom, unbiased), ds.mul(keep, ba.rv->at(ch)));
          }
        }
      }
    });
    auto tensor = [](const Shape& sh, DType t, const std::vector<Interval>& v, Format f) {
      std::vector<double> lo(v.size()), hi(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        const Interval r = roundOutward(v[i], f);
        lo[i] = r.lo;
        hi[i] = r.hi;
      }
      return Tensor::interval(sh, t, std::move(lo), std::move(hi));
    };
    std::vector<Tensor> res{
        tensor(ba.x->shape(), a.outSpec(0).dtype, out, sOut),
        tensor(ss, a.outSpec(1).dtype, numel(ss) > 0 ? mean : std::vector<Interval>{}, sMean),
        tensor(ss, a.outSpec(2).dtype, numel(ss) > 0 ? rstd : std::vector<Interval>{}, sRstd)};
    if (ba.functional) {
      res.push_back(tensor({l.channels}, a.outSpec(3).dtype, newMean, outFormat(a, ctx, 3)));
      res.push_back(tensor({l.channels}, a.outSpec(4).dtype, newVar, outFormat(a, ctx, 4)));
    }
    return res;
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const BnArgs ba = bnArgs(a, mVariant);
    const Shape ss = statShape(a, ba);
    const BnLayout& l = ba.l;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format stat = forwardStatFormat(a, ctx, c);
    const bool storable = unitRoundoff(stat) > unitRoundoff(c);
    const Format sOut = outFormat(a, ctx, 0), sMean = outFormat(a, ctx, 1),
                 sRstd = outFormat(a, ctx, 2);
    std::mt19937_64& rng = *ctx.rng;
    auto maybeStore = [&](double v) { return storable && (rng() & 1) ? roundNearest(v, stat) : v; };
    const std::int64_t n = l.n();
    const auto cs = static_cast<std::size_t>(l.channels);
    std::vector<double> out(static_cast<std::size_t>(ba.x->numel())), mean(cs), rstd(cs),
        newMean(cs), newVar(cs);
    const AffineForm form = randomAffineForm(rng);
    const bool storeAB = rng() & 1;
    const auto xv = ba.x->values();
    for (std::int64_t ch = 0; ch < l.channels; ++ch) {
      const auto cu = static_cast<std::size_t>(ch);
      double mu, r, m2 = 0.0, var = 0.0;
      if (ba.training) {
        if (n == 0) {
          mean[cu] = rstd[cu] = newMean[cu] = newVar[cu] = std::nan("");
          continue;
        }
        std::vector<double> row(static_cast<std::size_t>(n));
        for (std::int64_t k = 0; k < n; ++k)
          row[static_cast<std::size_t>(k)] = xv[static_cast<std::size_t>(l.at(ch, k))];
        std::tie(mu, m2) = randomMoments(row, c, rng, stat);
        const double nd = static_cast<double>(n);
        var = (rng() & 1) ? roundNearest(m2 / nd, c)
                          : roundNearest(m2 * roundNearest(1.0 / nd, c), c);
        if (rng() & 1) var = std::max(var, 0.0);
        r = randomRsqrt(var, ba.eps, c, rng);
      } else {
        mu = ba.rm->values()[cu];
        r = randomRsqrt(ba.rv->values()[cu], ba.eps, c, rng);
      }
      const double muUse = ba.training ? maybeStore(mu) : mu, rUse = maybeStore(r);
      const double* w = ba.w ? &ba.w->values()[cu] : nullptr;
      const double* b = ba.b ? &ba.b->values()[cu] : nullptr;
      for (std::int64_t k = 0; k < n; ++k) {
        const auto i = static_cast<std::size_t>(l.at(ch, k));
        out[i] = roundNearest(randomAffine(xv[i], muUse, rUse, w, b, form, c, stat, storeAB), sOut);
      }
      mean[cu] = roundNearest(mu, sMean);
      rstd[cu] = roundNearest(r, sRstd);
      if (ba.functional) {
        const double rm = ba.rm->values()[cu], rv = ba.rv->values()[cu];
        if (!ba.training) {
          newMean[cu] = rm;
          newVar[cu] = rv;
          continue;
        }
        const double mom = randomScalar(ba.momentum, c, rng);
        const double keep =
            (rng() & 1) ? roundNearest(1.0 - mom, c) : randomScalar(1.0 - ba.momentum, c, rng);
        auto rn = [c](double v) { return roundNearest(v, c); };
        newMean[cu] = rn(rn(mom * (rng() & 1 ? muUse : mu)) + rn(keep * rm));
        const double nd = static_cast<double>(n);
        double unbiased;
        switch (rng() % 3) {
          case 0:
            unbiased = rn(m2 / (nd - 1.0));
            break;
          case 1:
            unbiased = rn(var * randomScalar(nd / (nd - 1.0), c, rng));
            break;
          default:
            unbiased = rn(rn(var * nd) / (nd - 1.0));
            break;
        }
        newVar[cu] = rn(rn(mom * maybeStore(unbiased)) + rn(keep * rv));
      }
    }
    std::vector<Tensor> res{
        Tensor::point(ba.x->shape(), a.outSpec(0).dtype, std::move(out)),
        Tensor::point(ss, a.outSpec(1).dtype, numel(ss) > 0 ? mean : std::vector<double>{}),
        Tensor::point(ss, a.outSpec(2).dtype, numel(ss) > 0 ? rstd : std::vector<double>{})};
    if (ba.functional) {
      const Format f3 = outFormat(a, ctx, 3), f4 = outFormat(a, ctx, 4);
      for (double& v : newMean) v = roundNearest(v, f3);
      for (double& v : newVar) v = roundNearest(v, f4);
      res.push_back(Tensor::point({l.channels}, a.outSpec(3).dtype, std::move(newMean)));
      res.push_back(Tensor::point({l.channels}, a.outSpec(4).dtype, std::move(newVar)));
    }
    return res;
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const BnArgs ba = bnArgs(a, mVariant);
    const Shape ss = statShape(a, ba);
    Tape tape;
    const AdDomain d{&tape};
    auto leaves = [&](const Tensor* t) {
      std::vector<Var> v;
      if (t)
        for (double x : t->values()) v.push_back(d.leaf(x));
      return v;
    };
    const std::vector<Var> x = leaves(ba.x), w = leaves(ba.w), b = leaves(ba.b), rm = leaves(ba.rm),
                           rv = leaves(ba.rv);
    BnOutputs<AdDomain> o;
    bnForwardFormula(d, ba, numel(ss) > 0, x, ba.w ? &w : nullptr, ba.b ? &b : nullptr,
                     ba.rm ? &rm : nullptr, ba.rv ? &rv : nullptr, o);
    std::vector<std::pair<int, double>> seeds;
    const std::vector<Var>* outs[5] = {&o.out, &o.mean, &o.rstd, &o.newMean, &o.newVar};
    for (std::size_t k = 0; k < 5 && k < g.size(); ++k)
      if (g[k].numel() == static_cast<std::int64_t>(outs[k]->size()))
        for (std::size_t i = 0; i < outs[k]->size(); ++i)
          seeds.emplace_back((*outs[k])[i].id, g[k].values()[i]);
    const auto adj = tape.backward(seeds);
    std::map<const Tensor*, Tensor> grads;
    auto grad = [&](const std::vector<Var>& v, const Tensor* t) {
      if (!t) return;
      std::vector<double> gv(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) gv[i] = adj[static_cast<std::size_t>(v[i].id)];
      grads.emplace(t, Tensor::point(t->shape(), t->dtype(), std::move(gv)));
    };
    grad(x, ba.x);
    grad(w, ba.w);
    grad(b, ba.b);
    grad(rm, ba.rm);
    grad(rv, ba.rv);
    std::vector<std::optional<Tensor>> res;
    for (const Tensor* t : a.tensorInputs()) {
      const auto it = grads.find(t);
      res.emplace_back(it != grads.end() ? std::optional<Tensor>(it->second)
                                         : std::optional<Tensor>(zerosLike(*t, t->dtype())));
    }
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outputs,
                                 OpContext& ctx) const override {
    return localErrorFromInterval(*this, a, outputs, ctx);
  }

  // Training: a channel's mean and rstd are shared by its n elements, weighed by the signed
  // adjoint sums (ops::norm::normRowAdjoint with the channel affine form; core/ops/norm_ops.cpp,
  // "Adjoint-weighted local error"), the probabilistic term ~√n·u through momentSpread where
  // localError's worst case put ~n·u in every element. nullopt (→ localError): eval, statistics
  // stored coarser than c, adjoints on the running statistics, or a channel without a bound.
  std::optional<AdjointLocalError> adjointLocalError(const OpArgs& a, std::span<const Tensor> o,
                                                     std::span<const Tensor> g,
                                                     OpContext& ctx) const override {
    const BnArgs ba = bnArgs(a, mVariant);
    const BnLayout& l = ba.l;
    const std::int64_t n = l.n();
    if (!ba.training || n == 0 || o.size() < 3 || g.size() < 3) return std::nullopt;
    const Format c = accumulationFormat(ctx.precision, a.outSpec(0).dtype);
    const Format stat = forwardStatFormat(a, ctx, c);
    if (stat != c) return std::nullopt;
    for (std::size_t k = 3; k < g.size(); ++k)
      for (double v : g[k].values())
        if (v != 0.0) return std::nullopt;
    const NormRowModel m{kernels::RowMomentsModel{c, ba.eps, modelUlps(LibmFn::Rsqrt, c), stat},
                         outFormat(a, ctx, 0),
                         outFormat(a, ctx, 1),
                         outFormat(a, ctx, 2),
                         true,
                         !ctx.boundOnly};
    const auto xv = ba.x->values(), g0 = g[0].values();
    const auto nu = static_cast<std::size_t>(n);
    std::vector<double> x(nu), gr(nu), w(ba.w ? nu : 0), b(ba.b ? nu : 0);
    return normRowsAdjoint(l.channels, m, o, g, [&](std::int64_t ch) {
      const auto cu = static_cast<std::size_t>(ch);
      for (std::int64_t k = 0; k < n; ++k) {
        const auto i = static_cast<std::size_t>(l.at(ch, k)), ku = static_cast<std::size_t>(k);
        x[ku] = xv[i];
        gr[ku] = g0[i];
      }
      if (ba.w) std::fill(w.begin(), w.end(), ba.w->values()[cu]);
      if (ba.b) std::fill(b.begin(), b.end(), ba.b->values()[cu]);
      return NormRow{x.data(), gr.data(), ba.w ? w.data() : nullptr, ba.b ? b.data() : nullptr, n};
    });
  }

 private:
  static std::vector<Tensor> outputs(const OpArgs& a, const BnArgs& ba, const Shape& ss,
                                     std::vector<double>& out, std::vector<double>& mean,
                                     std::vector<double>& rstd, std::vector<double>& newMean,
                                     std::vector<double>& newVar) {
    if (numel(ss) == 0) {
      mean.clear();
      rstd.clear();
    }
    std::vector<Tensor> res{Tensor::point(ba.x->shape(), a.outSpec(0).dtype, std::move(out)),
                            Tensor::point(ss, a.outSpec(1).dtype, std::move(mean)),
                            Tensor::point(ss, a.outSpec(2).dtype, std::move(rstd))};
    if (ba.functional) {
      res.push_back(Tensor::point({ba.l.channels}, a.outSpec(3).dtype, std::move(newMean)));
      res.push_back(Tensor::point({ba.l.channels}, a.outSpec(4).dtype, std::move(newVar)));
    }
    return res;
  }

  BnVariant mVariant;
};

// ---------------------------------------------------------------------------------------------
// native_batch_norm_backward(dy, x, w?, rm?, rv?, save_mean?, save_invstd?, train, eps, mask)

struct BnBwdArgs {
  const Tensor *dy = nullptr, *x = nullptr, *w = nullptr, *rm = nullptr, *rv = nullptr,
               *saveMean = nullptr, *saveInvstd = nullptr;
  bool train = true;
  double eps = 1e-5;
  std::vector<bool> mask;
  BnLayout l;
};

BnBwdArgs bnBwdArgs(const OpArgs& a) {
  BnBwdArgs r;
  r.dy = &a.tensor(0);
  r.x = &a.tensor(1);
  r.l = bnLayout(a, *r.x);
  if (r.dy->shape() != r.x->shape())
    a.fail("grad_out " + shapeString(r.dy->shape()) + " should have the shape of input " +
           shapeString(r.x->shape()));
  const std::int64_t c = r.l.channels;
  r.w = channelTensor(a, 2, c, "weight");
  r.train = a.boolArg(7, "train");
  r.eps = a.numberArg(8, "eps");
  r.mask = outputMask(a, 9);
  if (r.train) {
    r.saveMean = channelTensor(a, 5, c, "save_mean");
    r.saveInvstd = channelTensor(a, 6, c, "save_invstd");
    if (!r.saveMean || !r.saveInvstd)
      a.fail("save_mean and save_invstd must be given in training mode (train=True)");
    // running stats are not read in training; [0]-shaped or absent ones are fine.
    if (a.isTensor(3)) r.rm = &a.tensor(3);
    if (a.isTensor(4)) r.rv = &a.tensor(4);
  } else {
    r.rm = channelTensor(a, 3, c, "running_mean");
    r.rv = channelTensor(a, 4, c, "running_var");
    if (!r.rm || !r.rv)
      a.fail("running_mean and running_var must be given in evaluation mode (train=False)");
    if (a.isTensor(5)) r.saveMean = &a.tensor(5);
    if (a.isTensor(6)) r.saveInvstd = &a.tensor(6);
  }
  return r;
}

/// Returns a batch-norm backward computed through the backend's hooks, or nothing (empty) when
/// it declines: dy and x gathered into channel rows, Backend::batchNormBackwardRows
/// (kernels::batchNormBackwardRow per row, the body the host loop runs), grad_input gathered
/// back into x's layout. The same bits as the host loop.
std::vector<Tensor> offerRows(const OpArgs& a, const BnBwdArgs& ba,
                              const kernels::BatchNormBackwardModel& m, const Tensor& mean,
                              const Tensor& second, Backend& be) {
  const BnLayout& l = ba.l;
  const std::int64_t n = l.n(), rows = l.channels;
  if (!be.offersIntervalKernels() || n == 0 || rows == 0) return {};
  const auto [toRows, back] = channelMaps(l);
  const auto dy = offerGather(be, *ba.dy, toRows, Shape{rows, n}, ba.dy->dtype(), {0.0, 0.0});
  const auto x = offerGather(be, *ba.x, toRows, Shape{rows, n}, ba.x->dtype(), {0.0, 0.0});
  if (!dy || !x) return {};
  const auto r = static_cast<std::size_t>(rows);
  std::vector<double> gl(r * static_cast<std::size_t>(n)), gh(gl.size()), wl(r), wh(r), bl(r),
      bh(r);
  auto spanOf = [](const Tensor* t) {
    return t ? kernels::ConstIntervalSpan{t->lo().data(), t->hi().data()}
             : kernels::ConstIntervalSpan{};
  };
  if (!be.batchNormBackwardRows(m, spanOf(&*dy), spanOf(&*x), spanOf(&mean), spanOf(&second),
                                spanOf(ba.w), {gl.data(), gh.data()}, {wl.data(), wh.data()},
                                {bl.data(), bh.data()}, rows, n))
    return {};
  const DType t0 = outDtypeOr(a, 0, ba.x->dtype());
  const Tensor giRows = Tensor::interval(Shape{rows, n}, t0, std::move(gl), std::move(gh));
  auto gi = offerGather(be, giRows, back, ba.x->shape(), t0, Interval{0.0, 0.0});
  if (!gi) return {};
  return {std::move(*gi),
          Tensor::interval({rows}, outDtypeOr(a, 1, t0), std::move(wl), std::move(wh)),
          Tensor::interval({rows}, outDtypeOr(a, 2, t0), std::move(bl), std::move(bh))};
}

/// The exact backward in a point-like domain (binary64 or AD): gI, gW, gB.
template <class D>
void bnBackwardFormula(const D& d, const BnBwdArgs& ba, const std::vector<typename D::V>& dy,
                       const std::vector<typename D::V>& x, const std::vector<typename D::V>* w,
                       const std::vector<typename D::V>& meanIn,
                       const std::vector<typename D::V>& scaleIn, std::vector<typename D::V>& gi,
                       std::vector<typename D::V>& gw, std::vector<typename D::V>& gb) {
  using V = typename D::V;
  const BnLayout& l = ba.l;
  const std::int64_t n = l.n();
  const auto cs = static_cast<std::size_t>(l.channels);
  gi.assign(x.size(), d.lit(0.0));
  gw.assign(cs, d.lit(0.0));
  gb.assign(cs, d.lit(0.0));
  const V nv = d.lit(static_cast<double>(n)), one = d.lit(1.0), eps = d.lit(ba.eps);
  for (std::int64_t c = 0; c < l.channels; ++c) {
    const auto cu = static_cast<std::size_t>(c);
    // train: meanIn/scaleIn are save_mean/save_invstd; eval: running_mean/running_var.
    const V mu = meanIn[cu];
    const V r = ba.train ? scaleIn[cu] : d.div(one, d.sqrtV(d.add(scaleIn[cu], eps)));
    V sdy = d.lit(0.0), dot = d.lit(0.0);
    for (std::int64_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(l.at(c, k));
      sdy = d.add(sdy, dy[i]);
      dot = d.add(dot, d.mul(dy[i], d.sub(x[i], mu)));
    }
    gw[cu] = d.mul(dot, r);
    gb[cu] = sdy;
    const V scale = w ? d.mul(r, (*w)[cu]) : r;
    const V k = d.div(d.mul(d.mul(dot, r), r), nv), gm = d.div(sdy, nv);
    for (std::int64_t kk = 0; kk < n; ++kk) {
      const auto i = static_cast<std::size_t>(l.at(c, kk));
      gi[i] = ba.train ? d.mul(d.sub(d.sub(dy[i], gm), d.mul(d.sub(x[i], mu), k)), scale)
                       : d.mul(dy[i], scale);
    }
  }
}

class BatchNormBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const BnBwdArgs ba = bnBwdArgs(a);
    const PointDomain d;
    const std::vector<double> dy = valuesOf(ba.dy), x = valuesOf(ba.x), w = valuesOf(ba.w),
                              mean = valuesOf(ba.train ? ba.saveMean : ba.rm),
                              scale = valuesOf(ba.train ? ba.saveInvstd : ba.rv);
    std::vector<double> gi, gw, gb;
    bnBackwardFormula(d, ba, dy, x, ba.w ? &w : nullptr, mean, scale, gi, gw, gb);
    return results(a, ba, std::move(gi), std::move(gw), std::move(gb));
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const BnBwdArgs ba = bnBwdArgs(a);
    const BnLayout& l = ba.l;
    const DType t0 = outDtypeOr(a, 0, ba.x->dtype());
    const Format c = accumulationFormat(ctx.precision, t0);
    const Format stat = statFormat(ctx, ba, c);
    // Per-channel scalars and, when the stat format is coarser than c, the per-element ops too
    // (PyTorch's strided CPU path computes them as tensor ops in the input dtype, measured on
    // torch 2.15 with fp16: gI and gW 1–4 ulps outside an opmath-only enclosure): the body
    // computes in `stat`. With nested formats that encloses every evaluation in c as well.
    kernels::BatchNormBackwardModel m;
    m.compute = c;
    m.stat = stat;
    m.u = unitRoundoff(c) * (ctx.precision.truncatingAccumulation ? 2.0 : 1.0);
    m.eta = smallestSubnormal(c);
    m.uS = statRoundoff(c, stat);
    m.etaS = std::fmax(m.eta, smallestSubnormal(stat));
    m.storable = unitRoundoff(stat) > unitRoundoff(c);
    m.training = ba.train;
    m.eps = ba.eps;
    m.rsqrtUlps = modelUlps(LibmFn::Rsqrt, c);
    m.inputStorage = formatOf(ctx, t0);
    m.weightStorage = formatOf(ctx, outDtypeOr(a, 1, t0));
    m.biasStorage = formatOf(ctx, outDtypeOr(a, 2, t0));
    const Tensor* mean = ba.train ? ba.saveMean : ba.rm;
    const Tensor* second = ba.train ? ba.saveInvstd : ba.rv;
    std::vector<Tensor> out = offerRows(a, ba, m, *mean, *second, ctx.backend);
    if (out.empty()) {
      // Channel by channel through the same body (kernels::batchNormBackwardRow), here.
      const std::int64_t n = l.n();
      const auto cs = static_cast<std::size_t>(l.channels);
      std::vector<double> giLo(static_cast<std::size_t>(ba.x->numel())), giHi(giLo.size()),
          gwLo(cs), gwHi(cs), gbLo(cs), gbHi(cs);
      ctx.backend.parallelFor(l.channels, [&](std::int64_t begin, std::int64_t end) {
        std::vector<double> row(static_cast<std::size_t>(6 * n));
        const auto nu = static_cast<std::size_t>(n);
        double *dyl = row.data(), *dyh = dyl + nu, *xl = dyh + nu, *xh = xl + nu, *gl = xh + nu,
               *gh = gl + nu;
        for (std::int64_t ch = begin; ch < end; ++ch) {
          for (std::int64_t k = 0; k < n; ++k) {
            const std::int64_t i = l.at(ch, k);
            const Interval dy = ba.dy->at(i), x = ba.x->at(i);
            dyl[k] = dy.lo;
            dyh[k] = dy.hi;
            xl[k] = x.lo;
            xh[k] = x.hi;
          }
          const Interval wc = ba.w ? ba.w->at(ch) : Interval{};
          Interval gw, gb;
          kernels::batchNormBackwardRow(dyl, dyh, xl, xh, n, mean->at(ch), second->at(ch),
                                        ba.w ? &wc : nullptr, m, gl, gh, &gw, &gb);
          for (std::int64_t k = 0; k < n; ++k) {
            const auto i = static_cast<std::size_t>(l.at(ch, k));
            giLo[i] = gl[k];
            giHi[i] = gh[k];
          }
          const auto cu = static_cast<std::size_t>(ch);
          gwLo[cu] = gw.lo;
          gwHi[cu] = gw.hi;
          gbLo[cu] = gb.lo;
          gbHi[cu] = gb.hi;
        }
      });
      out = {
          Tensor::interval(ba.x->shape(), t0, std::move(giLo), std::move(giHi)),
          Tensor::interval({l.channels}, outDtypeOr(a, 1, t0), std::move(gwLo), std::move(gwHi)),
          Tensor::interval({l.channels}, outDtypeOr(a, 2, t0), std::move(gbLo), std::move(gbHi))};
    }
    for (std::size_t k = 0; k < 3; ++k)
      if (!ba.mask[k]) out[k] = zerosLike(out[k], out[k].dtype()).toInterval();
    return out;
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const BnBwdArgs ba = bnBwdArgs(a);
    const BnLayout& l = ba.l;
    const DType t0 = outDtypeOr(a, 0, ba.x->dtype());
    const Format c = accumulationFormat(ctx.precision, t0);
    const Format stat = statFormat(ctx, ba, c);
    const bool storable = unitRoundoff(stat) > unitRoundoff(c);
    std::mt19937_64& rng = *ctx.rng;
    // The strided tensor-op path (when the stat format is coarser): every per-element result,
    // the differences x − μ and the products of the dot product rounded to the stat format.
    const bool tensorOps = storable && (rng() & 1);
    auto rn = [&](double v) {
      const double r = roundNearest(v, c);
      return tensorOps ? roundNearest(r, stat) : r;
    };
    // A per-channel result: rounded to c, then possibly stored in the stat format.
    auto st = [&](double v) {
      const double r = roundNearest(v, c);
      return storable && (rng() & 1) ? roundNearest(r, stat) : r;
    };
    const std::int64_t n = l.n();
    const auto cs = static_cast<std::size_t>(l.channels);
    const double nd = static_cast<double>(n);
    std::vector<double> gi(static_cast<std::size_t>(ba.x->numel())), gw(cs), gb(cs), dyr, xm,
        scratch;
    const int kForm = static_cast<int>(rng() % 3), gmForm = static_cast<int>(rng() % 2),
              tForm = static_cast<int>(rng() % 2), gForm = static_cast<int>(rng() % 2);
    for (std::int64_t ch = 0; ch < l.channels; ++ch) {
      const auto cu = static_cast<std::size_t>(ch);
      double mu, r;
      if (ba.train) {
        mu = ba.saveMean->values()[cu];
        r = ba.saveInvstd->values()[cu];
      } else {
        mu = ba.rm->values()[cu];
        r = randomRsqrt(ba.rv->values()[cu], ba.eps, c, rng);
        if (storable && (rng() & 1)) r = roundNearest(r, stat);
      }
      dyr.assign(static_cast<std::size_t>(n), 0.0);
      xm.assign(dyr.size(), 0.0);
      for (std::int64_t k = 0; k < n; ++k) {
        const auto i = static_cast<std::size_t>(l.at(ch, k));
        dyr[static_cast<std::size_t>(k)] = ba.dy->values()[i];
        xm[static_cast<std::size_t>(k)] = rn(ba.x->values()[i] - mu);
      }
      std::vector<double> t2 = dyr;
      const double sumDy = st(randomSum(t2, c, rng));
      double dotP;
      if (tensorOps) {
        for (std::size_t k = 0; k < t2.size(); ++k) t2[k] = rn(dyr[k] * xm[k]);
        dotP = st(randomSum(t2, c, rng));
      } else {
        dotP = st(randomDot(dyr, xm, c, rng, scratch));
      }
      gw[cu] = st(dotP * r);
      gb[cu] = sumDy;
      const double w = ba.w ? ba.w->values()[cu] : 1.0;
      const double scale = ba.w ? st(r * w) : r;
      auto finish = [&](double t) {
        if (!ba.w) return rn(t * r);
        return gForm == 0 ? rn(rn(t * r) * w) : rn(t * scale);
      };
      if (!ba.train) {
        for (std::int64_t k = 0; k < n; ++k) {
          const auto i = static_cast<std::size_t>(l.at(ch, k));
          gi[i] = finish(ba.dy->values()[i]);
        }
        continue;
      }
      // The per-channel scalars may be stored (st); their intermediate products stay in c.
      auto rc = [c](double v) { return roundNearest(v, c); };
      const double norm = rc(1.0 / nd);
      const double kk = kForm == 0   ? st(rc(rc(dotP * r) * r) / nd)
                        : kForm == 1 ? st(rc(rc(dotP * norm) * r) * r)
                                     : st(rc(dotP * norm) * rc(r * r));
      const double gm = gmForm == 0 ? st(sumDy / nd) : st(sumDy * norm);
      for (std::int64_t k = 0; k < n; ++k) {
        const auto i = static_cast<std::size_t>(l.at(ch, k));
        const double dyi = ba.dy->values()[i];
        const double p = rn(xm[static_cast<std::size_t>(k)] * kk);
        const double t = tForm == 0 ? rn(rn(dyi - gm) - p) : rn(rn(dyi - p) - gm);
        gi[i] = finish(t);
      }
    }
    const Format s0 = formatOf(ctx, t0), s1 = formatOf(ctx, outDtypeOr(a, 1, t0)),
                 s2 = formatOf(ctx, outDtypeOr(a, 2, t0));
    for (double& v : gi) v = roundNearest(v, s0);
    for (double& v : gw) v = roundNearest(v, s1);
    for (double& v : gb) v = roundNearest(v, s2);
    return results(a, ba, std::move(gi), std::move(gw), std::move(gb));
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const BnBwdArgs ba = bnBwdArgs(a);
    Tape tape;
    const AdDomain d{&tape};
    std::map<const Tensor*, std::vector<Var>> leafOf;
    auto leaves = [&](const Tensor* t) -> const std::vector<Var>& {
      auto [it, fresh] = leafOf.try_emplace(t);
      if (fresh && t)
        for (double x : t->values()) it->second.push_back(d.leaf(x));
      return it->second;
    };
    const std::vector<Var>& dy = leaves(ba.dy);
    const std::vector<Var>& x = leaves(ba.x);
    const std::vector<Var>& w = leaves(ba.w);
    const std::vector<Var>& mean = leaves(ba.train ? ba.saveMean : ba.rm);
    const std::vector<Var>& scale = leaves(ba.train ? ba.saveInvstd : ba.rv);
    std::vector<Var> gi, gw, gb;
    bnBackwardFormula(d, ba, dy, x, ba.w ? &w : nullptr, mean, scale, gi, gw, gb);
    std::vector<std::pair<int, double>> seeds;
    const std::vector<Var>* outs[3] = {&gi, &gw, &gb};
    for (std::size_t k = 0; k < 3 && k < h.size(); ++k)
      if (ba.mask[k] && h[k].numel() == static_cast<std::int64_t>(outs[k]->size()))
        for (std::size_t i = 0; i < outs[k]->size(); ++i)
          seeds.emplace_back((*outs[k])[i].id, h[k].values()[i]);
    const auto adj = tape.backward(seeds);
    std::vector<std::optional<Tensor>> res;
    for (const Tensor* t : a.tensorInputs()) {
      const auto it = leafOf.find(t);
      if (it == leafOf.end()) {
        res.emplace_back(zerosLike(*t, t->dtype()));  // not read in this mode
        continue;
      }
      std::vector<double> g(it->second.size());
      for (std::size_t i = 0; i < g.size(); ++i)
        g[i] = adj[static_cast<std::size_t>(it->second[i].id)];
      res.emplace_back(Tensor::point(t->shape(), t->dtype(), std::move(g)));
    }
    return res;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outputs,
                                 OpContext& ctx) const override {
    return localErrorFromInterval(*this, a, outputs, ctx);
  }

 private:
  static Format formatOf(const OpContext& ctx, DType t) {
    return isIntegral(t) ? Format::Fp64 : ctx.precision.storageFor(t);
  }
  /// The coarsest of the input, parameter and statistic formats (the backward's per-channel
  /// sums and scalars may be stored in it; file comment).
  static Format statFormat(const OpContext& ctx, const BnBwdArgs& ba, Format c) {
    Format s = coarser(c, formatOf(ctx, ba.x->dtype()));
    if (ba.w) s = coarser(s, formatOf(ctx, ba.w->dtype()));
    if (ba.train) s = coarser(s, formatOf(ctx, ba.saveMean->dtype()));
    return s;
  }
  static std::vector<Tensor> results(const OpArgs& a, const BnBwdArgs& ba, std::vector<double> gi,
                                     std::vector<double> gw, std::vector<double> gb) {
    const DType t0 = outDtypeOr(a, 0, ba.x->dtype());
    const Shape cs{ba.l.channels};
    std::vector<Tensor> out{Tensor::point(ba.x->shape(), t0, std::move(gi)),
                            Tensor::point(cs, outDtypeOr(a, 1, t0), std::move(gw)),
                            Tensor::point(cs, outDtypeOr(a, 2, t0), std::move(gb))};
    for (std::size_t k = 0; k < 3; ++k)
      if (!ba.mask[k]) out[k] = zerosLike(out[k], out[k].dtype());
    return out;
  }
};

}  // namespace

void registerBatchNormOps(OpRegistry& r) {
  r.add("aten.native_batch_norm", std::make_shared<BatchNormForwardRule>(BnVariant::Native));
  r.add("aten._native_batch_norm_legit", std::make_shared<BatchNormForwardRule>(BnVariant::Legit));
  r.add("aten._native_batch_norm_legit.no_stats",
        std::make_shared<BatchNormForwardRule>(BnVariant::LegitNoStats));
  r.add("aten._native_batch_norm_legit_no_training",
        std::make_shared<BatchNormForwardRule>(BnVariant::LegitNoTraining));
  r.add("aten._native_batch_norm_legit_functional",
        std::make_shared<BatchNormForwardRule>(BnVariant::LegitFunctional));
  r.add("aten.native_batch_norm_backward", std::make_shared<BatchNormBackwardRule>());
}

}  // namespace lossbound
