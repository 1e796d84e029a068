// Vector norm rules (linalg_vector_norm, norm.ScalarOpt_dim, norm.Scalar; order 2, 1, inf): zero
// escapes of the randomized executor (random orders, trees, blocks and FMA chains of the sum of
// squares) from the interval rule in every format, over random shapes, dims and keepdim; long
// rows of one value (the sum of squares' worst case); overflow; adjoints against finite
// differences; local errors against observed rounding; exact values and refused orders.
#include "core/interval/format_names.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>
#include <random>
#include <string>

using namespace lossbound;
using namespace lossbound::test;

namespace {

const Format kFormats[] = {Format::Fp64, Format::Fp32, Format::Bf16, Format::Fp16};
const double kOrders[] = {2.0, 1.0, HUGE_VAL};

/// A random norm of order `ord` over random dims (or every dim for norm.Scalar).
OpCase makeCase(const std::string& op, double ord, Format f, std::mt19937_64& rng, bool iv) {
  OpCase c;
  c.op = op;
  c.precision = modelFor(std::nullopt);
  const DType t = dtypeFor(f);
  const int rank = static_cast<int>(rng() % 4);
  const Shape s = randomShape(rank, rng, 9, 0.03);
  const double spread = f == Format::Fp16 ? 4.0 : 16.0;
  c.inputs = {iv ? randomInterval(s, t, rng, 1e-3, spread) : randomPoint(s, t, rng, spread)};
  c.args = {in(0), num(ord)};
  if (op != "aten.norm.Scalar") {
    std::vector<std::int64_t> dims;
    for (int d = 0; d < rank; ++d)
      if (rng() % 2) dims.push_back(rng() % 2 ? d : d - rank);
    c.args.push_back(ints(dims));  // [] is every dim
    c.args.push_back(flag(rng() % 2));
  }
  c.outDtypes = {t};
  return c;
}

const char* kOps[] = {"aten.linalg_vector_norm.default", "aten.norm.ScalarOpt_dim",
                      "aten.norm.Scalar"};

/// The norm of one row x (shape {n}) of dtype t, order ord.
OpCase rowCase(const std::vector<double>& x, DType t, double ord) {
  OpCase c;
  c.op = "aten.linalg_vector_norm.default";
  c.precision = modelFor(std::nullopt);
  c.inputs = {Tensor::point({static_cast<std::int64_t>(x.size())}, t, x)};
  c.args = {in(0), num(ord)};
  c.outDtypes = {t};
  return c;
}

}  // namespace

class TestVectorNormOps : public QObject {
  Q_OBJECT

 private slots:
  void enclosureEveryOrderEveryFormat() {
    std::mt19937_64 rng(31);
    for (const char* op : kOps)
      for (double ord : kOrders)
        for (Format f : kFormats) {
          int trials = 0;
          for (int caseNo = 0; trials < 400; ++caseNo) {
            const OpCase c = makeCase(op, ord, f, rng, caseNo % 2 == 0);
            const EnclosureReport r = checkEnclosure(c, 20, rng);
            QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
            trials += r.trials;
          }
        }
  }

