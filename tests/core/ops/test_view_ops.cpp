// View and copy rules: values land where torch puts them (checked by hand on small cases), every
// domain agrees (zero escapes), adjoints against finite differences over random shapes with
// size-0 and size-1 dims, and casts (_to_copy, copy_) round correctly per format.
#include "core/backend.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"

#include <QtTest>

#include <random>
#include <tuple>

using namespace lossbound;
using namespace lossbound::test;

namespace {

Tensor iota(const Shape& s, DType t = DType::Float32) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::point(s, t, v);
}

std::vector<Tensor> runPoint(const OpCase& c) {
  static auto backend = createCpuBackend();
  Node n;
  n.name = "n";
  n.op = c.op;
  n.args = c.args;
  n.kwargs = c.kwargs;
  for (DType t : c.outDtypes) n.outputs.push_back({{}, t});
  OpArgs a(n, [&](const ValueRef& r) -> const Tensor& {
    return c.inputs.at(std::stoul(r.name.substr(2)));
  });
  OpContext ctx{c.precision, *backend, nullptr};
  return opRegistry().find(c.op)->point(a, ctx);
}

OpCase one(const std::string& op, std::vector<Tensor> inputs, std::vector<IrValue> args,
           std::vector<DType> out = {DType::Float32}) {
  OpCase c;
  c.op = op;
  c.inputs = std::move(inputs);
  c.args = std::move(args);
  c.outDtypes = std::move(out);
  return c;
}

