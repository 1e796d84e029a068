// Creation rules (constants stored as RN_F(v), arange) and optimizer-update rules (addcmul,
// addcdiv, lerp): zero escapes of the randomized executor per precision over random shapes with
// broadcasting, adjoints against finite differences, local errors against observed rounding.
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"

#include <QtTest>

#include <cmath>
#include <random>

using namespace lossbound;
using namespace lossbound::test;

namespace {

const Format kFormats[] = {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16};

OpCase update(const std::string& op, Format f, std::mt19937_64& rng, bool iv) {
  OpCase c;
  c.op = op;
  const DType t = dtypeFor(f);
  const double spread = f == Format::Fp16 ? 4 : 12;
  const Shape s = randomShape(static_cast<int>(rng() % 3), rng, 5, 0.05);
  auto make = [&](const Shape& sh) {
    return iv && rng() % 2 ? randomInterval(sh, t, rng, 1e-3, spread)
                           : randomPoint(sh, t, rng, spread);
  };
  c.inputs = {make(s), make(broadcastableTo(s, rng))};
  c.args = {in(0), in(1)};
  if (op.starts_with("aten.lerp")) {
    if (op.ends_with(".Tensor")) {
      std::vector<double> w(static_cast<std::size_t>(numel(s)));
      std::uniform_real_distribution<double> u(-0.7, 1.2);
      for (double& x : w) x = roundToFormat(u(rng), f, RoundingDirection::Nearest);
      c.inputs.push_back(Tensor::point(s, t, w));
      c.args.push_back(in(2));
    } else {
      const double ws[] = {0.1, 0.001, 0.9, 0.5, -0.6};
      c.args.push_back(num(ws[rng() % 5]));
    }
  } else {
    c.inputs.push_back(make(broadcastableTo(s, rng)));
    c.args.push_back(in(2));
    if (rng() % 2) c.kwargs["value"] = num(rng() % 2 ? -0.001 : 0.3);
  }
  c.outDtypes = {t};
  return c;
}

OpCase creation(int which, Format f, std::mt19937_64& rng) {
  OpCase c;
  const DType t = rng() % 5 == 0 ? DType::Int64 : dtypeFor(f);
  c.outDtypes = {t};
  const Shape s = randomShape(static_cast<int>(rng() % 3), rng, 4, 0.1);
  const double v = wideValue(rng, f == Format::Fp16 ? 4 : 20);
  switch (which) {
    case 0:
      c.op = "aten.full.default";
      c.args = {ints(s), num(v)};
      break;
    case 1:
      c.op = "aten.ones.default";
      c.args = {ints(s)};
      break;
    case 2:
      c.op = "aten.zeros_like.default";
      c.inputs = {randomPoint(s, t, rng)};
      c.args = {in(0)};
      break;
    case 3:
      c.op = "aten.full_like.default";
      c.inputs = {randomPoint(s, t, rng)};
      c.args = {in(0), num(v)};
      break;
    case 4:
      c.op = "aten.scalar_tensor.default";
      c.args = {num(v)};
      break;
    case 5:
      c.op = "aten.arange.start_step";
      c.args = {num(-1.3), num(7.0), num(0.7)};
      break;
    case 6:
      c.op = "aten.arange.default";
      c.args = {integer(9)};
      break;
    case 7:
      c.op = "aten.fill_.Scalar";
      c.inputs = {randomPoint(s, t, rng)};
      c.args = {in(0), num(v)};
      break;
    case 8:
      c.op = "aten.new_zeros.default";
      c.inputs = {randomPoint(s, t, rng)};
      c.args = {in(0), ints({2, 3})};
      break;
    default:
      c.op = rng() % 2 ? "aten.fill_.Tensor" : "aten.fill.Tensor";
      c.inputs = {randomPoint(s, t, rng), randomInterval({}, t, rng, 1e-3, 8)};
      c.args = {in(0), in(1)};
      break;
  }
  if (c.op.starts_with("aten.arange")) c.outDtypes = {dtypeFor(f)};
  return c;
}

}  // namespace

