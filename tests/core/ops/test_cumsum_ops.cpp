// cumsum: prefix sums under the order-free sum bound — zero escapes of the randomized executor
// (sequential scans in the accumulation format or in binary64, and every prefix summed in a
// random order and bracketing) in fp64/fp32/bf16/fp16, long rows of terms of mixed signs and
// magnitudes, local errors against observed rounding, the reversed-cumsum adjoint, the dtype
// argument and integer prefix sums.
#include "core/ops/registry.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <random>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

OpCase cumsumCase(Format f, bool intervals, std::mt19937_64& rng, std::int64_t maxLen) {
  const DType t = dtypeFor(f);
  const int rank = static_cast<int>(rng() % 4);
  Shape s(static_cast<std::size_t>(rank));
  for (auto& d : s) d = 1 + static_cast<std::int64_t>(rng() % 4);
  const auto dim =
      rank == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
  if (rank > 0)
    s[static_cast<std::size_t>(dim)] =
        1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(maxLen));
  OpCase c{"aten.cumsum.default",
           {in(0), integer(rng() % 2 ? dim : dim - std::max(rank, 1))},
           {},
           {t},
           {values(s, t, intervals, rng, f == Format::Fp16 ? 4 : 8)},
           modelFor(std::nullopt)};
  return c;
}

}  // namespace

class TestCumsumOps : public QObject {
  Q_OBJECT

 private slots:
  void valuesOfTorch() {
    // torch 1.13: cumsum(arange(12.).view(3, 4), 1)
    std::vector<double> v(12);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    const OpCase c{"aten.cumsum.default",
                   {in(0), integer(1)},
                   {},
                   {DType::Float32},
                   {Tensor::point({3, 4}, DType::Float32, v)},
                   modelFor(std::nullopt)};
    const Tensor y = RuleCall(c).point()[0];
    QCOMPARE(std::vector<double>(y.values().begin(), y.values().end()),
             (std::vector<double>{0, 1, 3, 6, 4, 9, 15, 22, 8, 17, 27, 38}));
  }

  void enclosesEveryOrder() {
    checkAllFormats(
        "aten.cumsum.default (rows up to 6)",
        [](Format f, bool iv, std::mt19937_64& rng) { return cumsumCase(f, iv, rng, 6); });
    checkAllFormats(
        "aten.cumsum.default (rows up to 200)",
        [](Format f, bool iv, std::mt19937_64& rng) { return cumsumCase(f, iv, rng, 200); }, 150,
        6);
    checkVjpCases("aten.cumsum.default", [](Format f, bool iv, std::mt19937_64& rng) {
      return cumsumCase(f, iv, rng, 6);
    });
  }

  /// cumsum(x, dim, dtype=float32) of bf16 x, and of int64 x (positions from a mask).
  void dtypeArgumentAndIntegers() {
    std::mt19937_64 rng(9);
    OpCase c{"aten.cumsum.default",
             {in(0), integer(0)},
             {{"dtype", dtypeValue(DType::Float32)}},
             {DType::Float32},
             {values({50}, DType::BFloat16, false, rng, 6)},
             modelFor(std::nullopt)};
    QCOMPARE(checkEnclosure(c, 200, rng).escapes, 0);
    QCOMPARE(checkLocalError(c, 50, rng).violations, 0);
    OpCase narrowing = c;
    narrowing.kwargs["dtype"] = dtypeValue(DType::BFloat16);
    narrowing.outDtypes = {DType::BFloat16};
    narrowing.inputs = {values({50}, DType::Float32, false, rng, 6)};
    QCOMPARE(checkEnclosure(narrowing, 200, rng).escapes, 0);
    const OpCase ints{"aten.cumsum.default",
                      {in(0), integer(-1)},
                      {},
                      {DType::Int64},
                      {Tensor::point({2, 4}, DType::Bool, {1, 1, 0, 1, 0, 0, 1, 1})},
                      modelFor(std::nullopt)};
    const RuleCall call(ints);
    const Tensor y = call.interval()[0];
    QCOMPARE(std::vector<double>(y.lo().begin(), y.lo().end()),
             (std::vector<double>{1, 2, 2, 3, 0, 0, 1, 2}));
    QCOMPARE(std::vector<double>(y.hi().begin(), y.hi().end()),
             (std::vector<double>{1, 2, 2, 3, 0, 0, 1, 2}));
  }
};

QTEST_APPLESS_MAIN(TestCumsumOps)
#include "test_cumsum_ops.moc"
