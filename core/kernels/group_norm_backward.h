#pragma once
// native_group_norm_backward as LB_HD bodies, in the three passes of the interval rule of
// core/ops/group_norm_ops.cpp (whose file comment derives every bound): the per-(sample, channel)
// sums ds = Σ_hw dy·x and db = Σ_hw dy, then grad_weight and grad_bias per channel (sums over the
// samples) and grad_input per row (sample, group). The host rule runs them, and
// Backend::groupNormBackward on a device (one thread per sum, per channel and per row), so both
// compute the same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/kernel_types.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate computes a group-norm backward: the accumulation format c and the
/// statistics' format `stat` (the coarsest of c, the input's, the statistics' and the weight's),
/// u of the sums (2u with truncating accumulation) and eta of c, uS = the larger of u and the
/// stat rounding and etaS; the layout (N samples, C channels in G groups, HxW elements per
/// channel); the storage formats of grad_input, grad_weight and grad_bias.
struct GroupNormBackwardModel {
  Format compute = Format::Fp64;
  Format stat = Format::Fp64;
  double u = 0x1p-53;
  double eta = 0x1p-1074;
  double uS = 0x1p-53;
  double etaS = 0x1p-1074;
  std::int64_t samples = 0;
  std::int64_t channels = 0;
  std::int64_t spatial = 0;
  std::int64_t groups = 1;
  Format inputStorage = Format::Fp64;
  Format weightStorage = Format::Fp64;
  Format biasStorage = Format::Fp64;

  /// Returns the channels per group.
  LB_HD std::int64_t perGroup() const { return groups > 0 ? channels / groups : 0; }
  /// Returns the elements per row (sample, group).
  LB_HD std::int64_t rowLength() const { return perGroup() * spatial; }
  /// Returns the number of rows.
  LB_HD std::int64_t rows() const { return samples * groups; }
};

/// Returns max(|x.lo|, |x.hi|).
LB_HD inline double magnitudeOf(Interval x) { return ::fmax(::fabs(x.lo), ::fabs(x.hi)); }

/// Pass 1, q = n·C + c: ds[q] = Σ_hw dy·x and db[q] = Σ_hw dy over the channel's HxW elements in
/// any order (Higham 2002 eq. 3.5 and 4.4), each rounded outward to the stat format.
LB_HD inline void groupNormChannelSums(const GroupNormBackwardModel& m, std::int64_t q,
                                       ConstIntervalSpan dy, ConstIntervalSpan x, IntervalSpan ds,
                                       IntervalSpan db) {
  const ComputeDomain st{m.stat};
  SumState sd, sb;
  for (std::int64_t k = 0; k < m.spatial; ++k) {
    const std::int64_t i = q * m.spatial + k;
    const Interval dyi{dy.lo[i], dy.hi[i]};
    accumulate(sd, lossbound::mul(dyi, Interval{x.lo[i], x.hi[i]}));
    accumulate(sb, dyi);
  }
  const double n = static_cast<double>(m.spatial);
  const double ed = dotErrorBound(n, sd.absSumUp, m.u, m.eta);
  const double eb = sumErrorBound(n, sb.absSumUp, m.u);
  store(ds, q, st.round(widenBy(sd.sum, ed)));
  store(db, q, st.round(widenBy(sb.sum, eb)));
}

/// Pass 2, channel ch: gw[ch] = Σ_n fl(fl(ds − fl(db·μ))·r) and gb[ch] = Σ_n db in any order
/// (eq. 4.4), steps in the stat format, rounded outward to grad_weight's and grad_bias's storage.
LB_HD inline void groupNormWeightColumn(const GroupNormBackwardModel& m, std::int64_t ch,
                                        ConstIntervalSpan ds, ConstIntervalSpan db,
                                        ConstIntervalSpan mean, ConstIntervalSpan rstd,
                                        IntervalSpan gw, IntervalSpan gb) {
  const ComputeDomain st{m.stat};
  const std::int64_t dg = m.perGroup();
  const std::int64_t g = dg > 0 ? ch / dg : 0;
  SumState sw, sb;
  for (std::int64_t n = 0; n < m.samples; ++n) {
    const std::int64_t q = n * m.channels + ch, r = n * m.groups + g;
    const Interval dbq{db.lo[q], db.hi[q]};
    accumulate(sw, st.mul(st.sub(Interval{ds.lo[q], ds.hi[q]},
                                 st.mul(dbq, Interval{mean.lo[r], mean.hi[r]})),
                          Interval{rstd.lo[r], rstd.hi[r]}));
    accumulate(sb, dbq);
  }
  const double n = static_cast<double>(m.samples);
  const double ew = sumErrorBound(n, sw.absSumUp, m.u);
  const double eb = sumErrorBound(n, sb.absSumUp, m.u);
  store(gw, ch, roundOutward(st.round(widenBy(sw.sum, ew)), m.weightStorage));
  store(gb, ch, roundOutward(st.round(widenBy(sb.sum, eb)), m.biasStorage));
}

