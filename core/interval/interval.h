#pragma once
// Closed real intervals with binary64 endpoints and the basic operations on them, each returning
// the tightest binary64 interval that contains every exact result (the endpoints are computed with
// the directed-rounding table of rounding.h). Conventions, following IEEE 1788 set semantics:
// - the empty set is {+inf, -inf} (lo > hi); the entire line is {-inf, +inf};
// - an endpoint that is NaN makes the operand "unknown": it is treated as the entire line, so a
//   result never has a NaN endpoint;
// - a point at infinity, [+inf, +inf] (a value that overflowed), stands for every real beyond the
//   largest double, [DBL_MAX, +inf] (likewise for -inf), so inf - inf never makes a NaN endpoint;
// - operations return only the part of the result inside the function's domain (sqrt of [-1, 4]
//   is [0, 2]); an operand wholly outside the domain gives the empty set;
// - division by an interval that contains zero returns the hull of the result set, which is
//   usually unbounded; division by exactly [0, 0] is empty.
// Everything here is LB_HD: the same bodies run in CUDA kernels.

#include "core/interval/hd.h"
#include "core/interval/rounding.h"

namespace lossbound {

/// A closed interval [lo, hi] of reals; an aggregate, so `Interval{1.0, 2.0}` works.
struct Interval {
  double lo;
  double hi;
};

/// Positive infinity in binary64: the one named constant for it (usable in device code too).
inline constexpr double kInf = __builtin_huge_val();

namespace interval_detail {
LB_HD inline double inf() { return __builtin_huge_val(); }
LB_HD inline double maxFinite() { return 0x1.fffffffffffffp+1023; }
LB_HD inline bool isNan(double x) { return x != x; }
LB_HD inline double fmin2(double a, double b) { return a < b ? a : b; }
LB_HD inline double fmax2(double a, double b) { return a > b ? a : b; }
/// Returns c ? a : b, without a branch on the host (c depends on the signs of data).
LB_HD inline double pick(bool c, double a, double b) {
#if defined(__CUDA_ARCH__)
  return c ? a : b;
#else
  return rounding_detail::blend(c, a, b);
#endif
}
/// Product of endpoints where 0 * inf counts as 0 (an unbounded endpoint is never attained).
LB_HD inline double mulDownEnd(double a, double b) {
  return (a == 0.0 || b == 0.0) ? 0.0 : mul_down(a, b);
}
LB_HD inline double mulUpEnd(double a, double b) {
  return (a == 0.0 || b == 0.0) ? 0.0 : mul_up(a, b);
}
}  // namespace interval_detail

/// Returns the empty interval {+inf, -inf}.
LB_HD inline Interval emptyInterval() { return {interval_detail::inf(), -interval_detail::inf()}; }
/// Returns the entire real line [-inf, +inf].
LB_HD inline Interval entireInterval() { return {-interval_detail::inf(), interval_detail::inf()}; }
/// Returns the degenerate interval [x, x]; NaN gives the entire line (nothing is known).
LB_HD inline Interval point(double x) {
  return interval_detail::isNan(x) ? entireInterval() : Interval{x, x};
}
/// Returns true when x is the empty set (lo > hi); NaN endpoints are not empty but unknown.
LB_HD inline bool isEmpty(Interval x) { return x.lo > x.hi; }
/// Returns true when an endpoint is NaN (the operand is then treated as the entire line).
LB_HD inline bool hasNan(Interval x) {
  return interval_detail::isNan(x.lo) || interval_detail::isNan(x.hi);
}
namespace interval_detail {
LB_HD inline Interval sanitizeRare(Interval x) {
  if (hasNan(x)) return entireInterval();
  if (x.lo == inf() && x.hi == inf()) return {maxFinite(), inf()};
  if (x.lo == -inf() && x.hi == -inf()) return {-inf(), -maxFinite()};
  return x;  // empty
}
}  // namespace interval_detail
/// Returns x with NaN endpoints replaced by the entire line, and a point at infinity (an overflowed
/// value, [+inf, +inf]) replaced by every real beyond the largest double, [DBL_MAX, +inf] (and
/// likewise for -inf); other intervals unchanged. Every operation sanitizes its operands, so
/// inf - inf never makes a NaN endpoint.
LB_HD inline Interval sanitize(Interval x) {
  // One test for the common case: both comparisons fail for NaN, empty and infinite points.
  if (x.lo < interval_detail::inf() && x.hi > -interval_detail::inf()) return x;
  return interval_detail::sanitizeRare(x);
}
/// Returns true when the real v lies in x.
LB_HD inline bool contains(Interval x, double v) { return x.lo <= v && v <= x.hi; }
/// Returns true when y is a subset of x (the empty set is a subset of everything).
LB_HD inline bool contains(Interval x, Interval y) {
  return isEmpty(y) || (x.lo <= y.lo && y.hi <= x.hi);
}
/// Returns hi - lo rounded up (0 for a point, +inf when unbounded or NaN, 0 for empty).
LB_HD inline double width(Interval x) {
  x = sanitize(x);
  return isEmpty(x) ? 0.0 : sub_up(x.hi, x.lo);
}
/// Returns the midpoint, rounded to nearest (finite for finite intervals; 0 for the entire line
/// and for NaN endpoints).
LB_HD inline double midpoint(Interval x) {
  x = sanitize(x);
  if (x.lo == -interval_detail::inf() && x.hi == interval_detail::inf()) return 0.0;
  return 0.5 * x.lo + 0.5 * x.hi;
}
/// Returns the smallest interval containing x and y.
LB_HD inline Interval hull(Interval x, Interval y) {
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x)) return y;
  if (isEmpty(y)) return x;
  return {interval_detail::fmin2(x.lo, y.lo), interval_detail::fmax2(x.hi, y.hi)};
}
/// Returns the intersection of x and y (possibly empty).
LB_HD inline Interval intersect(Interval x, Interval y) {
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  const Interval r{interval_detail::fmax2(x.lo, y.lo), interval_detail::fmin2(x.hi, y.hi)};
  return isEmpty(r) ? emptyInterval() : r;
}

