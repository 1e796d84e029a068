// The directed-rounding table of core/interval/rounding.h against the FPU itself: every primitive
// must return the bit pattern that IEEE roundTowardNegative / roundTowardPositive gives (signed
// zeros included; any NaN matches any NaN). The reference runs under fesetround in a separate
// translation unit (ieee_reference.cpp, -frounding-math -O0).

#include "core/interval/rounding.h"
#include "tests/core/interval/ieee_reference.h"
#include "tests/core/interval/test_values.h"

#include <QTest>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

using lossbound::test::Doubles;
using lossbound::test::IeeeOp;
using lossbound::test::kInf;

namespace {

// Random cases per primitive per run (edge cases come on top).
constexpr std::size_t kRandomCases = 1'000'000;

/// Inputs of one primitive; unary and binary primitives leave the unused columns empty.
struct Cases {
  std::vector<double> a, b, c;
  std::size_t edges = 0;
  void add(double x, double y = 0.0, double z = 0.0) {
    a.push_back(x);
    b.push_back(y);
    c.push_back(z);
  }
  std::size_t size() const { return a.size(); }
};

using Primitive = std::function<double(double, double, double)>;

/// What kinds of results a run covered; the test requires each kind it can produce.
struct Coverage {
  std::size_t inexact = 0, subnormal = 0, signedZero = 0, overflowFinite = 0, infinite = 0, nan = 0;
};

const char* opName(IeeeOp op) {
  switch (op) {
    case IeeeOp::Add:
      return "add";
    case IeeeOp::Sub:
      return "sub";
    case IeeeOp::Mul:
      return "mul";
    case IeeeOp::Div:
      return "div";
    case IeeeOp::Sqrt:
      return "sqrt";
    case IeeeOp::Fma:
      return "fma";
  }
  return "?";
}

/// Compares down/up against the IEEE reference on every case and fills *coverage; fails the
/// current test with the first mismatches.
void compareWithIeee(IeeeOp op, const Cases& cs, const Primitive& down, const Primitive& up,
                     Coverage* coverage) {
  const std::size_t n = cs.size();
  std::vector<double> refDown(n), refUp(n);
  lossbound::test::ieeeDirected(op, true, cs.a.data(), cs.b.data(), cs.c.data(), refDown.data(), n);
  lossbound::test::ieeeDirected(op, false, cs.a.data(), cs.b.data(), cs.c.data(), refUp.data(), n);
  Coverage& cov = *coverage;
  std::size_t mismatches = 0;
  QStringList report;
  for (std::size_t i = 0; i < n; ++i) {
    const double gotDown = down(cs.a[i], cs.b[i], cs.c[i]);
    const double gotUp = up(cs.a[i], cs.b[i], cs.c[i]);
    for (int dir = 0; dir < 2; ++dir) {
      const double got = dir == 0 ? gotDown : gotUp;
      const double want = dir == 0 ? refDown[i] : refUp[i];
      if (lossbound::test::sameDatum(got, want)) continue;
      if (++mismatches <= 10)
        report << QStringLiteral("%1_%2(%3, %4, %5) = %6, IEEE gives %7")
                      .arg(opName(op), dir == 0 ? "down" : "up", lossbound::test::hex(cs.a[i]),
                           lossbound::test::hex(cs.b[i]), lossbound::test::hex(cs.c[i]),
                           lossbound::test::hex(got), lossbound::test::hex(want));
    }
    const double d = refDown[i], u = refUp[i];
    if (!lossbound::test::sameDatum(d, u)) ++cov.inexact;
    if (d != 0.0 && std::fabs(d) < DBL_MIN) ++cov.subnormal;
    if (d == 0.0 && std::signbit(d)) ++cov.signedZero;
    if (std::isinf(u) != std::isinf(d) && !std::isnan(d)) ++cov.overflowFinite;
    if (std::isinf(d) && std::isinf(u)) ++cov.infinite;
    if (std::isnan(d)) ++cov.nan;
  }
  qInfo(
      "%s_down/%s_up: %zu cases (%zu edge, %zu random), %zu inexact, %zu subnormal, %zu -0, "
      "%zu overflow (finite on one side), %zu infinite, %zu NaN; %zu mismatches",
      opName(op), opName(op), n, cs.edges, n - cs.edges, cov.inexact, cov.subnormal, cov.signedZero,
      cov.overflowFinite, cov.infinite, cov.nan, mismatches);
  if (mismatches > 0)
    QFAIL(qPrintable(
        QStringLiteral("%1 mismatches against IEEE directed rounding:\n").arg(mismatches) +
        report.join('\n')));
}

/// Requires that a run exercised every kind of result the primitive can produce.
void requireCoverage(const Coverage& cov, std::size_t n, bool canOverflow) {
  QVERIFY2(cov.inexact > n / 4, "fewer than a quarter of the cases needed rounding");
  QVERIFY2(cov.subnormal > 1000, "too few subnormal results");
  QVERIFY2(cov.nan > 0, "no NaN case");
  QVERIFY2(cov.infinite > 0, "no infinite case");
  if (canOverflow) QVERIFY2(cov.overflowFinite > 100, "too few overflow cases");
}

/// Returns +-(1 + k 2^-52) 2^e with 1 <= k < 2^10: products of two such values have an error term
/// k m 2^-104 that is tiny against the product, the hardest case for a residual near underflow.
double nearPowerOfTwo(Doubles& g, int e) {
  const double v = std::ldexp(1.0 + std::ldexp(static_cast<double>(g.intIn(1, 1023)), -52), e);
  return g.chance(0.5) ? -v : v;
}

/// Adds every pair (or triple, for fma: a sample of triples) of edge values.
void addEdgePairs(Cases& cs) {
  const auto& s = Doubles::specials();
  for (double x : s)
    for (double y : s) cs.add(x, y);
  cs.edges = cs.size();
}

/// a * b + c as written, compiled with FMA instructions available: GCC contracts it into one
/// fused multiply-add unless the project's -ffp-contract=off (CMakeLists.txt) is in force.
__attribute__((target("fma"), noinline)) double productThenSum(double a, double b, double c) {
  return a * b + c;
}

}  // namespace

