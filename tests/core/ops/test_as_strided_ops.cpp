// as_strided / as_strided_copy / as_strided_scatter over the input's row-major elements: values
// land where torch puts them for a row-major input (channels_last transposes, overlaps, offsets),
// every domain agrees with the randomized executor in every format (exact copies; overlapping
// writes enclosed by the hull of their candidates), adjoints against finite differences, and a
// view reaching past the input's elements or a malformed geometry is an error naming the node.
#include "core/ops/registry.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <random>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

Tensor iota(const Shape& s, DType t = DType::Float32, double from = 0.0) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<double>(i);
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

/// A random view geometry (rank 0-3, extents 1-3, strides 0-4 so overlaps and gaps both occur)
/// and an input shape holding it with some room to spare.
struct Geometry {
  std::vector<std::int64_t> size, stride;
  std::int64_t offset;
  Shape input;
};

Geometry geometry(std::mt19937_64& rng) {
  Geometry g;
  const int rank = static_cast<int>(rng() % 4);
  std::int64_t last = 0;
  for (int d = 0; d < rank; ++d) {
    g.size.push_back(1 + static_cast<std::int64_t>(rng() % 3));
    g.stride.push_back(static_cast<std::int64_t>(rng() % 5));
    last += (g.size.back() - 1) * g.stride.back();
  }
  g.offset = static_cast<std::int64_t>(rng() % 3);
  const std::int64_t n = g.offset + last + 1 + static_cast<std::int64_t>(rng() % 3);
  g.input = n % 2 == 0 && rng() % 2 ? Shape{2, n / 2} : Shape{n};
  return g;
}

/// as_strided(x, size, stride, offset) (or as_strided_copy) on a random geometry.
OpCase asStrided(const std::string& op, Format f, bool intervals, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  const Geometry g = geometry(rng);
  return one(op, {values(g.input, t, intervals, rng, 8)},
             {in(0), ints(g.size), ints(g.stride), integer(g.offset)}, t);
}

/// as_strided_scatter(base, src, size, stride, offset) on a random geometry.
OpCase asStridedScatter(Format f, bool intervals, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  const Geometry g = geometry(rng);
  return one("aten.as_strided_scatter.default",
             {values(g.input, t, intervals, rng, 8),
              values(Shape(g.size.begin(), g.size.end()), t, intervals, rng, 8)},
             {in(0), in(1), ints(g.size), ints(g.stride), integer(g.offset)}, t);
}

}  // namespace

class TestAsStridedOps : public QObject {
  Q_OBJECT

