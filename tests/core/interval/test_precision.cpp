// Storage-format rounding (core/interval/precision.h) against an exact reference: MPFR with the
// format's precision and exponent range (mpfr_set_emin / mpfr_set_emax + mpfr_subnormalize), in
// all three directions, bit for bit (signed zeros included), on >= 100,000 cases per format across
// the format's range: subnormals, underflow, exact values, ties, near-overflow and overflow.

#include "core/interval/precision.h"
#include "tests/core/interval/mpfr_real.h"
#include "tests/core/interval/test_values.h"

#include <QTest>

#include <mpfr.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

using lossbound::Format;
using lossbound::FormatSpec;
using lossbound::RoundingDirection;
using lossbound::test::Doubles;
using lossbound::test::hex;
using lossbound::test::kInf;
using lossbound::test::kNan;

namespace {

// Random cases per format per run (edge cases come on top); each is rounded in three directions.
constexpr int kCases = 120'000;

/// Sets MPFR's exponent range to that of a binary format for the scope of the object. MPFR writes
/// x = m * 2^e with 1/2 <= m < 1, so the IEEE range [emin, emax] with precision p becomes
/// [emin - p + 2, emax + 1] once subnormals are emulated by mpfr_subnormalize.
class ExponentRange {
 public:
  explicit ExponentRange(FormatSpec s) : emin_(mpfr_get_emin()), emax_(mpfr_get_emax()) {
    mpfr_set_emin(s.emin - s.precision + 2);
    mpfr_set_emax(s.emax + 1);
  }
  ~ExponentRange() {
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
  }
  ExponentRange(const ExponentRange&) = delete;
  ExponentRange& operator=(const ExponentRange&) = delete;

 private:
  mpfr_exp_t emin_, emax_;
};

/// Returns x rounded exactly into the format (the caller holds an ExponentRange for it).
double referenceRound(double x, lossbound::test::Real& y, mpfr_rnd_t rnd) {
  const int t = mpfr_set_d(y, x, rnd);  // rounds to p bits, overflows and underflows in range
  mpfr_subnormalize(y, t, rnd);         // then to the subnormal grid, without double rounding
  return mpfr_get_d(y, MPFR_RNDN);      // exact: the value is a binary64 number
}

const char* formatLabel(Format f) {
  switch (f) {
    case Format::Fp64:
      return "fp64";
    case Format::Fp32:
      return "fp32";
    case Format::Tf32:
      return "tf32";
    case Format::Bf16:
      return "bf16";
    case Format::Fp16:
      return "fp16";
  }
  return "?";
}

/// Returns the inputs for format f: random values over (and beyond) the format's range, exact
/// format values and their binary64 neighbours, exact ties and their neighbours, the subnormal and
/// overflow boundaries, random bit patterns, and the edge values of binary64.
std::vector<double> inputsFor(Format f, Doubles& g, std::size_t* edges) {
  const FormatSpec s = lossbound::formatSpec(f);
  const int p = s.precision;
  const double maxFinite = lossbound::largestFinite(f);
  const double minSub = lossbound::smallestSubnormal(f);
  std::vector<double> v;
  const double boundaries[] = {maxFinite,
                               maxFinite + std::ldexp(1.0, s.emax - p),  // tie: RN overflows
                               std::ldexp(1.0, s.emax + 1),
                               std::ldexp(1.0, s.emax),
                               std::ldexp(1.0, s.emin),
                               std::ldexp(1.0, s.emin) - minSub,  // largest subnormal
                               minSub,
                               minSub / 2,  // tie between 0 and minSub: RN gives 0
                               minSub * 1.5,
                               minSub * 2.5,
                               1.0,
                               1.0 + std::ldexp(1.0, -p),  // tie: RN gives 1
                               1.0 + 3 * std::ldexp(1.0, -p)};
  for (double b : boundaries)
    for (double x : {b, std::nextafter(b, 0.0), std::nextafter(b, kInf)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  for (double x : Doubles::specials()) v.push_back(x);
  *edges = v.size();
  for (int i = 0; i < kCases; ++i) {
    switch (i % 8) {
      case 0:
      case 1:  // across the whole range of the format, from below its smallest subnormal to
               // beyond its largest value
        v.push_back(g.withExponent(s.emin - p - 3, s.emax + 2));
        break;
      case 2:  // the subnormal range of the format
        v.push_back(g.withExponent(s.emin - p - 1, s.emin));
        break;
      case 3: {  // exact values of the format and their binary64 neighbours
        const double m = g.shortMantissa(p, 0, 0);
        const double x = std::ldexp(m, g.intIn(s.emin, s.emax));
        v.push_back(g.nudge(x, g.chance(0.5) ? 0 : 2));
        break;
      }
      case 4: {  // exact ties (p + 1 significant bits, the last one set) and their neighbours
        const double m = g.shortMantissa(p, 0, 0);
        const double tie = m + std::copysign(std::ldexp(1.0, -p), m);  // |m| in [1, 2): half ulp
        const double x = std::ldexp(tie, g.intIn(s.emin - p, s.emax));
        v.push_back(g.nudge(x, g.chance(0.5) ? 0 : 1));
        break;
      }
      case 5:  // near overflow
        v.push_back(g.nudge(
            std::copysign(maxFinite, g.chance(0.5) ? 1.0 : -1.0) * (1.0 + std::ldexp(g.unit(), -p)),
            3));
        break;
      case 6:
        v.push_back(g.anyBits());
        break;
      default:
        v.push_back(g.withExponent(-60, 60));
        break;
    }
  }
  return v;
}

}  // namespace

/// Tests roundToFormat and roundOutward against MPFR.
class TestPrecision : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qInfo("seed %llu (set LOSSBOUND_TEST_SEED to change)",
          static_cast<unsigned long long>(lossbound::test::testSeed()));
  }