std::vector<double> vals(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

/// Random cases covering every view op (shapes with size-0 and size-1 dims).
OpCase randomCase(int which, std::mt19937_64& rng, bool iv) {
  const int rank = 1 + static_cast<int>(rng() % 3);
  Shape s = randomShape(rank, rng, 4, 0.08);
  const DType t = DType::Float32;
  Tensor x = iv ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
  auto dim = [&] { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank)); };
  switch (which) {
    case 0: {
      std::vector<std::int64_t> size{numel(s)};
      if (rng() % 2) size = {-1};
      return one("aten.view.default", {x}, {in(0), ints(size)});
    }
    case 1: {
      Shape target = s;
      for (auto& d : target)
        if (d == 1 && rng() % 2) d = 3;
      target.insert(target.begin(), 2);
      std::vector<std::int64_t> size(target.begin(), target.end());
      if (rng() % 2) size[1] = -1;
      return one("aten.expand.default", {x}, {in(0), ints(size)});
    }
    case 2:
      return one("aten.transpose.int", {x}, {in(0), integer(dim()), integer(-1)});
    case 3: {
      std::vector<std::int64_t> p(static_cast<std::size_t>(rank));
      std::iota(p.begin(), p.end(), 0);
      std::shuffle(p.begin(), p.end(), rng);
      return one("aten.permute.default", {x}, {in(0), ints(p)});
    }
    case 4: {
      const std::int64_t d = dim();
      const std::int64_t starts[] = {0, 1, -2};
      const std::int64_t ends[] = {9223372036854775807LL, 2, -1};
      return one("aten.slice.Tensor", {x},
                 {in(0), integer(d), integer(starts[rng() % 3]), integer(ends[rng() % 3]),
                  integer(1 + static_cast<std::int64_t>(rng() % 2))});
    }
    case 5: {
      s = randomShape(rank, rng, 4, 0.0);
      x = iv ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
      const std::int64_t d = dim();
      return one("aten.select.int", {x}, {in(0), integer(d), integer(-1)});
    }
    case 6:
      return one("aten.unsqueeze.default", {x}, {in(0), integer(-1 - dim())});
    case 7:
      return one("aten.squeeze.default", {x}, {in(0)});
    case 8: {
      Tensor y = iv ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
      return one("aten.cat.default", {x, y}, {list({in(0), in(1)}), integer(dim())});
    }
    case 9: {
      OpCase c = one("aten.split.Tensor", {x},
                     {in(0), integer(1 + static_cast<std::int64_t>(rng() % 2)), integer(0)});
      const std::int64_t e = s[0];
      const std::int64_t n = e == 0 ? 1 : (e + c.args[1].intValue - 1) / c.args[1].intValue;
      c.outDtypes.assign(static_cast<std::size_t>(n), t);
      return c;
    }
    case 10: {
      if (rank < 2) s = {3, 4};
      x = iv ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
      return one(rng() % 2 ? "aten.tril.default" : "aten.triu.default", {x},
                 {in(0), integer(static_cast<std::int64_t>(rng() % 3) - 1)});
    }
    case 11:
      return one("aten.clone.default", {x}, {in(0)});
    case 13: {
      std::vector<std::int64_t> dims;
      for (int d = 0; d < rank; ++d)
        if (rng() % 2) dims.push_back(rng() % 2 ? d : d - rank);
      return one("aten.flip.default", {x}, {in(0), ints(dims)});
    }
    case 14: {
      if (rng() % 3 == 0)
        return one("aten.roll.default", {x},
                   {in(0), ints({static_cast<std::int64_t>(rng() % 9) - 4})});
      std::vector<std::int64_t> shifts, dims;
      for (int d = 0; d < rank; ++d)
        if (rng() % 2) {
          dims.push_back(d);
          shifts.push_back(static_cast<std::int64_t>(rng() % 11) - 5);
        }
      if (dims.empty()) {
        dims.push_back(0);
        shifts.push_back(1);
      }
      return one("aten.roll.default", {x}, {in(0), ints(shifts), ints(dims)});
    }
    case 15: {
      s = randomShape(rank, rng, 4, 0.0);
      x = iv ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
      const std::int64_t d = dim();
      const std::int64_t n = s[static_cast<std::size_t>(d)];
      const std::int64_t start = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
      const std::int64_t len =
          static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n - start + 1));
      return one(rng() % 2 ? "aten.narrow.default" : "aten.narrow_copy.default", {x},
                 {in(0), integer(d), integer(rng() % 2 ? start : start - n), integer(len)});
    }
    case 16: {
      const char* copies[] = {"aten.expand_copy.default",    "aten.permute_copy.default",
                              "aten.transpose_copy.int",     "aten.slice_copy.Tensor",
                              "aten.unsqueeze_copy.default", "aten.squeeze_copy.default",
                              "aten.alias_copy.default"};
      const int k = static_cast<int>(rng() % 7);
      const int base[] = {1, 3, 2, 4, 6, 7, 11};
      OpCase c = randomCase(base[k], rng, iv);
      c.op = copies[k];
      return c;
    }
    case 18: {
      // repeat: as many counts as dims or more (new leading dims), some 0 and 1.
      std::vector<std::int64_t> reps(static_cast<std::size_t>(rank) + rng() % 2);
      for (std::int64_t& r : reps) r = static_cast<std::int64_t>(rng() % 4);
      return one("aten.repeat.default", {x}, {in(0), ints(reps)});
    }
    case 17: {
      std::vector<std::int64_t> dims;
      for (int d = 0; d < rank; ++d)
        if (rng() % 2) dims.push_back(d);
      return one("aten.squeeze.dims", {x}, {in(0), ints(dims)});
    }
    default: {
      s = randomShape(2, rng, 4, 0.0);
      x = iv ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
      return one("aten.t.default", {x}, {in(0)});
    }
  }
}

}  // namespace

class TestViewOps : public QObject {
  Q_OBJECT