/// Tests the directed-rounding primitives bit for bit against fesetround.
class TestRounding : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qInfo("seed %llu (set LOSSBOUND_TEST_SEED to change)", static_cast<unsigned long long>(seed()));
  }

  /// The oracle itself must honour the rounding mode, or every comparison below is vacuous.
  void referenceHonoursRoundingMode() {
    const double a[] = {1.0, 1.0, 0.1, 2.0, 0x1p-1074, 1.0, 1.0};
    const double b[] = {0x1p-60, 3.0, 3.0, 0.0, 0.5, -1.0, 0x1p-60};
    const double c[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0};
    double d[1], u[1];
    const IeeeOp ops[] = {IeeeOp::Add, IeeeOp::Div, IeeeOp::Mul, IeeeOp::Sqrt,
                          IeeeOp::Mul, IeeeOp::Add, IeeeOp::Fma};
    for (int i = 0; i < 7; ++i) {
      lossbound::test::ieeeDirected(ops[i], true, a + i, b + i, c + i, d, 1);
      lossbound::test::ieeeDirected(ops[i], false, a + i, b + i, c + i, u, 1);
      if (ops[i] == IeeeOp::Add && b[i] == -1.0) {
        // x + (-x) is -0 only when rounding down.
        QVERIFY(d[0] == 0.0 && std::signbit(d[0]));
        QVERIFY(u[0] == 0.0 && !std::signbit(u[0]));
      } else {
        QVERIFY2(d[0] < u[0],
                 qPrintable(QStringLiteral("case %1: %2 !< %3")
                                .arg(i)
                                .arg(lossbound::test::hex(d[0]), lossbound::test::hex(u[0]))));
      }
    }
  }

  /// The rounding models assume a product and a sum round twice; a contraction rounds once.
  void productAndSumAreNotContracted() {
    if (!__builtin_cpu_supports("fma")) QSKIP("this CPU has no FMA instructions to contract into");
    volatile double a = 1.0 + 0x1p-30, b = 1.0 - 0x1p-30, c = -1.0;
    QCOMPARE(std::fma(a, b, c), -0x1p-60);   // a * b = 1 - 2^-60 exactly
    QCOMPARE(productThenSum(a, b, c), 0.0);  // RN(a * b) = 1, then 1 - 1
  }

  void add() {
    Cases cs = binaryCases(IeeeOp::Add);
    Coverage cov;
    compareWithIeee(
        IeeeOp::Add, cs, [](double a, double b, double) { return lossbound::add_down(a, b); },
        [](double a, double b, double) { return lossbound::add_up(a, b); }, &cov);
    if (QTest::currentTestFailed()) return;
    requireCoverage(cov, cs.size(), true);
    QVERIFY2(cov.signedZero > 1000, "too few exact cancellations");
  }

  void sub() {
    Cases cs = binaryCases(IeeeOp::Sub);
    Coverage cov;
    compareWithIeee(
        IeeeOp::Sub, cs, [](double a, double b, double) { return lossbound::sub_down(a, b); },
        [](double a, double b, double) { return lossbound::sub_up(a, b); }, &cov);
    if (QTest::currentTestFailed()) return;
    requireCoverage(cov, cs.size(), true);
    QVERIFY2(cov.signedZero > 1000, "too few exact cancellations");
  }

  void mul() {
    Cases cs = binaryCases(IeeeOp::Mul);
    Coverage cov;
    compareWithIeee(
        IeeeOp::Mul, cs, [](double a, double b, double) { return lossbound::mul_down(a, b); },
        [](double a, double b, double) { return lossbound::mul_up(a, b); }, &cov);
    if (QTest::currentTestFailed()) return;
    requireCoverage(cov, cs.size(), true);
  }

  void div() {
    Cases cs = binaryCases(IeeeOp::Div);
    Coverage cov;
    compareWithIeee(
        IeeeOp::Div, cs, [](double a, double b, double) { return lossbound::div_down(a, b); },
        [](double a, double b, double) { return lossbound::div_up(a, b); }, &cov);
    if (QTest::currentTestFailed()) return;
    requireCoverage(cov, cs.size(), true);
  }

  void sqrt() {
    Doubles g(seed() ^ 5);
    Cases cs;
    for (double x : Doubles::specials()) cs.add(x);
    cs.edges = cs.size();
    for (std::size_t i = 0; i < kRandomCases; ++i) {
      switch (i % 6) {
        case 0:
          cs.add(g.anyBits());
          break;
        case 1:
          cs.add(std::fabs(g.withExponent(-1074, 1023)));
          break;
        case 2:
          cs.add(std::fabs(g.subnormal()));
          break;
        case 3:
          if (g.chance(0.5)) {  // around the 2^-968 switch, a = RN(r^2): a - sqrt(a)^2 is tiny
            const double r = nearPowerOfTwo(g, g.intIn(-490, -478));
            cs.add(std::fabs(r * r));
          } else {  // exact squares and their neighbours
            const double r = std::fabs(g.shortMantissa(g.intIn(1, 26), -537, 511));
            cs.add(g.nudge(r * r, 2));
          }
          break;
        case 4:  // near overflow, and around the fast path's 2^-968 switch
          cs.add(
              std::fabs(g.chance(0.5) ? g.withExponent(1000, 1023) : g.withExponent(-975, -960)));
          break;
        default:
          cs.add(g.mixed());
          break;
      }
    }
    Coverage cov;
    compareWithIeee(
        IeeeOp::Sqrt, cs, [](double a, double, double) { return lossbound::sqrt_down(a); },
        [](double a, double, double) { return lossbound::sqrt_up(a); }, &cov);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(cov.inexact > cs.size() / 4, "fewer than a quarter of the cases needed rounding");
    QVERIFY2(cov.nan > 1000, "too few negative or NaN operands");
    QVERIFY2(cov.signedZero > 0, "no sqrt(-0)");
  }

  void fma() {
    Doubles g(seed() ^ 6);
    Cases cs;
    const auto& s = Doubles::specials();
    for (double x : s)
      for (double y : s) {
        cs.add(x, y, s[g.bits() % s.size()]);
        cs.add(x, y, -x * y);
      }
    cs.edges = cs.size();
    for (std::size_t i = 0; i < kRandomCases; ++i) {
      double a = 0, b = 0, c = 0;
      switch (i % 10) {
        case 0:
          a = g.anyBits(), b = g.anyBits(), c = g.anyBits();
          break;
        case 1:
          a = g.withExponent(-1074, 1023), b = g.withExponent(-1074, 1023);
          c = g.withExponent(-1074, 1023);
          break;
        case 2: {  // c cancels the rounded product: the result is the product's error, or nearby
          a = g.withExponent(-600, 600), b = g.withExponent(-600, 600);
          c = g.nudge(-(a * b), g.chance(0.5) ? 0 : 3);
          break;
        }
        case 3: {  // exact products cancelled exactly: the result is a signed zero
          a = g.shortMantissa(g.intIn(1, 26), -500, 500);
          b = g.shortMantissa(g.intIn(1, 26), -500, 500);
          c = -(a * b);
          break;
        }
        case 4: {  // products in and below the subnormal range
          const int ea = g.intIn(-1074, 0);
          a = g.withExponent(ea, ea), b = g.withExponent(-1100 - ea, -1000 - ea);
          c = g.chance(0.5) ? g.subnormal() : g.nudge(-(a * b), 2);
          break;
        }
        case 5: {  // products near overflow, c on either side
          const int ea = g.intIn(0, 1023);
          a = g.withExponent(ea, ea), b = g.withExponent(1015 - ea, 1023 - ea);
          c = g.chance(0.5) ? g.withExponent(1000, 1023) : g.nudge(-(a * b), 2);
          break;
        }
        case 6: {  // tiny c against a normal product (sticky bits far below)
          a = g.withExponent(-100, 100), b = g.withExponent(-100, 100);
          c = g.withExponent(-1074, -300);
          break;
        }
        case 7: {  // huge product against a tiny c, and tiny product against a huge c
          a = g.withExponent(400, 1023), b = g.withExponent(0, 600);
          c = g.withExponent(-1074, -900);
          if (g.chance(0.5)) {
            a = g.withExponent(-1074, -400), b = g.withExponent(-600, 0);
            c = g.withExponent(-100, 1023);
          }
          break;
        }
        case 8: {  // products straddling the thresholds of the emulation (2^-960, 2^960)
          const int e = g.intIn(-1080, -940) * (g.chance(0.5) ? 1 : -1);
          const int ea = g.intIn(-60, 60);
          a = g.withExponent(ea, ea), b = g.withExponent(e - ea, e - ea + 1);
          if (e > 0) b = g.withExponent(std::min(e - ea, 1023), std::min(e - ea, 1023));
          if (e < 0 && g.chance(0.5))  // a product error far below the product
            a = nearPowerOfTwo(g, ea), b = nearPowerOfTwo(g, e - ea);
          c = g.chance(0.3) ? g.nudge(-(a * b), 2) : g.mixed();
          break;
        }
        default:
          a = g.mixed(), b = g.mixed(), c = g.mixed();
          break;
      }
      cs.add(a, b, c);
    }
    Coverage cov;
    compareWithIeee(
        IeeeOp::Fma, cs, [](double a, double b, double c) { return lossbound::fma_down(a, b, c); },
        [](double a, double b, double c) { return lossbound::fma_up(a, b, c); }, &cov);
    if (QTest::currentTestFailed()) return;
    requireCoverage(cov, cs.size(), true);
    QVERIFY2(cov.signedZero > 1000, "too few exact cancellations");
  }

 private:
  static std::uint64_t seed() { return lossbound::test::testSeed(); }

  /// Random and edge operands for add, sub, mul and div, with op-specific hard cases.
  static Cases binaryCases(IeeeOp op) {
    Doubles g(seed() ^ static_cast<std::uint64_t>(op));
    Cases cs;
    addEdgePairs(cs);
    for (std::size_t i = 0; i < kRandomCases; ++i) {
      double a = 0, b = 0;
      switch (i % 8) {
        case 0:
          a = g.anyBits(), b = g.anyBits();
          break;
        case 1:
          a = g.withExponent(-1074, 1023), b = g.withExponent(-1074, 1023);
          break;
        case 2:
          a = g.subnormal(), b = g.withExponent(-1074, -1000);
          break;
        case 3:
          a = g.mixed(), b = g.mixed();
          break;
        default:
          hardCase(op, g, i, a, b);
          break;
      }
      if (g.chance(0.5)) std::swap(a, b);
      cs.add(a, b);
    }
    return cs;
  }

  /// Fills a, b with a case that stresses op: cancellation, overflow, underflow, exactness.
  static void hardCase(IeeeOp op, Doubles& g, std::size_t i, double& a, double& b) {
    const int kind = static_cast<int>(i / 8 % 4);
    if (op == IeeeOp::Add || op == IeeeOp::Sub) {
      const double sign = op == IeeeOp::Add ? -1.0 : 1.0;  // makes a op b cancel
      a = g.withExponent(-1074, 1023);
      switch (kind) {
        case 0:
          b = sign * g.nudge(a, 4);
          break;   // a ~ -b: exact zeros and tiny results
        case 1: {  // nearby exponents: partial cancellation
          const int e = std::ilogb(a) + g.intIn(-60, 60);
          b = g.withExponent(std::clamp(e, -1074, 1023), std::clamp(e, -1074, 1023));
          break;
        }
        case 2:  // near overflow: same signs, and a huge operand against a smaller one
          if (g.chance(0.5)) {
            a = g.withExponent(1020, 1023), b = -sign * g.withExponent(1015, 1023);
          } else {
            a = g.nudge(std::copysign(DBL_MAX, a), 8), b = g.withExponent(900, 1023);
          }
          break;
        default:
          b = sign * g.nudge(a, 1) + g.subnormal();
          break;
      }
      return;
    }
    if (op == IeeeOp::Mul) {
      const int ea = g.intIn(-1074, 1023);
      a = g.withExponent(ea, ea);
      int lo = 0, hi = 0;
      switch (kind) {
        case 0:
          lo = -1080 - ea, hi = -1015 - ea;
          break;  // product around the subnormal range
        case 1:
          lo = 1015 - ea, hi = 1025 - ea;
          break;  // product near overflow
        case 2:
          lo = -1000 - ea, hi = -940 - ea;
          break;  // around the fast path's 2^-968 switch
        default:
          lo = 940 - ea, hi = 980 - ea;
          break;  // around the slow path's 2^960 switch
      }
      b = g.withExponent(std::clamp(lo, -1074, 1023), std::clamp(hi, -1074, 1023));
      if (kind == 2 && g.chance(0.5)) {  // tiny residuals (k*m*2^-104 relative) near the switch
        const int e = g.intIn(-1000, -940);
        a = nearPowerOfTwo(g, g.intIn(-60, 60));
        b = nearPowerOfTwo(g, e - std::ilogb(a));
      }
      if (kind == 3 && g.chance(0.5)) {  // exact short products
        a = g.shortMantissa(g.intIn(1, 26), -540, 500);
        b = g.shortMantissa(g.intIn(1, 26), -540, 500);
      }
      return;
    }
    // Division.
    const int eb = g.intIn(-1074, 1023);
    b = g.withExponent(eb, eb);
    int lo = 0, hi = 0;
    switch (kind) {
      case 0:
        lo = eb - 1080, hi = eb - 1015;
        break;  // quotient around the subnormal range
      case 1:
        lo = eb + 1015, hi = eb + 1025;
        break;   // quotient near overflow
      case 2: {  // exact quotients a = q * b, and their neighbours
        const double q = g.shortMantissa(g.intIn(1, 26), -400, 400);
        b = g.shortMantissa(g.intIn(1, 26), -400, 400);
        a = g.nudge(q * b, g.chance(0.5) ? 0 : 1);
        return;
      }
      default:
        if (g.chance(0.5)) {  // dividends around the fast path's 2^-968 switch; half of them
                              // with a remainder a - q*b tiny against a (a = RN(q * b))
          b = nearPowerOfTwo(g, g.intIn(-60, 60));
          a = g.withExponent(-995, -955);
          if (g.chance(0.5)) a = nearPowerOfTwo(g, std::ilogb(a) - std::ilogb(b)) * b;
          return;
        }
        lo = eb - 5, hi = eb + 5;  // quotients near 1
        break;
    }
    a = g.withExponent(std::clamp(lo, -1074, 1023), std::clamp(hi, -1074, 1023));
  }
};

QTEST_APPLESS_MAIN(TestRounding)
#include "test_rounding.moc"
