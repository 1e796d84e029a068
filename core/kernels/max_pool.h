#pragma once
// max_pool2d_with_indices and its backward as LB_HD bodies: one window's value and index
// enclosures, and one plane of the backward's scatter-sum (core/ops/max_pool_ops.cpp, whose file
// comment derives both). The host rules call them per window and per plane, and
// Backend::maxPoolRows and Backend::maxPoolBackward run them on a device, so both compute the
// same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/kernel_types.h"

#include <cstdint>

namespace lossbound::kernels {

/// Encloses one window: its elements are [lo[i], hi[i]] for the i < k whose plane offset off[i]
/// is >= 0 (scan order; -1 marks no element), start is the offset the kernels report when no
/// element beats −inf. value = [max of lower ends, max of upper ends] rounded outward to s (an
/// exact ±inf point kept; the entire line when an element is NaN); index = [first, last] offset
/// of the elements that can be the maximum (upper end ≥ the largest lower end).
LB_HD inline void maxPoolWindow(const double* lo, const double* hi, const double* off,
                                std::int64_t k, double start, Format s, Interval& value,
                                Interval& index) {
  const double inf = interval_detail::inf();
  Interval ext{-inf, -inf};
  bool nan = false;
  double front = -1.0, back = -1.0;
  for (std::int64_t i = 0; i < k; ++i) {
    if (off[i] < 0.0) continue;
    const Interval e{lo[i], hi[i]};
    nan = nan || hasNan(e);
    ext = {::fmax(ext.lo, e.lo), ::fmax(ext.hi, e.hi)};
    if (front < 0.0) front = off[i];
    back = off[i];
  }
  double first = start, last = start;
  if (nan) {
    ext = entireInterval();
    if (front >= 0.0) {
      first = front;
      last = back;
    }
  } else {
    bool any = false;
    for (std::int64_t i = 0; i < k; ++i)
      if (off[i] >= 0.0 && hi[i] >= ext.lo && ext.lo > -inf) {
        if (!any) first = off[i];
        last = off[i];
        any = true;
      }
    if (ext.lo == -inf && front >= 0.0) {
      // Every element may be −inf: the kernels then keep `start` or any larger element.
      first = ::fmin(start, front);
      last = back;
    }
    if (!(ext.lo == ext.hi && (ext.lo == inf || ext.lo == -inf))) ext = roundOutward(ext, s);
  }
  value = ext;
  index = {first, last};
}

/// The shape of max_pool2d_with_indices_backward: output and input plane sizes, and the storage
/// format of grad_input (which the sums run in: CPU scalar_t, CUDA accscalar_t ≥ it).
struct MaxPoolBackwardModel {
  Format storage = Format::Fp64;
  std::int64_t outPlane = 0;
  std::int64_t inPlane = 0;
};

/// The scratch maxPoolBackwardPlane needs per plane, in doubles: |sum| bounds and term counts.
LB_HD inline std::int64_t maxPoolBackwardScratch(std::int64_t inPlane) { return 2 * inPlane; }

/// Writes plane pl of grad_input[planes × inPlane] from grad_output and the index enclosures
/// [planes × outPlane]: every input offset p sums, in any order, the gradients of the outputs
/// whose index can be p — g when the index is the point p, hull(g, 0) when it is an interval
/// holding p — in output order, enclosed by γ_(m−1)(u_s)·Σ|g| around the exact sum (Higham 2002
/// eq. 4.4) and rounded outward to the storage (kernels::sumFinish); 0 where nothing lands.
/// Returns false when a point index is outside the plane or an index is NaN (the host rule
/// reports it); such an output adds nothing.
LB_HD inline bool maxPoolBackwardPlane(ConstIntervalSpan g, ConstIntervalSpan index,
                                       std::int64_t pl, const MaxPoolBackwardModel& m,
                                       IntervalSpan out, double* scratch) {
  double* absSum = scratch;
  double* count = scratch + m.inPlane;
  const std::int64_t in0 = pl * m.inPlane, out0 = pl * m.outPlane;
  for (std::int64_t p = 0; p < m.inPlane; ++p) {
    out.lo[in0 + p] = 0.0;
    out.hi[in0 + p] = 0.0;
    absSum[p] = 0.0;
    count[p] = 0.0;
  }
  bool ok = true;
  const double last = static_cast<double>(m.inPlane - 1);
  for (std::int64_t o = 0; o < m.outPlane; ++o) {
    const double ilo = index.lo[out0 + o], ihi = index.hi[out0 + o];
    if (!(ilo <= ihi) || (ilo == ihi && !(ilo >= 0.0 && ilo <= last))) {
      ok = false;
      continue;
    }
    const Interval go = sanitize(Interval{g.lo[out0 + o], g.hi[out0 + o]});
    const auto lo = static_cast<std::int64_t>(::fmax(::ceil(ilo), 0.0));
    const auto hi = static_cast<std::int64_t>(::fmin(::floor(ihi), last));
    // A definite index receives g; each offset of an undecided one receives g or nothing.
    const Interval term = lo == hi ? go : hull(go, Interval{0.0, 0.0});
    for (std::int64_t p = lo; p <= hi; ++p) {
      SumState st{{out.lo[in0 + p], out.hi[in0 + p]}, absSum[p]};
      accumulate(st, term);
      out.lo[in0 + p] = st.sum.lo;
      out.hi[in0 + p] = st.sum.hi;
      absSum[p] = st.absSumUp;
      count[p] += 1.0;
    }
  }
  for (std::int64_t p = 0; p < m.inPlane; ++p) {
    const SumState st{{out.lo[in0 + p], out.hi[in0 + p]}, absSum[p]};
    const Interval r = sumFinish(st, count[p], m.storage, m.storage, false);
    out.lo[in0 + p] = r.lo;
    out.hi[in0 + p] = r.hi;
  }
  return ok;
}

}  // namespace lossbound::kernels
