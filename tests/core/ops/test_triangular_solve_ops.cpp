// linalg_solve_triangular (unit diagonal, left): the binary64 solution satisfies A·X = B and
// ignores the diagonal and the other triangle, as PyTorch does; in fp64 and fp32, 600 random
// cases each (lower and upper, batch dims, point and interval inputs) with zero escapes of the
// randomized executor (every row a dot product in a random order and bracketing, with or without
// FMA) from the interval rule, and |random − point| <= localError; vjp against finite
// differences; the refused cases are errors that name what is supported.
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

/// A solve of A (batch…, n, n) against B (batch…, n, k) with these flags.
OpCase solveCase(Tensor A, Tensor B, bool upper, bool unit = true, bool left = true) {
  OpCase c;
  c.op = "aten.linalg_solve_triangular.default";
  c.args = {in(0), in(1)};
  c.kwargs["upper"] = flag(upper);
  c.kwargs["unitriangular"] = flag(unit);
  if (!left) c.kwargs["left"] = flag(false);
  c.outDtypes = {B.dtype()};
  c.inputs = {std::move(A), std::move(B)};
  c.precision = modelFor(std::nullopt);
  return c;
}

/// A random case: off-diagonal entries uniform in [−s, s] (s from 0.1 to 1: Qwen3-Next's UT
/// systems are of the first kind, 1 tests growth), anything on the diagonal and the other
/// triangle (not read), batch dims of rank 0 to 2.
OpCase randomCase(Format f, bool intervals, std::mt19937_64& rng) {
  const DType t = f == Format::Fp64 ? DType::Float64 : DType::Float32;
  const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 12);
  const std::int64_t k = 1 + static_cast<std::int64_t>(rng() % 4);
  Shape batch;
  for (std::size_t r = rng() % 3; r > 0; --r)
    batch.push_back(1 + static_cast<std::int64_t>(rng() % 3));
  Shape sa = batch, sb = batch;
  sa.insert(sa.end(), {n, n});
  sb.insert(sb.end(), {n, k});
  const double s = rng() % 3 == 0 ? 1.0 : 0.1 + 0.4 * static_cast<double>(rng() % 2);
  return solveCase(uniform(sa, t, intervals, rng, s), uniform(sb, t, intervals, rng, 2.0),
                   rng() % 2 == 0);
}

std::vector<double> values(const Tensor& t) {
  const auto v = t.values();
  return {v.begin(), v.end()};
}

}  // namespace

class TestTriangularSolveOps : public QObject {
  Q_OBJECT

 private slots:
  /// Hand-solved systems: x0 = 3, x1 = 4 − 2·3 (lower), x1 = 4, x0 = 3 − 2·4 (upper); the
  /// diagonal (7) and the other triangle (9) are not read, as in torch.linalg.solve_triangular
  /// with unitriangular=True.
  void knownAnswers() {
    const Tensor lower = Tensor::point({2, 2}, DType::Float32, {7, 9, 2, 7});
    const Tensor upper = Tensor::point({2, 2}, DType::Float32, {7, 2, 9, 7});
    const Tensor b = Tensor::point({2, 1}, DType::Float32, {3, 4});
    QCOMPARE(values(RuleCall(solveCase(lower, b, false)).point()[0]), (std::vector<double>{3, -2}));
    QCOMPARE(values(RuleCall(solveCase(upper, b, true)).point()[0]), (std::vector<double>{-5, 4}));
    const Tensor y = RuleCall(solveCase(lower, b, false)).interval()[0];
    QCOMPARE(y.lo()[0], 3.0);  // one term: exact
    QVERIFY(y.lo()[1] <= -2.0 && y.hi()[1] >= -2.0 && y.hi()[1] - y.lo()[1] < 1e-5);
  }