class TestCreationOptimizerOps : public QObject {
  Q_OBJECT

 private slots:
  /// eye(n) and eye(n, m): torch.eye(3, 2) is [[1, 0], [0, 1], [0, 0]], exact in every dtype.
  void eyeIsTheIdentity() {
    for (DType t : {DType::Float32, DType::BFloat16, DType::Int64, DType::Bool}) {
      OpCase c;
      c.op = "aten.eye.m";
      c.args = {integer(3), integer(2)};
      c.outDtypes = {t};
      c.precision = modelFor(std::nullopt);
      const std::vector<Tensor> y = intervalOutputs(c);
      QCOMPARE(y[0].shape(), (Shape{3, 2}));
      const std::vector<double> want{1, 0, 0, 1, 0, 0};
      for (std::size_t i = 0; i < want.size(); ++i) {
        QCOMPARE(y[0].lo()[i], want[i]);
        QCOMPARE(y[0].hi()[i], want[i]);
      }
      std::mt19937_64 rng(2);
      const EnclosureReport r = checkEnclosure(c, 3, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
    }
    OpCase sq;
    sq.op = "aten.eye.default";
    sq.args = {integer(4)};
    sq.outDtypes = {DType::Float32};
    sq.precision = modelFor(std::nullopt);
    std::vector<Tensor> p;
    localErrorOutputs(sq, &p);
    QCOMPARE(p[0].shape(), (Shape{4, 4}));
    double trace = 0, total = 0;
    for (std::int64_t i = 0; i < 16; ++i) {
      total += p[0].values()[static_cast<std::size_t>(i)];
      if (i % 5 == 0) trace += p[0].values()[static_cast<std::size_t>(i)];
    }
    QCOMPARE(trace, 4.0);
    QCOMPARE(total, 4.0);
    sq.args = {integer(-1)};
    QVERIFY_THROWS_EXCEPTION(OpError, intervalOutputs(sq));
  }

  void zeroIsExactZerosOfTheInputShape() {
    // aten.zero (functionalized zero_): zeros of the input's shape and dtype, whatever it holds.
    std::mt19937_64 rng(5);
    OpCase c;
    c.op = "aten.zero.default";
    c.inputs = {randomInterval({3, 4}, DType::Float32, rng)};
    c.args = {in(0)};
    c.outDtypes = {DType::Float32};
    const std::vector<Tensor> out = intervalOutputs(c);
    QCOMPARE(out.at(0).shape(), (Shape{3, 4}));
    for (std::size_t i = 0; i < 12; ++i) {
      QCOMPARE(out[0].lo()[i], 0.0);
      QCOMPARE(out[0].hi()[i], 0.0);
    }
    QCOMPARE(checkEnclosure(c, 10, rng).escapes, 0);
  }

  void stridedEmptiesAreRowMajorZeros() {
    // new_empty_strided / empty_strided (DeepSeek-V3's MoE): the strides describe a layout the
    // IR does not have; the values are the same zeros as new_empty's.
    std::mt19937_64 rng(6);
    OpCase c;
    c.op = "aten.new_empty_strided.default";
    c.inputs = {randomPoint({2}, DType::Float32, rng)};
    c.args = {in(0), ints({3, 2}), ints({1, 3})};
    c.outDtypes = {DType::Float32};
    std::vector<Tensor> out = intervalOutputs(c);
    QCOMPARE(out.at(0).shape(), (Shape{3, 2}));
    for (std::size_t i = 0; i < 6; ++i) QCOMPARE(out[0].hi()[i], 0.0);
    c.op = "aten.empty_strided.default";
    c.inputs.clear();
    c.args = {ints({4}), ints({1})};
    out = intervalOutputs(c);
    QCOMPARE(out.at(0).shape(), (Shape{4}));
    QCOMPARE(checkEnclosure(c, 5, rng).escapes, 0);
  }

  void maskConstantsStayExactOrFinite() {
    // full(−inf) (a causal mask) is stored exactly: [−inf, −inf], not [−inf, −max], which made
    // every softmax row it masks unbounded; full(−3.4028235e38), finfo(float32).min written with
    // 8 digits, is just past −max but rounds to it: a finite enclosure holding v and RN(v).
    std::mt19937_64 rng(9);
    for (const double v : {-HUGE_VAL, HUGE_VAL, -3.4028235e38, 3.4028235e38}) {
      OpCase c;
      c.op = "aten.full.default";
      c.args = {ints({2, 2}), num(v)};
      c.outDtypes = {DType::Float32};
      const Tensor out = intervalOutputs(c).at(0);
      for (std::size_t i = 0; i < 4; ++i) {
        if (std::isinf(v)) {
          QCOMPARE(out.lo()[i], v);
          QCOMPARE(out.hi()[i], v);
        } else {
          QVERIFY(std::isfinite(out.lo()[i]) && std::isfinite(out.hi()[i]));
          QVERIFY(out.lo()[i] <= v && v <= out.hi()[i]);
        }
      }
      QCOMPARE(checkEnclosure(c, 10, rng).escapes, 0);
    }
  }

  void updatesEncloseEveryFormat() {
    std::mt19937_64 rng(41);
    for (const char* op : {"aten.addcmul.default", "aten.addcdiv.default", "aten.lerp.Scalar",
                           "aten.lerp.Tensor", "aten.addcmul_.default"})
      for (Format f : kFormats) {
        int trials = 0;
        for (int k = 0; trials < 1000; ++k) {
          const OpCase c = update(op, f, rng, k % 2 == 0);
          const EnclosureReport r = checkEnclosure(c, 20, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
          trials += r.trials;
        }
      }
  }

  void updatesAdjointsAndLocalErrors() {
    std::mt19937_64 rng(42);
    for (const char* op :
         {"aten.addcmul.default", "aten.addcdiv.default", "aten.lerp.Scalar", "aten.lerp.Tensor"}) {
      for (int k = 0; k < 10; ++k) {
        const VjpReport v = checkVjp(update(op, Format::Fp64, rng, false), rng);
        QVERIFY2(v.maxRelError < 1e-6, v.where.c_str());
      }
      for (Format f : kFormats)
        for (int k = 0; k < 10; ++k) {
          const LocalErrorReport r = checkLocalError(update(op, f, rng, false), 10, rng);
          QVERIFY2(r.violations == 0, r.first.c_str());
        }
    }
  }

  void creationEnclosesStoredConstants() {
    std::mt19937_64 rng(43);
    for (int which = 0; which < 10; ++which)
      for (Format f : kFormats)
        for (int k = 0; k < 50; ++k) {
          const OpCase c = creation(which, f, rng);
          const EnclosureReport r = checkEnclosure(c, 20, rng);
          QVERIFY2(r.escapes == 0, (c.op + ": " + r.firstEscape).c_str());
          const LocalErrorReport le = checkLocalError(c, 3, rng);
          QVERIFY2(le.violations == 0, le.first.c_str());
        }
  }

  void arangeMatchesTorch() {
    OpCase c;
    c.op = "aten.arange.start_step";
    c.args = {integer(2), integer(11), integer(3)};
    c.outDtypes = {DType::Int64};
    std::mt19937_64 rng(1);
    const EnclosureReport r = checkEnclosure(c, 3, rng);
    QCOMPARE(r.escapes, 0);
    c.args = {num(0.0), num(1.0), num(0.1)};  // 10 elements in torch
    c.outDtypes = {DType::Float32};
    QCOMPARE(checkEnclosure(c, 3, rng).escapes, 0);
  }
};

QTEST_GUILESS_MAIN(TestCreationOptimizerOps)
#include "test_creation_optimizer_ops.moc"
