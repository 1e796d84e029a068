// slice_scatter / select_scatter / slice_backward / select_backward and constant_pad_nd: values
// land where torch 1.13 puts them, every domain agrees with the randomized executor in every
// format (exact copies; a padded value stored in the format), adjoints against finite
// differences, mismatched shapes are errors that name the node.
#include "core/ops/registry.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <random>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

Tensor iota(const Shape& s, DType t = DType::Float32) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::point(s, t, v);
}

OpCase one(const std::string& op, std::vector<Tensor> inputs, std::vector<IrValue> args,
           DType out = DType::Float32) {
  return OpCase{op, std::move(args), {}, {out}, std::move(inputs), modelFor(std::nullopt)};
}

std::vector<double> pointOf(const OpCase& c) {
  const Tensor y = RuleCall(c).point()[0];
  return {y.values().begin(), y.values().end()};
}

Shape shapeOf(int rank, std::mt19937_64& rng) {
  Shape s(static_cast<std::size_t>(rank));
  for (auto& d : s) d = 1 + static_cast<std::int64_t>(rng() % 4);
  return s;
}

/// slice_scatter(x, src, dim, start, end, step) with src of the slice's shape.
OpCase sliceScatter(Format f, bool intervals, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  const int rank = 1 + static_cast<int>(rng() % 3);
  const Shape xs = shapeOf(rank, rng);
  const auto dim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
  const std::int64_t n = xs[static_cast<std::size_t>(dim)];
  const std::int64_t start = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
  const std::int64_t step = 1 + static_cast<std::int64_t>(rng() % 2);
  const std::int64_t end = rng() % 2 ? 9223372036854775807LL : n;
  Shape ss = xs;
  ss[static_cast<std::size_t>(dim)] = (n - start + step - 1) / step;
  return one("aten.slice_scatter.default",
             {values(xs, t, intervals, rng, 8), values(ss, t, intervals, rng, 8)},
             {in(0), in(1), integer(dim), integer(start), integer(end), integer(step)}, t);
}

/// select_scatter(x, src, dim, index).
OpCase selectScatter(Format f, bool intervals, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  const int rank = 1 + static_cast<int>(rng() % 3);
  const Shape xs = shapeOf(rank, rng);
  const auto dim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
  Shape ss = xs;
  ss.erase(ss.begin() + dim);
  const std::int64_t n = xs[static_cast<std::size_t>(dim)];
  const std::int64_t index =
      static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * n)) - n;
  return one("aten.select_scatter.default",
             {values(xs, t, intervals, rng, 8), values(ss, t, intervals, rng, 8)},
             {in(0), in(1), integer(dim), integer(index)}, t);
}

/// constant_pad_nd(x, pad, value): pads (and crops) the last one to three dims.
OpCase pad(Format f, bool intervals, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  const int rank = 1 + static_cast<int>(rng() % 3);
  const Shape xs = shapeOf(rank, rng);
  std::vector<std::int64_t> p;
  const int padded = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(rank));
  for (int k = 0; k < padded; ++k) {
    const std::int64_t n = xs[xs.size() - 1 - static_cast<std::size_t>(k)];
    // a crop at most n − 1 on one side, padding up to 2 on each
    p.push_back(static_cast<std::int64_t>(rng() % 3) - (rng() % 3 == 0 ? (n - 1) : 0));
    p.push_back(static_cast<std::int64_t>(rng() % 3));
  }
  const double vs[] = {0.0, -100.0, 0.1, -3.0e38, 1.0 / 3.0};
  const double v = vs[rng() % 5];
  OpCase c =
      one("aten.constant_pad_nd.default", {values(xs, t, intervals, rng, 8)}, {in(0), ints(p)}, t);
  if (v != 0.0 || rng() % 2) c.args.push_back(num(v));
  return c;
}

}  // namespace

class TestSliceScatterPadOps : public QObject {
  Q_OBJECT

