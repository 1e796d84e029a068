#pragma once
// Interval extensions of the elementary functions used by training programs. Most are monotone
// increasing (exp, expm1, log, log1p, tanh, erf, sigmoid), so an enclosure is [f_down(lo),
// f_up(hi)], where f_down / f_up take the libm result and move it outward by a margin of ulps, then
// clamp it to the function's range. sin and cos are not monotone: their range over [lo, hi] is the
// hull of the endpoint values and of the extrema ±1 at the turning points kπ/2 inside [lo, hi],
// which are found from an outward enclosure of [lo, hi] / (π/2) (a turning point that may be
// inside counts as inside).
//
// The margins (kLibmUlps) are the maximum errors published for the libm in use plus one ulp:
// glibc's libm-test-ulps for x86_64 (glibc 2.36, Debian 12) on the host, and the CUDA C
// Programming Guide's "Mathematical Functions" table on the device. Both are measured by extensive
// but not exhaustive tests, so they are not guarantees: that is why one ulp is added, and why the
// MPFR test in tests/core/interval checks every function on >= 100,000 cases per run.

#include "core/interval/hd.h"
#include "core/interval/interval.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace lossbound {

/// The elementary functions with an interval extension.
enum class Elementary { Exp, Expm1, Log, Log1p, Tanh, Erf, Sin, Cos };

/// Returns the outward margin in ulps applied to a libm result (published error + 1 ulp).
LB_HD inline int libmUlps(Elementary f) {
#if defined(__CUDA_ARCH__)
  // CUDA 13 Programming Guide, double-precision table: exp 1, expm1 1, log 1, log1p 1, tanh 1,
  // erf 2, sin 2, cos 2 (max ulp error, full range); + 1.
  switch (f) {
    case Elementary::Exp:
      return 2;
    case Elementary::Expm1:
      return 2;
    case Elementary::Log:
      return 2;
    case Elementary::Log1p:
      return 2;
    case Elementary::Tanh:
      return 2;
    case Elementary::Erf:
      return 3;
    case Elementary::Sin:
    case Elementary::Cos:
      return 3;
  }
  return 4;
#else
  // glibc 2.36 sysdeps/x86_64/fpu/libm-test-ulps, "double" rows: exp 1, expm1 1, log 1,
  // log1p 1, tanh 2, erf 1, sin 1, cos 1; + 1.
  switch (f) {
    case Elementary::Exp:
      return 2;
    case Elementary::Expm1:
      return 2;
    case Elementary::Log:
      return 2;
    case Elementary::Log1p:
      return 2;
    case Elementary::Tanh:
      return 3;
    case Elementary::Erf:
      return 2;
    case Elementary::Sin:
    case Elementary::Cos:
      return 2;
  }
  return 4;
#endif
}

namespace elementary_detail {

LB_HD inline double evalLibm(Elementary f, double x) {
#if defined(__CUDA_ARCH__)
  switch (f) {
    case Elementary::Exp:
      return ::exp(x);
    case Elementary::Expm1:
      return ::expm1(x);
    case Elementary::Log:
      return ::log(x);
    case Elementary::Log1p:
      return ::log1p(x);
    case Elementary::Tanh:
      return ::tanh(x);
    case Elementary::Erf:
      return ::erf(x);
    case Elementary::Sin:
      return ::sin(x);
    case Elementary::Cos:
      return ::cos(x);
  }
  return x;
#else
  switch (f) {
    case Elementary::Exp:
      return std::exp(x);
    case Elementary::Expm1:
      return std::expm1(x);
    case Elementary::Log:
      return std::log(x);
    case Elementary::Log1p:
      return std::log1p(x);
    case Elementary::Tanh:
      return std::tanh(x);
    case Elementary::Erf:
      return std::erf(x);
    case Elementary::Sin:
      return std::sin(x);
    case Elementary::Cos:
      return std::cos(x);
  }
  return x;
#endif
}

LB_HD inline double stepOut(double v, int ulps, bool down) {
#if defined(__CUDA_ARCH__)
  const double target = down ? -interval_detail::inf() : interval_detail::inf();
  for (int i = 0; i < ulps; ++i) v = ::nextafter(v, target);
#else
  // Bit arithmetic rather than a libm call per ulp; the same steps as nextafter.
  for (int i = 0; i < ulps; ++i)
    v = down ? rounding_detail::nextDown(v) : rounding_detail::nextUp(v);
#endif
  return v;
}

/// The exact range of f: results are clamped into it after widening.
LB_HD inline Interval range(Elementary f) {
  const double inf = interval_detail::inf();
  switch (f) {
    case Elementary::Exp:
      return {0.0, inf};
    case Elementary::Expm1:
      return {-1.0, inf};
    case Elementary::Log:
      return {-inf, inf};
    case Elementary::Log1p:
      return {-inf, inf};
    case Elementary::Tanh:
      return {-1.0, 1.0};
    case Elementary::Erf:
    case Elementary::Sin:
    case Elementary::Cos:
      return {-1.0, 1.0};
  }
  return {-inf, inf};
}

}  // namespace elementary_detail

