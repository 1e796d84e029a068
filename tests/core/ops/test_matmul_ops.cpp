// Matrix-product rules (mm, addmm, baddbmm, bmm, mv, matmul, dot): zero escapes of the randomized
// executor (random orders, bracketings, split-K, FMA, tf32 truncation) from the midpoint–radius
// interval rule per precision (fp64, fp32, tf32, bf16, fp16), random shapes with size-0/size-1
// dims, wide value ranges, underflow and overflow; adjoints against finite differences.
#include "core/backend.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/gemm.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::ops;

namespace {

const Format kFormats[] = {Format::Fp64, Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16};

std::int64_t dim(std::mt19937_64& rng) {
  const int r = static_cast<int>(rng() % 20);
  if (r == 0) return 0;
  if (r < 4) return 1;
  return 2 + static_cast<std::int64_t>(rng() % 11);
}

double spreadFor(Format f) { return f == Format::Fp16 ? 3.0 : 12.0; }

Tensor input(const Shape& s, Format f, bool iv, std::mt19937_64& rng) {
  const DType t = dtypeFor(f);
  return iv ? randomInterval(s, t, rng, 1e-3, spreadFor(f)) : randomPoint(s, t, rng, spreadFor(f));
}

OpCase makeCase(const std::string& op, Format f, std::mt19937_64& rng, bool iv) {
  OpCase c;
  c.op = op;
  c.precision = modelFor(f);
  c.outDtypes = {dtypeFor(f)};
  const std::int64_t m = dim(rng), k = dim(rng), n = dim(rng);
  if (op == "aten.mm.default") {
    c.inputs = {input({m, k}, f, iv, rng), input({k, n}, f, iv, rng)};
    c.args = {in(0), in(1)};
  } else if (op == "aten.addmm.default") {
    const Shape biasShapes[] = {{n}, {m, n}, {1, n}, {}, {m, 1}};
    c.inputs = {input(biasShapes[rng() % 5], f, iv, rng), input({m, k}, f, iv, rng),
                input({k, n}, f, iv, rng)};
    c.args = {in(0), in(1), in(2)};
    if (rng() % 3 == 0) {
      c.kwargs["beta"] = num(0.5);
      c.kwargs["alpha"] = num(rng() % 2 ? 1.0 : -0.1);
    }
  } else if (op == "aten.baddbmm.default") {
    const std::int64_t b = dim(rng) % 4;
    const Shape biasShapes[] = {{b, m, n}, {n}, {m, 1}, {1, m, n}, {}};
    c.inputs = {input(biasShapes[rng() % 5], f, iv, rng), input({b, m, k}, f, iv, rng),
                input({b, k, n}, f, iv, rng)};
    c.args = {in(0), in(1), in(2)};
    if (rng() % 3 == 0) {
      c.kwargs["beta"] = num(rng() % 2 ? 0.0 : 0.5);
      c.kwargs["alpha"] = num(rng() % 2 ? 1.0 / 8 : -0.1);
    }
  } else if (op == "aten.bmm.default") {
    const std::int64_t b = dim(rng) % 4;
    c.inputs = {input({b, m, k}, f, iv, rng), input({b, k, n}, f, iv, rng)};
    c.args = {in(0), in(1)};
  } else if (op == "aten.mv.default") {
    c.inputs = {input({m, k}, f, iv, rng), input({k}, f, iv, rng)};
    c.args = {in(0), in(1)};
  } else if (op == "aten.dot.default") {
    c.inputs = {input({k}, f, iv, rng), input({k}, f, iv, rng)};
    c.args = {in(0), in(1)};
  } else {  // matmul with 1-D, 2-D and broadcast batch operands
    const int kind = static_cast<int>(rng() % 4);
    Shape a{m, k}, b{k, n};
    if (kind == 0) a = {k};
    if (kind == 1) b = {k};
    if (kind == 2) {
      a = {2, 1, m, k};
      b = {3, k, n};
    }
    if (kind == 3) {
      a = {2, m, k};
    }
    c.inputs = {input(a, f, iv, rng), input(b, f, iv, rng)};
    c.args = {in(0), in(1)};
  }
  return c;
}

}  // namespace

class TestMatmulOps : public QObject {
  Q_OBJECT

