// Group norm op rules (native_group_norm, native_group_norm_backward): per op and precision,
// random cases from channel_norm_cases.h (N×C×H×W, N×C×L and N×C inputs, 1..3 groups of 1..4
// channels, weight/bias present or None, point and interval inputs, parameters in the input dtype
// or fp32) with zero escapes from the interval rule, local errors against observed rounding, vjp
// against finite differences, and the backward rule against the forward's vjp in point
// arithmetic.
#include "core/ops/broadcasting.h"
#include "tests/core/ops/channel_norm_cases.h"

#include <QtTest>

#include <cmath>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;
using namespace lossbound::test::norm;

class TestGroupNormOps : public QObject {
  Q_OBJECT
 private slots:
  void groupNorm() {
    checkAllFormats("native_group_norm", gnForwardCase);
    checkVjpCases("native_group_norm", moderate(gnForwardCase, 1));
  }
  void groupNormBackward() {
    checkAllFormats("native_group_norm_backward", gnBackwardCase);
    checkVjpCases("native_group_norm_backward", moderate(gnBackwardCase, 2));
  }
  void backwardIsTheForwardVjp() {
    // native_group_norm_backward(dy, x, mean, rstd, w) in binary64 against the vjp of
    // native_group_norm with output gradients (dy, 0, 0).
    std::mt19937_64 rng(12);
    std::normal_distribution<double> nd;
    OpContext ctx{modelFor(std::nullopt), cpuBackend(), nullptr};
    double worst = 0.0;
    int compared = 0;
    for (int i = 0; i < 200; ++i) {
      const OpCase fc = moderate(gnForwardCase, 1)(Format::Fp64, false, rng);
      const Bound fb(fc);
      const std::vector<Tensor> out = fb.rule().point(fb.args(), ctx);
      std::vector<double> dyv(static_cast<std::size_t>(out[0].numel()));
      for (double& v : dyv) v = nd(rng);
      const Tensor dy = Tensor::point(out[0].shape(), DType::Float64, dyv);
      const std::vector<Tensor> g{dy, Tensor::full(out[1].shape(), out[1].dtype(), 0.0),
                                  Tensor::full(out[2].shape(), out[2].dtype(), 0.0)};
      const auto vjp = fb.rule().vjp(fb.args(), out, g, ctx);
      const bool hasW = fc.args[1].kind == IrValue::Kind::Ref;
      OpCase bc;
      bc.op = "aten.native_group_norm_backward.default";
      bc.precision = fc.precision;
      bc.inputs = {dy, fc.inputs[0], out[1], out[2]};
      bc.args = {in(0), in(1), in(2), in(3)};
      if (hasW) bc.inputs.push_back(fc.inputs[1]);
      bc.args.push_back(hasW ? in(4) : none());
      bc.args.insert(bc.args.end(), {fc.args[3], fc.args[4], fc.args[5], fc.args[6],
                                     list({flag(true), flag(true), flag(true)})});
      bc.outDtypes = {DType::Float64, DType::Float64, DType::Float64};
      const Bound bb(bc);
      const std::vector<Tensor> grads = bb.rule().point(bb.args(), ctx);
      // vjp entries: x, then weight and bias when present (in that order).
      std::vector<const Tensor*> expected{&grads[0]};
      if (hasW) expected.push_back(&grads[1]);
      if (fc.args[2].kind == IrValue::Kind::Ref) expected.push_back(&grads[2]);
      QCOMPARE(vjp.size(), expected.size());
      for (std::size_t e = 0; e < expected.size(); ++e) {
        // Relative to max(max|expected|, 1): rows of one element have a zero gradient that the
        // backward's closed form reaches only up to rounding (r·w·dy − r·w·dy).
        double d = 0.0, m = 1.0;
        for (std::int64_t j = 0; j < expected[e]->numel(); ++j) {
          d = std::fmax(d, std::fabs(vjp[e]->values()[static_cast<std::size_t>(j)] -
                                     expected[e]->values()[static_cast<std::size_t>(j)]));
          m = std::fmax(m, std::fabs(expected[e]->values()[static_cast<std::size_t>(j)]));
        }
        if (expected[e]->numel() == 0) continue;
        QVERIFY2(d / m < 1e-9,
                 qPrintable(QStringLiteral("case %1 input %2: %3, x %4, N C HxW G %5 %6 %7 %8")
                                .arg(i)
                                .arg(e)
                                .arg(d / m)
                                .arg(QString::fromStdString(shapeString(fc.inputs[0].shape())))
                                .arg(fc.args[3].intValue)
                                .arg(fc.args[4].intValue)
                                .arg(fc.args[5].intValue)
                                .arg(fc.args[6].intValue)));
        worst = std::fmax(worst, d / m);
        ++compared;
      }
    }
    qInfo(
        "native_group_norm_backward vs the vjp of native_group_norm: %d tensors, max rel diff "
        "%.3g",
        compared, worst);
    QVERIFY(compared > 300);
  }
  /// adjointLocalError (a row's statistics shared by its elements, ops::norm::normRowAdjoint):
  /// random cases of every format against 100 executions each, the bound and the probabilistic
  /// term (adjointFailure, channel_norm_cases.h).
  void adjointLocalErrorBoundsTheExecutions() {
    checkAdjointCases("native_group_norm", gnForwardCase, 29);
  }
  /// Rows of 4,096 fp32 elements (2 groups of 4 channels of 32×32; centred, and shifted to 100):
  /// checkLargeRows (channel_norm_cases.h).
  void adjointTermOnLargeRows() {
    std::mt19937_64 rng(31);
    for (double off : {0.0, 100.0})
      checkLargeRows(
          largeNormCase("aten.native_group_norm.default", {2, 8, 32, 32}, 8, off,
                        {integer(2), integer(8), integer(1024), integer(2), num(1e-5)}, rng),
          rng, "native_group_norm", off);
  }
  /// One row, x on a 2^-20 grid with |x − μ| in [1, 2) and [2, 4), μ ≈ 0.3, an adjoint with
  /// Σg = 0 and Σg·(x − μ) = 0 (no shared term): fl(x − μ̂) rounds every element of a binade by
  /// the same offset, so the per-element terms must add up within a binade (the review's
  /// counterexample: 3.4× the root-sum-square in root-mean-square before).
  void coherentRoundingsOfOneBinade() {
    std::mt19937_64 rng(41);
    const std::int64_t n = 4096;
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    std::vector<double> x(static_cast<std::size_t>(n)), g(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) {
      const bool wide = k % 2;
      const double m = wide ? 2.05 + 1.9 * uni(rng) : 1.05 + 0.9 * uni(rng);
      x[k] = std::ldexp(std::nearbyint(std::ldexp(0.3 + ((k / 2) % 2 ? m : -m), 20)), -20);
      g[k] = wide ? -1.0 : 1.0;
    }
    long double sum = 0;
    for (double v : x) sum += v;
    const double mu = static_cast<double>(sum / n);
    for (int it = 0; it < 3; ++it) {  // project g off 1 and x − μ
      long double sg = 0, sgd = 0, sdd = 0;
      for (std::size_t k = 0; k < x.size(); ++k) {
        sg += g[k];
        sgd += static_cast<long double>(g[k]) * (x[k] - mu);
        sdd += static_cast<long double>(x[k] - mu) * (x[k] - mu);
      }
      const double a = static_cast<double>(sg / n), b = static_cast<double>(sgd / sdd);
      for (std::size_t k = 0; k < x.size(); ++k) g[k] -= a + b * (x[k] - mu);
    }
    OpCase c;
    c.op = "aten.native_group_norm.default";
    c.precision = modelFor(std::nullopt);
    c.inputs = {Tensor::point({1, 1, n}, DType::Float32, x)};
    c.args = {in(0), none(), none(), integer(1), integer(1), integer(n), integer(1), num(1e-5)};
    c.outDtypes = {DType::Float32, DType::Float32, DType::Float32};
    const RuleCall call(c);
    const auto term = call.adjointLocalError({Tensor::point({1, 1, n}, DType::Float32, g),
                                              Tensor::full({1, 1}, DType::Float32, 0.0),
                                              Tensor::full({1, 1}, DType::Float32, 0.0)});
    QVERIFY(term.has_value());
    const std::string failure =
        checkAdjointProbabilisticTerm(call, g, std::sqrt(term->sumSquares), 200, rng);
    QVERIFY2(failure.empty(), failure.c_str());
  }
  /// The first-order bound with subnormal products, which later products scale (the review's
  /// counterexample: w·(x − μ̂) subnormal, then ·r̂: 127 η against a bound of 6 η before), and
  /// no bound where the affine part may overflow in fp32.
  void underflowAndOverflow() {
    std::mt19937_64 rng(43);
    const auto rowCase = [](std::vector<double> x, double w) {
      OpCase c;
      c.op = "aten.native_group_norm.default";
      c.precision = modelFor(std::nullopt);
      const auto n = static_cast<std::int64_t>(x.size());
      c.inputs = {Tensor::point({1, 1, n}, DType::Float32, std::move(x)),
                  Tensor::point({1}, DType::Float32, {w})};
      c.args = {in(0), in(1), none(), integer(1), integer(1), integer(n), integer(1), num(1e-5)};
      c.outDtypes = {DType::Float32, DType::Float32, DType::Float32};
      return c;
    };
    const std::vector<Tensor> g{Tensor::point({1, 1, 2}, DType::Float32, {-1.0, 1.0}),
                                Tensor::full({1, 1}, DType::Float32, 0.0),
                                Tensor::full({1, 1}, DType::Float32, 0.0)};
    for (const OpCase& c : {rowCase({0.0, 0x1p-140}, static_cast<float>(0.3)),
                            rowCase({-1000.0, 1000.0}, 0x1.3p-140)}) {
      const RuleCall call(c);
      const auto term = call.adjointLocalError(g);
      QVERIFY(term.has_value());
      const auto y = call.point()[0].values();
      for (int e = 0; e < 300; ++e) {
        const std::vector<Tensor> run = call.random(rng);
        const auto v = run[0].values();
        const double d = std::fabs(-(v[0] - y[0]) + (v[1] - y[1]));
        QVERIFY2(d <= term->bound,
                 qPrintable(QStringLiteral("%1 > bound %2").arg(d).arg(term->bound)));
      }
    }
    QVERIFY(!RuleCall(rowCase({1e36, 1e36}, 2.0)).adjointLocalError(g).has_value());
  }
  void badArgumentsAreErrors() {
    std::mt19937_64 rng(4);
    OpCase c = gnForwardCase(Format::Fp32, false, rng);
    OpCase badGroups = c;
    badGroups.args[4] = integer(5);  // C = 5
    badGroups.args[6] = integer(2);  // not divisible
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(badGroups, 1, rng));
    OpCase badNumel = c;
    badNumel.args[3] = integer(c.args[3].intValue + 1);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(badNumel, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestGroupNormOps)
#include "test_group_norm_ops.moc"
