// Every interval operation of core/interval against MPFR at 256 bits. For each operation and each
// random case (>= 100,000 per run, across magnitudes, subnormals, zeros, infinities and
// near-overflow): no result endpoint is NaN, and the exact result at sampled points of the operands
// (their endpoints and random interior points) lies inside the result. The basic operations (add,
// sub, mul, div, sqr, sqrt, and the exact neg, abs, min, max, hull) must moreover return exactly
// the tightest binary64 enclosure: MPFR's downward / upward rounding of the exact range. The width
// of the results in ulps is reported per operation.
//
// Why a 256-bit MPFR value rounded down (up) is a sound stand-in for the exact value: a binary64
// endpoint e satisfies e <= v exactly when e <= RD256(v), because e is itself a 256-bit number;
// and RD53(RD256(v)) = RD53(v) because the binary64 grid is a subset of the 256-bit grid.

#include "core/interval/elementary.h"
#include "core/interval/interval.h"
#include "tests/core/interval/mpfr_real.h"
#include "tests/core/interval/test_values.h"

#include <QStringList>
#include <QTest>

#include <mpfr.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

using lossbound::Interval;
using lossbound::test::Doubles;
using lossbound::test::hex;
using lossbound::test::kInf;
using lossbound::test::kNan;
using lossbound::test::Real;

namespace {

// Random cases per operation per run.
constexpr int kCases = 100'000;

QString str(Interval x) { return QStringLiteral("[%1, %2]").arg(hex(x.lo), hex(x.hi)); }

bool hasNanEndpoint(Interval x) { return std::isnan(x.lo) || std::isnan(x.hi); }

/// Collects failures of one test function and reports the first few.
class Failures {
 public:
  void add(const QString& what) {
    if (++count_ <= 12) messages_ << what;
  }
  std::size_t count() const { return count_; }
  QString report() const {
    return QStringLiteral("%1 failures:\n").arg(count_) + messages_.join('\n');
  }

 private:
  std::size_t count_ = 0;
  QStringList messages_;
};

/// Widths of the results in ulps: of results from point operands (the operation's own rounding),
/// and in excess of the tightest binary64 enclosure of the exact range (0 for a tight operation).
struct Widths {
  std::size_t cases = 0, points = 0, pointCases = 0, excessCases = 0;
  double pointMax = 0, pointSum = 0, excessMax = 0, excessSum = 0;

