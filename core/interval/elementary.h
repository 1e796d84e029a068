#pragma once
// Interval extensions of the elementary functions used by training programs. All of them are
// monotone increasing (exp, expm1, log, log1p, tanh, erf, sigmoid), so an enclosure is
// [f_down(lo), f_up(hi)], where f_down / f_up take the libm result and move it outward by a margin
// of ulps, then clamp it to the function's range.
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
enum class Elementary { Exp, Expm1, Log, Log1p, Tanh, Erf };

/// Returns the outward margin in ulps applied to a libm result (published error + 1 ulp).
LB_HD inline int libmUlps(Elementary f) {
#if defined(__CUDA_ARCH__)
  // CUDA 13 Programming Guide, double-precision table: exp 1, expm1 1, log 1, log1p 1, tanh 1,
  // erf 2 (max ulp error); + 1.
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
  }
  return 4;
#else
  // glibc 2.36 sysdeps/x86_64/fpu/libm-test-ulps, "double" rows: exp 1, expm1 1, log 1,
  // log1p 1, tanh 2, erf 1; + 1.
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

/// Returns an enclosure of {log a : a > 0}: [-inf, ..] when x reaches 0, empty when x <= 0
/// entirely (log(0) is -inf, which is not a real: only the part of x inside the domain counts).
LB_HD inline Interval log(Interval x) {
  x = sanitize(x);
  if (isEmpty(x) || x.hi <= 0.0) return emptyInterval();
  const double lo = x.lo <= 0.0 ? -interval_detail::inf() : elementaryDown(Elementary::Log, x.lo);
  return {lo, elementaryUp(Elementary::Log, x.hi)};
}
/// Returns an enclosure of {log(1 + a) : a > -1}; empty when x <= -1 entirely.
LB_HD inline Interval log1p(Interval x) {
  x = sanitize(x);
  if (isEmpty(x) || x.hi <= -1.0) return emptyInterval();
  const double lo =
      x.lo <= -1.0 ? -interval_detail::inf() : elementaryDown(Elementary::Log1p, x.lo);
  return {lo, elementaryUp(Elementary::Log1p, x.hi)};
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

}  // namespace lossbound
