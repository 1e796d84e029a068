#pragma once
// One channel of a batch norm forward (native_batch_norm and its PyTorch 2.x names) as an LB_HD
// body: the channel's moments (kernels::rowMoments; eval: the running statistics and
// kernels::rsqrtEnclosure) and the affine part per element (kernels::affineEnclosure), rounded
// outward to the output formats. The host rule
// (core/ops/batch_norm_ops.cpp, whose file comment derives every bound and cites its source)
// calls it per channel, and Backend::batchNormRows runs it per gathered channel row on a device,
// so both compute the same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/kernels/channel_norm_affine.h"
#include "core/kernels/kernel_types.h"
#include "core/kernels/layer_norm_row.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate computes a batch norm: the moments' model (compute format c, eps, rsqrt
/// ulps, the format the statistics may be stored in), the storage formats of out, save_mean and
/// save_invstd, and whether it normalizes with the batch's moments (training) or the running
/// statistics (eval). A group norm (native_group_norm, core/ops/group_norm_ops.cpp) is the
/// training form over rows (n, g) of D·HxW elements whose weight and bias change every HxW
/// elements: groups = G > 0 and spatial = HxW.
struct BatchNormModel {
  RowMomentsModel moments;
  Format outStorage = Format::Fp64;
  Format meanStorage = Format::Fp64;
  Format rstdStorage = Format::Fp64;
  bool training = true;
  std::int64_t groups = 0;   ///< > 0: a group norm of that many groups
  std::int64_t spatial = 1;  ///< group norm: the elements per channel (HxW)
};

/// Returns how many weight (and bias) values Backend::batchNormRows reads for `rows` rows of
/// `cols`: one per row (batch norm), or C = G·D, D = cols / HxW (group norm).
LB_HD inline std::int64_t affineCount(const BatchNormModel& m, std::int64_t rows,
                                      std::int64_t cols) {
  if (m.groups <= 0) return rows;
  return m.spatial > 0 ? m.groups * (cols / m.spatial) : 0;
}

/// The training form of a normalization row: the row's moments (kernels::rowMoments), then per
/// element k the affine part with the weight and bias at index k / run of wlo/whi and blo/bhi
/// (nullptr for None): one channel for a batch-norm row (run = n), D channels of HxW elements
/// for a group-norm row (run = HxW). Outputs, scratch and the unbounded case as batchNormRow.
LB_HD inline RowMoments normRowTraining(const double* xlo, const double* xhi, std::int64_t n,
                                        const double* wlo, const double* whi, const double* blo,
                                        const double* bhi, std::int64_t run,
                                        const BatchNormModel& m, double* ylo, double* yhi,
                                        Interval* mean, Interval* rstd) {
  const Format c = m.moments.compute, stat = m.moments.statStorage;
  const RowMoments mo = rowMoments(xlo, xhi, n, m.moments, ylo, yhi);
  if (!mo.bounded) {
    const Interval all = entireInterval();
    for (std::int64_t k = 0; k < n; ++k) {
      ylo[k] = all.lo;
      yhi[k] = all.hi;
    }
    *mean = all;
    *rstd = all;
    return mo;
  }
  AffineChannel aff;
  aff.hasWeight = wlo != nullptr;
  aff.hasBias = blo != nullptr;
  aff.mean = mo.mean;
  aff.rstd = hull(mo.rstd, roundOutward(mo.rstd, stat));  // r, or r stored in `stat`
  const double e = mo.meanError;
  const std::int64_t step = run > 0 ? run : 1;
  // |x − μ̂|·r <= p for the computed r (normalizedBound), and for r stored in `stat` (within
  // 2·u_stat of it relatively: rstd is a normal number there) too.
  double p = normalizedBound(mo, n, m.moments);
  if (unitRoundoff(stat) > unitRoundoff(c)) p = mul_up(p, add_up(1.0, 2.0 * unitRoundoff(stat)));
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t ch = k / step;
    if (wlo) aff.weight = Interval{wlo[ch], whi[ch]};
    if (blo) aff.bias = Interval{blo[ch], bhi[ch]};
    // x − μ̂ for every used μ̂: the exact centred value ± the mean error.
    const Interval centred{sub_down(ylo[k], e), add_up(yhi[k], e)};
    const Interval y = roundOutward(
        affineEnclosure(Interval{xlo[k], xhi[k]}, centred, aff, c, stat, p), m.outStorage);
    ylo[k] = y.lo;
    yhi[k] = y.hi;
  }
  *mean = roundOutward(mo.mean, m.meanStorage);
  *rstd = roundOutward(mo.rstd, m.rstdStorage);
  return mo;
}

