#pragma once
// nll_loss forward (nll_loss_forward, nll_loss2d_forward) and backward as LB_HD bodies: the kept
// targets' terms −w_t·x[n, t] summed in one pass, then the order-free sum bounds and the
// reduction; the backward's element at each kept target. The host rules (core/ops/loss_ops.cpp,
// whose file comment derives every bound and cites its source) call these very bodies, and
// Backend::nllLoss / nllLossBackward run them on a device, so both compute the same bits. The
// forward pass is sequential: the enclosure of a directed-rounding sum depends on the order, and
// one order is what makes the device's bits the host's; the backward is one thread per target.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/kernel_types.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate computes an nll_loss forward: compute format c, accumulation format acc (the
/// coarser of c and the output's storage), u = acc's unit roundoff (doubled when truncating), the
/// underflow term eta, the storage formats of output and total_weight, the reduction (0 none,
/// 1 mean, 2 sum), whether a weight is given, the ignore_index, and the layout: self is
/// (batch, classes, inner) with inner = 1 for (N, C) and the 0-d target of a (C) input.
struct NllLossModel {
  Format c = Format::Fp64;
  Format acc = Format::Fp64;
  Format outStorage = Format::Fp64;
  Format weightStorage = Format::Fp64;
  double u = 0.0;
  double eta = 0.0;
  int reduction = 1;
  bool weighted = false;
  double ignore = -100.0;
  std::int64_t classes = 0;
  std::int64_t inner = 1;
};

/// The running state of the pass: the exact enclosures of Σ terms and Σ w, upper bounds of their
/// magnitudes' sums, and the number of kept targets.
struct NllLossState {
  Interval sum{0.0, 0.0};
  Interval tw{0.0, 0.0};
  double absSum = 0.0;
  double absW = 0.0;
  std::int64_t kept = 0;
};

/// Returns the class a target value names: k in [0, classes), -1 for the ignore_index, -2 for a
/// target out of range (the host rule reports it as an error).
LB_HD inline std::int64_t nllTargetClass(double target, const NllLossModel& m) {
  if (target == m.ignore) return -1;
  const std::int64_t k = tableRow(target, m.classes);
  return k < 0 ? -2 : k;
}

/// Adds the kept term −w·x (exact) to the state; returns the term.
LB_HD inline Interval nllAccumulate(NllLossState& s, Interval w, Interval x) {
  const Interval term = lossbound::neg(lossbound::mul(w, x));
  s.sum = lossbound::add(s.sum, term);
  s.absSum = add_up(s.absSum, magnitude(term));
  s.tw = lossbound::add(s.tw, w);
  s.absW = add_up(s.absW, magnitude(w));
  ++s.kept;
  return term;
}

/// Element of reduction none: the term, rounded in c when a weight multiplies, stored.
LB_HD inline Interval nllNoneElement(Interval term, const NllLossModel& m) {
  return roundOutward(m.weighted ? roundOutward(term, m.c) : term, m.outStorage);
}

/// Finishes a sum or mean reduction: the order-free sum bounds (Higham 2002, eq. 3.5 with
/// weights, eq. 4.4 without), total_weight (or the count stored, without weights), the quotient
/// for the mean (the entire line for 0/0 or a partial sum that may overflow); stored.
LB_HD inline void nllFinish(const NllLossState& s, const NllLossModel& m, Interval& out,
                            Interval& totalWeight) {
  const double n = static_cast<double>(s.kept);
  const double es =
      m.weighted ? dotErrorBound(n, s.absSum, m.u, m.eta) : sumErrorBound(n, s.absSum, m.u);
  const double ew = sumErrorBound(n, s.absW, m.u);
  const Interval sumC = roundOutward({sub_down(s.sum.lo, es), add_up(s.sum.hi, es)}, m.c);
  Interval twC = roundOutward({sub_down(s.tw.lo, ew), add_up(s.tw.hi, ew)}, m.c);
  if (!m.weighted) twC = hull(twC, roundOutward(s.tw, m.outStorage));  // the count, stored
  Interval r;
  if (m.reduction == 2)
    r = sumC;
  else if (twC.lo <= 0.0 && twC.hi >= 0.0)
    r = entireInterval();  // 0/0 or unbounded
  else
    r = roundOutward(lossbound::div(sumC, twC), m.c);
  if (!(add_up(s.absSum, es) < largestFinite(m.acc))) r = entireInterval();  // may overflow
  out = roundOutward(r, m.outStorage);
  totalWeight = roundOutward(twC, m.weightStorage);
}