  /// The binary64 solution solves the system: max |A·X − B| tiny against |A||X| + |B|.
  void pointSolvesTheSystem() {
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 100; ++trial) {
      const OpCase c = randomCase(Format::Fp64, false, rng);
      const Tensor x = RuleCall(c).point()[0];
      const auto a = c.inputs[0].values(), b = c.inputs[1].values(), xv = x.values();
      const Shape& sb = c.inputs[1].shape();
      const std::int64_t n = sb[sb.size() - 2], k = sb.back(), batch = numel(sb) / (n * k);
      const bool upper = c.kwargs.at("upper").boolValue;
      for (std::int64_t q = 0; q < batch; ++q)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t col = 0; col < k; ++col) {
            const auto at = [&](std::int64_t r, std::int64_t cc) {
              return static_cast<std::size_t>((q * n + r) * k + cc);
            };
            double ax = xv[at(i, col)], mag = std::fabs(ax) + std::fabs(b[at(i, col)]);
            for (std::int64_t j = 0; j < n; ++j)
              if (upper ? j > i : j < i) {
                const double aij = a[static_cast<std::size_t>((q * n + i) * n + j)];
                ax += aij * xv[at(j, col)];
                mag += std::fabs(aij * xv[at(j, col)]);
              }
            QVERIFY2(std::fabs(ax - b[at(i, col)]) <= 1e-13 * mag,
                     qPrintable(QStringLiteral("trial %1 row %2").arg(trial).arg(i)));
          }
    }
  }

  void enclosureAndLocalErrorFp64Fp32() {
    for (Format f : {Format::Fp64, Format::Fp32}) {
      const Summary s = runCases(randomCase, f, 600, 4, f == Format::Fp64 ? 11 : 12);
      qInfo(
          "linalg_solve_triangular %s: %d cases %d runs, escapes %d, local violations %d, "
          "width/spread %.3g, max |random-point|/localError %.3g",
          formatName(f), s.cases, s.trials, s.escapes, s.localViolations,
          s.spreadSum > 0 ? s.widthSum / s.spreadSum : 0.0, s.localMaxRatio);
      QVERIFY2(s.escapes == 0, s.firstEscape.c_str());
      QVERIFY2(s.localViolations == 0, s.firstLocal.c_str());
      QVERIFY(s.localMaxRatio > 0.0);  // the executor does round
    }
  }

  void vjpMatchesFiniteDifferences() {
    checkVjpCases("linalg_solve_triangular", randomCase, 60, 1e-5);
  }

  void refusedCasesAreErrors() {
    const Tensor a = Tensor::point({2, 2}, DType::Float32, {1, 0, 2, 1});
    const Tensor b = Tensor::point({2, 1}, DType::Float32, {3, 4});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(solveCase(a, b, false, false)));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(solveCase(a, b, false, true, false)));
    const Tensor ah = Tensor::point({2, 2}, DType::BFloat16, {1, 0, 2, 1});
    const Tensor bh = Tensor::point({2, 1}, DType::BFloat16, {3, 4});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(solveCase(ah, bh, false)));
    const Tensor ab = Tensor::point({3, 2, 2}, DType::Float32, std::vector<double>(12, 0.5));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(solveCase(ab, b, false)));  // broadcasting
    const Tensor wide = Tensor::point({3, 1}, DType::Float32, {1, 2, 3});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(solveCase(a, wide, false)));  // 3 rows, n = 2
    const Tensor b64 = Tensor::point({2, 1}, DType::Float64, {3, 4});
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(solveCase(a, b64, false)));  // two dtypes
    OpCase truncating = solveCase(a, b, false);
    truncating.precision.truncatingAccumulation = true;
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(truncating).interval());
    OpCase tf32 = solveCase(a, b, false);
    tf32.precision.tf32Matmul = true;
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(tf32).interval());
    try {
      RuleCall{solveCase(a, b, false, false)};
    } catch (const OpError& e) {
      QVERIFY(std::string(e.what()).find("unitriangular=True") != std::string::npos);
    }
  }
};

QTEST_GUILESS_MAIN(TestTriangularSolveOps)
#include "test_triangular_solve_ops.moc"