 private slots:
  void valuesLandWhereTorchPutsThem() {
    const Tensor x = iota({3, 4});
    const Tensor m1 = Tensor::full({3, 2}, DType::Float32, -1.0);
    QCOMPARE(pointOf(one("aten.slice_scatter.default", {x, m1},
                         {in(0), in(1), integer(1), integer(1), integer(4), integer(2)})),
             (std::vector<double>{0, -1, 2, -1, 4, -1, 6, -1, 8, -1, 10, -1}));
    QCOMPARE(
        pointOf(one("aten.select_scatter.default", {x, Tensor::full({3}, DType::Float32, -1.0)},
                    {in(0), in(1), integer(1), integer(-1)})),
        (std::vector<double>{0, 1, 2, -1, 4, 5, 6, -1, 8, 9, 10, -1}));
    const OpCase p =
        one("aten.constant_pad_nd.default", {x}, {in(0), ints({1, -1, 0, 1}), num(-1)});
    QCOMPARE(RuleCall(p).point()[0].shape(), (Shape{4, 4}));
    QCOMPARE(pointOf(p),
             (std::vector<double>{-1, 0, 1, 2, -1, 4, 5, 6, -1, 8, 9, 10, -1, -1, -1, -1}));
    // the labels shift of Hugging Face causal LMs: int64, padded with -100
    const OpCase labels = one("aten.constant_pad_nd.default", {iota({2, 2}, DType::Int64)},
                              {in(0), ints({0, 1}), num(-100.0)}, DType::Int64);
    QCOMPARE(pointOf(labels), (std::vector<double>{0, 1, -100, 2, 3, -100}));
    const Tensor li = RuleCall(labels).interval()[0];
    QCOMPARE(li.lo()[2], -100.0);
    QCOMPARE(li.hi()[2], -100.0);
  }

  void scattersEveryFormat() {
    checkAllFormats("aten.slice_scatter.default", sliceScatter, 400);
    checkVjpCases("aten.slice_scatter.default", sliceScatter);
    checkAllFormats("aten.select_scatter.default", selectScatter, 400);
    checkVjpCases("aten.select_scatter.default", selectScatter);
  }

  void padEveryFormat() {
    checkAllFormats("aten.constant_pad_nd.default", pad, 400);
    checkVjpCases("aten.constant_pad_nd.default", pad);
  }

  /// A pad value that is not representable is enclosed as stored, with its rounding as the local
  /// error.
  void padValueIsStoredInTheFormat() {
    const OpCase c = one("aten.constant_pad_nd.default", {iota({2}, DType::BFloat16)},
                         {in(0), ints({1, 0}), num(0.1)}, DType::BFloat16);
    const RuleCall call(c);
    const Tensor y = call.interval()[0];
    QVERIFY(y.lo()[0] < 0.1 && 0.1 < y.hi()[0] && y.hi()[0] - y.lo()[0] < 1e-3);
    const double le = call.localError()[0].values()[0];
    QVERIFY(le >= std::fabs(0.10009765625 - 0.1) && le < 1e-3);  // RN_bf16(0.1) = 0.10009765625
    QCOMPARE(call.localError()[0].values()[1], 0.0);
  }

  void mismatchesAreErrors() {
    const Tensor x = iota({3, 4});
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(one("aten.slice_scatter.default", {x, iota({3, 3})},
                                          {in(0), in(1), integer(1), integer(0), integer(2)})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(one("aten.slice_scatter.default", {x, iota({3, 2}, DType::Float64)},
                              {in(0), in(1), integer(1), integer(0), integer(2)})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(one("aten.constant_pad_nd.default", {x}, {in(0), ints({1, 2, 3})})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(one("aten.constant_pad_nd.default", {x}, {in(0), ints({-3, -2})})));
  }
};

QTEST_APPLESS_MAIN(TestSliceScatterPadOps)
#include "test_slice_scatter_pad_ops.moc"