  void roundToFormat_data() {
    QTest::addColumn<int>("format");
    for (Format f : {Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16, Format::Fp64})
      QTest::newRow(formatLabel(f)) << static_cast<int>(f);
  }

  void roundToFormat() {
    QFETCH(int, format);
    const auto f = static_cast<Format>(format);
    const FormatSpec s = lossbound::formatSpec(f);
    Doubles g(lossbound::test::testSeed() ^ (0x500 + static_cast<std::uint64_t>(format)));
    std::size_t edges = 0;
    const std::vector<double> inputs = inputsFor(f, g, &edges);

    const RoundingDirection dirs[] = {RoundingDirection::Down, RoundingDirection::Up,
                                      RoundingDirection::Nearest};
    const mpfr_rnd_t rnds[] = {MPFR_RNDD, MPFR_RNDU, MPFR_RNDN};
    std::size_t mismatches = 0, inexact = 0, subnormal = 0, overflow = 0, ties = 0, zeros = 0;
    QStringList report;
    lossbound::test::Real y(s.precision);
    const ExponentRange range(s);
    for (double x : inputs) {
      double got[3], want[3];
      for (int d = 0; d < 3; ++d) {
        got[d] = lossbound::roundToFormat(x, f, dirs[d]);
        want[d] = referenceRound(x, y, rnds[d]);
        if (lossbound::test::sameDatum(got[d], want[d])) continue;
        if (++mismatches <= 10)
          report << QStringLiteral("roundToFormat(%1, %2, %3) = %4, MPFR gives %5")
                        .arg(hex(x), formatLabel(f), QString::number(d), hex(got[d]), hex(want[d]));
      }
      if (!lossbound::test::sameDatum(want[0], want[1])) ++inexact;
      if (want[2] != 0.0 && std::fabs(want[2]) < std::ldexp(1.0, s.emin)) ++subnormal;
      if (std::isinf(want[2]) && std::isfinite(x)) ++overflow;
      if (want[0] == 0.0 && x != 0.0) ++zeros;
      // A tie: x is exactly halfway between its two neighbours in the format.
      if (std::isfinite(want[1]) && want[0] != want[1] && x - want[0] == want[1] - x) ++ties;
    }
    qInfo(
        "%s: %zu cases (%zu edge) x 3 directions: %zu inexact, %zu ties, %zu subnormal, "
        "%zu underflow to zero, %zu overflow to inf; %zu mismatches",
        formatLabel(f), inputs.size(), edges, inexact, ties, subnormal, zeros, overflow,
        mismatches);
    QVERIFY2(mismatches == 0,
             qPrintable(QStringLiteral("%1 mismatches:\n").arg(mismatches) + report.join('\n')));
    QVERIFY(inputs.size() - edges >= 100'000);
    if (f == Format::Fp64) return;  // the identity: nothing rounds
    QVERIFY2(inexact > inputs.size() / 2, "too few inexact cases");
    QVERIFY2(ties > 1000, "too few exact ties");
    QVERIFY2(subnormal > 1000, "too few subnormal results");
    QVERIFY2(overflow > 1000, "too few overflows");
    QVERIFY2(zeros > 1000, "too few underflows to zero");
  }

  /// roundOutward gives the format's tightest enclosure and never loses a value.
  void roundOutwardEnclosesAndIsTight() {
    Doubles g(lossbound::test::testSeed() ^ 0x600);
    for (Format f : {Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16}) {
      for (int i = 0; i < 20'000; ++i) {
        const FormatSpec s = lossbound::formatSpec(f);
        double a = g.withExponent(s.emin - s.precision - 2, s.emax + 1);
        double b = g.chance(0.3) ? a : g.withExponent(s.emin - s.precision - 2, s.emax + 1);
        if (a > b) std::swap(a, b);
        const lossbound::Interval r = lossbound::roundOutward({a, b}, f);
        QVERIFY(r.lo <= a && b <= r.hi);
        QCOMPARE(r.lo, lossbound::roundToFormat(a, f, RoundingDirection::Down));
        QCOMPARE(r.hi, lossbound::roundToFormat(b, f, RoundingDirection::Up));
        const lossbound::Interval n = lossbound::storeNearest({a, b}, f);
        QVERIFY(n.lo <= lossbound::roundToFormat(a, f, RoundingDirection::Nearest));
        QVERIFY(lossbound::roundToFormat(b, f, RoundingDirection::Nearest) <= n.hi);
      }
      QVERIFY(lossbound::isEmpty(lossbound::roundOutward(lossbound::emptyInterval(), f)));
      const lossbound::Interval u = lossbound::roundOutward({kNan, 1.0}, f);
      QVERIFY(u.lo == -kInf && u.hi == kInf);
    }
  }

  /// The format parameters match IEEE 754 binary16/32/64, bfloat16 and TF32.
  void formatConstants() {
    QCOMPARE(lossbound::largestFinite(Format::Fp32), double(FLT_MAX));
    QCOMPARE(lossbound::smallestSubnormal(Format::Fp32), double(FLT_TRUE_MIN));
    QCOMPARE(lossbound::largestFinite(Format::Fp16), 65504.0);
    QCOMPARE(lossbound::smallestSubnormal(Format::Fp16), std::ldexp(1.0, -24));
    QCOMPARE(lossbound::largestFinite(Format::Bf16), std::ldexp(255.0, 120));
    QCOMPARE(lossbound::largestFinite(Format::Tf32), std::ldexp(2047.0, 117));
    QCOMPARE(lossbound::largestFinite(Format::Fp64), DBL_MAX);
    QCOMPARE(lossbound::unitRoundoff(Format::Bf16), std::ldexp(1.0, -8));
    QCOMPARE(lossbound::unitRoundoff(Format::Fp16), std::ldexp(1.0, -11));
    // The looked-up constants equal their definitions from formatSpec() for every format.
    for (Format f : {Format::Fp64, Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16}) {
      const FormatSpec s = lossbound::formatSpec(f);
      QCOMPARE(lossbound::unitRoundoff(f), std::ldexp(1.0, -s.precision));
      QCOMPARE(lossbound::smallestSubnormal(f), std::ldexp(1.0, s.emin - s.precision + 1));
      QCOMPARE(lossbound::largestFinite(f),
               std::ldexp(2.0 - std::ldexp(1.0, 1 - s.precision), s.emax));
    }
  }
};

QTEST_APPLESS_MAIN(TestPrecision)
#include "test_precision.moc"