/// Returns a value <= f(x) for the exact f (the libm result moved down by libmUlps(f) ulps).
LB_HD inline double elementaryDown(Elementary f, double x) {
  using namespace elementary_detail;
  const double v = evalLibm(f, x);
  if (v != v) return v;
  const Interval r = range(f);
  // At -inf/+inf inputs the libm results are the exact limits.
  if (x == -interval_detail::inf() || x == interval_detail::inf()) return v;
  const double w = stepOut(v, libmUlps(f), true);
  return w < r.lo ? r.lo : w;
}

/// Returns a value >= f(x) for the exact f (the libm result moved up by libmUlps(f) ulps).
LB_HD inline double elementaryUp(Elementary f, double x) {
  using namespace elementary_detail;
  const double v = evalLibm(f, x);
  if (v != v) return v;
  const Interval r = range(f);
  if (x == -interval_detail::inf() || x == interval_detail::inf()) return v;
  const double w = stepOut(v, libmUlps(f), false);
  return w > r.hi ? r.hi : w;
}

namespace elementary_detail {
/// Applies a monotone increasing f on its domain [dlo, dhi] (closed at finite ends for log-type
/// functions handled by the caller).
LB_HD inline Interval monotone(Elementary f, Interval x) {
  x = sanitize(x);
  if (isEmpty(x)) return x;
  return {elementaryDown(f, x.lo), elementaryUp(f, x.hi)};
}
}  // namespace elementary_detail

/// Returns an enclosure of {e^a}.
LB_HD inline Interval exp(Interval x) { return elementary_detail::monotone(Elementary::Exp, x); }
/// Returns an enclosure of {e^a - 1}.
LB_HD inline Interval expm1(Interval x) {
  return elementary_detail::monotone(Elementary::Expm1, x);
}
/// Returns an enclosure of {tanh a}.
LB_HD inline Interval tanh(Interval x) { return elementary_detail::monotone(Elementary::Tanh, x); }
/// Returns an enclosure of {erf a}.
LB_HD inline Interval erf(Interval x) { return elementary_detail::monotone(Elementary::Erf, x); }

/// Returns an enclosure of {log a : a >= 0} in the extended reals: log(±0) = -inf, the pole's
/// value IEEE 754-2019 §9.2.1 and C11 F.10.3.7 give it (torch.log(0) is -inf). So [-inf, ..] when x
/// reaches 0, the point -inf when 0 is its only point in the domain, empty when x < 0 entirely
/// (only the part of x inside the domain counts; a negative a gives NaN).
LB_HD inline Interval log(Interval x) {
  x = sanitize(x);
  const double inf = interval_detail::inf();
  if (isEmpty(x) || x.hi < 0.0) return emptyInterval();
  if (x.hi == 0.0) return {-inf, -inf};
  const double lo = x.lo <= 0.0 ? -inf : elementaryDown(Elementary::Log, x.lo);
  return {lo, elementaryUp(Elementary::Log, x.hi)};
}
/// Returns an enclosure of {log(1 + a) : a >= -1}, log1p(-1) = -inf as log(0) (same sources);
/// empty when x < -1 entirely.
LB_HD inline Interval log1p(Interval x) {
  x = sanitize(x);
  const double inf = interval_detail::inf();
  if (isEmpty(x) || x.hi < -1.0) return emptyInterval();
  if (x.hi == -1.0) return {-inf, -inf};
  const double lo = x.lo <= -1.0 ? -inf : elementaryDown(Elementary::Log1p, x.lo);
  return {lo, elementaryUp(Elementary::Log1p, x.hi)};
}
/// Returns true when x is the point -inf: the value of log and log1p at their pole, exact in
/// every format (a stored -inf is -inf), which outward rounding would read as an overflow past
/// -DBL_MAX and widen.
LB_HD inline bool isPoleValue(Interval x) {
  return x.lo == -interval_detail::inf() && x.hi == -interval_detail::inf();
}