/// Returns {-v : v in x}.
LB_HD inline Interval neg(Interval x) {
  x = sanitize(x);
  return isEmpty(x) ? x : Interval{-x.hi, -x.lo};
}
/// Returns the tightest enclosure of {a + b}.
LB_HD inline Interval add(Interval x, Interval y) {
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  return {add_down(x.lo, y.lo), add_up(x.hi, y.hi)};
}
/// Returns the tightest enclosure of {a - b}.
LB_HD inline Interval sub(Interval x, Interval y) {
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  return {sub_down(x.lo, y.hi), sub_up(x.hi, y.lo)};
}
/// Returns the tightest enclosure of {a * b}.
LB_HD inline Interval mul(Interval x, Interval y) {
  using namespace interval_detail;
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  // When neither operand has zero inside, the extremes are two known endpoint products:
  // x >= 0, y >= 0: lo*lo and hi*hi; x >= 0, y <= 0: hi*lo and lo*hi; and so on. The common case
  // (also finite, so 0 * inf cannot occur) selects the endpoints with pick() and tests with `|`
  // and `&`, not `||` and `&&`: the signs of data make unpredictable branches.
  double lo, hi;
  const bool xs = (x.lo >= 0.0) | (x.hi <= 0.0), ys = (y.lo >= 0.0) | (y.hi <= 0.0);  // one sign
  const double big = inf();  // a constant, so the `&` below have no calls (clang's -Wbitwise-…)
  const bool finite = (x.lo > -big) & (x.hi < big) & (y.lo > -big) & (y.hi < big);
  if (finite & xs & ys) {
    const bool xn = x.hi <= 0.0, yn = y.hi <= 0.0;
    lo = mul_down(pick(yn, x.hi, x.lo), pick(xn, y.hi, y.lo));
    hi = mul_up(pick(yn, x.lo, x.hi), pick(xn, y.lo, y.hi));
  } else if (xs & ys) {  // the same with infinite endpoints
    const bool xn = x.hi <= 0.0, yn = y.hi <= 0.0;
    lo = mulDownEnd(yn ? x.hi : x.lo, xn ? y.hi : y.lo);
    hi = mulUpEnd(yn ? x.lo : x.hi, xn ? y.lo : y.hi);
  } else if (xs) {  // only y has zero inside
    const double a = x.hi <= 0.0 ? x.lo : x.hi;
    lo = mulDownEnd(a, x.hi <= 0.0 ? y.hi : y.lo);
    hi = mulUpEnd(a, x.hi <= 0.0 ? y.lo : y.hi);
  } else if (ys) {  // only x has zero inside
    const double b = y.hi <= 0.0 ? y.lo : y.hi;
    lo = mulDownEnd(y.hi <= 0.0 ? x.hi : x.lo, b);
    hi = mulUpEnd(y.hi <= 0.0 ? x.lo : x.hi, b);
  } else {  // both: four products
    lo = fmin2(mulDownEnd(x.lo, y.hi), mulDownEnd(x.hi, y.lo));
    hi = fmax2(mulUpEnd(x.lo, y.lo), mulUpEnd(x.hi, y.hi));
  }
  return {lo == 0.0 ? -0.0 : lo, hi == 0.0 ? 0.0 : hi};
}
/// Returns the tightest enclosure of {a * a} (tighter than mul(x, x): the result is >= 0).
LB_HD inline Interval sqr(Interval x) {
  using namespace interval_detail;
  x = sanitize(x);
  if (isEmpty(x)) return x;
  if (x.lo >= 0.0) return {mulDownEnd(x.lo, x.lo), mulUpEnd(x.hi, x.hi)};
  if (x.hi <= 0.0) return {mulDownEnd(x.hi, x.hi), mulUpEnd(x.lo, x.lo)};
  const double m = fmax2(-x.lo, x.hi);
  return {0.0, mulUpEnd(m, m)};
}
/// Returns {|a|}.
LB_HD inline Interval abs(Interval x) {
  x = sanitize(x);
  if (isEmpty(x)) return x;
  if (x.lo >= 0.0) return x;
  if (x.hi <= 0.0) return neg(x);
  return {0.0, interval_detail::fmax2(-x.lo, x.hi)};
}

