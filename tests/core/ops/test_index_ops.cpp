// Gather/scatter and advanced-indexing rules: values land where torch puts them (expected values
// printed by torch 1.13 for the same small cases), every domain agrees with the randomized
// executor in fp64/fp32/bf16/fp16 (zero escapes, local errors bound the observed rounding,
// including duplicate targets of overwriting and accumulating scatters), adjoints against finite
// differences, and indices that depend on rounded values are refused with the node named.
#include "core/ops/registry.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <limits>
#include <memory>
#include <random>
#include <tuple>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

Tensor iota(const Shape& s, DType t = DType::Float32) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::point(s, t, v);
}

Tensor longs(const Shape& s, std::vector<double> v) { return Tensor::point(s, DType::Int64, v); }
Tensor bools(const Shape& s, std::vector<double> v) { return Tensor::point(s, DType::Bool, v); }

OpCase one(const std::string& op, std::vector<Tensor> inputs, std::vector<IrValue> args,
           DType out = DType::Float32) {
  return OpCase{op, std::move(args), {}, {out}, std::move(inputs), modelFor(std::nullopt)};
}

std::vector<double> vals(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

std::vector<double> pointOf(const OpCase& c) { return vals(RuleCall(c).point()[0]); }

/// Random integers in [0, high) as an int64 point tensor of shape s.
Tensor randomIndex(const Shape& s, std::int64_t high, std::mt19937_64& rng) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& e : v) e = static_cast<double>(rng() % static_cast<std::uint64_t>(high));
  return longs(s, v);
}

Shape shapeOf(int rank, std::mt19937_64& rng, int maxExtent = 4) {
  Shape s(static_cast<std::size_t>(rank));
  for (auto& d : s)
    d = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(maxExtent));
  return s;
}

/// gather / scatter / scatter_add cases: x of rank 1-3, index no larger than x outside dim.
CaseMaker alongDim(const std::string& op) {
  return [op](Format f, bool intervals, std::mt19937_64& rng) {
    const DType t = dtypeFor(f);
    const int rank = 1 + static_cast<int>(rng() % 3);
    const Shape xs = shapeOf(rank, rng);
    const auto dim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
    Shape is = xs;
    for (std::size_t d = 0; d < is.size(); ++d)
      is[d] = static_cast<std::int64_t>(d) == dim
                  ? 1 + static_cast<std::int64_t>(rng() % 6)  // duplicates along dim
                  : 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(xs[d]));
    const Tensor x = values(xs, t, intervals, rng, 8);
    const Tensor index = randomIndex(is, xs[static_cast<std::size_t>(dim)], rng);
    if (op == "aten.gather.default") return one(op, {x, index}, {in(0), integer(dim), in(1)}, t);
    if (op == "aten.scatter.value")
      return one(op, {x, index}, {in(0), integer(dim), in(1), num(rng() % 2 ? 0.1 : -2.5)}, t);
    Shape ss = is;
    for (auto& d : ss) d += static_cast<std::int64_t>(rng() % 2);
    return one(op, {x, index, values(ss, t, intervals, rng, 8)},
               {in(0), integer(dim), in(1), in(2)}, t);
  };
}

/// index_select / index_add cases: a 1-d index with duplicates along dim.
CaseMaker indexAlong(const std::string& op) {
  return [op](Format f, bool intervals, std::mt19937_64& rng) {
    const DType t = dtypeFor(f);
    const int rank = 1 + static_cast<int>(rng() % 3);
    const Shape xs = shapeOf(rank, rng);
    const auto dim = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
    const auto n = 1 + static_cast<std::int64_t>(rng() % 6);
    const Tensor index = randomIndex({n}, xs[static_cast<std::size_t>(dim)], rng);
    const Tensor x = values(xs, t, intervals, rng, 8);
    if (op == "aten.index_select.default")
      return one(op, {x, index}, {in(0), integer(dim), in(1)}, t);
    Shape ss = xs;
    ss[static_cast<std::size_t>(dim)] = n;
    OpCase c = one(op, {x, index, values(ss, t, intervals, rng, 8)},
                   {in(0), integer(dim), in(1), in(2)}, t);
    if (rng() % 2) c.kwargs["alpha"] = num(rng() % 2 ? 0.3 : -2.0);
    return c;
  };
}