/// Encloses every 1/sqrt(var + eps) the candidate computes from a variance in `var` (the
/// contract of ops::rsqrtEnclosure, core/ops/channel_norm_support.h): two correctly rounded
/// steps in c, or an rsqrt within rsqrtUlps ulps; eps read as a Python scalar; the entire line
/// when var + eps may be negative (a NaN), [0, inf] when it may be 0.
LB_HD inline Interval rsqrtEnclosure(Interval var, double eps, Format c, int rsqrtUlps) {
  const ComputeDomain d{c};
  const Interval ve = d.add(var, scalarEnclosure(eps, c));
  if (ve.lo < 0.0) return entireInterval();  // sqrt of a negative number: NaN
  if (ve.lo == 0.0) return Interval{0.0, interval_detail::inf()};
  const Interval twoStep = d.div(Interval{1.0, 1.0}, d.round(lossbound::sqrt(ve)));
  const Interval libm =
      d.round(widenUlps(lossbound::div(Interval{1.0, 1.0}, lossbound::sqrt(ve)), rsqrtUlps, c));
  return hull(twoStep, libm);
}

/// Encloses every (out, mean, rstd) the candidate can store for one channel whose n elements are
/// the row xlo/xhi (weight and bias: the channel's, nullptr for None; runningMean/runningVar:
/// the channel's running statistics, read in eval only), rounded outward to the storage formats,
/// and returns the moments (training; the running-statistics update reads them). ylo/yhi (n
/// each) are also the body's scratch (centred values) and must not alias the inputs. Training
/// without a bound (a non-finite x, n == 0, a row too long for c): every output entire.
LB_HD inline RowMoments batchNormRow(const double* xlo, const double* xhi, std::int64_t n,
                                     const Interval* weight, const Interval* bias,
                                     Interval runningMean, Interval runningVar,
                                     const BatchNormModel& m, double* ylo, double* yhi,
                                     Interval* mean, Interval* rstd) {
  const Format c = m.moments.compute, stat = m.moments.statStorage;
  AffineChannel aff;
  aff.hasWeight = weight != nullptr;
  aff.hasBias = bias != nullptr;
  if (weight) aff.weight = *weight;
  if (bias) aff.bias = *bias;
  if (!m.training) {
    // x − running_mean: the inputs are independent, so the plain interval difference.
    const Interval r = rsqrtEnclosure(runningVar, m.moments.eps, c, m.moments.rsqrtUlps);
    aff.mean = runningMean;
    aff.rstd = hull(r, roundOutward(r, stat));
    for (std::int64_t k = 0; k < n; ++k) {
      const Interval xk{xlo[k], xhi[k]};
      const Interval y = roundOutward(
          affineEnclosure(xk, lossbound::sub(xk, runningMean), aff, c, stat), m.outStorage);
      ylo[k] = y.lo;
      yhi[k] = y.hi;
    }
    *mean = roundOutward(runningMean, m.meanStorage);
    *rstd = roundOutward(r, m.rstdStorage);
    return RowMoments{};
  }
  return normRowTraining(xlo, xhi, n, weight ? &weight->lo : nullptr,
                         weight ? &weight->hi : nullptr, bias ? &bias->lo : nullptr,
                         bias ? &bias->hi : nullptr, n, m, ylo, yhi, mean, rstd);
}