/// Returns a value <= 1 / (1 + e^-a). For a > 0 it is 1 / (1 + e^-a) from e^-a rounded up; for
/// a <= 0 it is t / (1 + t) with t = e^a rounded down (t / (1 + t) increases with t), which keeps
/// the bound relatively tight where the result is tiny and e^-a would overflow.
LB_HD inline double sigmoidDown(double a) {
  if (a > 0.0) return div_down(1.0, add_up(1.0, elementaryUp(Elementary::Exp, -a)));
  const double t = elementaryDown(Elementary::Exp, a);
  return div_down(t, add_up(1.0, t));
}
/// Returns a value >= 1 / (1 + e^-a) (the mirror image of sigmoidDown).
LB_HD inline double sigmoidUp(double a) {
  if (a > 0.0) return div_up(1.0, add_down(1.0, elementaryDown(Elementary::Exp, -a)));
  const double t = elementaryUp(Elementary::Exp, a);
  return div_up(t, add_down(1.0, t));
}
/// Returns an enclosure of {1 / (1 + e^-a)} (monotone increasing).
LB_HD inline Interval sigmoid(Interval x) {
  x = sanitize(x);
  if (isEmpty(x)) return x;
  const double lo = sigmoidDown(x.lo), hi = sigmoidUp(x.hi);
  return {lo < 0.0 ? 0.0 : lo, hi > 1.0 ? 1.0 : hi};
}

namespace elementary_detail {
/// Encloses {sin a} (cosine: false) or {cos a} (true) over x: the hull of the endpoint values and
/// of ±1 where a turning point kπ/2 (sin: k odd, cos: k even; a maximum when k − (sin ? 1 : 0)
/// is a multiple of 4) may lie in x. An infinite endpoint gives the entire line (sin ±inf is NaN).
LB_HD inline Interval sinCos(Interval x, bool cosine) {
  x = sanitize(x);
  if (isEmpty(x)) return x;
  const double inf = interval_detail::inf();
  if (x.lo == -inf || x.hi == inf) return entireInterval();
  // π/2 lies strictly between these binary64 neighbours (π/2 = 0x1.921fb54442d18469...p+0).
  const Elementary f = cosine ? Elementary::Cos : Elementary::Sin;
  double lo = elementaryDown(f, x.lo), hi = elementaryUp(f, x.lo);
  // A point holds no turning point but 0 (kπ/2 is irrational for k != 0; cos turns at 0, where
  // the libm value 1 is exact and clamped to the range).
  if (x.lo == x.hi) return {lo, hi};
  const double dlo = elementaryDown(f, x.hi), dhi = elementaryUp(f, x.hi);
  lo = dlo < lo ? dlo : lo;
  hi = dhi > hi ? dhi : hi;
  const Interval halfPi{0x1.921fb54442d18p+0, 0x1.921fb54442d19p+0};
  const Interval q = div(x, halfPi);  // encloses {a / (π/2) : a in x}
  // Past 2^50 quarter periods the residue of k mod 4 is not worth the care: the range is [-1, 1].
  if (!(q.lo > -0x1p50 && q.hi < 0x1p50) || q.hi - q.lo >= 4.0) return {-1.0, 1.0};
#if defined(__CUDA_ARCH__)
  const double first = ::ceil(q.lo), last = ::floor(q.hi);
#else
  const double first = std::ceil(q.lo), last = std::floor(q.hi);
#endif
  for (double k = first; k <= last; k += 1.0) {
    // residue of k mod 4 in {0, 1, 2, 3} (|k| < 2^50: exact in binary64)
    const double m = k - 4.0 * static_cast<double>(static_cast<long long>(k / 4.0));
    const int r = (static_cast<int>(m) + 4 + (cosine ? 0 : 3)) % 4;  // cos phase: 0 max, 2 min
    if (r == 0) hi = 1.0;
    if (r == 2) lo = -1.0;
  }
  return {lo, hi};
}
}  // namespace elementary_detail

/// Returns an enclosure of {sin a} (the turning points split the interval; see sinCos).
LB_HD inline Interval sin(Interval x) { return elementary_detail::sinCos(x, false); }
/// Returns an enclosure of {cos a} (the turning points split the interval; see sinCos).
LB_HD inline Interval cos(Interval x) { return elementary_detail::sinCos(x, true); }

}  // namespace lossbound