/// index.Tensor / index_put cases on x of rank 3: each dim indexed by None, a long tensor
/// (broadcastable shapes, negative values) or, for the first dims, a bool mask.
CaseMaker advanced(const std::string& op) {
  return [op](Format f, bool intervals, std::mt19937_64& rng) {
    const DType t = dtypeFor(f);
    const Shape xs = shapeOf(3, rng);
    std::vector<Tensor> inputs{values(xs, t, intervals, rng, 8)};
    std::vector<IrValue> list;
    const bool mask = rng() % 4 == 0;
    std::size_t d = 0;
    if (mask) {  // a bool mask over the first two dims
      const Shape ms{xs[0], xs[1]};
      inputs.push_back(randomPoint(ms, DType::Bool, rng));
      list.push_back(in(static_cast<int>(inputs.size() - 1)));
      d = 2;
    }
    // long indices broadcast to b; next to a mask (nonzero count unknown here) they are 1-element
    const Shape b = mask ? Shape{1} : shapeOf(static_cast<int>(1 + rng() % 2), rng, 3);
    for (; d < xs.size(); ++d) {
      if (rng() % 3 == 0 && !(d + 1 == xs.size() && list.size() == d && inputs.size() == 1)) {
        list.push_back(none());
        continue;
      }
      Shape s = broadcastableTo(b, rng);
      std::vector<double> v(static_cast<std::size_t>(numel(s)));
      for (double& e : v)
        e = static_cast<double>(
            static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * xs[d])) -
            xs[d]);  // in [-n, n)
      inputs.push_back(longs(s, v));
      list.push_back(in(static_cast<int>(inputs.size() - 1)));
    }
    if (rng() % 2 && !list.empty() && list.back().kind == IrValue::Kind::None)
      list.pop_back();  // trailing dims left out
    OpCase c = one(op, inputs, {in(0), lossbound::test::list(list)}, t);
    if (op == "aten.index.Tensor") return c;
    // values broadcastable to x[indices]: a 0-d value or the full indexed shape
    const Shape r = RuleCall(one("aten.index.Tensor", inputs, c.args, t)).point()[0].shape();
    const Shape vs = rng() % 3 == 0 ? Shape{} : broadcastableTo(r, rng);
    c.inputs.push_back(values(vs, t, intervals, rng, 8));
    c.args.push_back(in(static_cast<int>(c.inputs.size() - 1)));
    c.args.push_back(flag(rng() % 2 == 0));
    return c;
  };
}

/// masked_select / masked_scatter cases: a bool mask broadcastable to x.
CaseMaker masked(const std::string& op) {
  return [op](Format f, bool intervals, std::mt19937_64& rng) {
    const DType t = dtypeFor(f);
    const Shape xs = shapeOf(1 + static_cast<int>(rng() % 3), rng);
    const Tensor mask = randomPoint(broadcastableTo(xs, rng), DType::Bool, rng);
    const Tensor x = values(xs, t, intervals, rng, 8);
    if (op == "aten.masked_select.default") return one(op, {x, mask}, {in(0), in(1)}, t);
    const Tensor src =
        values({numel(xs) + static_cast<std::int64_t>(rng() % 3)}, t, intervals, rng, 8);
    return one(op, {x, mask, src}, {in(0), in(1), in(2)}, t);
  };
}

/// Many additions into one target (scatter_add along a length-1 dim): the order-free sum bound.
CaseMaker manyIntoOne(const std::string& op) {
  return [op](Format f, bool intervals, std::mt19937_64& rng) {
    const DType t = dtypeFor(f);
    const std::int64_t n = 8 + static_cast<std::int64_t>(rng() % 60);
    const Tensor x = values({2}, t, intervals, rng, 4);
    const Tensor index = randomIndex({n}, 2, rng);
    const Tensor src = values({n}, t, intervals, rng, 4);
    if (op == "aten.index_put.default")
      return one(op, {x, index, src}, {in(0), lossbound::test::list({in(1)}), in(2), flag(true)},
                 t);
    return one(op, {x, index, src}, {in(0), integer(0), in(1), in(2)}, t);
  };
}

}  // namespace

class TestIndexOps : public QObject {
  Q_OBJECT