/// Row r of Backend::batchNormRows (rows of `cols` elements, x, out, mean and rstd as the hook
/// has them): a batch norm reads weight[r], bias[r] and, in eval, the running statistics [r]; a
/// group norm (m.groups = G > 0) reads, for element k of row (n, g), the weight and bias of
/// channel g·D + k / HxW.
LB_HD inline void batchNormRowAt(const BatchNormModel& m, std::int64_t r, std::int64_t cols,
                                 ConstIntervalSpan x, ConstIntervalSpan weight,
                                 ConstIntervalSpan bias, ConstIntervalSpan runningMean,
                                 ConstIntervalSpan runningVar, IntervalSpan out, Interval* mean,
                                 Interval* rstd) {
  const std::int64_t o = r * cols;
  if (m.groups > 0) {
    const std::int64_t first = (r % m.groups) * (cols / (m.spatial > 0 ? m.spatial : 1));
    normRowTraining(x.lo + o, x.hi + o, cols, weight.lo ? weight.lo + first : nullptr,
                    weight.lo ? weight.hi + first : nullptr, bias.lo ? bias.lo + first : nullptr,
                    bias.lo ? bias.hi + first : nullptr, m.spatial, m, out.lo + o, out.hi + o, mean,
                    rstd);
    return;
  }
  const Interval w = weight.lo ? Interval{weight.lo[r], weight.hi[r]} : Interval{};
  const Interval b = bias.lo ? Interval{bias.lo[r], bias.hi[r]} : Interval{};
  const Interval rm = runningMean.lo ? Interval{runningMean.lo[r], runningMean.hi[r]} : Interval{};
  const Interval rv = runningVar.lo ? Interval{runningVar.lo[r], runningVar.hi[r]} : Interval{};
  batchNormRow(x.lo + o, x.hi + o, cols, weight.lo ? &w : nullptr, bias.lo ? &b : nullptr, rm, rv,
               m, out.lo + o, out.hi + o, mean, rstd);
}

/// How the candidate computes a batch-norm backward (native_batch_norm_backward): the
/// accumulation format c and the statistics' format `stat` (the coarsest of c, the input's, the
/// weight's and save_mean's), u of the sums (2u with truncating accumulation) and eta of c,
/// uS = statRoundoff(c, stat) and etaS, whether the per-element ops may round to `stat`
/// (PyTorch's strided CPU path), training or eval (eval: r from the running variance, eps and
/// the rsqrt ulps), and the storage formats of grad_input, grad_weight and grad_bias.
struct BatchNormBackwardModel {
  Format compute = Format::Fp64;
  Format stat = Format::Fp64;
  double u = 0x1p-53;
  double eta = 0x1p-1074;
  double uS = 0x1p-53;
  double etaS = 0x1p-1074;
  bool storable = false;
  bool training = true;
  double eps = 1e-5;
  int rsqrtUlps = 0;
  Format inputStorage = Format::Fp64;
  Format weightStorage = Format::Fp64;
  Format biasStorage = Format::Fp64;
};