namespace interval_detail {
/// Quotient endpoint where finite / inf = 0 and inf / inf (degenerate operands) widens to inf.
LB_HD inline double divDownEnd(double a, double b) {
  if (a == 0.0) return 0.0;
  const bool ai = a == inf() || a == -inf(), bi = b == inf() || b == -inf();
  if (bi) return ai ? -inf() : 0.0;
  return div_down(a, b);
}
LB_HD inline double divUpEnd(double a, double b) {
  if (a == 0.0) return 0.0;
  const bool ai = a == inf() || a == -inf(), bi = b == inf() || b == -inf();
  if (bi) return ai ? inf() : 0.0;
  return div_up(a, b);
}
}  // namespace interval_detail

/// Returns the tightest enclosure of {a / b : b != 0}: unbounded when y contains zero inside,
/// half-unbounded when zero is an endpoint of y, empty when y is [0, 0].
LB_HD inline Interval div(Interval x, Interval y) {
  using namespace interval_detail;
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  // The common case first: finite endpoints, zero inside neither operand (and not in y at all).
  // Then the extremes are two known endpoint quotients, selected by sign without branches
  // (y > 0, x >= 0: lo/hi and hi/lo; y > 0, x <= 0: lo/lo and hi/hi; y < 0: mirrored); `|` and
  // `&` rather than `||` and `&&`, because the signs of data make unpredictable branches.
  const double big = inf();  // a constant, so the `&` below have no calls (clang's -Wbitwise-…)
  const bool finite = (x.lo > -big) & (x.hi < big) & (y.lo > -big) & (y.hi < big);
  if (finite & ((y.lo > 0.0) | (y.hi < 0.0)) & ((x.lo >= 0.0) | (x.hi <= 0.0))) {
    const bool xn = x.hi <= 0.0, yn = y.hi < 0.0;
    return {div_down(pick(yn, x.hi, x.lo), pick(xn, y.lo, y.hi)),
            div_up(pick(yn, x.lo, x.hi), pick(xn, y.hi, y.lo))};
  }
  if (y.lo == 0.0 && y.hi == 0.0) return emptyInterval();
  if (x.lo == 0.0 && x.hi == 0.0) return {-0.0, 0.0};
  if (y.lo > 0.0) {  // positive divisor
    if (x.lo >= 0.0) return {divDownEnd(x.lo, y.hi), divUpEnd(x.hi, y.lo)};
    if (x.hi <= 0.0) return {divDownEnd(x.lo, y.lo), divUpEnd(x.hi, y.hi)};
    return {divDownEnd(x.lo, y.lo), divUpEnd(x.hi, y.lo)};
  }
  if (y.hi < 0.0) {  // negative divisor
    if (x.lo >= 0.0) return {divDownEnd(x.hi, y.hi), divUpEnd(x.lo, y.lo)};
    if (x.hi <= 0.0) return {divDownEnd(x.hi, y.lo), divUpEnd(x.lo, y.hi)};
    return {divDownEnd(x.hi, y.hi), divUpEnd(x.lo, y.hi)};
  }
  // Zero is in y. Zero endpoints: the quotient set is a half line; zero inside: everything (the
  // set is a union of two half lines whose hull is the entire line) unless x contains 0 too.
  if (x.lo < 0.0 && x.hi > 0.0) return entireInterval();
  if (y.lo == 0.0) {  // y = [0, d], d > 0
    if (x.lo >= 0.0) return {divDownEnd(x.lo, y.hi), inf()};
    return {-inf(), divUpEnd(x.hi, y.hi)};
  }
  if (y.hi == 0.0) {  // y = [c, 0], c < 0
    if (x.lo >= 0.0) return {-inf(), divUpEnd(x.lo, y.lo)};
    return {divDownEnd(x.hi, y.lo), inf()};
  }
  return entireInterval();
}
/// Returns the tightest enclosure of {sqrt(a) : a >= 0}; empty when x < 0 entirely.
LB_HD inline Interval sqrt(Interval x) {
  x = sanitize(x);
  if (isEmpty(x) || x.hi < 0.0) return emptyInterval();
  const double lo = x.lo <= 0.0 ? 0.0 : sqrt_down(x.lo);
  return {lo, x.hi <= 0.0 ? 0.0 : sqrt_up(x.hi)};
}
/// Returns the tightest enclosure of {min(a, b)}.
LB_HD inline Interval min(Interval x, Interval y) {
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  return {interval_detail::fmin2(x.lo, y.lo), interval_detail::fmin2(x.hi, y.hi)};
}
/// Returns the tightest enclosure of {max(a, b)}.
LB_HD inline Interval max(Interval x, Interval y) {
  x = sanitize(x);
  y = sanitize(y);
  if (isEmpty(x) || isEmpty(y)) return emptyInterval();
  return {interval_detail::fmax2(x.lo, y.lo), interval_detail::fmax2(x.hi, y.hi)};
}