  void pointResult(Interval r) {
    if (lossbound::isEmpty(r) || !std::isfinite(r.lo) || !std::isfinite(r.hi)) return;
    const double w = lossbound::test::ulpsBetween(r.lo, r.hi);
    ++pointCases;
    pointSum += w;
    pointMax = std::max(pointMax, w);
  }
  void excess(Interval r, double tightLo, double tightHi) {
    if (lossbound::isEmpty(r) || !std::isfinite(r.lo) || !std::isfinite(r.hi) ||
        !std::isfinite(tightLo) || !std::isfinite(tightHi) || r.lo > tightLo || r.hi < tightHi)
      return;
    const double e =
        lossbound::test::ulpsBetween(r.lo, tightLo) + lossbound::test::ulpsBetween(tightHi, r.hi);
    ++excessCases;
    excessSum += e;
    excessMax = std::max(excessMax, e);
  }
  void print(const char* op) const {
    const QString pointPart =
        pointCases ? QString::asprintf("width max %g ulps, mean %.3f (%zu)", pointMax,
                                       pointSum / double(pointCases), pointCases)
                   : QStringLiteral("n/a");
    qInfo(
        "%-8s %6zu cases, %7zu points checked | point operands: %s | excess over tightest: "
        "max %g ulps, mean %.3f (%zu)",
        op, cases, points, qPrintable(pointPart), excessMax,
        excessCases ? excessSum / double(excessCases) : 0.0, excessCases);
  }
};

/// The tightest binary64 enclosure of an exact range, or the empty set.
struct Tight {
  bool empty = true;
  double lo = kInf, hi = -kInf;
};

/// Returns true when r.lo <= L and U <= r.hi, L and U being lower / upper bounds of one exact
/// value.
bool encloses(Interval r, mpfr_srcptr lower, mpfr_srcptr upper) {
  return !hasNanEndpoint(r) && mpfr_cmp_d(lower, r.lo) >= 0 && mpfr_cmp_d(upper, r.hi) <= 0;
}

/// Returns r == t as sets of reals (zeros of either sign are equal).
bool sameAsTight(Interval r, const Tight& t) {
  if (t.empty) return lossbound::isEmpty(r);
  return r.lo == t.lo && r.hi == t.hi;
}

// ---- random operands ------------------------------------------------------------------------

using EndpointGen = std::function<double(Doubles&)>;

/// Returns a random valid interval (no NaN, lo <= hi, lo < +inf, hi > -inf) with endpoints from
/// `end`: points, intervals a few ulps wide, half-unbounded, touching zero, entire, and general.
Interval randomInterval(Doubles& g, const EndpointGen& end) {
  for (;;) {
    double a = end(g), b = 0.0;
    switch (g.intIn(0, 19)) {
      case 0:
      case 1:
        b = a;
        break;
      case 2:
      case 3:
        b = g.nudge(a, 3);
        break;
      case 4:
        b = g.chance(0.5) ? kInf : -kInf;
        break;
      case 5:
        a = g.chance(0.5) ? 0.0 : -0.0, b = end(g);
        break;
      case 6:
        if (g.chance(0.1)) return lossbound::entireInterval();
        b = end(g);
        break;
      default:
        b = end(g);
        break;
    }
    if (std::isnan(a) || std::isnan(b)) continue;
    const Interval x{std::min(a, b), std::max(a, b)};
    if (x.lo == kInf || x.hi == -kInf) continue;
    return x;
  }
}

/// Returns a random point of x (finite): uniform over the binary64 values in x, or linear.
double sampleIn(Doubles& g, Interval x) {
  const double lo = std::max(x.lo, -DBL_MAX), hi = std::min(x.hi, DBL_MAX);
  if (!(lo < hi)) return lo;
  if (g.chance(0.5)) {
    // Unsigned arithmetic: the span of [-DBL_MAX, DBL_MAX] does not fit in an int64.
    const auto a = static_cast<std::uint64_t>(lossbound::test::ordinal(lo));
    const std::uint64_t span = static_cast<std::uint64_t>(lossbound::test::ordinal(hi)) - a;
    const auto k =
        static_cast<std::int64_t>(a + (span == UINT64_MAX ? g.bits() : g.bits() % (span + 1)));
    const double v = k >= 0 ? lossbound::test::fromBits(static_cast<std::uint64_t>(k))
                            : -lossbound::test::fromBits(static_cast<std::uint64_t>(-k));
    return std::clamp(v, lo, hi);
  }
  const double t = g.unit();
  return std::clamp(lo * (1 - t) + hi * t, lo, hi);
}

/// Endpoints for the arithmetic operations: every exponent, typical magnitudes, edge values,
/// subnormals, near-overflow, short significands (exact products).
double arithmeticEndpoint(Doubles& g) {
  switch (g.intIn(0, 9)) {
    case 0:
    case 1:
    case 2:
      return g.withExponent(-1074, 1023);
    case 3:
    case 4:
      return g.withExponent(-40, 40);
    case 5:
      return g.special();
    case 6:
      return g.subnormal();
    case 7:
      return g.withExponent(1010, 1023);
    case 8:
      return g.withExponent(-1074, -1000);
    default:
      return g.shortMantissa(g.intIn(1, 26), -60, 60);
  }
}

/// Returns an interval whose endpoints are close to +-2^k times those of x: cancellation for add
/// and sub, quotients near powers of two for div, products near overflow or underflow for mul.
Interval relatedInterval(Doubles& g, Interval x) {
  const int k = g.chance(0.5) ? 0 : g.intIn(-1100, 1100);
  const double s = g.chance(0.5) ? 1.0 : -1.0;
  double a = g.nudge(s * std::ldexp(x.lo, k), 2), b = g.nudge(s * std::ldexp(x.hi, k), 2);
  if (std::isnan(a) || std::isnan(b)) return x;
  if (a > b) std::swap(a, b);
  if (a == kInf || b == -kInf) return x;
  return {a, b};
}

// ---- MPFR references ------------------------------------------------------------------------

enum class BinOp { Add, Sub, Mul, Div, Min, Max };

/// Sets out to a op b (finite or not) rounded in rnd at 256 bits, with the limits of set-valued
/// arithmetic: 0 * inf = 0 (0 is attained, inf only approached), a / 0 from side `side` =
/// +-inf, finite / inf = 0. Returns false when the corner is indeterminate (0/0, inf/inf, inf-inf).
bool corner(BinOp op, double a, double b, int side, mpfr_rnd_t rnd, mpfr_ptr out) {
  static Real ma, mb;
  mpfr_set_d(ma, a, MPFR_RNDN);
  mpfr_set_d(mb, b, MPFR_RNDN);
  switch (op) {
    case BinOp::Add:
      mpfr_add(out, ma, mb, rnd);
      break;
    case BinOp::Sub:
      mpfr_sub(out, ma, mb, rnd);
      break;
    case BinOp::Min:
      mpfr_min(out, ma, mb, rnd);
      break;
    case BinOp::Max:
      mpfr_max(out, ma, mb, rnd);
      break;
    case BinOp::Mul:
      if (a == 0.0 || b == 0.0) {
        mpfr_set_zero(out, 1);
        return true;
      }
      mpfr_mul(out, ma, mb, rnd);
      break;
    case BinOp::Div:
      if (b == 0.0) {
        if (a == 0.0) return false;
        mpfr_set_inf(out, (a > 0) == (side > 0) ? 1 : -1);
        return true;
      }
      if (std::isinf(b)) {
        if (std::isinf(a)) return false;
        mpfr_set_zero(out, 1);
        return true;
      }
      mpfr_div(out, ma, mb, rnd);
      break;
  }
  return !mpfr_nan_p(out);
}

/// Returns the tightest enclosure of {a op b : a in x, b in y} from the corners: every op here is
/// monotone in each argument on a part of y that does not change sign, so the extremes are limits
/// at the corners; division splits y at zero and drops the point 0 itself.
Tight referenceBinary(BinOp op, Interval x, Interval y) {
  Real lo, hi, v;
  bool any = false;
  auto consider = [&](double a, double b, int side) {
    if (!corner(op, a, b, side, MPFR_RNDD, v)) return;
    if (!any || mpfr_less_p(v, lo)) mpfr_set(lo, v, MPFR_RNDN);
    corner(op, a, b, side, MPFR_RNDU, v);
    if (!any || mpfr_greater_p(v, hi)) mpfr_set(hi, v, MPFR_RNDN);
    any = true;
  };
  auto parts = [&](double blo, double bhi, int side) {
    for (double a : {x.lo, x.hi})
      for (double b : {blo, bhi}) consider(a, b, side);
  };
  if (op == BinOp::Div) {
    if (y.lo < 0.0) parts(y.lo, y.hi < 0.0 ? y.hi : 0.0, -1);
    if (y.hi > 0.0) parts(y.lo > 0.0 ? y.lo : 0.0, y.hi, +1);
  } else {
    parts(y.lo, y.hi, 0);
  }
  Tight t;
  if (!any) return t;
  t.empty = false;
  t.lo = mpfr_get_d(lo, MPFR_RNDD);
  t.hi = mpfr_get_d(hi, MPFR_RNDU);
  return t;
}

enum class Fn { Sqr, Sqrt, Neg, Abs, Exp, Expm1, Log, Log1p, Tanh, Erf, Sigmoid, Sin, Cos };

/// Sets out to f(a) rounded in rnd at 256 bits and returns MPFR's ternary value in *ternary
/// (correctly rounded for every f but sigmoid, which is composed of directed steps that bound it
/// on the rnd side). Returns false outside f's domain.
bool evaluate(Fn f, double a, mpfr_rnd_t rnd, mpfr_ptr out, int* ternary) {
  static Real x, e;
  mpfr_set_d(x, a, MPFR_RNDN);
  int t = 0;
  switch (f) {
    case Fn::Sqr:
      t = mpfr_sqr(out, x, rnd);
      break;
    case Fn::Sqrt:
      if (a < 0.0) return false;
      t = mpfr_sqrt(out, x, rnd);
      break;
    case Fn::Neg:
      t = mpfr_neg(out, x, rnd);
      break;
    case Fn::Abs:
      t = mpfr_abs(out, x, rnd);
      break;
    case Fn::Exp:
      t = mpfr_exp(out, x, rnd);
      break;
    case Fn::Expm1:
      t = mpfr_expm1(out, x, rnd);
      break;
    case Fn::Log:
      if (!(a > 0.0)) return false;
      t = mpfr_log(out, x, rnd);
      break;
    case Fn::Log1p:
      if (!(a > -1.0)) return false;
      t = mpfr_log1p(out, x, rnd);
      break;
    case Fn::Tanh:
      t = mpfr_tanh(out, x, rnd);
      break;
    case Fn::Erf:
      t = mpfr_erf(out, x, rnd);
      break;
    case Fn::Sin:
      t = mpfr_sin(out, x, rnd);
      break;
    case Fn::Cos:
      t = mpfr_cos(out, x, rnd);
      break;
    case Fn::Sigmoid: {
      // 1 / (1 + e^-a): a lower bound takes e^-a and the sum rounded up, the quotient down.
      const bool down = rnd == MPFR_RNDD;
      const mpfr_rnd_t inner = down ? MPFR_RNDU : MPFR_RNDD;
      mpfr_neg(x, x, MPFR_RNDN);
      mpfr_exp(e, x, inner);
      mpfr_add_ui(e, e, 1, inner);
      mpfr_ui_div(out, 1, e, rnd);
      t = down ? -1 : 1;  // a bound, not a rounding: never claim exactness
      break;
    }
  }
  *ternary = t;
  return !mpfr_nan_p(out);
}

/// Sets lower <= f(a) <= upper at 256 bits: for the correctly rounded functions these are exactly
/// the downward and upward roundings, derived from one round-to-nearest evaluation and its ternary
/// value. Returns false outside f's domain.
bool bounds(Fn f, double a, mpfr_ptr lower, mpfr_ptr upper) {
  int t = 0;
  if (f == Fn::Sigmoid)
    return evaluate(f, a, MPFR_RNDD, lower, &t) && evaluate(f, a, MPFR_RNDU, upper, &t);
  if (!evaluate(f, a, MPFR_RNDN, lower, &t)) return false;
  mpfr_set(upper, lower, MPFR_RNDN);
  if (t > 0) mpfr_nextbelow(lower);  // the exact value lies strictly between the neighbours
  if (t < 0) mpfr_nextabove(upper);
  return true;
}

/// Widens t to ±1 when a maximum / minimum of sin (cosine: cos) lies in [lo, hi]: the turning
/// points kπ/2 with k = ceil(lo/(π/2)) .. floor(hi/(π/2)), from MPFR's π at the reference
/// precision.
void turningPoints(bool cosine, double lo, double hi, Tight* t) {
  Real halfPi, first, last, k, r, four;
  mpfr_const_pi(halfPi, MPFR_RNDN);
  mpfr_div_2ui(halfPi, halfPi, 1, MPFR_RNDN);
  mpfr_set_d(first, lo, MPFR_RNDN);
  mpfr_div(first, first, halfPi, MPFR_RNDN);
  mpfr_ceil(first, first);
  mpfr_set_d(last, hi, MPFR_RNDN);
  mpfr_div(last, last, halfPi, MPFR_RNDN);
  mpfr_floor(last, last);
  mpfr_sub(k, last, first, MPFR_RNDN);  // integers below 2^1100: exact at the reference precision
  const double count = mpfr_get_d(k, MPFR_RNDN);
  if (count >= 3.0) {
    t->lo = -1.0;
    t->hi = 1.0;
    return;
  }
  mpfr_set_ui(four, 4, MPFR_RNDN);
  for (int i = 0; i <= static_cast<int>(count); ++i) {
    mpfr_add_si(k, first, i, MPFR_RNDN);
    mpfr_fmod(r, k, four, MPFR_RNDN);  // in (-4, 4), the sign of k
    const int m = static_cast<int>(mpfr_get_si(r, MPFR_RNDN));
    const int phase = ((m % 4) + 4 + (cosine ? 0 : 3)) % 4;
    if (phase == 0) t->hi = 1.0;
    if (phase == 2) t->lo = -1.0;
  }
}

/// Returns the tightest enclosure of f over x: f at the endpoints (clipped to the domain, with the
/// domain's limit when x reaches past it) and at 0 when f turns there (sqr, abs). Counts the
/// endpoints it evaluated in *evaluated.
Tight referenceUnary(Fn f, Interval x, std::size_t* evaluated) {
  double lo = x.lo, hi = x.hi;
  Tight t;
  if ((f == Fn::Sqrt && hi < 0.0) || (f == Fn::Log && hi < 0.0) || (f == Fn::Log1p && hi < -1.0))
    return t;
  if ((f == Fn::Log && hi == 0.0) || (f == Fn::Log1p && hi == -1.0)) {
    t.empty = false;  // the pole alone: log(±0) = -inf (IEEE 754-2019 §9.2.1; mpfr_log too)
    t.lo = t.hi = -kInf;
    return t;
  }
  std::vector<double> candidates{lo, hi};
  if ((f == Fn::Sqr || f == Fn::Abs) && lo < 0.0 && hi > 0.0) candidates.push_back(0.0);
  if ((f == Fn::Sin || f == Fn::Cos) && !(std::isfinite(lo) && std::isfinite(hi))) {
    t.empty = false;  // sin(±inf) is NaN: the entire line
    t.lo = -kInf;
    t.hi = kInf;
    return t;
  }
  bool unboundedBelow = false;
  if (f == Fn::Sqrt && lo < 0.0) candidates[0] = 0.0;
  if ((f == Fn::Log && lo <= 0.0) || (f == Fn::Log1p && lo <= -1.0)) {
    unboundedBelow = true;  // log reaches -inf at the domain's edge
    candidates.erase(candidates.begin());
  }
  Real mlo, mhi, vlo, vhi;
  bool any = false;
  for (double c : candidates) {
    bounds(f, c, vlo, vhi);
    if (!any || mpfr_less_p(vlo, mlo)) mpfr_set(mlo, vlo, MPFR_RNDN);
    if (!any || mpfr_greater_p(vhi, mhi)) mpfr_set(mhi, vhi, MPFR_RNDN);
    any = true;
    if (std::isfinite(c)) ++*evaluated;
  }
  t.empty = false;
  t.lo = unboundedBelow ? -kInf : mpfr_get_d(mlo, MPFR_RNDD);
  t.hi = mpfr_get_d(mhi, MPFR_RNDU);
  // A point holds a turning point only at 0 (cos), where cos(0) = 1 is the endpoint value; the
  // 256-bit quotient of a huge point by π/2 would be a rounded integer, not a turning point.
  if ((f == Fn::Sin || f == Fn::Cos) && lo != hi) turningPoints(f == Fn::Cos, lo, hi, &t);
  return t;
}

Interval apply(Fn f, Interval x) {
  switch (f) {
    case Fn::Sqr:
      return lossbound::sqr(x);
    case Fn::Sqrt:
      return lossbound::sqrt(x);
    case Fn::Neg:
      return lossbound::neg(x);
    case Fn::Abs:
      return lossbound::abs(x);
    case Fn::Exp:
      return lossbound::exp(x);
    case Fn::Expm1:
      return lossbound::expm1(x);
    case Fn::Log:
      return lossbound::log(x);
    case Fn::Log1p:
      return lossbound::log1p(x);
    case Fn::Tanh:
      return lossbound::tanh(x);
    case Fn::Erf:
      return lossbound::erf(x);
    case Fn::Sigmoid:
      return lossbound::sigmoid(x);
    case Fn::Sin:
      return lossbound::sin(x);
    case Fn::Cos:
      return lossbound::cos(x);
  }
  return x;
}

Interval apply(BinOp op, Interval x, Interval y) {
  switch (op) {
    case BinOp::Add:
      return lossbound::add(x, y);
    case BinOp::Sub:
      return lossbound::sub(x, y);
    case BinOp::Mul:
      return lossbound::mul(x, y);
    case BinOp::Div:
      return lossbound::div(x, y);
    case BinOp::Min:
      return lossbound::min(x, y);
    case BinOp::Max:
      return lossbound::max(x, y);
  }
  return x;
}

// ---- endpoint generators for the elementary functions -----------------------------------------

double expEndpoint(Doubles& g) {
  switch (g.intIn(0, 9)) {
    case 0:
    case 1:
    case 2:
      return -760.0 + 1480.0 * g.unit();
    case 3:
    case 4:
      return g.withExponent(-1074, 11);
    case 5:
      return g.withExponent(-60, 3);
    case 6: {  // overflow, underflow and subnormal-result thresholds of exp
      const double t[] = {709.782712893384, -745.1332191019411, -708.3964185322641, 0.0};
      return g.nudge(t[g.intIn(0, 3)], 50);
    }
    case 7:
      return g.special();
    default:
      return g.withExponent(-1074, 1023);
  }
}

double logEndpoint(Doubles& g) {
  switch (g.intIn(0, 9)) {
    case 0:
    case 1:
    case 2:
      return std::fabs(g.withExponent(-1074, 1023));
    case 3:
    case 4:
      return g.nudge(1.0 + g.withExponent(-60, -1), 3);  // near 1: results near 0
    case 5:
      return std::fabs(g.subnormal());
    case 6:
      return g.withExponent(-1074, 1023);  // either sign: partly outside the domain
    case 7:
      return g.special();
    default:
      return std::fabs(g.withExponent(-40, 40));
  }
}

double log1pEndpoint(Doubles& g) {
  switch (g.intIn(0, 9)) {
    case 0:
    case 1:
      return g.withExponent(-1074, 1023);
    case 2:
    case 3:
      return g.nudge(-1.0 + std::fabs(g.withExponent(-60, -1)), 3);  // near -1
    case 4:
    case 5:
      return g.withExponent(-1074, -1);  // near 0
    case 6:
      return -1.0 - std::fabs(g.withExponent(-60, 10));  // outside the domain
    case 7:
      return g.special();
    default:
      return g.withExponent(-20, 40);
  }
}

double saturatingEndpoint(Doubles& g) {  // tanh and erf
  switch (g.intIn(0, 9)) {
    case 0:
    case 1:
    case 2:
      return g.withExponent(-1074, 10);
    case 3:
    case 4:
    case 5:
      return -40.0 + 80.0 * g.unit();
    case 6:
      return g.withExponent(-60, 0);
    case 7:
      return g.special();
    default:
      return g.withExponent(-1074, 1023);
  }
}

double trigEndpoint(Doubles& g) {  // sin and cos
  switch (g.intIn(0, 9)) {
    case 0:
    case 1:
    case 2:
      return -20.0 + 40.0 * g.unit();
    case 3:
    case 4: {  // near a turning point or a zero kπ/2 (|k| <= 40)
      const double k = static_cast<double>(g.intIn(-40, 40));
      return g.nudge(k * 1.5707963267948966, 50);
    }
    case 5:
      return g.withExponent(-1074, 0);
    case 6:
      return g.withExponent(0, 60);  // large arguments
    case 7:
      return g.special();
    default:
      return g.withExponent(-1074, 1023);
  }
}

std::uint64_t seed() { return lossbound::test::testSeed(); }

}  // namespace