 private slots:
  void enclosureEveryOpEveryFormat() {
    std::mt19937_64 rng(2024);
    for (const char* op :
         {"aten.mm.default", "aten.addmm.default", "aten.baddbmm.default", "aten.bmm.default",
          "aten.mv.default", "aten.matmul.default", "aten.dot.default"}) {
      for (Format f : kFormats) {
        int trials = 0;
        for (int caseNo = 0; trials < 1000; ++caseNo) {
          const OpCase c = makeCase(op, f, rng, caseNo % 2 == 0);
          const EnclosureReport r = checkEnclosure(c, 20, rng);
          QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
          trials += r.trials;
        }
      }
    }
  }

  void largeEatsSmallInEveryOrder() {
    // 16777216 + 0.4 + 0.4 in fp32: the products of [16777216, 0.4, 0.4] with ones, all orders.
    const double big = 16777216.0, small = static_cast<double>(0.4f);
    const double orders[6][3] = {{big, small, small}, {small, big, small}, {small, small, big},
                                 {big, small, small}, {small, big, small}, {small, small, big}};
    std::mt19937_64 rng(5);
    for (const auto& o : orders) {
      OpCase c;
      c.op = "aten.mm.default";
      c.precision = modelFor(Format::Fp32);
      c.outDtypes = {DType::Float32};
      c.inputs = {Tensor::point({1, 3}, DType::Float32, {o[0], o[1], o[2]}),
                  Tensor::point({3, 1}, DType::Float32, {1.0, 1.0, 1.0})};
      c.args = {in(0), in(1)};
      const EnclosureReport r = checkEnclosure(c, 300, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
    }
  }

  void underflowAndOverflow() {
    std::mt19937_64 rng(8);
    // fp32 products far in the subnormal range, and fp16 products past 65504.
    for (int t = 0; t < 60; ++t) {
      OpCase c;
      c.op = "aten.mm.default";
      const bool tiny = t % 2 == 0;
      const Format f = tiny ? Format::Fp32 : Format::Fp16;
      c.precision = modelFor(f);
      c.outDtypes = {dtypeFor(f)};
      const std::int64_t k = 1 + static_cast<std::int64_t>(rng() % 8);
      std::vector<double> a(static_cast<std::size_t>(3 * k)), b(static_cast<std::size_t>(k * 2));
      for (double& v : a)
        v = roundToFormat(wideValue(rng, 2) * (tiny ? 0x1p-70 : 200.0), f,
                          RoundingDirection::Nearest);
      for (double& v : b)
        v = roundToFormat(wideValue(rng, 2) * (tiny ? 0x1p-75 : 200.0), f,
                          RoundingDirection::Nearest);
      c.inputs = {Tensor::point({3, k}, dtypeFor(f), a), Tensor::point({k, 2}, dtypeFor(f), b)};
      c.args = {in(0), in(1)};
      const EnclosureReport r = checkEnclosure(c, 30, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
    }
  }

  void pointInputsGiveTightEnclosures() {
    // fp32, k = 64, values in [1, 2): the radius is about γ_64·|A||B|; it must not be looser
    // than 4·γ_k (the fp64 terms are negligible) — a regression guard on the radius formula.
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(1.0, 2.0);
    std::vector<double> a(8 * 64), b(64 * 8);
    for (double& v : a) v = static_cast<float>(u(rng));
    for (double& v : b) v = static_cast<float>(u(rng));
    OpCase c;
    c.op = "aten.mm.default";
    c.precision = modelFor(Format::Fp32);
    c.outDtypes = {DType::Float32};
    c.inputs = {Tensor::point({8, 64}, DType::Float32, a),
                Tensor::point({64, 8}, DType::Float32, b)};
    c.args = {in(0), in(1)};
    const EnclosureReport r = checkEnclosure(c, 50, rng);
    QCOMPARE(r.escapes, 0);
    const double gamma = 64 * 0x1p-24 / (1 - 64 * 0x1p-24);
    QVERIFY2(r.relWidthMax <= 2 * 4 * gamma, std::to_string(r.relWidthMax).c_str());
    QVERIFY(r.spreadSum > 0);
  }

  void adjointsMatchFiniteDifferences() {
    std::mt19937_64 rng(17);
    for (const char* op :
         {"aten.mm.default", "aten.addmm.default", "aten.baddbmm.default", "aten.bmm.default",
          "aten.mv.default", "aten.matmul.default", "aten.dot.default"})
      for (int t = 0; t < 10; ++t) {
        OpCase c = makeCase(op, Format::Fp64, rng, false);
        for (auto& x : c.inputs) {
          std::vector<double> v(x.values().begin(), x.values().end());
          for (double& e : v)
            if (e != 0) e = std::ldexp(e, -std::ilogb(e));
          x = Tensor::point(x.shape(), x.dtype(), v);
        }
        const VjpReport r = checkVjp(c, rng);
        QVERIFY2(r.maxRelError < 1e-6, r.where.c_str());
      }
  }

  void localErrorBoundsObservedRounding() {
    std::mt19937_64 rng(21);
    for (const char* op : {"aten.mm.default", "aten.addmm.default", "aten.baddbmm.default",
                           "aten.mv.default", "aten.matmul.default"})
      for (Format f : kFormats)
        for (int t = 0; t < 10; ++t) {
          const OpCase c = makeCase(op, f, rng, false);
          const LocalErrorReport r = checkLocalError(c, 10, rng);
          QVERIFY2(r.violations == 0, r.first.c_str());
        }
  }

  void probabilisticLocalErrorIsTheRootSumSquare() {
    // probabilisticLocalError: never above localError, at least the last rounding of the sum
    // (u_acc·|y|), empty for alpha != 1; for a long fp32 dot product of positive terms it is
    // √k·u·Σ|ab| against the worst case's γ_k·Σ|ab| (Higham–Mary 2019).
    std::mt19937_64 rng(22);
    int given = 0;
    for (const char* op : {"aten.mm.default", "aten.addmm.default", "aten.baddbmm.default",
                           "aten.bmm.default", "aten.mv.default", "aten.matmul.default"})
      for (Format f : kFormats)
        for (int t = 0; t < 20; ++t) {
          const OpCase c = makeCase(op, f, rng, false);
          const RuleCall call(c);
          const std::vector<Tensor> pr = call.probabilisticLocalError();
          const auto al = c.kwargs.find("alpha");
          if (al != c.kwargs.end() && al->second.floatValue != 1.0) {
            QVERIFY(pr.empty());
            continue;
          }
          QCOMPARE(pr.size(), std::size_t{1});
          ++given;
          const std::vector<Tensor> le = call.localError();
          const double uAcc = unitRoundoff(f == Format::Fp64 ? Format::Fp64 : Format::Fp32);
          for (std::int64_t i = 0; i < pr[0].numel(); ++i) {
            const double p = pr[0].at(i).hi, r = le[0].at(i).hi;
            const double y = std::fabs(call.point()[0].at(i).hi);
            QVERIFY2(p <= r, qPrintable(QStringLiteral("%1: %2 > %3").arg(op).arg(p).arg(r)));
            if (std::isfinite(y) && r > 0 && f != Format::Tf32)
              QVERIFY2(
                  p >= uAcc * y * (1 - 1e-6) || p == r,
                  qPrintable(QStringLiteral("%1: %2 < u|y| = %3").arg(op).arg(p).arg(uAcc * y)));
          }
        }
    QVERIFY(given > 300);
    // A dot product of 4096 positive fp32 terms: √4096 = 64 times below γ_4096.
    const std::int64_t k = 4096;
    OpCase c;
    c.op = "aten.mm.default";
    c.precision = modelFor(Format::Fp32);
    c.outDtypes = {DType::Float32};
    c.inputs = {Tensor::full({1, k}, DType::Float32, 0.75),
                Tensor::full({k, 1}, DType::Float32, 1.5)};
    c.args = {in(0), in(1)};
    const RuleCall call(c);
    const double p = call.probabilisticLocalError()[0].at(0).hi, r = call.localError()[0].at(0).hi;
    const double m = 0.75 * 1.5 * static_cast<double>(k), u = 0x1p-24;
    QVERIFY(p >= 64.0 * u * m && p <= 64.0 * u * m * 1.01);
    QVERIFY(r >= 4096.0 * u * m);
  }

  /// The signed-sum form of the local bound (u·Σ|z| + (k − 1)·u·max(Σ⁺, Σ⁻) to first order):
  /// fp32 dot products of mixed-sign terms summed in the orders that make the partial sums
  /// largest (every positive term first, largest first, then the negatives; the reverse;
  /// ascending magnitudes), with rounded products or as an FMA chain, stay inside it; for terms
  /// of random sign it is below 0.55·γ_k·Σ|z| (the worst-case form), and for terms of one sign
  /// it is still k·u·Σ|z|.
  void signedSumFormCoversAdversarialOrders() {
    std::mt19937_64 rng(41);
    std::normal_distribution<double> normal(0.0, 1.0);
    const double u = 0x1p-24;
    for (std::int64_t k : {1, 2, 16, 255, 1000, 4096})
      for (double positiveShare : {0.5, 0.8, 1.0}) {
        std::vector<double> a(static_cast<std::size_t>(k)), b(a.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
          a[i] = static_cast<double>(static_cast<float>(std::fabs(normal(rng))));
          b[i] = static_cast<double>(static_cast<float>(std::fabs(normal(rng)))) *
                 (std::uniform_real_distribution<double>(0, 1)(rng) < positiveShare ? 1 : -1);
        }
        OpCase c;
        c.op = "aten.mm.default";
        c.precision = modelFor(Format::Fp32);
        c.outDtypes = {DType::Float32};
        c.inputs = {Tensor::point({1, k}, DType::Float32, a),
                    Tensor::point({k, 1}, DType::Float32, b)};
        c.args = {in(0), in(1)};
        const RuleCall call(c);
        const double bound = call.localError()[0].at(0).hi;
        long double exact = 0, absSum = 0;
        std::vector<std::size_t> idx(a.size());
        for (std::size_t i = 0; i < idx.size(); ++i) {
          idx[i] = i;
          exact += static_cast<long double>(a[i]) * b[i];
          absSum += std::fabs(static_cast<long double>(a[i]) * b[i]);
        }
        const auto z = [&](std::size_t i) { return a[i] * b[i]; };
        const auto orderBy = [&](auto less) { std::sort(idx.begin(), idx.end(), less); };
        for (int order = 0; order < 3; ++order) {
          if (order == 0) orderBy([&](std::size_t i, std::size_t j) { return z(i) > z(j); });
          if (order == 1) orderBy([&](std::size_t i, std::size_t j) { return z(i) < z(j); });
          if (order == 2)
            orderBy(
                [&](std::size_t i, std::size_t j) { return std::fabs(z(i)) < std::fabs(z(j)); });
          for (bool fused : {false, true}) {
            float acc = 0.0f;
            for (std::size_t i : idx)
              acc = fused ? std::fmaf(static_cast<float>(a[i]), static_cast<float>(b[i]), acc)
                          : acc + static_cast<float>(a[i]) * static_cast<float>(b[i]);
            const double err = static_cast<double>(std::fabs(acc - exact));
            QVERIFY2(err <= bound, qPrintable(QStringLiteral("k %1, share %2, order %3: %4 > %5")
                                                  .arg(k)
                                                  .arg(positiveShare)
                                                  .arg(order)
                                                  .arg(err)
                                                  .arg(bound)));
          }
        }
        const double worstForm = ops::gammaUp(k, u) * static_cast<double>(absSum);
        if (k >= 1000 && positiveShare == 0.5)
          QVERIFY2(bound < 0.55 * worstForm, qPrintable(QString::number(bound / worstForm)));
        if (positiveShare == 1.0)  // no cancellation: no gain, k·u·Σ|z| to first order
          QVERIFY(bound >= static_cast<double>(k) * u * static_cast<double>(absSum));
      }
  }

  /// beta != 1 keeps the worst-case form: the bias leaf fl(fl(β)·c) rounds twice. A review's
  /// counterexample (fp32, k = 1): β = 1 + 2^-22 + 2^-24 − 2^-40 rounds to 1 + 2^-22, fl(β̃·c) and
  /// fl(p + q) both round down, 3.25·2^-24 in all, above the signed-sum form's 2.5·2^-24.
  void betaKeepsTheWorstCaseForm() {
    const double beta = 1 + 0x1p-22 + 0x1p-24 - 0x1p-40, c = 1 + (0x1p21 - 1) * 0x1p-23;
    const double p = 0x1p-24 - 0x1p-40;
    const float pf = static_cast<float>(p), cf = static_cast<float>(c);
    QCOMPARE(static_cast<double>(pf), p);
    QCOMPARE(static_cast<double>(cf), c);
    const float candidate = pf * 1.0f + static_cast<float>(beta) * cf;
    const long double exact = static_cast<long double>(p) + static_cast<long double>(beta) * c;
    const double err = static_cast<double>(std::fabs(candidate - exact));
    OpCase k;
    k.op = "aten.addmm.default";
    k.precision = modelFor(Format::Fp32);
    k.outDtypes = {DType::Float32};
    k.inputs = {Tensor::point({1, 1}, DType::Float32, {c}),
                Tensor::point({1, 1}, DType::Float32, {p}),
                Tensor::point({1, 1}, DType::Float32, {1.0})};
    k.args = {in(0), in(1), in(2)};
    k.kwargs["beta"] = num(beta);
    const double bound = RuleCall(k).localError()[0].at(0).hi;
    QVERIFY2(err > 3.0 * 0x1p-24, qPrintable(QString::number(err / 0x1p-24)));
    QVERIFY2(err <= bound, qPrintable(QStringLiteral("%1 > %2").arg(err).arg(bound)));
  }

  void baddbmmMatchesNaiveLoop() {
    // beta·self + alpha·(batch1 @ batch2), self [3, 1] broadcast to [2, 3, 4], against a loop.
    std::mt19937_64 rng(9);
    OpCase c;
    c.op = "aten.baddbmm.default";
    c.precision = modelFor(Format::Fp64);
    c.outDtypes = {DType::Float64};
    c.inputs = {randomPoint({3, 1}, DType::Float64, rng, 2.0),
                randomPoint({2, 3, 5}, DType::Float64, rng, 2.0),
                randomPoint({2, 5, 4}, DType::Float64, rng, 2.0)};
    c.args = {in(0), in(1), in(2)};
    c.kwargs["beta"] = num(0.5);
    c.kwargs["alpha"] = num(-2.0);
    std::vector<Tensor> out;
    localErrorOutputs(c, &out);
    QCOMPARE(out[0].shape(), (Shape{2, 3, 4}));
    const auto s = c.inputs[0].values(), a = c.inputs[1].values(), b = c.inputs[2].values();
    for (int p = 0; p < 2; ++p)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) {
          double dot = 0;
          for (int k = 0; k < 5; ++k) dot += a[(p * 3 + i) * 5 + k] * b[(p * 5 + k) * 4 + j];
          const double expected = 0.5 * s[i] - 2.0 * dot;
          const double got = out[0].values()[(p * 3 + i) * 4 + j];
          QVERIFY2(std::fabs(got - expected) <= 1e-12 * (std::fabs(expected) + 1),
                   std::to_string(got - expected).c_str());
        }
  }

  void baddbmmAttentionMaskStaysExact() {
    // torch 1.13's multi-head attention: baddbmm(mask, q, kᵀ) with a causal −inf mask broadcast
    // over the heads. Masked entries are exactly −inf in every domain (not the entire line), the
    // others finite; with beta = 0 self is ignored, even a NaN in it.
    std::mt19937_64 rng(12);
    const double inf = __builtin_huge_val();
    std::vector<double> mask(16, 0.0);
    for (int i = 0; i < 4; ++i)
      for (int j = i + 1; j < 4; ++j) mask[static_cast<std::size_t>(i * 4 + j)] = -inf;
    for (Format f : kFormats) {
      OpCase c;
      c.op = "aten.baddbmm.default";
      c.precision = modelFor(f);
      c.outDtypes = {dtypeFor(f)};
      c.inputs = {Tensor::point({1, 4, 4}, dtypeFor(f), mask), input({3, 4, 5}, f, true, rng),
                  input({3, 5, 4}, f, true, rng)};
      c.args = {in(0), in(1), in(2)};
      if (f == Format::Fp32) c.kwargs["alpha"] = num(0.25);
      const EnclosureReport r = checkEnclosure(c, 50, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      const Tensor e = intervalOutputs(c)[0];
      for (std::int64_t i = 0; i < e.numel(); ++i) {
        const bool masked = mask[static_cast<std::size_t>(i % 16)] == -inf;
        const Interval v = e.at(i);
        if (masked)
          QVERIFY2(v.lo == -inf && v.hi == -inf, std::to_string(i).c_str());
        else
          QVERIFY2(std::isfinite(v.lo) && std::isfinite(v.hi), std::to_string(i).c_str());
      }
      c.kwargs["beta"] = num(0.0);
      c.inputs[0] = Tensor::full({1, 4, 4}, dtypeFor(f), __builtin_nan(""));
      const Tensor z = intervalOutputs(c)[0];
      for (std::int64_t i = 0; i < z.numel(); ++i)
        QVERIFY(std::isfinite(z.at(i).lo) && std::isfinite(z.at(i).hi));
      QCOMPARE(checkEnclosure(c, 10, rng).escapes, 0);
    }
  }

  // GemmOrder::PerProduct (the baselines' one execution) against the model's own arithmetic: a
  // copy of the generator replays its draws (tf32 truncation, alpha and beta, the permutation,
  // FMA or not, the bias as a term), and every element must equal, bit for bit, the sequential
  // chain of mulIn/addIn/fmaIn in that order, and lie inside intervalGemm's enclosure. Fails when
  // the float or double fast path rounds differently from the model (e.g. a product not rounded
  // before its add) or the chain walks another order.
  void perProductOrderIsAChainOfTheModel() {
    std::mt19937_64 rng(77);
    const auto backend = createCpuBackend(1);
    int fusedChains = 0, roundedChains = 0, biasTerms = 0, elements = 0, special = 0;
    constexpr double kInf = std::numeric_limits<double>::infinity();
    // Zeros of both signs, subnormals of the formats (0x1p-140: fp32's; 0x1p-20: fp16's; the
    // others flush), a product overflowing fp16 or fp32 (1e30) or fp64 (1e200), infinities, NaN.
    const double kSpecial[] = {0.0,  -0.0,   0x1p-1074, -0x1p-140, 0x1p-20,
                               1e30, -1e200, kInf,      -kInf,     std::nan("")};
    for (int caseNo = 0; caseNo < 600; ++caseNo) {
      const Format f = kFormats[caseNo % 5];
      const GemmModel gm = gemmModel(modelFor(f), dtypeFor(f));
      const std::int64_t m = dim(rng), k = dim(rng) * (caseNo % 7 == 0 ? 20 : 1), n = dim(rng);
      Tensor A = randomPoint({m, k}, dtypeFor(Format::Fp64), rng, spreadFor(f));
      Tensor B = randomPoint({k, n}, dtypeFor(Format::Fp64), rng, spreadFor(f));
      const bool withBias = caseNo % 3 != 0;
      const double alpha = caseNo % 4 == 1 ? -0.1 : 1.0, beta = caseNo % 5 == 2 ? 0.5 : 1.0;
      std::vector<double> bias(static_cast<std::size_t>(m * n));
      for (double& v : bias) v = roundNearest(wideValue(rng, spreadFor(f)), gm.out);
      if (caseNo % 4 == 3) {  // an eighth of the operands and the bias special (own generator)
        std::mt19937_64 pick(static_cast<std::uint64_t>(caseNo));
        const auto sprinkle = [&](std::span<double> v, Format to) {
          for (double& x : v)
            if (pick() % 8 == 0) x = roundNearest(kSpecial[pick() % std::size(kSpecial)], to);
        };
        sprinkle(A.mutableLo(), Format::Fp64);
        sprinkle(B.mutableLo(), Format::Fp64);
        sprinkle(bias, gm.out);
      }
      const std::uint64_t seed = rng();
      std::vector<double> out(static_cast<std::size_t>(m * n));
      std::mt19937_64 draws(seed);
      randomGemm(A, 0, B, 0, m, k, n, gm, withBias ? bias.data() : nullptr, alpha, beta, draws,
                 out.data(), GemmOrder::PerProduct);

      std::mt19937_64 replay(seed);  // the same draws, in randomGemm's order
      const bool truncate = gm.in == Format::Tf32 && (replay() & 1);
      const auto in = [&](double v) {
        return gm.in == Format::Fp64
                   ? v
                   : (truncate ? roundTowardZero(v, gm.in) : roundNearest(v, gm.in));
      };
      const double al = randomScalar(alpha, gm.acc, replay),
                   bl = randomScalar(beta, gm.acc, replay);
      std::vector<std::size_t> perm(static_cast<std::size_t>(k));
      std::iota(perm.begin(), perm.end(), std::size_t{0});
      std::shuffle(perm.begin(), perm.end(), replay);
      const bool fused = replay() & 1;
      const bool biasTerm = withBias && alpha == 1.0 && beta == 1.0 && (replay() & 1);
      (fused ? fusedChains : roundedChains) += m * n > 0 && k > 1;
      biasTerms += biasTerm && m * n > 0;

      std::vector<double> lo(out.size()), hi(out.size());
      std::vector<Interval> biasIv;
      for (double v : bias) biasIv.push_back({v, v});
      intervalGemm(*backend, A, 0, B, 0, m, k, n, gm, withBias ? biasIv.data() : nullptr, alpha,
                   beta, lo.data(), hi.data());
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          const auto u = static_cast<std::size_t>(i * n + j);
          const auto a = [&](std::size_t q) {
            return in(A.values()[static_cast<std::size_t>(i * k) + q]);
          };
          const auto b = [&](std::size_t q) {
            return in(B.values()[q * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)]);
          };
          double acc = 0.0;
          std::size_t p = 0;
          if (biasTerm) {
            acc = roundNearest(bias[u], gm.acc);
          } else if (k > 0) {
            acc = mulIn(a(perm[0]), b(perm[0]), gm.acc);
            p = 1;
          }
          for (; p < perm.size(); ++p)
            acc = fused ? fmaIn(a(perm[p]), b(perm[p]), acc, gm.acc)
                        : addIn(acc, mulIn(a(perm[p]), b(perm[p]), gm.acc), gm.acc);
          if (!biasTerm) {
            if (alpha != 1.0) acc = mulIn(al, acc, gm.acc);
            if (withBias)
              acc = addIn(acc, beta == 1.0 ? bias[u] : mulIn(bl, bias[u], gm.acc), gm.acc);
          }
          const double expected = roundNearest(acc, gm.out);
          const std::string where = "case " + std::to_string(caseNo) + " format " +
                                    std::to_string(static_cast<int>(f)) + " element (" +
                                    std::to_string(i) + ", " + std::to_string(j) + ")";
          QVERIFY2(out[u] == expected || (std::isnan(out[u]) && std::isnan(expected)),
                   (where + ": " + std::to_string(out[u]) + " vs the model's chain " +
                    std::to_string(expected))
                       .c_str());
          QVERIFY2(std::isnan(out[u]) || (lo[u] <= out[u] && out[u] <= hi[u]),
                   (where + ": outside intervalGemm's enclosure").c_str());
          ++elements;
          special += !std::isfinite(out[u]) || (out[u] != 0 && std::fabs(out[u]) < 0x1p-126);
        }
    }
    qInfo(
        "per-product order: %d elements, %d fused and %d rounded-product chains, %d with the "
        "bias as a term, %d results infinite, NaN or below fp32's normal range",
        elements, fusedChains, roundedChains, biasTerms, special);
    QVERIFY(fusedChains > 20 && roundedChains > 20 && biasTerms > 20 && special > 100);
  }

  void shapeMismatchIsAnError() {
    OpCase c;
    c.op = "aten.mm.default";
    c.outDtypes = {DType::Float32};
    c.inputs = {Tensor::full({2, 3}, DType::Float32, 1.0),
                Tensor::full({4, 2}, DType::Float32, 1.0)};
    c.args = {in(0), in(1)};
    std::mt19937_64 rng(1);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
    c.op = "aten.mv.default";  // mv wants a matrix and a vector, not two matrices
    c.inputs[1] = Tensor::full({3, 1}, DType::Float32, 1.0);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestMatmulOps)
#include "test_matmul_ops.moc"
