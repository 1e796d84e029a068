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
#include "core/kernels/layer_norm_row.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate computes a batch norm: the moments' model (compute format c, eps, rsqrt
/// ulps, the format the statistics may be stored in), the storage formats of out, save_mean and
/// save_invstd, and whether it normalizes with the batch's moments (training) or the running
/// statistics (eval).
struct BatchNormModel {
  RowMomentsModel moments;
  Format outStorage = Format::Fp64;
  Format meanStorage = Format::Fp64;
  Format rstdStorage = Format::Fp64;
  bool training = true;
};

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
  aff.mean = mo.mean;
  aff.rstd = hull(mo.rstd, roundOutward(mo.rstd, stat));  // r, or r stored in `stat`
  const double e = mo.meanError;
  for (std::int64_t k = 0; k < n; ++k) {
    // x − μ̂ for every used μ̂: the exact centred value ± the mean error.
    const Interval centred{sub_down(ylo[k], e), add_up(yhi[k], e)};
    const Interval y = roundOutward(
        affineEnclosure(Interval{xlo[k], xhi[k]}, centred, aff, c, stat), m.outStorage);
    ylo[k] = y.lo;
    yhi[k] = y.hi;
  }
  *mean = roundOutward(mo.mean, m.meanStorage);
  *rstd = roundOutward(mo.rstd, m.rstdStorage);
  return mo;
}

}  // namespace lossbound::kernels
