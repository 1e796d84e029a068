#pragma once
// One window of max_pool2d_with_indices as an LB_HD body: the value and index enclosures of the
// pooling rule (core/ops/max_pool_ops.cpp, whose file comment derives both). The host rule calls
// it per window, and Backend::maxPoolRows runs it per gathered window on a device, so both
// compute the same bits (a maximum is a selection: nothing is summed).

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"

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

}  // namespace lossbound::kernels