 private slots:
  void valuesLandWhereTorchPutsThem() {
    const Tensor x = iota({3, 4});
    QCOMPARE(pointOf(one("aten.gather.default", {x, longs({3, 2}, {3, 0, 1, 1, 2, 0})},
                         {in(0), integer(1), in(1)})),
             (std::vector<double>{3, 0, 5, 5, 10, 8}));
    QCOMPARE(pointOf(one("aten.index_select.default", {x, longs({3}, {2, 0, 2})},
                         {in(0), integer(0), in(1)})),
             (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
    QCOMPARE(pointOf(one("aten.scatter.src",
                         {Tensor::full({3, 4}, DType::Float32, 0.0), longs({2, 2}, {1, 3, 0, 0}),
                          Tensor::point({2, 2}, DType::Float32, {5, 6, 7, 8})},
                         {in(0), integer(1), in(1), in(2)})),
             (std::vector<double>{0, 5, 0, 6, 8, 0, 0, 0, 0, 0, 0, 0}));
    QCOMPARE(pointOf(one("aten.scatter_add.default",
                         {Tensor::full({3, 4}, DType::Float32, 1.0), longs({1, 4}, {2, 1, 2, 0}),
                          Tensor::point({1, 4}, DType::Float32, {5, 6, 7, 8})},
                         {in(0), integer(0), in(1), in(2)})),
             (std::vector<double>{1, 1, 1, 9, 1, 7, 1, 1, 6, 1, 8, 1}));
    OpCase ia = one("aten.index_add.default",
                    {Tensor::full({3, 2}, DType::Float32, 1.0), longs({3}, {2, 0, 2}),
                     Tensor::point({3, 2}, DType::Float32, {1, 2, 3, 4, 5, 6})},
                    {in(0), integer(0), in(1), in(2)});
    ia.kwargs["alpha"] = integer(2);
    QCOMPARE(pointOf(ia), (std::vector<double>{7, 9, 1, 1, 13, 17}));
    const Tensor y = iota({2, 3, 4});
    const OpCase i1 = one("aten.index.Tensor", {y, longs({2}, {2, 0}), longs({2, 1}, {1, 3})},
                          {in(0), lossbound::test::list({none(), in(1), in(2)})});
    QCOMPARE(RuleCall(i1).point()[0].shape(), (Shape{2, 2, 2}));
    QCOMPARE(pointOf(i1), (std::vector<double>{9, 1, 11, 3, 21, 13, 23, 15}));
    const OpCase i2 = one("aten.index.Tensor", {y, longs({2}, {1, 0}), longs({2}, {3, -1})},
                          {in(0), lossbound::test::list({in(1), none(), in(2)})});
    QCOMPARE(RuleCall(i2).point()[0].shape(), (Shape{2, 3}));
    QCOMPARE(pointOf(i2), (std::vector<double>{15, 19, 23, 3, 7, 11}));
    const OpCase i3 = one("aten.index.Tensor", {y, bools({2, 3}, {1, 0, 1, 0, 0, 1})},
                          {in(0), lossbound::test::list({in(1)})});
    QCOMPARE(RuleCall(i3).point()[0].shape(), (Shape{3, 4}));
    QCOMPARE(pointOf(i3), (std::vector<double>{0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23}));
    QCOMPARE(pointOf(one("aten.index_put.default",
                         {Tensor::full({3, 4}, DType::Float32, 0.0), longs({3}, {0, 2, 0}),
                          longs({3}, {1, 3, 1}), Tensor::point({3}, DType::Float32, {1, 2, 3})},
                         {in(0), lossbound::test::list({in(1), in(2)}), in(3), flag(true)})),
             (std::vector<double>{0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}));
    QCOMPARE(pointOf(one("aten.index_put.default",
                         {Tensor::full({3, 4}, DType::Float32, 0.0), bools({3}, {1, 0, 1}),
                          Tensor::scalar(9.0, DType::Float32)},
                         {in(0), lossbound::test::list({in(1)}), in(2)})),
             (std::vector<double>{9, 9, 9, 9, 0, 0, 0, 0, 9, 9, 9, 9}));
    QCOMPARE(
        pointOf(one("aten.masked_select.default", {x, bools({4}, {1, 0, 0, 1})}, {in(0), in(1)})),
        (std::vector<double>{0, 3, 4, 7, 8, 11}));
    QCOMPARE(
        pointOf(one("aten.masked_scatter.default",
                    {Tensor::full({2, 3}, DType::Float32, 0.0), bools({2, 3}, {1, 0, 1, 0, 1, 0}),
                     Tensor::point({4}, DType::Float32, {1, 2, 3, 4})},
                    {in(0), in(1), in(2)})),
        (std::vector<double>{1, 0, 2, 0, 3, 0}));
  }

  void gatherAndIndexSelect() {
    for (const char* op : {"aten.gather.default"}) {
      checkAllFormats(op, alongDim(op), 400);
      checkVjpCases(op, alongDim(op));
    }
    checkAllFormats("aten.index_select.default", indexAlong("aten.index_select.default"), 400);
    checkVjpCases("aten.index_select.default", indexAlong("aten.index_select.default"));
  }

  void scatters() {
    for (const char* op : {"aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default"}) {
      checkAllFormats(op, alongDim(op), 400);
      checkVjpCases(op, alongDim(op));
    }
    checkAllFormats("aten.index_add.default", indexAlong("aten.index_add.default"), 400);
    checkVjpCases("aten.index_add.default", indexAlong("aten.index_add.default"));
  }

  void accumulationIntoOneTarget() {
    for (const char* op : {"aten.scatter_add.default", "aten.index_put.default"})
      checkAllFormats(std::string(op) + " (8-67 terms per target)", manyIntoOne(op), 300, 8);
  }

  void advancedIndexing() {
    for (const char* op : {"aten.index.Tensor", "aten.index_put.default"}) {
      checkAllFormats(op, advanced(op), 400);
      checkVjpCases(op, advanced(op));
    }
    for (const char* op : {"aten.masked_select.default", "aten.masked_scatter.default"}) {
      checkAllFormats(op, masked(op), 400);
      checkVjpCases(op, masked(op));
    }
  }

  /// Overwriting duplicates: the enclosure holds every candidate and the local error covers the
  /// distance between them.
  void duplicateOverwritesHoldEveryCandidate() {
    const OpCase c = one("aten.index_put.default",
                         {Tensor::full({2}, DType::Float32, 0.0), longs({3}, {1, 1, 1}),
                          Tensor::point({3}, DType::Float32, {1, 5, 3})},
                         {in(0), lossbound::test::list({in(1)}), in(2), flag(false)});
    const RuleCall call(c);
    const Tensor y = call.interval()[0];
    QCOMPARE(y.lo()[1], 1.0);
    QCOMPARE(y.hi()[1], 5.0);
    QCOMPARE(call.point()[0].values()[1], 3.0);  // the last write
    QVERIFY(call.localError()[0].values()[1] >= 2.0);
    std::mt19937_64 rng(3);
    QCOMPARE(checkEnclosure(c, 200, rng).escapes, 0);
    QCOMPARE(checkLocalError(c, 200, rng).violations, 0);
  }

  /// Integer tensors (labels) are written and summed exactly.
  void integerTargetsAreExact() {
    const OpCase c = one(
        "aten.index_put.default",
        {longs({4}, {3, 4, 5, 6}), bools({4}, {0, 1, 0, 1}), Tensor::scalar(-100.0, DType::Int64)},
        {in(0), lossbound::test::list({in(1)}), in(2)}, DType::Int64);
    QCOMPARE(pointOf(c), (std::vector<double>{3, -100, 5, -100}));
    const Tensor y = RuleCall(c).interval()[0];
    QCOMPARE(vals(y), (std::vector<double>{3, -100, 5, -100}));
    QCOMPARE(std::vector<double>(y.hi().begin(), y.hi().end()), vals(y));
  }

  /// x[mask] = v with one value is where(mask, v, x): exact where the mask is known, and the
  /// hull of v and x where a mask entry depends on rounded values (either write may happen),
  /// for a mask over every dim and over the leading dim only.
  void maskWriteOfOneValueIsASelection() {
    const Tensor x = Tensor::interval({3, 2}, DType::Float32, {0, 1, 2, 3, 4, 5},
                                      {0.5, 1.5, 2.5, 3.5, 4.5, 5.5});
    const Tensor v = Tensor::interval({}, DType::Float32, {-2.0}, {-1.0});
    const Tensor rows = Tensor::interval({3}, DType::Bool, {0, 1, 0}, {0, 1, 1});
    const Tensor full =
        Tensor::interval({3, 2}, DType::Bool, {0, 1, 0, 0, 1, 0}, {0, 1, 1, 0, 1, 0});
    const std::vector<double> rowsLo{0, 1, -2, -2, -2, -2}, rowsHi{0.5, 1.5, -1, -1, 4.5, 5.5};
    const std::vector<double> fullLo{0, -2, -2, 3, -2, 5}, fullHi{0.5, -1, 2.5, 3.5, -1, 5.5};
    const OpRule* rule = opRegistry().find("aten.index_put.default");
    const auto backend = createCpuBackend();
    const PrecisionModel precision;
    OpContext ctx{precision, *backend, nullptr};
    // The rule is called directly: RuleCall takes its shapes from point(), which (as the
    // randomized executor) needs an exact mask.
    auto interval = [&](const Tensor& mask, bool accumulate) {
      Node node;
      node.name = "case";
      node.op = "aten.index_put.default";
      node.args = {in(0), lossbound::test::list({in(1)}), in(2), flag(accumulate)};
      node.outputs = {TensorSpec{{3, 2}, DType::Float32}};
      const std::vector<Tensor> inputs{x, mask, v};
      const OpArgs args(node, [&](const ValueRef& r) -> const Tensor& {
        return inputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
      });
      return rule->interval(args, ctx)[0];
    };
    for (const auto& [mask, lo, hi] :
         {std::tuple{rows, rowsLo, rowsHi}, std::tuple{full, fullLo, fullHi}}) {
      const Tensor y = interval(mask, false);
      QCOMPARE(vals(y), lo);
      QCOMPARE(std::vector<double>(y.hi().begin(), y.hi().end()), hi);
    }
    // Accumulating writes stay refused for such a mask: the count of terms is unknown.
    QVERIFY_THROWS_EXCEPTION(OpError, interval(rows, true));

    // Exact masks: the selection gives what the scatter gives (the point rule's values), for
    // uint8 masks (2 is true), int64 and float x of rank 3 under masks over 1 and 2 dims, and
    // values of shapes [], [1] and [1, 1]; a value of a rank the indexed shape cannot take, and
    // a 0-d mask, stay errors as the point rule's.
    const Tensor x3 = iota({2, 3, 2});
    const Tensor l3 = iota({2, 3, 2}, DType::Int64);
    const Tensor m1 = Tensor::point({2}, DType::UInt8, {0, 2});
    const Tensor m2 = bools({2, 3}, {1, 0, 0, 1, 1, 0});
    for (const Tensor& base : {x3, l3})
      for (const Tensor& mask : {m1, m2})
        for (const Shape& vs : {Shape{}, Shape{1}, Shape{1, 1}}) {
          const Tensor value = Tensor::full(vs, base.dtype(), -7.0);
          const OpCase c = one("aten.index_put.default", {base, mask, value},
                               {in(0), lossbound::test::list({in(1)}), in(2)}, base.dtype());
          const RuleCall call(c);
          const Tensor y = call.interval()[0];
          const std::string where = std::string(dtypeName(base.dtype())) + " mask rank " +
                                    std::to_string(mask.rank()) + " value rank " +
                                    std::to_string(vs.size());
          QVERIFY2(y.shape() == base.shape(), where.c_str());
          QVERIFY2(vals(y) == vals(call.point()[0]), where.c_str());
          QVERIFY2(std::vector<double>(y.hi().begin(), y.hi().end()) == vals(y), where.c_str());
        }
    const Tensor v3 = Tensor::full({1, 1, 1}, DType::Float32, -7.0);
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(one("aten.index_put.default", {x3, m2, v3},
                                                   {in(0), lossbound::test::list({in(1)}), in(2)}))
                                          .interval());
    QVERIFY_THROWS_EXCEPTION(
        OpError,
        RuleCall(one("aten.index_put.default",
                     {x3, Tensor::scalar(1.0, DType::Bool), Tensor::scalar(-7.0, DType::Float32)},
                     {in(0), lossbound::test::list({in(1)}), in(2)}))
            .interval());
  }

  /// nonzero (the experts a mixture-of-experts layer runs): torch.nonzero's coordinates, NaN
  /// counting as nonzero, 0-d inputs, certain intervals; an element that may be zero or not, and
  /// a count other than the trace's, are errors that say so.
  void nonzeroCoordinates() {
    const char* op = "aten.nonzero.default";
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor x = Tensor::point({2, 3}, DType::Float32, {0, 1.5, 0, nan, 0, -2});
    const RuleCall call(one(op, {x}, {in(0)}, DType::Int64));
    QCOMPARE(call.point()[0].shape(), (Shape{3, 2}));
    QCOMPARE(vals(call.point()[0]), (std::vector<double>{0, 1, 1, 0, 1, 2}));
    QCOMPARE(vals(call.interval()[0]), vals(call.point()[0]));
    const auto g = call.vjp({Tensor::full({3, 2}, DType::Float32, 1.0)})[0];
    QVERIFY(g);  // a float input: a zero gradient
    for (double v : g->values()) QCOMPARE(v, 0.0);
    const Tensor err = call.localError()[0];
    for (double v : err.values()) QCOMPARE(v, 0.0);
    QCOMPARE(RuleCall(one(op, {Tensor::scalar(3.0, DType::Float32)}, {in(0)}, DType::Int64))
                 .point()[0]
                 .shape(),
             (Shape{1, 0}));
    QCOMPARE(RuleCall(one(op, {Tensor::scalar(0.0, DType::Int64)}, {in(0)}, DType::Int64))
                 .point()[0]
                 .shape(),
             (Shape{0, 0}));
    const Tensor certain = Tensor::interval({3}, DType::Float32, {0, 0.5, -2}, {0, 1, -1});
    QCOMPARE(vals(RuleCall(one(op, {certain}, {in(0)}, DType::Int64)).interval()[0]),
             (std::vector<double>{1, 2}));
    std::mt19937_64 rng(5);
    for (int t = 0; t < 50; ++t) {
      const Tensor b = randomPoint(shapeOf(1 + static_cast<int>(rng() % 3), rng), DType::Bool, rng);
      const EnclosureReport r = checkEnclosure(one(op, {b}, {in(0)}, DType::Int64), 3, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
    }
    const Tensor maybe = Tensor::interval({3}, DType::Float32, {0, -1, 1}, {0, 1, 1});
    const auto message = [&](const Tensor& in0, Shape traced) {
      Node node;
      node.name = "case";
      node.op = op;
      node.args = {in(0)};
      node.outputs = {TensorSpec{std::move(traced), DType::Int64}};
      const OpArgs args(node, [&](const ValueRef&) -> const Tensor& { return in0; });
      const std::unique_ptr<Backend> backend = createCpuBackend();
      const PrecisionModel pm = modelFor(std::nullopt);
      OpContext ctx{pm, *backend};
      try {
        opRegistry().find(op)->interval(args, ctx);
      } catch (const OpError& e) {
        return QString(e.what());
      }
      return QString();
    };
    QVERIFY(message(maybe, {1, 1}).contains("element 1 of [3] is [-1.000000, 1.000000]"));
    QVERIFY(message(maybe, {1, 1}).contains("node 'case'"));
    QVERIFY(message(certain, {3, 1})
                .contains("finds 2 nonzero elements here, 3 when the program "
                          "was traced"));
    QVERIFY(message(certain, {2, 1}).isEmpty());
  }

  void uncertainIndicesAreRefused() {
    std::mt19937_64 rng(1);
    const Tensor x = iota({3, 4});
    const Tensor uncertain = Tensor::interval({2}, DType::Int64, {0, 1}, {0, 2});
    for (const OpCase& c :
         {one("aten.index_select.default", {x, uncertain}, {in(0), integer(0), in(1)}),
          one("aten.index.Tensor", {x, uncertain}, {in(0), lossbound::test::list({in(1)})}),
          one("aten.masked_select.default",
              {x, Tensor::interval({4}, DType::Bool, {0, 0, 1, 1}, {1, 0, 1, 1})},
              {in(0), in(1)})}) {
      bool threw = false;
      try {
        RuleCall(c).interval();
      } catch (const OpError& e) {
        threw = QString(e.what()).contains("not exactly known") &&
                QString(e.what()).contains("node 'case'");
      }
      QVERIFY2(threw, c.op.c_str());
    }
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(one("aten.gather.default", {x, longs({3, 1}, {0, 4, 1})},
                                          {in(0), integer(1), in(1)})));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(one("aten.index.Tensor", {x, longs({1}, {-4})},
                                                   {in(0), lossbound::test::list({in(1)})})));
  }
};

QTEST_APPLESS_MAIN(TestIndexOps)
#include "test_index_ops.moc"
