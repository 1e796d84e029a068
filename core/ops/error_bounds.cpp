// Order-free error bounds of one rounding, sums and dot products (Higham 2002, ch. 3–4).
#include "core/ops/error_bounds.h"

#include "core/kernels/kernel_bodies.h"
#include "core/ops/formats.h"

#include <algorithm>
#include <cmath>

namespace lossbound::ops {

double gammaUp(std::int64_t n, double u) { return kernels::gammaUp(static_cast<double>(n), u); }

double sumErrorBound(std::int64_t n, double absSumUp, double u) {
  return kernels::sumErrorBound(static_cast<double>(n), absSumUp, u);
}

double partialSumsRootSquares(std::span<double> magnitudes) {
  std::sort(magnitudes.begin(), magnitudes.end(),
            [](double a, double b) { return std::fabs(a) > std::fabs(b); });
  double prefix = 0.0, squares = 0.0;
  for (std::size_t k = 0; k < magnitudes.size(); ++k) {
    prefix = add_up(prefix, std::fabs(magnitudes[k]));
    if (k > 0) squares = add_up(squares, mul_up(prefix, prefix));
  }
  return sqrt_up(squares);
}

double dotErrorBound(std::int64_t n, double absDotUp, double u, double eta) {
  return kernels::dotErrorBound(static_cast<double>(n), absDotUp, u, eta);
}

Interval roundedSumEnclosure(const SumEnclosure& s, std::int64_t n, Format acc, Format store,
                             bool truncating) {
  const double u = unitRoundoff(acc) * (truncating ? 2.0 : 1.0);
  const double e = sumErrorBound(n, s.absSumUp, u);
  // Every partial sum is bounded by (1 + γ)·Σ|x|: if that can pass the largest finite value of
  // the accumulator, an implementation may overflow to ±inf.
  if (!(add_up(s.absSumUp, e) < largestFinite(acc))) return entireInterval();
  const Interval r{sub_down(s.sum.lo, e), add_up(s.sum.hi, e)};
  return roundOutward(r, store);
}

double roundingError(double y, Format c, Format f) {
  const double a = std::fabs(y);
  double e =
      add_up(mul_up(unitRoundoff(f), mul_up(a, 1.0 + unitRoundoff(c))), 0.5 * smallestSubnormal(f));
  if (c != f) e = add_up(e, add_up(mul_up(unitRoundoff(c), a), 0.5 * smallestSubnormal(c)));
  return e;
}

double storageRoundingError(double y, Format f) {
  if (std::isfinite(y) && roundNearest(y, f) == y) return 0.0;
  return roundingError(y, f, f);
}

}  // namespace lossbound::ops