namespace interval_detail {
/// Returns a^n for a >= 0 rounded down (or up): a product of directed-rounded factors of
/// non-negative numbers is monotone in each factor, so rounding each step the same way is sound.
LB_HD inline double powNonNeg(double a, unsigned n, bool down) {
  double r = 1.0;
  double base = a;
  // Square-and-multiply: every intermediate is >= 0, so directed rounding stays one-sided.
  while (n > 0) {
    if (n & 1u) r = down ? mul_down(r, base) : mul_up(r, base);
    n >>= 1;
    if (n > 0) base = down ? mul_down(base, base) : mul_up(base, base);
  }
  return r;
}
/// Returns an enclosure of {a^n} for n >= 1 (x sanitized and not empty).
LB_HD inline Interval powPositive(Interval x, unsigned n) {
  if (n % 2 == 0) {
    const Interval a = abs(x);
    return {powNonNeg(a.lo, n, true), powNonNeg(a.hi, n, false)};
  }
  // Odd n: monotone increasing; negative endpoints use (-a)^n = -(a^n).
  const double lo = x.lo >= 0.0 ? powNonNeg(x.lo, n, true) : -powNonNeg(-x.lo, n, false);
  const double hi = x.hi >= 0.0 ? powNonNeg(x.hi, n, false) : -powNonNeg(-x.hi, n, true);
  return {lo, hi};
}
}  // namespace interval_detail

/// Returns an enclosure of {a^n} for an integer n (x^0 = [1, 1]; negative n is (1/x)^-n over the
/// nonzero a, so [0, 0]^-n is empty). Not always the tightest binary64 interval:
/// square-and-multiply rounds once per step.
LB_HD inline Interval pow(Interval x, int n) {
  x = sanitize(x);
  if (isEmpty(x)) return x;
  if (n == 0) return {1.0, 1.0};
  // |n| as unsigned: -INT_MIN does not fit in an int.
  const unsigned m = n < 0 ? 0u - static_cast<unsigned>(n) : static_cast<unsigned>(n);
  if (n > 0) return interval_detail::powPositive(x, m);
  // Without zero in x, the reciprocal first: (1/x)^m under- and overflows where the exact result
  // does, whereas 1 / x^m loses everything when x^m overflows. With zero in x, 1 / x^m keeps the
  // sign information that 1/x (a union of half lines) loses.
  if (x.lo > 0.0 || x.hi < 0.0) return interval_detail::powPositive(div(Interval{1.0, 1.0}, x), m);
  return div(Interval{1.0, 1.0}, interval_detail::powPositive(x, m));
}

}  // namespace lossbound
