// Order-free error bounds of one rounding, sums and dot products (Higham 2002, ch. 3–4).
#include "core/ops/error_bounds.h"

#include <cmath>

namespace lossbound::ops {

double gammaUp(std::int64_t n, double u) {
  if (n <= 0) return 0.0;
  const double nu = mul_up(static_cast<double>(n), u);
  if (nu >= 1.0) return kInf;
  return div_up(nu, sub_down(1.0, nu));
}

double sumErrorBound(std::int64_t n, double absSumUp, double u) {
  if (n <= 1 || absSumUp == 0.0) return 0.0;
  return mul_up(gammaUp(n - 1, u), absSumUp);
}

double dotErrorBound(std::int64_t n, double absDotUp, double u, double eta) {
  if (n <= 0) return 0.0;
  const double g = absDotUp == 0.0 ? 0.0 : mul_up(gammaUp(n, u), absDotUp);
  return add_up(g, mul_up(static_cast<double>(n), eta));
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

}  // namespace lossbound::ops