/// Encloses one channel of a batch-norm backward (the rule of core/ops/batch_norm_ops.cpp, whose
/// file comment derives the bounds): the channel's n elements of dy and x (gathered into a row),
/// its mean (save_mean, or the running mean in eval) and `rOrVar` (save_invstd, or the running
/// variance in eval), its weight (nullptr for None) → grad_input's row, grad_weight and
/// grad_bias, each rounded outward to its storage format. Σdy and Σdy·(x − μ) in any order
/// (Higham 2002, eq. 4.4 and 3.5), then the per-element formulas in the bracketings of the CPU
/// kernels, the CUDA kernels and the decomposition, every step in `stat`.
LB_HD inline void batchNormBackwardRow(const double* dylo, const double* dyhi, const double* xlo,
                                       const double* xhi, std::int64_t n, Interval mean,
                                       Interval rOrVar, const Interval* weight,
                                       const BatchNormBackwardModel& m, double* gilo, double* gihi,
                                       Interval* gw, Interval* gb) {
  const ComputeDomain ds{m.stat};
  const Interval mu = mean;
  Interval r = rOrVar;
  if (!m.training) {
    r = rsqrtEnclosure(rOrVar, m.eps, m.compute, m.rsqrtUlps);
    r = hull(r, roundOutward(r, m.stat));
  }
  // Σdy and Σdy·(x − μ) in any order, then possibly stored in the stat format.
  Interval sdy{0.0, 0.0}, dot{0.0, 0.0};
  double sdyAbs = 0.0, dotAbs = 0.0;
  for (std::int64_t k = 0; k < n; ++k) {
    const Interval dy{dylo[k], dyhi[k]};
    const Interval t = lossbound::mul(dy, lossbound::sub(Interval{xlo[k], xhi[k]}, mu));
    sdy = Interval{add_down(sdy.lo, dy.lo), add_up(sdy.hi, dy.hi)};
    sdyAbs = add_up(sdyAbs, dy.hi > -dy.lo ? dy.hi : -dy.lo);
    dot = Interval{add_down(dot.lo, t.lo), add_up(dot.hi, t.hi)};
    dotAbs = add_up(dotAbs, t.hi > -t.lo ? t.hi : -t.lo);
  }
  const double nd = static_cast<double>(n);
  const double eS = sumErrorBound(nd, sdyAbs, m.u);
  double eD = dotErrorBound(nd + 1.0, dotAbs, m.u, m.eta);
  if (m.storable) {
    // PyTorch's strided CPU path: x − μ and each product rounded to the stat format (tensor ops
    // in the input dtype), the sum accumulated in c.
    const double g2 = gammaUp(2.0, m.uS);
    const double eT = add_up(add_up(mul_up(g2, dotAbs), mul_up(2.0 * nd, m.etaS)),
                             sumErrorBound(nd, mul_up(dotAbs, add_up(1.0, g2)), m.u));
    eD = ::fmax(eD, eT);
  }
  const Interval sumDy = ds.round(Interval{sub_down(sdy.lo, eS), add_up(sdy.hi, eS)});
  const Interval dotP = ds.round(Interval{sub_down(dot.lo, eD), add_up(dot.hi, eD)});
  *gw = roundOutward(ds.mul(dotP, r), m.weightStorage);
  *gb = roundOutward(sumDy, m.biasStorage);
  const Interval wc = weight ? *weight : Interval{1.0, 1.0};
  auto store = [&](std::int64_t k, Interval v) {
    const Interval s = roundOutward(v, m.inputStorage);
    gilo[k] = s.lo;
    gihi[k] = s.hi;
  };
  if (!m.training) {
    for (std::int64_t k = 0; k < n; ++k) {
      const Interval dyi{dylo[k], dyhi[k]};
      store(k,
            weight ? hull(ds.mul(ds.mul(dyi, r), wc), ds.mul(dyi, ds.mul(r, wc))) : ds.mul(dyi, r));
    }
    return;
  }
  // k = Σdy(x − μ)·r²/n and the mean gradient in the bracketings of the CPU kernels, the CUDA
  // kernels and the decomposition.
  const Interval nI = ds.lit(nd);
  const Interval norm = ds.div(Interval{1.0, 1.0}, nI);
  const Interval kk =
      hull(hull(ds.div(ds.mul(ds.mul(dotP, r), r), nI), ds.mul(ds.mul(ds.mul(dotP, norm), r), r)),
           ds.mul(ds.mul(dotP, norm), ds.mul(r, r)));
  const Interval gm = hull(ds.div(sumDy, nI), ds.mul(sumDy, norm));
  const Interval scale = weight ? ds.mul(r, wc) : r;
  for (std::int64_t k = 0; k < n; ++k) {
    const Interval dyi{dylo[k], dyhi[k]};
    const Interval p = ds.mul(ds.sub(Interval{xlo[k], xhi[k]}, mu), kk);
    const Interval t = hull(ds.sub(ds.sub(dyi, gm), p), ds.sub(ds.sub(dyi, p), gm));
    store(k, weight ? hull(ds.mul(ds.mul(t, r), wc), ds.mul(t, scale)) : ds.mul(t, r));
  }
}

/// Row r of Backend::batchNormBackwardRows: batchNormBackwardRow on the gathered channel r with
/// mean[r], second[r] and weight[r] (lo == nullptr for None).
LB_HD inline void batchNormBackwardRowAt(const BatchNormBackwardModel& m, std::int64_t r,
                                         std::int64_t cols, ConstIntervalSpan dy,
                                         ConstIntervalSpan x, ConstIntervalSpan mean,
                                         ConstIntervalSpan second, ConstIntervalSpan weight,
                                         IntervalSpan gradInput, IntervalSpan gradWeight,
                                         IntervalSpan gradBias) {
  const std::int64_t o = r * cols;
  const Interval w = weight.lo ? Interval{weight.lo[r], weight.hi[r]} : Interval{};
  Interval gw, gb;
  batchNormBackwardRow(dy.lo + o, dy.hi + o, x.lo + o, x.hi + o, cols,
                       Interval{mean.lo[r], mean.hi[r]}, Interval{second.lo[r], second.hi[r]},
                       weight.lo ? &w : nullptr, m, gradInput.lo + o, gradInput.hi + o, &gw, &gb);
  gradWeight.lo[r] = gw.lo;
  gradWeight.hi[r] = gw.hi;
  gradBias.lo[r] = gb.lo;
  gradBias.hi[r] = gb.hi;
}

}  // namespace lossbound::kernels
