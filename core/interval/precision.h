#pragma once
// Floating-point formats that a candidate run may compute in, and outward rounding of binary64
// values and intervals to them. This is the building block of the precision model: a value stored
// in format F lies in roundDown(x, F) .. roundUp(x, F) of the exact x.

#include "core/interval/hd.h"
#include "core/interval/interval.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace lossbound {

/// A storage / arithmetic format of the modelled run. Tf32 is fp32 storage whose values enter
/// matmuls rounded to a 10-bit fraction.
enum class Format { Fp64, Fp32, Tf32, Bf16, Fp16 };

/// The parameters of a binary format: precision p (significand bits, hidden bit included) and the
/// normal exponent range [emin, emax].
struct FormatSpec {
  int precision;
  int emin;
  int emax;
};

/// Returns p, emin and emax of a format (IEEE 754 binary16/32/64, bfloat16, TF32).
LB_HD inline FormatSpec formatSpec(Format f) {
  switch (f) {
    case Format::Fp64:
      return {53, -1022, 1023};
    case Format::Fp32:
      return {24, -126, 127};
    case Format::Tf32:
      return {11, -126, 127};
    case Format::Bf16:
      return {8, -126, 127};
    case Format::Fp16:
      return {11, -14, 15};
  }
  return {53, -1022, 1023};
}

// The three constants below are looked up, not computed with ldexp: they sit in per-element loops
// of the op rules. test_precision checks them against their definitions from formatSpec().

/// Returns the unit roundoff u = 2^-p of round-to-nearest in format f.
LB_HD inline double unitRoundoff(Format f) {
  switch (f) {
    case Format::Fp64:
      return 0x1p-53;
    case Format::Fp32:
      return 0x1p-24;
    case Format::Tf32:
      return 0x1p-11;
    case Format::Bf16:
      return 0x1p-8;
    case Format::Fp16:
      return 0x1p-11;
  }
  return 0x1p-53;
}

/// Returns the smallest positive subnormal 2^(emin - p + 1) of format f.
LB_HD inline double smallestSubnormal(Format f) {
  switch (f) {
    case Format::Fp64:
      return 0x1p-1074;
    case Format::Fp32:
      return 0x1p-149;
    case Format::Tf32:
      return 0x1p-136;
    case Format::Bf16:
      return 0x1p-133;
    case Format::Fp16:
      return 0x1p-24;
  }
  return 0x1p-1074;
}

/// Returns the largest finite value (2 - 2^(1-p)) * 2^emax of format f.
LB_HD inline double largestFinite(Format f) {
  switch (f) {
    case Format::Fp64:
      return 0x1.fffffffffffffp+1023;
    case Format::Fp32:
      return 0x1.fffffep+127;
    case Format::Tf32:
      return 0x1.ffcp+127;
    case Format::Bf16:
      return 0x1.fep+127;
    case Format::Fp16:
      return 0x1.ffcp+15;
  }
  return 0x1.fffffffffffffp+1023;
}

/// How a value is rounded into a format.
enum class RoundingDirection { Down, Up, Nearest };

/// Returns x rounded to format f in the given direction (Nearest: ties to even), as a binary64
/// value. Overflow follows IEEE: Down of x > max is max, Up is +inf, Nearest is +inf from
/// max + ulp/2 on. NaN stays NaN; infinities and signed zeros are kept.
LB_HD inline double roundToFormat(double x, Format f, RoundingDirection dir) {
  if (f == Format::Fp64 || x != x || x == 0.0 || x == interval_detail::inf() ||
      x == -interval_detail::inf())
    return x;
#if !defined(__CUDA_ARCH__)
  if (f == Format::Fp32 && (x < 0.0 ? -x : x) <= 0x1.fffffep+127) {
    // The conversion to float rounds to nearest (ties to even) in every range, subnormals
    // included; a directed result is that value or the float next to it toward x.
    const float r = static_cast<float>(x);
    const double rd = static_cast<double>(r);
    if (dir == RoundingDirection::Down && rd > x)
      return static_cast<double>(::nextafterf(r, -HUGE_VALF));
    if (dir == RoundingDirection::Up && rd < x)
      return static_cast<double>(::nextafterf(r, HUGE_VALF));
    return rd;
  }
#endif
  const FormatSpec s = formatSpec(f);
  const bool negative = x < 0.0;
  double a = negative ? -x : x;
  // Rounding -x down is rounding x up, negated.
  RoundingDirection d = dir;
  if (negative && dir != RoundingDirection::Nearest)
    d = dir == RoundingDirection::Down ? RoundingDirection::Up : RoundingDirection::Down;
  const double maxFinite = largestFinite(f);
  double r;
  if (a > maxFinite) {
    const double halfUlpMax = ::ldexp(1.0, s.emax - s.precision);
    if (d == RoundingDirection::Down)
      r = maxFinite;
    else if (d == RoundingDirection::Up)
      r = interval_detail::inf();
    else
      r = a >= maxFinite + halfUlpMax ? interval_detail::inf() : maxFinite;
  } else {
    int e = ::ilogb(a);
    if (e < s.emin) e = s.emin;  // subnormal range of f: fixed quantum
    const int q = e - s.precision + 1;
    const double scaled = ::ldexp(a, -q);  // exact: a power-of-two scaling within range
    double n;
    if (d == RoundingDirection::Down)
      n = ::floor(scaled);
    else if (d == RoundingDirection::Up)
      n = ::ceil(scaled);
    else
      n = ::nearbyint(scaled);  // default rounding mode: ties to even
    r = ::ldexp(n, q);
    if (r > maxFinite) r = d == RoundingDirection::Down ? maxFinite : interval_detail::inf();
  }
  return negative ? -r : r;
}

/// Returns the tightest interval of format-f values containing x (outward rounding); both
/// endpoints are exactly representable in f.
LB_HD inline Interval roundOutward(Interval x, Format f) {
  x = sanitize(x);
  if (isEmpty(x)) return x;
  return {roundToFormat(x.lo, f, RoundingDirection::Down),
          roundToFormat(x.hi, f, RoundingDirection::Up)};
}

/// Returns an enclosure of every value that storing an exact value from x in format f with
/// round-to-nearest can give (= roundOutward: RN(v) lies between RD(v) and RU(v), both monotone).
LB_HD inline Interval storeNearest(Interval x, Format f) { return roundOutward(x, f); }

}  // namespace lossbound
