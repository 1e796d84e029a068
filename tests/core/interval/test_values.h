#pragma once
// Shared by the interval tests: bit-level views of binary64 values and a random generator that
// covers the whole binary64 line (random bit patterns, magnitudes spread over every exponent,
// subnormals, signed zeros, infinities, NaN, values near overflow and underflow).

#include "core/interval/interval.h"

#include <QByteArray>
#include <QString>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

namespace lossbound::test {

using lossbound::kInf;
inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

/// Returns the IEEE bit pattern of x.
inline std::uint64_t bitsOf(double x) { return std::bit_cast<std::uint64_t>(x); }
/// Returns the double whose IEEE bit pattern is b.
inline double fromBits(std::uint64_t b) { return std::bit_cast<double>(b); }
/// Returns true when a and b are the same datum: equal bit patterns (so +0 != -0), or both NaN.
inline bool sameDatum(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || bitsOf(a) == bitsOf(b);
}
/// Returns the position of x among the ordered binary64 values (+0 and -0 both map to 0).
inline std::int64_t ordinal(double x) {
  const std::uint64_t b = bitsOf(x);
  const auto mag = static_cast<std::int64_t>(b & 0x7fffffffffffffffULL);
  return (b >> 63) ? -mag : mag;
}
/// Returns how many binary64 steps lie from lo up to hi (finite, lo <= hi).
inline double ulpsBetween(double lo, double hi) {
  // Unsigned: the distance from -DBL_MAX to DBL_MAX does not fit in an int64.
  return static_cast<double>(static_cast<std::uint64_t>(ordinal(hi)) -
                             static_cast<std::uint64_t>(ordinal(lo)));
}
/// Formats x exactly (hex float) for failure messages.
inline QString hex(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", x);  // QString::asprintf has no %a
  return QString::fromLatin1(buf);
}

/// Returns the seed of this run: $LOSSBOUND_TEST_SEED when set, else a fixed default.
inline std::uint64_t testSeed() {
  const QByteArray env = qgetenv("LOSSBOUND_TEST_SEED");
  return env.isEmpty() ? 0x10ddb0d5eedULL : env.toULongLong(nullptr, 0);
}

/// Random binary64 values of the kinds the interval tests need.
class Doubles {
 public:
  explicit Doubles(std::uint64_t seed) : rng_(seed) {}

  /// Returns 64 random bits.
  std::uint64_t bits() { return rng_(); }
  /// Returns an integer uniform in [lo, hi].
  int intIn(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  /// Returns a double uniform in [0, 1).
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  /// Returns true with probability p.
  bool chance(double p) { return unit() < p; }
  /// Returns a uniformly random bit pattern (all finite exponents, and rarely inf or NaN).
  double anyBits() { return fromBits(bits()); }

  /// Returns a value of random sign and random lower bits whose leading bit has an exponent in
  /// [emin, emax], clamped to [-1074, 1023] (below -1022 the value is subnormal).
  double withExponent(int emin, int emax) {
    emin = std::clamp(emin, -1074, 1023);
    emax = std::clamp(emax, emin, 1023);
    const int e = intIn(emin, emax);
    const std::uint64_t sign = bits() & 0x8000000000000000ULL;
    const std::uint64_t frac = bits() & ((1ULL << 52) - 1);
    if (e >= -1022) return fromBits(sign | (static_cast<std::uint64_t>(e + 1023) << 52) | frac);
    const int lead = e + 1074;  // bit position of the leading one in a subnormal
    return fromBits(sign | (1ULL << lead) | (frac & ((1ULL << lead) - 1)));
  }
  /// Returns a value with at most k significant bits (so short products and squares are exact).
  double shortMantissa(int k, int emin, int emax) {
    const std::uint64_t m = (bits() >> (64 - k)) | (1ULL << (k - 1));
    const double v = std::ldexp(static_cast<double>(m), intIn(emin, emax) - (k - 1));
    return chance(0.5) ? -v : v;
  }
  /// Returns a random subnormal or zero of random sign.
  double subnormal() {
    return fromBits((bits() & 0x8000000000000000ULL) | (bits() & ((1ULL << 52) - 1)));
  }
  /// Returns x moved by a few ulps (|k| <= spread) along the binary64 line, staying finite.
  double nudge(double x, int spread) {
    if (!std::isfinite(x)) return x;
    int k = intIn(-spread, spread);
    for (; k > 0; --k) x = std::nextafter(x, kInf);
    for (; k < 0; ++k) x = std::nextafter(x, -kInf);
    return std::isfinite(x) ? x : std::copysign(DBL_MAX, x);
  }
  /// Returns one of the edge values, chosen at random.
  double special() { return specials()[bits() % specials().size()]; }
  /// Returns a value from a mix of all the generators above.
  double mixed() {
    switch (intIn(0, 5)) {
      case 0:
        return special();
      case 1:
        return anyBits();
      case 2:
        return subnormal();
      case 3:
        return withExponent(-1074, -1000);
      case 4:
        return withExponent(1000, 1023);
      default:
        return withExponent(-1074, 1023);
    }
  }

  /// Returns the edge values: zeros, subnormal and normal boundaries, ones, near-overflow,
  /// infinities, NaN, and the exponent thresholds the emulated rounding switches on.
  static const std::vector<double>& specials() {
    static const std::vector<double> values = [] {
      std::vector<double> v;
      const double positive[] = {0.0,
                                 DBL_TRUE_MIN,
                                 2 * DBL_TRUE_MIN,
                                 3 * DBL_TRUE_MIN,
                                 DBL_MIN - DBL_TRUE_MIN,
                                 DBL_MIN,
                                 std::nextafter(DBL_MIN, 1.0),
                                 0x1p-1060,
                                 0x1p-1000,
                                 0x1.8p-970,
                                 0x1p-969,
                                 0x1p-968,
                                 0x1p-961,
                                 0x1p-960,
                                 0x1p-537,
                                 0x1p-511,
                                 1e-300,
                                 0.1,
                                 0.5,
                                 std::nextafter(1.0, 0.0),
                                 1.0,
                                 std::nextafter(1.0, 2.0),
                                 1.5,
                                 2.0,
                                 3.0,
                                 std::numbers::sqrt2,
                                 std::numbers::pi,
                                 10.0,
                                 0x1p511,
                                 0x1p512,
                                 1e300,
                                 0x1p960,
                                 0x1p961,
                                 0x1p1022,
                                 0x1p1023,
                                 0x1.fffffffffffffp1022,
                                 std::nextafter(DBL_MAX, 0.0),
                                 DBL_MAX,
                                 kInf};
      for (double x : positive) {
        v.push_back(x);
        v.push_back(-x);
      }
      v.push_back(kNan);
      v.push_back(-kNan);
      return v;
    }();
    return values;
  }

  /// Returns the engine, for distributions of the caller's own.
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace lossbound::test