/// The whole forward for self x[batch × classes × inner], targets t[batch × inner] (values),
/// weight (classes; lo == nullptr for None): out holds batch·inner elements for reduction none
/// (0 where ignored) and one otherwise; totalWeight one (0 for none). Returns false when a target
/// is out of range (nothing is then promised about out).
LB_HD inline bool nllLossForward(const NllLossModel& m, ConstIntervalSpan x, const double* target,
                                 ConstIntervalSpan weight, std::int64_t batch, IntervalSpan out,
                                 IntervalSpan totalWeight) {
  NllLossState s;
  bool ok = true;
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t j = 0; j < m.inner; ++j) {
      const std::int64_t o = i * m.inner + j;
      const std::int64_t k = nllTargetClass(target[o], m);
      if (m.reduction == 0) out.lo[o] = out.hi[o] = 0.0;
      if (k == -1) continue;
      if (k < 0) {
        ok = false;
        continue;
      }
      const std::int64_t e = (i * m.classes + k) * m.inner + j;
      const Interval w = weight.lo ? Interval{weight.lo[k], weight.hi[k]} : Interval{1.0, 1.0};
      const Interval term = nllAccumulate(s, w, Interval{x.lo[e], x.hi[e]});
      if (m.reduction == 0) {
        const Interval r = nllNoneElement(term, m);
        out.lo[o] = r.lo;
        out.hi[o] = r.hi;
      }
    }
  if (m.reduction == 0) {
    totalWeight.lo[0] = totalWeight.hi[0] = 0.0;
    return ok;
  }
  Interval r, tw;
  nllFinish(s, m, r, tw);
  out.lo[0] = r.lo;
  out.hi[0] = r.hi;
  totalWeight.lo[0] = tw.lo;
  totalWeight.hi[0] = tw.hi;
  return ok;
}

/// grad_input at a kept target (nll_loss_backward, the loss rule's backward): −w·g (sum and none;
/// without a weight −g, exact but rounded to c), for the mean the hull of (−w)·(g / tw) and
/// ((−w)·g) / tw with every step in c (the entire line when tw may be 0); stored.
LB_HD inline Interval nllBackwardElement(Interval w, Interval g, Interval tw,
                                         const NllLossModel& m) {
  const ComputeDomain d{m.c};
  const Interval nw = lossbound::neg(w);
  Interval r;
  if (m.reduction != 1)
    r = m.weighted ? d.mul(nw, g) : d.round(lossbound::neg(g));
  else if (tw.lo <= 0.0 && tw.hi >= 0.0)
    r = entireInterval();
  else
    r = hull(d.mul(nw, d.div(g, tw)), d.div(d.mul(nw, g), tw));
  return roundOutward(r, m.outStorage);
}

/// One target position o of nll_loss_backward for self batch × classes × inner: writes
/// out[e] = nllBackwardElement at the element e its class picks (grad g[o] for reduction none,
/// else g[0]); returns false for a target out of range. Distinct positions write distinct
/// elements; every other element of out must be 0 beforehand.
LB_HD inline bool nllBackwardAt(const NllLossModel& m, std::int64_t o, const double* target,
                                ConstIntervalSpan g, ConstIntervalSpan weight, Interval tw,
                                IntervalSpan out) {
  const std::int64_t k = nllTargetClass(target[o], m);
  if (k == -1) return true;
  if (k < 0) return false;
  const std::int64_t i = o / m.inner, j = o % m.inner;
  const std::int64_t e = (i * m.classes + k) * m.inner + j;
  const std::int64_t go = m.reduction == 0 ? o : 0;
  const Interval w = weight.lo ? Interval{weight.lo[k], weight.hi[k]} : Interval{1.0, 1.0};
  const Interval r = nllBackwardElement(w, Interval{g.lo[go], g.hi[go]}, tw, m);
  out.lo[e] = r.lo;
  out.hi[e] = r.hi;
  return true;
}

}  // namespace lossbound::kernels