 private slots:
  void valuesLandWhereTorchPutsThem() {
    // the channels_last mean of mobilenet_v3_small: [2,8,1,1] with strides [8,1,8,8] is the
    // identity on its row-major elements
    QCOMPARE(pointOf(one("aten.as_strided.default", {iota({2, 8, 1, 1})},
                         {in(0), ints({2, 8, 1, 1}), ints({8, 1, 8, 8}), integer(0)})),
             pointOf(one("aten.clone.default", {iota({2, 8, 1, 1})}, {in(0)})));
    // a transpose, an overlapping window, an offset, and the default offset
    QCOMPARE(pointOf(one("aten.as_strided.default", {iota({2, 3})},
                         {in(0), ints({3, 2}), ints({1, 3}), integer(0)})),
             (std::vector<double>{0, 3, 1, 4, 2, 5}));
    QCOMPARE(pointOf(one("aten.as_strided_copy.default", {iota({4})},
                         {in(0), ints({3, 2}), ints({1, 1}), integer(0)})),
             (std::vector<double>{0, 1, 1, 2, 2, 3}));
    QCOMPARE(pointOf(one("aten.as_strided.default", {iota({6})},
                         {in(0), ints({2}), ints({2}), integer(1)})),
             (std::vector<double>{1, 3}));
    QCOMPARE(pointOf(one("aten.as_strided.default", {iota({6})}, {in(0), ints({2}), ints({2})})),
             (std::vector<double>{0, 2}));
    // the write of mobilenet_v3_small's flattened classifier input and a strided write
    QCOMPARE(pointOf(one("aten.as_strided_scatter.default",
                         {Tensor::full({6}, DType::Float32, 0.0), iota({2, 2}, DType::Float32, 1)},
                         {in(0), in(1), ints({2, 2}), ints({3, 1}), integer(1)})),
             (std::vector<double>{0, 1, 2, 0, 3, 4}));
    QCOMPARE(pointOf(one("aten.as_strided_scatter.default",
                         {Tensor::full({8}, DType::Float32, 0.0), iota({2, 4}, DType::Float32, 1)},
                         {in(0), in(1), ints({2, 4}), ints({4, 1}), integer(0)})),
             (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
    // integer tensors move exactly too
    QCOMPARE(pointOf(one("aten.as_strided.default", {iota({2, 3}, DType::Int64)},
                         {in(0), ints({2}), ints({3}), integer(2)}, DType::Int64)),
             (std::vector<double>{2, 5}));
  }

  /// Overlapping writes: any writer may win, so the enclosure is the hull of the candidates and
  /// the local error covers the distance of the point value (the last writer) to it.
  void overlappingWritesTakeTheHull() {
    const OpCase c = one("aten.as_strided_scatter.default",
                         {Tensor::full({3}, DType::Float32, 0.0),
                          Tensor::point({3}, DType::Float32, {5.0, -1.0, 2.0})},
                         {in(0), in(1), ints({3}), ints({0}), integer(1)});
    const RuleCall call(c);
    QCOMPARE(call.point()[0].values()[1], 2.0);
    const Tensor y = call.interval()[0];
    QCOMPARE(y.lo()[1], -1.0);
    QCOMPARE(y.hi()[1], 5.0);
    QCOMPARE(y.lo()[0], 0.0);
    QCOMPARE(y.hi()[2], 0.0);
    QCOMPARE(call.localError()[0].values()[1], 3.0);
    QCOMPARE(call.localError()[0].values()[0], 0.0);
  }

  void everyFormat() {
    for (const char* op : {"aten.as_strided.default", "aten.as_strided_copy.default"}) {
      const CaseMaker make = [op](Format f, bool iv, std::mt19937_64& rng) {
        return asStrided(op, f, iv, rng);
      };
      checkAllFormats(op, make, 300);
      checkVjpCases(op, make);
    }
    checkAllFormats("aten.as_strided_scatter.default", asStridedScatter, 300);
    checkVjpCases("aten.as_strided_scatter.default", asStridedScatter);
  }

  void malformedGeometriesAreErrors() {
    const Tensor x = iota({2, 3});
    const auto fails = [](const OpCase& c, const char* needle) {
      try {
        RuleCall call(c);
      } catch (const OpError& e) {
        const QString m = QString::fromUtf8(e.what());
        QVERIFY2(m.contains(needle) && m.contains("as_strided"), e.what());
        return;
      }
      QFAIL("no OpError");
    };
    // reaches element 6 of 6
    fails(one("aten.as_strided.default", {x}, {in(0), ints({2, 2}), ints({3, 1}), integer(2)}),
          "6 elements");
    fails(one("aten.as_strided.default", {x}, {in(0), ints({2, 2}), ints({1})}), "lengths");
    fails(one("aten.as_strided.default", {x}, {in(0), ints({2}), ints({-1}), integer(2)}),
          "negative stride");
    fails(one("aten.as_strided.default", {x}, {in(0), ints({2}), ints({1}), integer(-1)}),
          "negative storage_offset");
    fails(one("aten.as_strided_scatter.default", {x, iota({3})},
              {in(0), in(1), ints({2}), ints({1}), integer(0)}),
          "src has shape");
    fails(one("aten.as_strided_scatter.default", {x, iota({2}, DType::Float64)},
              {in(0), in(1), ints({2}), ints({1}), integer(0)}),
          "dtype");
    fails(one("aten.as_strided_scatter.default", {x, iota({2})},
              {in(0), in(1), ints({2}), ints({5}), integer(1)}),
          "reaches element");
    // an empty view may sit anywhere
    QCOMPARE(RuleCall(one("aten.as_strided.default", {x},
                          {in(0), ints({0, 4}), ints({1, 9}), integer(0)}))
                 .point()[0]
                 .numel(),
             std::int64_t{0});
  }
};

QTEST_APPLESS_MAIN(TestAsStridedOps)
#include "test_as_strided_ops.moc"