/// Tests every interval operation against MPFR, and the documented edge behaviour.
class TestIntervalMpfr : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qInfo("seed %llu (set LOSSBOUND_TEST_SEED to change), MPFR %s at %d bits",
          static_cast<unsigned long long>(seed()), mpfr_get_version(),
          static_cast<int>(lossbound::test::kReferenceBits));
  }

  void add() { binary("add", BinOp::Add, true); }
  void sub() { binary("sub", BinOp::Sub, true); }
  void mul() { binary("mul", BinOp::Mul, true); }
  void div() { binary("div", BinOp::Div, true); }
  void min() { binary("min", BinOp::Min, true); }
  void max() { binary("max", BinOp::Max, true); }
  void neg() { unary("neg", Fn::Neg, arithmeticEndpoint, true, 2, 3 * kCases); }
  void abs() { unary("abs", Fn::Abs, arithmeticEndpoint, true, 2, 3 * kCases); }
  void sqr() { unary("sqr", Fn::Sqr, arithmeticEndpoint, true, 2, 3 * kCases); }
  void sqrt() { unary("sqrt", Fn::Sqrt, arithmeticEndpoint, true, 2, 3 * kCases / 2); }
  void exp() { unary("exp", Fn::Exp, expEndpoint, false, 1, 2 * kCases); }
  void expm1() { unary("expm1", Fn::Expm1, expEndpoint, false, 1, 2 * kCases); }
  void log() { unary("log", Fn::Log, logEndpoint, false, 1, 2 * kCases); }
  void log1p() { unary("log1p", Fn::Log1p, log1pEndpoint, false, 1, 3 * kCases / 2); }
  void tanh() { unary("tanh", Fn::Tanh, saturatingEndpoint, false, 1, 2 * kCases); }
  void erf() { unary("erf", Fn::Erf, saturatingEndpoint, false, 1, 2 * kCases); }
  void sigmoid() { unary("sigmoid", Fn::Sigmoid, expEndpoint, false, 1, 2 * kCases); }
  void sin() { unary("sin", Fn::Sin, trigEndpoint, false, 2, 2 * kCases); }
  void cos() { unary("cos", Fn::Cos, trigEndpoint, false, 2, 2 * kCases); }

  /// sin and cos reach ±1 inside an interval exactly when it holds a turning point.
  void sinCosTurningPoints() {
    const double halfPi = 1.5707963267948966;
    const Interval s1 = lossbound::sin(Interval{1.5, 1.6});  // holds π/2
    QCOMPARE(s1.hi, 1.0);
    QVERIFY(s1.lo > 0.99 && s1.lo < 0.9975);
    const Interval s2 = lossbound::sin(Interval{1.6, 3.0});  // decreasing, no turning point
    QVERIFY(s2.hi < 1.0 && s2.lo > 0.14 && s2.lo < 0.1412);
    const Interval c1 = lossbound::cos(Interval{3.0, 3.3});  // holds π
    QCOMPARE(c1.lo, -1.0);
    QVERIFY(c1.hi < -0.98);
    const Interval c2 = lossbound::cos(Interval{-0.1, 0.1});
    QCOMPARE(c2.hi, 1.0);
    const Interval w = lossbound::sin(Interval{0.0, 7.0});
    QVERIFY(w.lo == -1.0 && w.hi == 1.0);
    // The binary64 neighbour of π/2 is below it: [x, x] holds no turning point, sin(x) < 1 but
    // rounds to 1; the enclosure must still hold the exact value.
    const Interval p = lossbound::sin(Interval{halfPi, halfPi});
    QVERIFY(p.hi == 1.0 && p.lo < 1.0);
  }

  void hull() {
    Doubles g(seed() ^ 0x4811);
    Failures fail;
    Widths w;
    for (int i = 0; i < kCases; ++i) {
      const Interval x = randomInterval(g, arithmeticEndpoint);
      const Interval y = randomInterval(g, arithmeticEndpoint);
      const Interval r = lossbound::hull(x, y);
      ++w.cases;
      // Reference: the smallest interval holding both, from MPFR's min / max of the endpoints.
      const Tight lows = referenceBinary(BinOp::Min, {x.lo, x.lo}, {y.lo, y.lo});
      const Tight highs = referenceBinary(BinOp::Max, {x.hi, x.hi}, {y.hi, y.hi});
      const Tight t{false, lows.lo, highs.hi};
      if (!sameAsTight(r, t))
        fail.add(QStringLiteral("hull(%1, %2) = %3, want [%4, %5]")
                     .arg(str(x), str(y), str(r), hex(t.lo), hex(t.hi)));
      for (const Interval& z : {x, y}) {
        const double p = sampleIn(g, z);
        ++w.points;
        if (!lossbound::contains(r, p))
          fail.add(
              QStringLiteral("hull(%1, %2) = %3 misses %4").arg(str(x), str(y), str(r), hex(p)));
      }
      w.excess(r, t.lo, t.hi);
    }
    w.print("hull");
    QVERIFY2(fail.count() == 0, qPrintable(fail.report()));
  }

  void pow() {
    Doubles g(seed() ^ 0x9043);
    Failures fail;
    Widths w, small;  // all exponents, and |n| <= 9 alone (large n accumulate roundings)
    Real lower, upper;
    const int bigExponents[] = {INT_MIN, -1075, -33, 17, 64, 100, 1075, INT_MAX};
    const EndpointGen moderate = [](Doubles& d) {
      return d.chance(0.5) ? d.withExponent(-10, 10) : d.withExponent(-1074, 1023);
    };
    for (int i = 0; i < kCases; ++i) {
      const int n = g.chance(0.9) ? g.intIn(-9, 9) : bigExponents[g.intIn(0, 7)];
      const Interval x = randomInterval(g, i % 2 ? EndpointGen(arithmeticEndpoint) : moderate);
      const Interval r = lossbound::pow(x, n);
      ++w.cases;
      if (n >= -9 && n <= 9) ++small.cases;
      auto call = [&] { return QStringLiteral("pow(%1, %2) = %3").arg(str(x)).arg(n).arg(str(r)); };
      if (hasNanEndpoint(r)) fail.add(call() + " has a NaN endpoint");
      // Exact x^n at the finite endpoints and at interior points; 0^-k is not a real.
      for (double p : {x.lo, x.hi, sampleIn(g, x), sampleIn(g, x)}) {
        if (!std::isfinite(p) || (p == 0.0 && n < 0)) continue;
        Real mp;
        mpfr_set_d(mp, p, MPFR_RNDN);
        mpfr_pow_si(lower, mp, n, MPFR_RNDD);
        mpfr_pow_si(upper, mp, n, MPFR_RNDU);
        ++w.points;
        if (n >= -9 && n <= 9) ++small.points;
        if (!encloses(r, lower, upper))
          fail.add(call() + QStringLiteral(" misses the exact value at %1").arg(hex(p)));
      }
      if (x.lo == x.hi) w.pointResult(r);
      if (x.lo == x.hi && n >= -9 && n <= 9) small.pointResult(r);
      // The exact range is monotone between the endpoints when 0 is not inside x.
      if (x.lo > 0.0 || x.hi < 0.0) {
        Tight t;
        Real a, b;
        mpfr_set_d(a, x.lo, MPFR_RNDN);
        mpfr_set_d(b, x.hi, MPFR_RNDN);
        mpfr_pow_si(lower, a, n, MPFR_RNDD);
        mpfr_pow_si(upper, b, n, MPFR_RNDD);
        mpfr_min(lower, lower, upper, MPFR_RNDD);
        t.lo = mpfr_get_d(lower, MPFR_RNDD);
        mpfr_pow_si(lower, a, n, MPFR_RNDU);
        mpfr_pow_si(upper, b, n, MPFR_RNDU);
        mpfr_max(upper, lower, upper, MPFR_RNDU);
        t.hi = mpfr_get_d(upper, MPFR_RNDU);
        w.excess(r, t.lo, t.hi);
        if (n >= -9 && n <= 9) small.excess(r, t.lo, t.hi);
      }
    }
    w.print("pow");
    small.print("pow|n|<=9");
    QVERIFY2(fail.count() == 0, qPrintable(fail.report()));
  }

  /// Division by an interval that contains zero returns the hull of the quotient set.
  void divisionByZeroContainingIntervals() {
    struct Case {
      Interval x, y, want;
    };
    const Case cases[] = {
        {{1, 2}, {-1, 1}, {-kInf, kInf}},  {{1, 2}, {0, 1}, {1, kInf}},
        {{-2, -1}, {0, 1}, {-kInf, -1}},   {{1, 2}, {-1, 0}, {-kInf, -1}},
        {{-2, -1}, {-1, 0}, {1, kInf}},    {{0, 1}, {0, 1}, {0, kInf}},
        {{-1, 0}, {0, 1}, {-kInf, 0}},     {{-1, 1}, {0, 1}, {-kInf, kInf}},
        {{0, 0}, {0, 1}, {0, 0}},          {{0, 0}, {-1, 1}, {0, 0}},
        {{1, 2}, {-0.0, 4}, {0.25, kInf}}, {{1, 2}, {-kInf, kInf}, {-kInf, kInf}},
        {{1, 2}, {0, kInf}, {0, kInf}},    {{3, 3}, {-0.0, 0.0}, {kInf, -kInf}},
    };
    for (const Case& c : cases) {
      const Interval r = lossbound::div(c.x, c.y);
      const bool same = lossbound::isEmpty(c.want) ? lossbound::isEmpty(r)
                                                   : r.lo == c.want.lo && r.hi == c.want.hi;
      QVERIFY2(same, qPrintable(QStringLiteral("div(%1, %2) = %3, want %4")
                                    .arg(str(c.x), str(c.y), str(r), str(c.want))));
    }
  }

  /// Division by exactly zero is empty: no real b != 0 lies in [0, 0].
  void divisionByExactZeroIsEmpty() {
    for (const Interval x : {Interval{1, 2}, Interval{0, 0}, Interval{-kInf, kInf}})
      for (const Interval z : {Interval{0, 0}, Interval{-0.0, 0.0}, Interval{-0.0, -0.0}})
        QVERIFY(lossbound::isEmpty(lossbound::div(x, z)));
  }

  /// Only the part of an operand inside the domain counts; log(±0) and log1p(-1) are -inf (the
  /// pole: IEEE 754-2019 §9.2.1), exact.
  void domainsOfLogSqrtLog1p() {
    QVERIFY(lossbound::isEmpty(lossbound::log(Interval{-2, -1})));
    QVERIFY(lossbound::isEmpty(lossbound::log(Interval{-2, -0x1p-1074})));
    for (const Interval z : {Interval{-1, 0}, Interval{0, 0}, Interval{-0.0, -0.0}}) {
      QVERIFY(lossbound::isPoleValue(lossbound::log(z)));
      QVERIFY(lossbound::isPoleValue(lossbound::log1p(lossbound::sub(z, Interval{1, 1}))));
    }
    QVERIFY(lossbound::isEmpty(lossbound::log1p(Interval{-2, -1 - 0x1p-52})));
    const Interval l = lossbound::log(Interval{-1, 1});
    QCOMPARE(l.lo, -kInf);
    QVERIFY(l.hi >= 0.0 && l.hi < 1e-300);
    QCOMPARE(lossbound::log(Interval{0, 1}).lo, -kInf);
    QCOMPARE(lossbound::log1p(Interval{-1, 0}).lo, -kInf);
    QVERIFY(lossbound::isEmpty(lossbound::sqrt(Interval{-2, -1})));
    const Interval s = lossbound::sqrt(Interval{-1, 4});
    QVERIFY(s.lo == 0.0 && s.hi == 2.0);
  }

  /// A NaN endpoint means "unknown": the operand is the entire line, and no result endpoint is
  /// ever NaN. Degenerate points at infinity do not produce NaN either.
  void nanAndInfiniteOperandsNeverGiveNanEndpoints() {
    const std::vector<Interval> odd = {{kNan, 1},     {1, kNan},          {kNan, kNan},
                                       {-kNan, kNan}, {kInf, kInf},       {-kInf, -kInf},
                                       {kNan, kInf},  {-kInf, kNan},      {0, 0},
                                       {-0.0, -0.0},  {-kInf, kInf},      {1, 2},
                                       {-2, -1},      {DBL_MAX, DBL_MAX}, {-DBL_MAX, 0}};
    std::size_t checked = 0;
    for (const Interval& x : odd) {
      for (Fn f : {Fn::Sqr, Fn::Sqrt, Fn::Neg, Fn::Abs, Fn::Exp, Fn::Expm1, Fn::Log, Fn::Log1p,
                   Fn::Tanh, Fn::Erf, Fn::Sigmoid, Fn::Sin, Fn::Cos}) {
        const Interval r = apply(f, x);
        QVERIFY2(!hasNanEndpoint(r), qPrintable(QStringLiteral("fn %1 of %2 gives %3")
                                                    .arg(static_cast<int>(f))
                                                    .arg(str(x), str(r))));
        if (lossbound::hasNan(x))  // same as for the entire line
          QVERIFY(lossbound::contains(r, apply(f, lossbound::entireInterval())));
        ++checked;
      }
      for (int n : {-3, -2, -1, 0, 1, 2, 3, INT_MIN}) {
        QVERIFY(!hasNanEndpoint(lossbound::pow(x, n)));
        ++checked;
      }
      for (const Interval& y : odd) {
        for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Min, BinOp::Max}) {
          const Interval r = apply(op, x, y);
          QVERIFY2(!hasNanEndpoint(r), qPrintable(QStringLiteral("op %1 of %2, %3 gives %4")
                                                      .arg(static_cast<int>(op))
                                                      .arg(str(x), str(y), str(r))));
          if (lossbound::hasNan(x))
            QVERIFY(lossbound::contains(r, apply(op, lossbound::entireInterval(), y)));
          ++checked;
        }
        QVERIFY(!hasNanEndpoint(lossbound::hull(x, y)));
        QVERIFY(!hasNanEndpoint(lossbound::intersect(x, y)));
        checked += 2;
      }
    }
    qInfo("%zu operations on NaN, infinite and ordinary operands: no NaN endpoint", checked);
  }

  /// Every operation of an empty operand is empty, except hull, which ignores it.
  void emptyPropagates() {
    const Interval e = lossbound::emptyInterval();
    QVERIFY(lossbound::isEmpty(e));
    QVERIFY(!lossbound::isEmpty(lossbound::entireInterval()));
    for (Fn f : {Fn::Sqr, Fn::Sqrt, Fn::Neg, Fn::Abs, Fn::Exp, Fn::Expm1, Fn::Log, Fn::Log1p,
                 Fn::Tanh, Fn::Erf, Fn::Sigmoid, Fn::Sin, Fn::Cos})
      QVERIFY2(lossbound::isEmpty(apply(f, e)), qPrintable(QString::number(int(f))));
    for (int n : {-2, -1, 0, 1, 2, 3}) QVERIFY(lossbound::isEmpty(lossbound::pow(e, n)));
    for (const Interval y : {Interval{1, 2}, Interval{0, 0}, lossbound::entireInterval(), e}) {
      for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Min, BinOp::Max}) {
        QVERIFY(lossbound::isEmpty(apply(op, e, y)));
        QVERIFY(lossbound::isEmpty(apply(op, y, e)));
      }
      const Interval h = lossbound::hull(e, y);
      QVERIFY(lossbound::isEmpty(y) ? lossbound::isEmpty(h) : (h.lo == y.lo && h.hi == y.hi));
      QVERIFY(lossbound::isEmpty(lossbound::intersect(e, y)));
    }
    QVERIFY(lossbound::isEmpty(lossbound::intersect(Interval{1, 2}, Interval{3, 4})));
  }

 private:
  /// Runs a binary operation on kCases random operand pairs (a quarter of them related, to force
  /// cancellation and near-exact quotients) against MPFR.
  static void binary(const char* name, BinOp op, bool tight) {
    Doubles g(seed() ^ (0x100 + static_cast<std::uint64_t>(op)));
    Failures fail;
    Widths w;
    Real lower, upper;
    for (int i = 0; i < kCases; ++i) {
      const Interval x = randomInterval(g, arithmeticEndpoint);
      const Interval y =
          g.chance(0.25) ? relatedInterval(g, x) : randomInterval(g, arithmeticEndpoint);
      const Interval r = apply(op, x, y);
      ++w.cases;
      auto call = [&] {
        return QStringLiteral("%1(%2, %3) = %4").arg(name, str(x), str(y), str(r));
      };
      if (hasNanEndpoint(r)) fail.add(call() + " has a NaN endpoint");
      const Tight t = referenceBinary(op, x, y);
      if (tight && !sameAsTight(r, t))
        fail.add(call() + QStringLiteral(", the tightest enclosure is [%1, %2]%3")
                              .arg(hex(t.lo), hex(t.hi), t.empty ? " (empty)" : ""));
      // Exact values at the corners and at interior points must be inside.
      const double xs[] = {x.lo, x.hi, sampleIn(g, x), x.lo, sampleIn(g, x)};
      const double ys[] = {y.lo, y.hi, sampleIn(g, y), y.hi, y.lo};
      for (int k = 0; k < 5; ++k) {
        const double a = xs[k], b = ys[k];
        if (!std::isfinite(a) || !std::isfinite(b) || (op == BinOp::Div && b == 0.0)) continue;
        corner(op, a, b, 0, MPFR_RNDD, lower);
        corner(op, a, b, 0, MPFR_RNDU, upper);
        ++w.points;
        if (!encloses(r, lower, upper))
          fail.add(call() +
                   QStringLiteral(" misses the exact value at (%1, %2)").arg(hex(a), hex(b)));
      }
      if (x.lo == x.hi && y.lo == y.hi) w.pointResult(r);
      if (!t.empty) w.excess(r, t.lo, t.hi);
    }
    w.print(name);
    QVERIFY2(fail.count() == 0, qPrintable(fail.report()));
    QVERIFY(w.points > std::size_t(3) * kCases);  // most sampled points were finite and checked
  }

  /// Runs a unary operation on kCases random operands against MPFR; `tight` ops must return the
  /// tightest enclosure, the others must contain it. The reference evaluates the endpoints (for
  /// these functions, monotone on each side of 0, that decides containment); `interior` random
  /// interior points are checked on top.
  static void unary(const char* name, Fn f, const EndpointGen& end, bool tight, int interior,
                    std::size_t minPoints) {
    Doubles g(seed() ^ (0x200 + static_cast<std::uint64_t>(f)));
    Failures fail;
    Widths w;
    Real lower, upper;
    for (int i = 0; i < kCases; ++i) {
      const Interval x = randomInterval(g, end);
      const Interval r = apply(f, x);
      ++w.cases;
      auto call = [&] { return QStringLiteral("%1(%2) = %3").arg(name, str(x), str(r)); };
      if (hasNanEndpoint(r)) fail.add(call() + " has a NaN endpoint");
      const Tight t = referenceUnary(f, x, &w.points);
      if (tight
              ? !sameAsTight(r, t)
              : (t.empty != lossbound::isEmpty(r) || (!t.empty && !(r.lo <= t.lo && t.hi <= r.hi))))
        fail.add(call() + QStringLiteral(", the tightest enclosure is [%1, %2]%3")
                              .arg(hex(t.lo), hex(t.hi), t.empty ? " (empty)" : ""));
      for (int k = 0; k < interior; ++k) {
        const double p = sampleIn(g, x);
        if (!std::isfinite(p) || !bounds(f, p, lower, upper)) continue;
        ++w.points;
        if (!encloses(r, lower, upper))
          fail.add(call() + QStringLiteral(" misses the exact value at %1").arg(hex(p)));
      }
      if (x.lo == x.hi) w.pointResult(r);
      if (!t.empty) w.excess(r, t.lo, t.hi);
    }
    w.print(name);
    QVERIFY2(fail.count() == 0, qPrintable(fail.report()));
    QVERIFY(w.points > minPoints);  // most sampled points were finite, in the domain, and checked
  }
};

QTEST_APPLESS_MAIN(TestIntervalMpfr)
#include "test_interval_mpfr.moc"
