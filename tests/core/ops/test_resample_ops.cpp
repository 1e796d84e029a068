// Resampling rules: pixel_shuffle, pixel_unshuffle and nearest upsampling against PyTorch's values
// (its float source index with size and scale arguments), the backward op against autograd's
// gradient, zero escapes of the randomized executor over random shapes and formats (the backward
// sums in random orders), adjoints against finite differences, and bad arguments as errors.
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>
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

/// Returns false when the case is refused by design: PyTorch's nearest kernels disagree on an
/// index, or a scale factor makes an output size 0 (PyTorch refuses it too).
bool analysable(const OpCase& c) {
  try {
    RuleCall call(c);
    return true;
  } catch (const OpError& e) {
    const std::string m = e.what();
    if (m.find("kernels read different inputs") == std::string::npos &&
        m.find("output size out of range") == std::string::npos)
      throw;
    return false;
  }
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
    int refused = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const OpCase c = randomCase(rng, trial % 5, formats[trial % 3], trial % 2 == 0);
      if (!analysable(c)) {  // a nearest index the kernels disagree on: refused by design
        ++refused;
        continue;
      }
      const EnclosureReport r = checkEnclosure(c, 10, rng);
      QVERIFY2(r.escapes == 0, (c.op + ": " + r.firstEscape).c_str());
      if (trial % 2) {
        const LocalErrorReport l = checkLocalError(c, 10, rng);
        QVERIFY2(l.violations == 0, (c.op + ": " + l.first).c_str());
      }
    }
    QVERIFY2(refused < 100, std::to_string(refused).c_str());
  }

  void adjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(4);
    for (int trial = 0; trial < 100; ++trial) {
      const OpCase c = randomCase(rng, trial % 5, Format::Fp64, false);
      if (!analysable(c)) continue;
      const VjpReport r = checkVjp(c, rng);
      QVERIFY2(r.maxRelError < 1e-6, (c.op + " " + r.where).c_str());
    }
  }

  void bilinearTorchValues() {
    // F.interpolate(x, mode="bilinear") on PyTorch 1.13 in float64: sizes with and without
    // align_corners, scale factor 1.5, and a downsampling; autograd's gradient of sum(w · up(x)).
    const Tensor x =
        Tensor::point({1, 1, 2, 3}, DType::Float64, {0.5, -1.25, 2.0, 3.0, 0.75, -0.5});
    const auto near = [](const Tensor& got, const std::vector<double>& want) {
      if (got.values().size() != want.size()) return false;
      for (std::size_t i = 0; i < want.size(); ++i)
        if (std::fabs(got.values()[i] - want[i]) > 1e-12 * (1 + std::fabs(want[i]))) return false;
      return true;
    };
    const auto up = [&](std::vector<IrValue> more) {
      return RuleCall(oneInput("aten.upsample_bilinear2d.vec", x, std::move(more))).point()[0];
    };
    QVERIFY(near(
        up({ints({3, 5}), flag(false), none()}),
        {0.5, -0.2, -1.25, 0.7, 2.0, 1.75, 0.95, -0.25, 0.35, 0.75, 3.0, 2.1, 0.75, 0.0, -0.5}));
    QVERIFY(near(up({ints({3, 5}), flag(true), none()}),
                 {0.5, -0.375, -1.25, 0.375, 2.0, 1.75, 0.75, -0.25, 0.25, 0.75, 3.0, 1.875, 0.75,
                  0.125, -0.5}));
    const Tensor s = up({none(), flag(false), floats({1.5, 1.5})});
    QCOMPARE(s.shape(), (Shape{1, 1, 3, 4}));
    QVERIFY(near(
        s, {0.5, -0.375, -0.7083333333333338, 1.458333333333333, 1.75, 0.75, -0.08333333333333351,
            0.5833333333333333, 3.0, 1.875, 0.5416666666666669, -0.2916666666666666}));
    QVERIFY(near(up({ints({1, 2}), flag(false), none()}), {1.25, 0.5}));
    RuleCall back(oneInput("aten.upsample_bilinear2d_backward.vec", arange({1, 1, 3, 5}),
                           {ints({3, 5}), ints({1, 1, 2, 3}), flag(false), none()}));
    QVERIFY(near(back.point()[0], {4.9, 9.9, 12.7, 20.9, 27.9, 28.7}));
  }

  void bilinearEnclosesEveryExecution() {
    std::mt19937_64 rng(77);
    const Format formats[] = {Format::Fp32, Format::Bf16, Format::Fp64};
    const double factors[] = {0.5, 0.7, 1.5, 2.0, 3.0, 1.3};
    for (int trial = 0; trial < 240; ++trial) {
      const Format f = formats[trial % 3];
      const DType t = dtypeFor(f);
      const bool iv = trial % 2 == 0, align = (trial / 2) % 2 == 0;
      const auto dim = [&](int hi) {
        return static_cast<std::int64_t>(1 + rng() % static_cast<unsigned>(hi));
      };
      const Shape in{dim(2), dim(2), 1 + dim(5), 1 + dim(5)};  // factors >= 0.5 keep a row
      const auto input = [&](const Shape& sh) {
        return iv ? randomInterval(sh, t, rng, 1e-3, 6.0) : randomPoint(sh, t, rng, 6.0);
      };
      std::vector<IrValue> size = {ints({dim(9), dim(9)}), flag(align), none()};
      if (trial % 3 == 0)
        size = {none(), flag(align), floats({factors[rng() % 6], factors[rng() % 6]})};
      OpCase c = oneInput("aten.upsample_bilinear2d.vec", input(in), size);
      const EnclosureReport r = checkEnclosure(c, 10, rng);
      QVERIFY2(r.escapes == 0, ("forward: " + r.firstEscape).c_str());
      const Shape out = RuleCall(c).point()[0].shape();
      OpCase b = oneInput("aten.upsample_bilinear2d_backward.vec", input(out),
                          {c.args[1], ints(in), flag(align), c.args[3]});
      const EnclosureReport rb = checkEnclosure(b, 10, rng);
      QVERIFY2(rb.escapes == 0, ("backward: " + rb.firstEscape).c_str());
      if (!iv) {
        QVERIFY2(checkLocalError(c, 10, rng).violations == 0, "forward local error");
        QVERIFY2(checkLocalError(b, 10, rng).violations == 0, "backward local error");
        OpCase d = c, db = b;
        d.precision = db.precision = modelFor(Format::Fp64);
        d.inputs[0] = randomPoint(in, DType::Float64, rng, 3.0);
        db.inputs[0] = randomPoint(out, DType::Float64, rng, 3.0);
        QVERIFY2(checkVjp(d, rng).maxRelError < 1e-6, "forward vjp");
        QVERIFY2(checkVjp(db, rng).maxRelError < 1e-6, "backward vjp");
      }
    }
  }

  void kernelVariants() {
    // Bilinear where a dim keeps its size under a scale factor: PyTorch's CPU kernel copies
    // (F.interpolate(x, scale_factor=[1.05, 1.5], mode="bilinear") on 1.13 and 2.15: row 1 of a
    // 2-row input stays x's row), CUDA interpolates; the interval holds both.
    const Tensor x =
        Tensor::point({1, 1, 2, 3}, DType::Float32, {0.5, -1.25, 2.0, 3.0, 0.75, -0.5});
    RuleCall keep(
        oneInput("aten.upsample_bilinear2d.vec", x, {none(), flag(false), floats({1.05, 1.5})}));
    QCOMPARE(keep.point()[0].shape(), (Shape{1, 1, 2, 4}));
    const Tensor iv = keep.interval()[0];
    for (std::int64_t i = 0; i < 8; ++i)
      QVERIFY(iv.at(i).lo <= keep.point()[0].values()[static_cast<std::size_t>(i)] &&
              keep.point()[0].values()[static_cast<std::size_t>(i)] <= iv.at(i).hi);
    // The CPU copy: every output row is its input row resampled along the width (torch, float32,
    // 1.13 and 2.15: [0.5, -0.375, -0.708333, 1.458333, 3.0, 1.875, 0.541667, -0.291667]).
    const std::vector<double> rows = {0.5, -0.375, -0.7083331, 1.4583335,
                                      3.0, 1.875,  0.5416666,  -0.2916667};
    for (std::size_t i = 0; i < 8; ++i)
      QVERIFY(std::fabs(keep.point()[0].values()[i] - rows[i]) < 1e-6);
    // Nearest where the kernels disagree (1-D, 10 -> 10 under 1.05: the 2-D CPU path copies,
    // the others read floor(o / 1.05)): an error naming the index, not a guess.
    try {
      RuleCall(
          oneInput("aten.upsample_nearest1d.vec", arange({1, 1, 10}), {none(), floats({1.05})}));
      QFAIL("an ambiguous nearest index was accepted");
    } catch (const OpError& e) {
      QVERIFY2(std::string(e.what()).find("kernels read different inputs") != std::string::npos,
               e.what());
    }
  }

  void badArgumentsAreErrors() {
    // Bilinear: sizes that are empty or out of range, a backward whose sizes do not match.
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(oneInput("aten.upsample_bilinear2d.vec", arange({1, 1, 2, 3}),
                                               {ints({0, 3}), flag(false), none()})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(oneInput("aten.upsample_bilinear2d.vec", arange({1, 1, 2, 3}),
                                               {none(), flag(false), floats({1e300, 2})})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(oneInput("aten.upsample_bilinear2d_backward.vec", arange({1, 1, 2, 3}),
                                   {ints({2, 3}), ints({1, 1, 0, 3}), flag(false), none()})));
    QVERIFY_THROWS_EXCEPTION(
        OpError, RuleCall(oneInput("aten.upsample_bilinear2d_backward.vec", arange({1, 1, 2, 3}),
                                   {ints({4, 3}), ints({1, 1, 2, 3}), flag(false), none()})));
    QVERIFY_THROWS_EXCEPTION(OpError,
                             RuleCall(oneInput("aten.upsample_nearest2d.vec", arange({1, 1, 1, 3}),
                                               {none(), floats({0.5, 1})})));
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
