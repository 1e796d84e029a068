#pragma once
// The directed-rounding table: every rounding-sensitive operation of Lossbound goes through these
// primitives. On a CUDA device they are the hardware intrinsics (__dadd_rd, __dmul_ru, ...). On
// the host they are emulated exactly, without fesetround: the round-to-nearest result is computed,
// the sign of the exact residual is found with an error-free transformation (TwoSum, FMA-based
// TwoProduct, the division and square-root residuals, an exact expansion for fma), and the result
// is moved one ulp when the residual points that way. Overflow, underflow, subnormals, signed
// zeros, infinities and NaN follow IEEE 754-2019 for roundTowardNegative / roundTowardPositive;
// tests/core/interval compares every primitive bit for bit with fesetround on >= 1e6 cases.
//
// Each host primitive has a fast path for operands and results inside the normal range (no libm
// call but std::fma, and no data-dependent branch: the one-ulp move is integer arithmetic on the
// bit pattern), and a slow path that rescales by powers of two near underflow and handles zeros,
// infinities and NaN. -ffp-contract cannot change them: the sums (TwoSum) have no product to
// contract, and every product whose error matters goes through an explicit std::fma.

#include "core/interval/hd.h"

#if !defined(__CUDA_ARCH__)
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#endif

namespace lossbound {

#if defined(__CUDA_ARCH__)

LB_HD inline double add_down(double a, double b) { return __dadd_rd(a, b); }
LB_HD inline double add_up(double a, double b) { return __dadd_ru(a, b); }
LB_HD inline double sub_down(double a, double b) { return __dsub_rd(a, b); }
LB_HD inline double sub_up(double a, double b) { return __dsub_ru(a, b); }
LB_HD inline double mul_down(double a, double b) { return __dmul_rd(a, b); }
LB_HD inline double mul_up(double a, double b) { return __dmul_ru(a, b); }
LB_HD inline double div_down(double a, double b) { return __ddiv_rd(a, b); }
LB_HD inline double div_up(double a, double b) { return __ddiv_ru(a, b); }
LB_HD inline double sqrt_down(double a) { return __dsqrt_rd(a); }
LB_HD inline double sqrt_up(double a) { return __dsqrt_ru(a); }
LB_HD inline double fma_down(double a, double b, double c) { return __fma_rd(a, b, c); }
LB_HD inline double fma_up(double a, double b, double c) { return __fma_ru(a, b, c); }

#else

namespace rounding_detail {

// The slow paths stay out of line, so that the fast paths inline into the interval operations
// and the loops that call them.
#if defined(__GNUC__)
#define LB_SLOW_PATH __attribute__((noinline, cold))
#else
#define LB_SLOW_PATH
#endif

/// Returns the next binary64 value towards +infinity (NaN stays NaN, +inf stays +inf).
inline double nextUp(double x) {
  if (std::isnan(x) || x == INFINITY) return x;
  if (x == 0.0) return 0x1p-1074;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);  // std::bit_cast needs C++20, which nvcc's host pass lacks
  bits = x > 0 ? bits + 1 : bits - 1;
  double r = 0.0;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

/// Returns the next binary64 value towards -infinity (NaN stays NaN, -inf stays -inf).
inline double nextDown(double x) { return -nextUp(-x); }

/// Returns x moved one ulp toward -infinity (down) or +infinity (!down) when `move` is set, else
/// x; x must be finite and nonzero. Branch-free: toward +infinity a positive bit pattern grows by
/// one and a negative one shrinks, and that is right at the edges too (DBL_MAX up is +inf, the
/// smallest subnormal down is +0, -DBL_MAX down is -inf).
inline double stepFinite(double x, bool move, bool down) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint64_t negative = bits >> 63;
  const std::uint64_t delta = down ? 2 * negative - 1 : 1 - 2 * negative;  // modulo 2^64
  bits += delta & (0 - static_cast<std::uint64_t>(move));
  double r = 0.0;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

/// Returns c ? a : b as a bit blend: branch-free even where the compiler would otherwise jump on
/// the signs of data (which are not predictable).
inline double blend(bool c, double a, double b) {
  std::uint64_t ua = 0, ub = 0;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  const std::uint64_t mask = 0 - static_cast<std::uint64_t>(c);
  const std::uint64_t bits = (ua & mask) | (ub & ~mask);
  double r = 0.0;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

// Fast-path bounds. From 2^-968 up, the FMA residual of a product, quotient or square root is a
// multiple of at least 2^-1074, so it cannot underflow to a zero of the wrong meaning; below
// 2^1020, fma's exact four-term sum cannot overflow.
inline constexpr double kResidualSafeMin = 0x1p-968;
inline constexpr double kSumSafeMax = 0x1p1020;

/// Sign (-1, 0, +1) of the exact value `exact - rn`, given by the caller, turned into a result.
/// `down` selects roundTowardNegative, otherwise roundTowardPositive.
inline double adjust(double rn, int residualSign, bool down) {
  if (down && residualSign < 0) return nextDown(rn);
  if (!down && residualSign > 0) return nextUp(rn);
  return rn;
}

inline int signOf(double x) { return (x > 0) - (x < 0); }

/// Handles a round-to-nearest overflow to +-inf from finite operands: directed rounding stops at
/// the largest finite value on the side away from the rounding direction.
inline double overflowed(double rn, bool down) {
  if (down && rn == INFINITY) return DBL_MAX;
  if (!down && rn == -INFINITY) return -DBL_MAX;
  return rn;
}

/// Returns the sign of a + b + c + d computed exactly (Shewchuk's grow-expansion with TwoSum; the
/// caller guarantees no intermediate overflow).
inline int exactSumSign(double a, double b, double c, double d) {
  double h[4] = {a, 0.0, 0.0, 0.0};
  const double rest[3] = {b, c, d};
  int m = 1;
  for (double t : rest) {
    double q = t;
    for (int i = 0; i < m; ++i) {
      const double s = q + h[i];
      const double bb = s - q;
      const double err = (q - (s - bb)) + (h[i] - bb);
      h[i] = err;
      q = s;
    }
    h[m++] = q;
  }
  for (int i = m - 1; i >= 0; --i)
    if (h[i] != 0.0) return signOf(h[i]);
  return 0;
}

/// Slow path of addDirected (s = RN(a + b)): zero, infinite or NaN sums, and sums next to
/// overflow where TwoSum's s - a can overflow.
LB_SLOW_PATH inline double addSlow(double a, double b, double s, bool down) {
  if (!std::isfinite(s)) return std::isfinite(a) && std::isfinite(b) ? overflowed(s, down) : s;
  if (s == 0.0) {
    // Exact zero (sums that land on zero are exact). IEEE: x + (-x) and (+0) + (-0) give -0 when
    // rounding down, +0 otherwise; zeros of equal sign keep it.
    if (a == 0.0 && b == 0.0 && std::signbit(a) == std::signbit(b)) return a;
    return down ? -0.0 : 0.0;
  }
  // Fast2Sum with |x| >= |y| is exact and cannot overflow spuriously when s is finite.
  const bool aBig = std::fabs(a) >= std::fabs(b);
  const double x = aBig ? a : b, y = aBig ? b : a;
  const double err = y - (s - x);
  return adjust(s, signOf(err), down);
}

inline double addDirected(double a, double b, bool down) {
  const double s = a + b;
  // TwoSum (Knuth): the exact error of s whatever the order of |a| and |b|, unless s - a
  // overflows (possible when s is within an ulp of DBL_MAX), which the slow path handles.
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  if (s != 0.0 && std::fabs(s) <= DBL_MAX && std::fabs(bb) <= DBL_MAX)
    return stepFinite(s, down ? err < 0 : err > 0, down);
  return addSlow(a, b, s, down);
}

/// Slow path of mulDirected (p = RN(a * b)): tiny, zero, infinite or NaN products.
LB_SLOW_PATH inline double mulSlow(double a, double b, double p, bool down) {
  if (std::isnan(p) || !std::isfinite(a) || !std::isfinite(b) || a == 0.0 || b == 0.0) return p;
  if (std::isinf(p)) return overflowed(p, down);
  const int ea = std::ilogb(a), eb = std::ilogb(b);
  const int e = ea + eb;
  double residual;
  if (e >= -960 && e <= 960) {
    residual = std::fma(a, b, -p);  // exact: the product error is representable here
  } else {
    // Scale the operands (exactly, by powers of two) so the product is near 1; p scales exactly
    // too (it is a subnormal or tiny normal being scaled up, or a huge normal scaled down), and
    // the residual of the scaled product against it is representable (fewer bits than 53).
    const double as = std::ldexp(a, -ea), bs = std::ldexp(b, -eb);
    const double ps = std::ldexp(p, -e);
    residual = std::fma(as, bs, -ps);
  }
  return adjust(p, signOf(residual), down);
}

inline double mulDirected(double a, double b, bool down) {
  const double p = a * b;
  const double ap = std::fabs(p);
  if (ap >= kResidualSafeMin && ap <= DBL_MAX) {
    const double r = std::fma(a, b, -p);  // a * b - p, exactly
    return stepFinite(p, down ? r < 0 : r > 0, down);
  }
  return mulSlow(a, b, p, down);
}

/// Slow path of divDirected (q = RN(a / b)).
LB_SLOW_PATH inline double divSlow(double a, double b, double q, bool down) {
  if (std::isnan(q) || !std::isfinite(a) || !std::isfinite(b) || a == 0.0 || b == 0.0) return q;
  if (std::isinf(q)) return overflowed(q, down);
  int ea = 0, eb = 0;
  const double ma = std::frexp(std::fabs(a), &ea), mb = std::frexp(std::fabs(b), &eb);
  // |q| scaled by 2^(eb-ea) lies near ma/mb in (0.5, 2): exact scaling, then an exact residual
  // ma - qs*mb (Markstein/Boldo: the residual of a quotient rounded to <= 53 bits is
  // representable).
  const double qs = std::ldexp(std::fabs(q), eb - ea);
  const double r = std::fma(-qs, mb, ma);
  const int sgn = (std::signbit(a) != std::signbit(b)) ? -1 : 1;
  return adjust(q, sgn * signOf(r), down);
}

inline double divDirected(double a, double b, bool down) {
  const double q = a / b;
  // The remainder a - q*b is representable (Boldo-Daumas) and, with |a| >= 2^-968, a multiple
  // of at least 2^-1074: the FMA gives it exactly, with the sign of (a/b - q) * b.
  if (std::fabs(a) >= kResidualSafeMin && std::fabs(q) <= DBL_MAX && q != 0.0 &&
      std::fabs(b) <= DBL_MAX) {
    const double r = std::fma(-q, b, a);
    const double t = b > 0.0 ? r : -r;  // the sign of a/b - q
    return stepFinite(q, down ? t < 0 : t > 0, down);
  }
  return divSlow(a, b, q, down);
}

/// Slow path of sqrtDirected (s = RN(sqrt(a))).
LB_SLOW_PATH inline double sqrtSlow(double a, double s, bool down) {
  if (!(a > 0.0) || std::isinf(a)) return s;  // NaN, negatives, +-0, +inf are exact or NaN
  int e = 0;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  if (e % 2 != 0) {
    m *= 2.0;
    e -= 1;
  }
  const double ss = std::ldexp(s, -e / 2);  // sqrt(m), exact scaling
  const double r = std::fma(-ss, ss, m);    // exact (Boldo–Daumas: m - RN(sqrt m)^2 fits)
  return adjust(s, signOf(r), down);
}

inline double sqrtDirected(double a, bool down) {
  const double s = std::sqrt(a);
  if (a >= kResidualSafeMin && a <= DBL_MAX) {
    const double r = std::fma(-s, s, a);  // a - s^2, exactly
    return stepFinite(s, down ? r < 0 : r > 0, down);
  }
  return sqrtSlow(a, s, down);
}

/// Slow path of fmaDirected (r = RN(a * b + c)).
LB_SLOW_PATH inline double fmaSlow(double a, double b, double c, double r, bool down) {
  if (std::isnan(r)) return r;
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(c)) return r;
  if (std::isinf(r)) return overflowed(r, down);
  if (a == 0.0 || b == 0.0) {
    // The product is an exact signed zero: this is c + (+-0) under directed rounding.
    const double z = (std::signbit(a) != std::signbit(b)) ? -0.0 : 0.0;
    return addDirected(z, c, down);
  }
  if (r == 0.0) {
    // Exact zero: a nonzero product cancels c exactly (a tiny nonzero result would not round to
    // zero in round-to-nearest unless below half the smallest subnormal; that case is handled
    // below through the residual).
    const int e = std::ilogb(a) + std::ilogb(b);
    if (e >= -960) return down ? -0.0 : 0.0;
  }
  const int ea = std::ilogb(a), eb = std::ilogb(b);
  const int e = ea + eb;
  int sign;
  if (e >= -960 && e <= 960) {
    // TwoProduct is exact here, and TwoSum stays exact even among subnormals.
    const double p = a * b;
    const double pe = std::fma(a, b, -p);
    sign = exactSumSign(p, pe, c, -r);
  } else if (e < -960) {
    // Tiny product: scale everything up by 2^k, capped so that c and r stay finite. If the
    // product is still too small for an exact TwoProduct, it is smaller than any nonzero c - r.
    int k = -e;
    if (c != 0.0) k = std::min(k, 1000 - std::ilogb(c));
    if (r != 0.0) k = std::min(k, 1000 - std::ilogb(r));
    const double cs = std::ldexp(c, k), rs = std::ldexp(r, k);
    const int ka = std::min(k, 1000 - ea);
    const double as = std::ldexp(a, ka), bs = std::ldexp(b, k - ka);
    if (e + k >= -960) {
      const double p = as * bs;
      const double pe = std::fma(as, bs, -p);
      sign = exactSumSign(p, pe, cs, -rs);
    } else {
      sign = exactSumSign(cs, -rs, 0.0, 0.0);
      if (sign == 0) sign = (std::signbit(a) != std::signbit(b)) ? -1 : 1;
    }
  } else {
    // Huge product: scale down by 2^-e. c and r either scale exactly or are negligible against
    // the exact part (which is then a multiple of 2^-104 when nonzero).
    const double as = std::ldexp(a, -ea), bs = std::ldexp(b, -eb);
    const double p = as * bs;
    const double pe = std::fma(as, bs, -p);
    auto scaled = [e](double v, bool* tiny) {
      if (v != 0.0 && std::ilogb(v) - e < -960) {
        *tiny = true;
        return 0.0;
      }
      return std::ldexp(v, -e);
    };
    bool cTiny = false, rTiny = false;
    const double cs = scaled(c, &cTiny), rs = scaled(r, &rTiny);
    sign = exactSumSign(p, pe, cs, -rs);
    if (sign == 0 && cTiny) sign = signOf(c);
    if (sign == 0 && rTiny) sign = -signOf(r);
  }
  if (r == 0.0 && sign == 0) return down ? -0.0 : 0.0;
  return adjust(r, sign, down);
}

inline double fmaDirected(double a, double b, double c, bool down) {
  const double r = std::fma(a, b, c);
  const double p = a * b;
  const double ap = std::fabs(p);
  // In this range TwoProduct is exact and the expansion p + pe + c - r cannot overflow.
  if (ap >= kResidualSafeMin && ap <= kSumSafeMax && std::fabs(c) <= kSumSafeMax && r != 0.0) {
    const double pe = std::fma(a, b, -p);
    const int sign = exactSumSign(p, pe, c, -r);
    return stepFinite(r, down ? sign < 0 : sign > 0, down);
  }
  return fmaSlow(a, b, c, r, down);
}

}  // namespace rounding_detail

/// Returns a + b rounded toward -infinity (IEEE roundTowardNegative), bit-exact.
inline double add_down(double a, double b) { return rounding_detail::addDirected(a, b, true); }
/// Returns a + b rounded toward +infinity (IEEE roundTowardPositive), bit-exact.
inline double add_up(double a, double b) { return rounding_detail::addDirected(a, b, false); }
/// Returns a - b rounded toward -infinity, bit-exact.
inline double sub_down(double a, double b) { return rounding_detail::addDirected(a, -b, true); }
/// Returns a - b rounded toward +infinity, bit-exact.
inline double sub_up(double a, double b) { return rounding_detail::addDirected(a, -b, false); }
/// Returns a * b rounded toward -infinity, bit-exact.
inline double mul_down(double a, double b) { return rounding_detail::mulDirected(a, b, true); }
/// Returns a * b rounded toward +infinity, bit-exact.
inline double mul_up(double a, double b) { return rounding_detail::mulDirected(a, b, false); }
/// Returns a / b rounded toward -infinity, bit-exact.
inline double div_down(double a, double b) { return rounding_detail::divDirected(a, b, true); }
/// Returns a / b rounded toward +infinity, bit-exact.
inline double div_up(double a, double b) { return rounding_detail::divDirected(a, b, false); }
/// Returns sqrt(a) rounded toward -infinity, bit-exact.
inline double sqrt_down(double a) { return rounding_detail::sqrtDirected(a, true); }
/// Returns sqrt(a) rounded toward +infinity, bit-exact.
inline double sqrt_up(double a) { return rounding_detail::sqrtDirected(a, false); }
/// Returns a * b + c with one rounding toward -infinity, bit-exact.
inline double fma_down(double a, double b, double c) {
  return rounding_detail::fmaDirected(a, b, c, true);
}
/// Returns a * b + c with one rounding toward +infinity, bit-exact.
inline double fma_up(double a, double b, double c) {
  return rounding_detail::fmaDirected(a, b, c, false);
}

#endif

}  // namespace lossbound