  /// 4,096 equal values: every partial sum of squares rounds the same way, the sum of squares'
  /// worst case; and a row whose squares span many binades.
  void longRowsInEveryOrder() {
    std::mt19937_64 rng(32);
    for (Format f : {Format::Fp32, Format::Bf16, Format::Fp16}) {
      const DType t = dtypeFor(f);
      const OpCase same = rowCase(std::vector<double>(4096, 0.1), t, 2.0);
      const EnclosureReport r = checkEnclosure(same, 200, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      std::vector<double> spread(1000);
      for (std::size_t i = 0; i < spread.size(); ++i)
        spread[i] = std::ldexp(1.0 + 0.001 * static_cast<double>(i), static_cast<int>(i % 12) - 6);
      QCOMPARE(checkEnclosure(rowCase(spread, t, 2.0), 200, rng).escapes, 0);
    }
  }

  /// The sum of squares' worst case in fp32: 1, then 2,000 squares just above half an ulp of 1
  /// (x = 2^-12·(1 + 2^-20)): a sequential sum rounds every one of them up, an error of about
  /// n·u·Σ, the whole γ_n bound. The executor sums sequentially in about a third of its runs,
  /// so a bound half as wide would let executions escape (checked by hand).
  void roundingUpEveryStepStaysInside() {
    std::mt19937_64 rng(36);
    std::vector<double> x(2001, std::ldexp(1.0 + std::ldexp(1.0, -20), -12));
    x[0] = 1.0;
    const OpCase c = rowCase(x, DType::Float32, 2.0);
    const EnclosureReport r = checkEnclosure(c, 300, rng);
    QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
  }

  /// PyTorch 1.13's CPU kernels accumulate most bf16/fp16 norms in the 16-bit type, every
  /// product and partial sum rounded to it: 512 squares of bf16(0.1) stagnate far below the exact
  /// sum. That computation, emulated here in order, must lie inside the interval (it did not when
  /// the rule assumed fp32 accumulation only).
  void sixteenBitAccumulationOfPyTorch113() {
    const auto rn = [](double v, Format f) {
      return roundToFormat(v, f, RoundingDirection::Nearest);
    };
    for (Format f : {Format::Bf16, Format::Fp16})
      for (double ord : {2.0, 1.0}) {
        const double x = rn(0.1, f);
        double acc = 0.0;
        for (int k = 0; k < 512; ++k) acc = rn(acc + rn(ord == 2.0 ? x * x : x, f), f);
        const double torch113 = ord == 2.0 ? rn(std::sqrt(acc), f) : acc;
        const Tensor y = intervalOutputs(rowCase(std::vector<double>(512, x), dtypeFor(f), ord))[0];
        QVERIFY2(y.lo()[0] <= torch113 && torch113 <= y.hi()[0],
                 qPrintable(QStringLiteral("%1 order %2: %3 outside [%4, %5]")
                                .arg(QString::fromStdString(std::string(formatName(f))))
                                .arg(ord)
                                .arg(torch113)
                                .arg(y.lo()[0])
                                .arg(y.hi()[0])));
      }
  }

  /// Squares beyond fp32's range: the bound is [finite, +inf], the executor's result +inf.
  void overflowingSquaresAreUnbounded() {
    std::mt19937_64 rng(33);
    const OpCase c = rowCase({1e20, 1e20, 3.0}, DType::Float32, 2.0);
    QCOMPARE(checkEnclosure(c, 50, rng).escapes, 0);
    QCOMPARE(intervalOutputs(c)[0].hi()[0], HUGE_VAL);
  }

  void adjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(34);
    for (const char* op : kOps)
      for (double ord : kOrders)
        for (int k = 0; k < 8; ++k) {
          const OpCase c = makeCase(op, ord, Format::Fp64, rng, false);
          const VjpReport r = checkVjp(c, rng);
          QVERIFY2(r.maxRelError < 1e-6, r.where.c_str());
        }
  }

  void localErrorBoundsObservedRounding() {
    std::mt19937_64 rng(35);
    for (const char* op : kOps)
      for (double ord : kOrders)
        for (Format f : kFormats)
          for (int k = 0; k < 8; ++k) {
            const OpCase c = makeCase(op, ord, f, rng, false);
            const LocalErrorReport r = checkLocalError(c, 10, rng);
            QVERIFY2(r.violations == 0, r.first.c_str());
          }
  }

  /// What PyTorch computes: ‖(3, −4)‖ = 5, 7 and 4; keepdim; a zero row and an empty row are 0.
  void valuesAndShapes() {
    const struct { double ord, want; } cases[] = {{2.0, 5.0}, {1.0, 7.0}, {HUGE_VAL, 4.0}};
    for (const auto& k : cases) {
      const OpCase c = rowCase({3.0, -4.0}, DType::Float32, k.ord);
      std::vector<Tensor> point;
      localErrorOutputs(c, &point);
      QCOMPARE(point[0].values()[0], k.want);
      // The rule does not know the squares and sums were exact: 5 and 7 within a few fp32
      // ulps (the order-free bounds), 4 exactly.
      const Tensor y = intervalOutputs(c)[0];
      QVERIFY(y.lo()[0] <= k.want && k.want <= y.hi()[0]);
      QVERIFY(y.hi()[0] - y.lo()[0] <= (k.ord == HUGE_VAL ? 0.0 : 4.0 * 0x1p-23 * k.want));
    }
    OpCase keep;
    keep.op = "aten.norm.ScalarOpt_dim";
    keep.precision = modelFor(std::nullopt);
    keep.inputs = {Tensor::point({2, 3}, DType::Float64, {1, 2, 2, 0, 0, 0})};
    keep.args = {in(0), num(2.0), ints({-1}), flag(true)};
    keep.outDtypes = {DType::Float64};
    const Tensor y = intervalOutputs(keep)[0];
    QCOMPARE(y.shape(), (Shape{2, 1}));
    QVERIFY(y.lo()[0] <= 3.0 && 3.0 <= y.hi()[0] && y.hi()[0] - y.lo()[0] < 1e-14);
    QCOMPARE(y.hi()[1], 0.0);
    const Tensor empty = intervalOutputs(rowCase({}, DType::Float32, 2.0))[0];
    QCOMPARE(empty.hi()[0], 0.0);
  }

  void otherOrdersAreRefusedByName() {
    for (double ord : {0.0, 3.0, -HUGE_VAL}) {
      const OpCase c = rowCase({1.0, 2.0}, DType::Float32, ord);
      try {
        intervalOutputs(c);
        QFAIL("expected an OpError");
      } catch (const OpError& e) {
        QVERIFY2(std::string(e.what()).find("orders 2, 1 and inf") != std::string::npos, e.what());
      }
    }
  }
};

QTEST_APPLESS_MAIN(TestVectorNormOps)
#include "test_vector_norm_ops.moc"
