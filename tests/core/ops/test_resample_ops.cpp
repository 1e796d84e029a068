// Resampling rules: pixel_shuffle, pixel_unshuffle and nearest upsampling against PyTorch's values
// (its float source index with size and scale arguments), the backward op against autograd's
// gradient, zero escapes of the randomized executor over random shapes and formats (the backward
// sums in random orders), adjoints against finite differences, and bad arguments as errors.
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <random>
#include <string>
#include <vector>

using namespace lossbound;
using namespace lossbound::test;

namespace {

std::vector<double> values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

Tensor arange(const Shape& s) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Tensor::point(s, DType::Float32, v);
}

IrValue floats(const std::vector<double>& v) {
  std::vector<IrValue> out;
  for (double x : v) out.push_back(num(x));
  return list(out);
}

OpCase oneInput(const std::string& op, Tensor x, std::vector<IrValue> more) {
  OpCase c;
  c.op = op;
  c.args = {in(0)};
  c.args.insert(c.args.end(), more.begin(), more.end());
  c.outDtypes = {x.dtype()};
  c.inputs = {std::move(x)};
  c.precision = modelFor(std::nullopt);
  return c;
}

/// A random case of one resampling op (forward or backward) in format f.
OpCase randomCase(std::mt19937_64& rng, int which, Format f, bool iv) {
  const DType t = dtypeFor(f);
  const auto dim = [&](int hi) {
    return static_cast<std::int64_t>(1 + rng() % static_cast<unsigned>(hi));
  };
  const auto input = [&](const Shape& s) {
    return iv ? randomInterval(s, t, rng, 1e-3, 8.0) : randomPoint(s, t, rng, 8.0);
  };
  const std::int64_t n = dim(2), c = dim(3), h = dim(5), w = dim(5), r = dim(3);
  switch (which) {
    case 0:
      return oneInput("aten.pixel_shuffle.default", input({n, c * r * r, h, w}), {integer(r)});
    case 1:
      return oneInput("aten.pixel_unshuffle.default", input({n, c, h * r, w * r}), {integer(r)});
    case 2: {  // nearest 2-D, by size or by scale factor
      if (rng() % 2)
        return oneInput("aten.upsample_nearest2d.vec", input({n, c, h, w}),
                        {ints({dim(9), dim(9)}), none()});
      const double scales[] = {0.5, 1.5, 2.0, 3.0, 1.7};
      return oneInput("aten.upsample_nearest2d.vec", input({n, c, h, w}),
                      {none(), floats({scales[rng() % 5], scales[rng() % 5]})});
    }
    case 3:
      return oneInput("aten.upsample_nearest1d.default", input({n, c, w}), {ints({dim(9)})});
    default: {  // the 2-D backward: grad_output of the upsampled shape
      const std::int64_t oh = dim(9), ow = dim(9);
      return oneInput("aten.upsample_nearest2d_backward.vec", input({n, c, oh, ow}),
                      {ints({oh, ow}), ints({n, c, h, w}), none()});
    }
  }
}

}  // namespace

class TestResampleOps : public QObject {
  Q_OBJECT

 private slots:
  void pixelShuffleTorchValues() {
    // F.pixel_shuffle(arange(16).view(1, 4, 2, 2), 2) and F.pixel_unshuffle(arange(16).view(1,
    // 1, 4, 4), 2) (PyTorch 1.13).
    RuleCall s(oneInput("aten.pixel_shuffle.default", arange({1, 4, 2, 2}), {integer(2)}));
    QCOMPARE(s.point()[0].shape(), (Shape{1, 1, 4, 4}));
    QCOMPARE(values(s.point()[0]),
             (std::vector<double>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
    RuleCall u(oneInput("aten.pixel_unshuffle.default", arange({1, 1, 4, 4}), {integer(2)}));
    QCOMPARE(u.point()[0].shape(), (Shape{1, 4, 2, 2}));
    QCOMPARE(values(u.point()[0]),
             (std::vector<double>{0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15}));
  }

  void nearestTorchValues() {
    // F.interpolate(arange(6).view(1, 1, 2, 3), size=(3, 5)) and scale_factor=1.5 (a float
    // source index: 1/1.5 in float), and autograd's gradient of sum(w · up(x)), w = arange(15).
    const Tensor x = arange({1, 1, 2, 3});
    RuleCall bySize(oneInput("aten.upsample_nearest2d.vec", x, {ints({3, 5}), none()}));
    QCOMPARE(values(bySize.point()[0]),
             (std::vector<double>{0, 0, 1, 1, 2, 0, 0, 1, 1, 2, 3, 3, 4, 4, 5}));
    RuleCall byScale(oneInput("aten.upsample_nearest2d.vec", x, {none(), floats({1.5, 1.5})}));
    QCOMPARE(byScale.point()[0].shape(), (Shape{1, 1, 3, 4}));
    QCOMPARE(values(byScale.point()[0]), (std::vector<double>{0, 0, 1, 2, 0, 0, 1, 2, 3, 3, 4, 5}));
    RuleCall back(oneInput("aten.upsample_nearest2d_backward.vec", arange({1, 1, 3, 5}),
                           {ints({3, 5}), ints({1, 1, 2, 3}), none()}));
    QCOMPARE(values(back.point()[0]), (std::vector<double>{12, 20, 13, 21, 25, 14}));
    // The .default overloads: output_size and optional scales.
    RuleCall def(oneInput("aten.upsample_nearest2d.default", x, {ints({3, 5}), none(), none()}));
    QCOMPARE(values(def.point()[0]), values(bySize.point()[0]));
  }

  void encloseEveryExecution() {
    std::mt19937_64 rng(20261129);
    const Format formats[] = {Format::Fp32, Format::Bf16, Format::Fp64};
    for (int trial = 0; trial < 300; ++trial) {
      const OpCase c = randomCase(rng, trial % 5, formats[trial % 3], trial % 2 == 0);
      const EnclosureReport r = checkEnclosure(c, 10, rng);
      QVERIFY2(r.escapes == 0, (c.op + ": " + r.firstEscape).c_str());
      if (trial % 2) {
        const LocalErrorReport l = checkLocalError(c, 10, rng);
        QVERIFY2(l.violations == 0, (c.op + ": " + l.first).c_str());
      }
    }
  }

  void adjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(4);
    for (int trial = 0; trial < 100; ++trial) {
      const OpCase c = randomCase(rng, trial % 5, Format::Fp64, false);
      const VjpReport r = checkVjp(c, rng);
      QVERIFY2(r.maxRelError < 1e-6, (c.op + " " + r.where).c_str());
    }
  }

  void badArgumentsAreErrors() {
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(oneInput("aten.pixel_shuffle.default",
                                                        arange({1, 3, 2, 2}), {integer(2)})));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(oneInput("aten.pixel_unshuffle.default",
                                                        arange({1, 1, 3, 4}), {integer(2)})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(oneInput("aten.pixel_shuffle.default", arange({4, 2}), {integer(2)})));
    QVERIFY_THROWS_EXCEPTION(OpError, RuleCall(oneInput("aten.upsample_nearest2d.vec",
                                                        arange({1, 1, 2, 3}), {none(), none()})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(oneInput("aten.upsample_nearest2d.vec", arange({1, 1, 2, 3}),
                                               {ints({3}), none()})));
  }
};

QTEST_GUILESS_MAIN(TestResampleOps)
#include "test_resample_ops.moc"