/// Pass 3, row r = n·G + g: the group sums ds_g, db_g as dot products of the computed ds/db with
/// w (sums without a weight), the row scalars c2 and T = db_g·r/m in the stat format, then every
/// element c1·dy + c2·(x − μ) − T plus its rounding bound (the file comment of
/// core/ops/group_norm_ops.cpp), rounded in c and then to grad_input's storage. The whole row is
/// the entire line when c3 may overflow the stat format. weight.lo == nullptr for None.
LB_HD inline void groupNormBackwardRow(const GroupNormBackwardModel& m, std::int64_t r,
                                       ConstIntervalSpan dy, ConstIntervalSpan x,
                                       ConstIntervalSpan mean, ConstIntervalSpan rstd,
                                       ConstIntervalSpan weight, ConstIntervalSpan dsA,
                                       ConstIntervalSpan dbA, IntervalSpan dx) {
  const std::int64_t len = m.rowLength(), dg = m.perGroup();
  if (len == 0) return;
  const ComputeDomain d{m.compute}, ds{m.stat};
  const double u = m.u, uS = m.uS;
  const std::int64_t n = r / m.groups, g = r % m.groups;
  const Interval mu{mean.lo[r], mean.hi[r]}, rs{rstd.lo[r], rstd.hi[r]};
  const Interval one{1.0, 1.0};
  auto weightOf = [&](std::int64_t ch) {
    return weight.lo ? Interval{weight.lo[ch], weight.hi[ch]} : one;
  };
  SumState sd, sb;
  for (std::int64_t cg = 0; cg < dg; ++cg) {
    const std::int64_t ch = g * dg + cg, q = n * m.channels + ch;
    const Interval wc = weightOf(ch);
    accumulate(sd, lossbound::mul(Interval{dsA.lo[q], dsA.hi[q]}, wc));
    accumulate(sb, lossbound::mul(Interval{dbA.lo[q], dbA.hi[q]}, wc));
  }
  const double dgd = static_cast<double>(dg);
  const double ed =
      weight.lo ? dotErrorBound(dgd, sd.absSumUp, u, m.eta) : sumErrorBound(dgd, sd.absSumUp, u);
  const double eb =
      weight.lo ? dotErrorBound(dgd, sb.absSumUp, u, m.eta) : sumErrorBound(dgd, sb.absSumUp, u);
  const Interval dsG = ds.round(widenBy(sd.sum, ed));
  const Interval dbG = ds.round(widenBy(sb.sum, eb));
  const double md = static_cast<double>(len);
  const Interval s = hull(ds.div(one, ds.lit(md)), scalarEnclosure(1.0 / md, m.stat));
  const Interval qq =
      hull(ds.sub(ds.mul(dbG, mu), dsG), ds.round(lossbound::sub(lossbound::mul(dbG, mu), dsG)));
  const Interval c2 = ds.mul(ds.mul(ds.mul(ds.mul(qq, rs), rs), rs), s);
  const Interval tt = ds.mul(ds.mul(dbG, rs), s);
  const double c2mu = mul_up(magnitudeOf(c2), magnitudeOf(mu));
  const double c3mag =
      mul_up(add_up(mul_up(c2mu, add_up(1.0, uS)), magnitudeOf(tt)), add_up(1.0, uS));
  const std::int64_t o = r * len;
  if (!(c3mag <= largestFinite(m.stat))) {  // c3 may overflow where it is stored: ±inf
    const Interval e = roundOutward(entireInterval(), m.inputStorage);
    for (std::int64_t j = 0; j < len; ++j) {
      store(dx, o + j, e);
    }
    return;
  }
  const Interval shrink{sub_down(1.0, u), add_up(1.0, u)};
  for (std::int64_t j = 0; j < len; ++j) {
    const std::int64_t i = o + j;
    const std::int64_t ch = g * dg + j / m.spatial;
    const Interval c1 = weight.lo ? ds.mul(rs, weightOf(ch)) : rs;
    const Interval xi{x.lo[i], x.hi[i]};
    const Interval p1 = lossbound::mul(c1, Interval{dy.lo[i], dy.hi[i]});
    const double m1 = magnitudeOf(p1), m2 = mul_up(magnitudeOf(c2), magnitudeOf(xi));
    double err = add_up(mul_up(u, m1), mul_up(u, m2));
    err = add_up(err, mul_up(u, add_up(mul_up(add_up(m1, m2), add_up(1.0, u)), c3mag)));
    err = add_up(err, add_up(mul_up(uS, c2mu),
                             mul_up(uS, add_up(mul_up(c2mu, add_up(1.0, uS)), magnitudeOf(tt)))));
    err = add_up(err, add_up(2.0 * m.eta, 2.0 * m.etaS));
    const Interval core =
        lossbound::sub(lossbound::add(p1, lossbound::mul(c2, lossbound::sub(xi, mu))), tt);
    const Interval v =
        roundOutward(d.round(lossbound::mul(widenBy(core, err), shrink)), m.inputStorage);
    store(dx, i, v);
  }
}

/// The doubles of scratch groupNormBackward needs: ds and db, both ends, per (sample, channel).
LB_HD inline std::int64_t groupNormBackwardScratch(const GroupNormBackwardModel& m) {
  return 4 * m.samples * m.channels;
}

/// The three passes in order, serially (the host's Backend::groupNormBackward): `scratch` holds
/// groupNormBackwardScratch(m) doubles.
inline void groupNormBackward(const GroupNormBackwardModel& m, ConstIntervalSpan dy,
                              ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan rstd,
                              ConstIntervalSpan weight, IntervalSpan dx, IntervalSpan gw,
                              IntervalSpan gb, double* scratch) {
  const std::int64_t nc = m.samples * m.channels;
  const IntervalSpan ds{scratch, scratch + nc}, db{scratch + 2 * nc, scratch + 3 * nc};
  for (std::int64_t q = 0; q < nc; ++q) groupNormChannelSums(m, q, dy, x, ds, db);
  for (std::int64_t ch = 0; ch < m.channels; ++ch)
    groupNormWeightColumn(m, ch, {ds.lo, ds.hi}, {db.lo, db.hi}, mean, rstd, gw, gb);
  for (std::int64_t r = 0; r < m.rows(); ++r)
    groupNormBackwardRow(m, r, dy, x, mean, rstd, weight, {ds.lo, ds.hi}, {db.lo, db.hi}, dx);
}

}  // namespace lossbound::kernels