 private slots:
  void valuesLandWhereTorchPutsThem() {
    const Tensor x = iota({2, 3});
    QCOMPARE(vals(runPoint(one("aten.t.default", {x}, {in(0)}))[0]),
             (std::vector<double>{0, 3, 1, 4, 2, 5}));
    QCOMPARE(
        vals(runPoint(one("aten.slice.Tensor", {x},
                          {in(0), integer(1), integer(-2), integer(9223372036854775807LL)}))[0]),
        (std::vector<double>{1, 2, 4, 5}));
    QCOMPARE(vals(runPoint(one("aten.select.int", {x}, {in(0), integer(1), integer(-1)}))[0]),
             (std::vector<double>{2, 5}));
    QCOMPARE(vals(runPoint(one("aten.expand.default", {iota({3, 1})}, {in(0), ints({3, 2})}))[0]),
             (std::vector<double>{0, 0, 1, 1, 2, 2}));
    QCOMPARE(vals(runPoint(one("aten.tril.default", {iota({2, 2})}, {in(0)}))[0]),
             (std::vector<double>{0, 0, 2, 3}));
    QCOMPARE(vals(runPoint(one("aten.cat.default", {x, iota({2, 1})},
                               {list({in(0), in(1)}), integer(1)}))[0]),
             (std::vector<double>{0, 1, 2, 0, 3, 4, 5, 1}));
    const auto parts =
        runPoint(one("aten.split_with_sizes.default", {x}, {in(0), ints({1, 2}), integer(1)},
                     {DType::Float32, DType::Float32}));
    QCOMPARE(parts.size(), std::size_t{2});
    QCOMPARE(vals(parts[1]), (std::vector<double>{1, 2, 4, 5}));
    QCOMPARE(runPoint(one("aten.chunk.default", {iota({5})}, {in(0), integer(2)},
                          {DType::Float32, DType::Float32}))[1]
                 .numel(),
             2);
    // The unsafe forms (nn.LSTM's decomposition on torch 2.x) split as the safe ones do.
    const std::vector<DType> three(3, DType::Float32);
    for (const auto& [safe, unsafe, arg] :
         {std::tuple{"aten.split.Tensor", "aten.unsafe_split.Tensor", integer(2)},
          std::tuple{"aten.split_with_sizes.default", "aten.unsafe_split_with_sizes.default",
                     ints({1, 3, 1})},
          std::tuple{"aten.chunk.default", "aten.unsafe_chunk.default", integer(3)}}) {
      const auto a = runPoint(one(safe, {iota({5, 2})}, {in(0), arg, integer(0)}, three));
      const auto b = runPoint(one(unsafe, {iota({5, 2})}, {in(0), arg, integer(0)}, three));
      QCOMPARE(b.size(), std::size_t{3});
      for (std::size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(b[i].shape(), a[i].shape());
        QCOMPARE(vals(b[i]), vals(a[i]));
      }
    }
    QCOMPARE(vals(runPoint(
                 one("aten.slice_backward.default", {iota({2}, DType::Float32)},
                     {in(0), ints({2, 3}), integer(1), integer(1), integer(3), integer(2)}))[0]),
             (std::vector<double>{0, 0, 0, 0, 1, 0}));
    QCOMPARE(vals(runPoint(one("aten.select_backward.default", {iota({2})},
                               {in(0), ints({2, 2}), integer(0), integer(1)}))[0]),
             (std::vector<double>{0, 0, 0, 1}));
    QCOMPARE(runPoint(one("aten.view.default", {x}, {in(0), ints({-1, 2})}))[0].shape(),
             (Shape{3, 2}));
    QCOMPARE(
        runPoint(one("aten._reshape_alias.default", {x}, {in(0), ints({3, 2}), ints({2, 1})}))[0]
            .shape(),
        (Shape{3, 2}));
    QCOMPARE(runPoint(one("aten.squeeze.dim", {iota({2, 1})}, {in(0), integer(1)}))[0].shape(),
             (Shape{2}));
    QCOMPARE(runPoint(one("aten.unbind.int", {x}, {in(0), integer(1)},
                          {DType::Float32, DType::Float32, DType::Float32}))[2]
                 .shape(),
             (Shape{2}));
    QCOMPARE(
        runPoint(one("aten.stack.default", {x, x}, {list({in(0), in(1)}), integer(1)}))[0].shape(),
        (Shape{2, 2, 3}));
    // torch 1.13: flip(x, [0, 1]), roll(x, [1, -1], [0, 1]), roll(x, 5) of arange(12).view(3, 4)
    const Tensor y = iota({3, 4});
    QCOMPARE(vals(runPoint(one("aten.flip.default", {y}, {in(0), ints({0, -1})}))[0]),
             (std::vector<double>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
    QCOMPARE(vals(runPoint(one("aten.roll.default", {y}, {in(0), ints({1, -1}), ints({0, 1})}))[0]),
             (std::vector<double>{9, 10, 11, 8, 1, 2, 3, 0, 5, 6, 7, 4}));
    QCOMPARE(vals(runPoint(one("aten.roll.default", {y}, {in(0), ints({5})}))[0]),
             (std::vector<double>{7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6}));
    // torch 1.13: arange(6.).view(2, 3).repeat(2, 1, 2) and arange(3.).repeat(2)
    const Tensor rep = runPoint(one("aten.repeat.default", {x}, {in(0), ints({2, 1, 2})}))[0];
    QCOMPARE(rep.shape(), (Shape{2, 2, 6}));
    QCOMPARE(vals(rep), (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5,
                                             0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
    QCOMPARE(vals(runPoint(one("aten.repeat.default", {iota({3})}, {in(0), ints({2})}))[0]),
             (std::vector<double>{0, 1, 2, 0, 1, 2}));
    QCOMPARE(vals(runPoint(
                 one("aten.narrow.default", {y}, {in(0), integer(1), integer(-3), integer(2)}))[0]),
             (std::vector<double>{1, 2, 5, 6, 9, 10}));
    QCOMPARE(
        runPoint(one("aten.squeeze.dims", {iota({1, 2, 1})}, {in(0), ints({0, 1, 2})}))[0].shape(),
        (Shape{2}));
    QCOMPARE(vals(runPoint(one("aten.t_copy.default", {x}, {in(0)}))[0]),
             (std::vector<double>{0, 3, 1, 4, 2, 5}));
  }

  /// Every *_copy form of a view that functionalized 2.x traces emit is registered.
  void copyFormsAreRegistered() {
    for (const char* op :
         {"aten.view_copy.default", "aten.expand_copy.default", "aten.permute_copy.default",
          "aten.t_copy.default", "aten.transpose_copy.int", "aten.slice_copy.Tensor",
          "aten.select_copy.int", "aten.unsqueeze_copy.default", "aten.squeeze_copy.default",
          "aten.squeeze_copy.dim", "aten.squeeze_copy.dims", "aten.alias_copy.default",
          "aten.detach_copy.default", "aten._reshape_alias_copy.default",
          "aten.narrow_copy.default", "aten.split_copy.Tensor",
          "aten.split_with_sizes_copy.default", "aten.unbind_copy.int", "aten.to.dtype"})
      QVERIFY2(opRegistry().find(op), op);
  }

  void badArgumentsAreErrors() {
    const Tensor x = iota({2, 3});
    QVERIFY_THROWS_EXCEPTION(OpError,
                             runPoint(one("aten.view.default", {x}, {in(0), ints({4, 2})})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             runPoint(one("aten.expand.default", {x}, {in(0), ints({4, 3, 2})})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, runPoint(one("aten.transpose.int", {x}, {in(0), integer(0), integer(5)})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, runPoint(one("aten.select.int", {x}, {in(0), integer(0), integer(2)})));
    QVERIFY_THROWS_EXCEPTION(OpError, runPoint(one("aten.cat.default", {x, iota({3, 3})},
                                                   {list({in(0), in(1)}), integer(1)})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             runPoint(one("aten.repeat.default", {x}, {in(0), ints({2})})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             runPoint(one("aten.repeat.default", {x}, {in(0), ints({2, -1})})));
  }

  void everyDomainAgreesAndAdjointsMatch() {
    std::mt19937_64 rng(31);
    for (int which = 0; which <= 18; ++which)
      for (int k = 0; k < 60; ++k) {
        const OpCase c = randomCase(which, rng, k % 2 == 0);
        EnclosureReport r;
        try {
          r = checkEnclosure(c, 20, rng);
        } catch (const std::exception& e) {
          QFAIL((c.op + " threw: " + e.what() + " on shape " + shapeString(c.inputs[0].shape()))
                    .c_str());
        }
        QVERIFY2(r.escapes == 0, (c.op + ": " + r.firstEscape).c_str());
        QVERIFY2(r.trials == 20, c.op.c_str());
        if (k % 2) {
          const VjpReport v = checkVjp(c, rng);
          QVERIFY2(v.maxRelError < 1e-6, v.where.c_str());
        }
      }
  }

  void squeezeInPlaceEveryFormat() {
    // squeeze_.dim (in place) has the value semantics of squeeze.dim: exact in every format.
    std::mt19937_64 rng(41);
    for (Format f : {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16}) {
      const DType t = dtypeFor(f);
      int trials = 0;
      for (int k = 0; trials < 1000; ++k) {
        const int rank = 1 + static_cast<int>(rng() % 3);
        Shape s = randomShape(rank, rng, 4, 0.08);
        const auto d = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rank));
        if (rng() % 2) s[static_cast<std::size_t>(d)] = 1;
        const Tensor x = k % 2 ? randomInterval(s, t, rng, 1e-3, 6) : randomPoint(s, t, rng, 6);
        const OpCase c =
            one("aten.squeeze_.dim", {x}, {in(0), integer(rng() % 2 ? d : d - rank)}, {t});
        const EnclosureReport r = checkEnclosure(c, 20, rng);
        QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
        trials += r.trials;
        QCOMPARE(runPoint(c)[0].shape(),
                 runPoint(one("aten.squeeze.dim", {x}, c.args, {t}))[0].shape());
        if (k % 4 == 0) {
          const VjpReport v = checkVjp(c, rng);
          QVERIFY2(v.maxRelError < 1e-6, v.where.c_str());
        }
      }
    }
  }

  void castsRoundPerFormat() {
    std::mt19937_64 rng(12);
    const DType floats[] = {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16};
    for (DType from : floats)
      for (DType to : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16,
                       DType::Int64, DType::Bool}) {
        int trials = 0;
        for (int k = 0; trials < 1000; ++k) {
          const Shape s = randomShape(static_cast<int>(rng() % 3), rng, 5, 0.05);
          const double spread = (to == DType::Float16 || from == DType::Float16) ? 5 : 30;
          const Tensor x = k % 2 ? randomInterval(s, from, rng, 1e-2, spread)
                                 : randomPoint(s, from, rng, spread);
          OpCase c = one("aten._to_copy.default", {x}, {in(0)}, {to});
          c.kwargs["dtype"] = dtypeValue(to);
          const EnclosureReport r = checkEnclosure(c, 20, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
          trials += r.trials;
          if (isFloating(to) && k < 5) {
            const LocalErrorReport le = checkLocalError(c, 5, rng);
            QVERIFY2(le.violations == 0, le.first.c_str());
          }
          if (isFloating(to) && k < 3) QVERIFY(checkVjp(c, rng).maxRelError < 1e-6);
        }
      }
    // fp32 → bf16 of 1 + 2^-8 (a tie) rounds to even: 1.0
    OpCase c = one("aten._to_copy.default", {Tensor::scalar(1.0 + 0x1p-8, DType::Float32)}, {in(0)},
                   {DType::BFloat16});
    std::mt19937_64 r2(1);
    QCOMPARE(checkEnclosure(c, 5, r2).escapes, 0);
  }

  void copyCastsAndBroadcasts() {
    std::mt19937_64 rng(8);
    for (int k = 0; k < 60; ++k) {
      const Shape s = randomShape(2, rng, 4, 0.05);
      OpCase c = one("aten.copy_.default",
                     {randomPoint(s, DType::BFloat16, rng),
                      randomInterval(broadcastableTo(s, rng), DType::Float32, rng, 1e-3, 10)},
                     {in(0), in(1)}, {DType::BFloat16});
      const EnclosureReport r = checkEnclosure(c, 20, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      QVERIFY(checkVjp(c, rng).maxRelError < 1e-6);
    }
  }
};

QTEST_GUILESS_MAIN(TestViewOps)
#include "test_view_ops.moc"
