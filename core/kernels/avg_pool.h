#pragma once
// One window of avg_pool2d/3d / _adaptive_avg_pool2d, and one input of their backward ops, as LB_HD
// bodies: the interval rules of
// core/ops/avg_pool_ops.cpp (whose file comment lists the kernels modelled and derives the
// bound): the window's sum in any order, then the hull of every way the kernels divide it. The
// host rule calls it per window, and Backend::avgPoolRows runs it per gathered window on a
// device, so both compute the same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate averages: the accumulation and storage formats, whether the sum and the
/// division may also run in the storage format (adaptive forward), whether the adaptive
/// kernels' divisions by kH and kW apply, and whether the backward may sum the undivided
/// gradients in acc before one multiplication (CUDA avg_pool3d at stride 1).
struct AvgPoolModel {
  Format acc = Format::Fp64;
  Format store = Format::Fp64;
  bool narrow = false;
  bool adaptive = false;
  bool rawSum = false;
};

/// Encloses an integer n as the kernels' formats hold it: n, RN_acc(n) and (narrow) RN_store(n).
LB_HD inline Interval avgPoolInteger(double n, const AvgPoolModel& m) {
  Interval r = roundOutward(point(n), m.acc);
  if (m.narrow) r = hull(r, roundOutward(point(n), m.store));
  return hull(r, point(n));
}

/// Encloses every quotient of v by a window's divisor the kernels compute, before storage: v / d
/// and v·RN(1/d), and for adaptive pooling v / kH / kW, v / kW / kH and v·RN(RN(1/kW)·RN(1/kH)),
/// each operation rounded outward in the storage format when narrow (which encloses a rounding
/// to the accumulation format and any double rounding through it), else in the accumulation one.
LB_HD inline Interval avgPoolDivide(Interval v, double divisor, double kH, double kW,
                                    const AvgPoolModel& m) {
  const Format f = m.narrow ? m.store : m.acc;
  const auto r = [f](Interval x) { return roundOutward(x, f); };
  const Interval one{1.0, 1.0};
  const Interval d = avgPoolInteger(divisor, m);
  Interval q = r(lossbound::div(v, d));
  q = hull(q, r(lossbound::mul(v, r(lossbound::div(one, d)))));
  if (m.adaptive) {
    const Interval kh = avgPoolInteger(kH, m), kw = avgPoolInteger(kW, m);
    q = hull(q, r(lossbound::div(r(lossbound::div(v, kh)), kw)));
    q = hull(q, r(lossbound::div(r(lossbound::div(v, kw)), kh)));
    q = hull(q, r(lossbound::mul(
                    v, r(lossbound::mul(r(lossbound::div(one, kw)), r(lossbound::div(one, kh)))))));
  }
  return q;
}

/// Encloses one window's average: its elements are [lo[i], hi[i]] for the i < k whose plane offset
/// off[i] is >= 0; params holds the window's divisor, kH and kW. The sum in any order in the
/// accumulation format (or, narrow, the storage format), held in acc and possibly stored before
/// the division (sumFinish: γ_(n−1)·Σ|x|, Higham 2002 eq. 4.4), then avgPoolDivide, then the
/// storage rounding; 0 for a window without elements.
LB_HD inline Interval avgPoolWindow(const double* lo, const double* hi, const double* off,
                                    std::int64_t k, const double* params, const AvgPoolModel& m) {
  SumState e;
  double count = 0.0;
  for (std::int64_t i = 0; i < k; ++i) {
    if (off[i] < 0.0) continue;
    accumulate(e, sanitize(Interval{lo[i], hi[i]}));
    count += 1.0;
  }
  if (count == 0.0) return Interval{0.0, 0.0};
  Interval s = sumFinish(e, count, m.narrow ? m.store : m.acc, m.acc, false);
  if (m.narrow) s = roundOutward(s, m.store);
  return roundOutward(avgPoolDivide(s, params[0], params[1], params[2], m), m.store);
}

/// The geometry of avg_pool2d_backward / _adaptive_avg_pool2d_backward: `planes` planes of
/// `windows` gradients and `inPlane` inputs; each input lies in at most k windows.
struct AvgPoolBackwardShape {
  std::int64_t planes = 0;
  std::int64_t windows = 0;
  std::int64_t inPlane = 0;
  std::int64_t k = 0;
};

/// Encloses input i (plane i / inPlane, position q = i mod inPlane) of the average pooling's
/// backward: Σ g_o ⊘ d_o over the windows o that contain q, wins[q·k..] (in the plane's window
/// order, -1 past the last), each quotient avgPoolDivide of the sanitized gradient with window
/// o's divisor, kH and kW (params[3o..]), accumulated in that order and finished as a sum in any
/// order in the storage format (the backward kernels accumulate in scalar_t: sumFinish,
/// γ_(n−1)·Σ|x|, Higham 2002 eq. 4.4), stored ([0, 0] where no window contains q); with rawSum,
/// the entire line when the undivided gradients' sum may overflow acc. The host rule
/// (core/ops/avg_pool_ops.cpp) and Backend::avgPoolBackward run it per input.
LB_HD inline Interval avgPoolBackwardInput(ConstIntervalSpan g, std::int64_t i, const double* wins,
                                           const double* params, const AvgPoolBackwardShape& s,
                                           const AvgPoolModel& m) {
  const std::int64_t plane = i / s.inPlane, q = i % s.inPlane;
  SumState e, raw;
  double count = 0.0;
  for (std::int64_t j = 0; j < s.k; ++j) {
    const double w = wins[q * s.k + j];
    if (w < 0.0) continue;
    const auto o = static_cast<std::int64_t>(w);
    const std::int64_t at = plane * s.windows + o;
    const double* p = params + 3 * o;
    const Interval gi = sanitize(Interval{g.lo[at], g.hi[at]});
    accumulate(e, avgPoolDivide(gi, p[0], p[1], p[2], m));
    accumulate(raw, gi);
    count += 1.0;
  }
  // The undivided sum (rawSum) may overflow acc where the quotients' sum does not: ±inf there.
  if (m.rawSum && count > 0.0 &&
      !(add_up(raw.absSumUp, sumErrorBound(count, raw.absSumUp, unitRoundoff(m.acc))) <
        largestFinite(m.acc)))
    return entireInterval();
  return sumFinish(e, count, m.store, m.store, false);
}

}  // namespace lossbound::kernels
