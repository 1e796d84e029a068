// Batch norm op rules (native_batch_norm, the _native_batch_norm_legit family and
// native_batch_norm_backward): per op and precision, random cases from channel_norm_cases.h
// (N×C×H×W, N×C×L and N×C inputs, training and eval, weight/bias/running stats present or None,
// point and interval inputs, parameters in the input dtype or fp32) with zero escapes from the
// interval rule (random executions use two-pass, Welford and pairwise moments, every affine form
// and the stored-statistics variants), local errors against observed rounding, vjp against finite
// differences, the backward rule against the forward's vjp in point arithmetic, and the shapes
// of the saved statistics in eval mode.
#include "core/kernels/kernel_bodies.h"
#include "core/ops/broadcasting.h"
#include "tests/core/ops/channel_norm_cases.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;
using namespace lossbound::test::norm;

namespace {

CaseMaker forward(BnOp op, std::int64_t minPerChannel = 0) {
  return [op, minPerChannel](Format f, bool iv, std::mt19937_64& rng) {
    return bnForwardCase(op, f, iv, rng, minPerChannel);
  };
}

/// Returns max |a − b| / max(max|b|, 1) over two point tensors of equal size (channels of one
/// element have a zero gradient that the backward's closed form reaches only up to rounding).
double relDiff(const Tensor& a, const Tensor& b) {
  double d = 0.0, m = 1.0;
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    d = std::fmax(d, std::fabs(a.values()[static_cast<std::size_t>(i)] -
                               b.values()[static_cast<std::size_t>(i)]));
    m = std::fmax(m, std::fabs(b.values()[static_cast<std::size_t>(i)]));
  }
  return d / m;
}

}  // namespace

class TestBatchNormOps : public QObject {
  Q_OBJECT
 private slots:
  void nativeBatchNorm() {
    checkAllFormats("native_batch_norm", forward(BnOp::Native));
    checkVjpCases("native_batch_norm", moderate(forward(BnOp::Native, 2), 1));
  }
  void legitOverloads() {
    for (BnOp op : {BnOp::Legit, BnOp::NoStats, BnOp::NoTraining, BnOp::Functional}) {
      checkAllFormats(bnOpName(op), forward(op), 400);
      checkVjpCases(bnOpName(op), moderate(forward(op, 2), 1), 25);
    }
  }
  void batchNormBackward() {
    checkAllFormats("native_batch_norm_backward", bnBackwardCase);
    checkVjpCases("native_batch_norm_backward", moderate(bnBackwardCase, 2));
  }
  void backwardIsTheForwardVjp() {
    // native_batch_norm_backward(dy, x, w, rm, rv, save_mean, save_invstd, train) in binary64
    // against the vjp of native_batch_norm with output gradients (dy, 0, 0): the same derivative,
    // in training (through the batch statistics) and in eval (through the running stats).
    std::mt19937_64 rng(11);
    std::normal_distribution<double> nd;
    OpContext ctx{modelFor(std::nullopt), cpuBackend(), nullptr};
    double worst = 0.0;
    int compared = 0;
    for (int i = 0; i < 200; ++i) {
      const OpCase fc = moderate(forward(BnOp::Native, 1), 1)(Format::Fp64, false, rng);
      const Bound fb(fc);
      const std::vector<Tensor> out = fb.rule().point(fb.args(), ctx);
      std::vector<double> dyv(static_cast<std::size_t>(out[0].numel()));
      for (double& v : dyv) v = nd(rng);
      const Tensor dy = Tensor::point(out[0].shape(), DType::Float64, dyv);
      const std::vector<Tensor> g{dy, Tensor::full(out[1].shape(), out[1].dtype(), 0.0),
                                  Tensor::full(out[2].shape(), out[2].dtype(), 0.0)};
      const auto vjp = fb.rule().vjp(fb.args(), out, g, ctx);
      // The backward case: the forward's tensors and its saved statistics.
      const bool training = fc.args[5].boolValue;
      const auto tensorArg = [&](std::size_t pos) -> const Tensor* {
        return fc.args[pos].kind == IrValue::Kind::Ref
                   ? &fc.inputs[static_cast<std::size_t>(
                         std::stoi(fc.args[pos].ref.name.substr(2)))]
                   : nullptr;
      };
      OpCase bc;
      bc.op = "aten.native_batch_norm_backward.default";
      bc.precision = fc.precision;
      bc.inputs = {dy, fc.inputs[0], out[1], out[2]};
      bc.args = {in(0), in(1)};
      int k = 4;
      for (std::size_t pos : {1, 3, 4}) {  // weight, running_mean, running_var
        if (const Tensor* t = tensorArg(pos)) {
          bc.inputs.push_back(*t);
          bc.args.push_back(in(k++));
        } else {
          bc.args.push_back(none());
        }
      }
      bc.args.insert(bc.args.end(), {in(2), in(3), flag(training), num(1e-5),
                                     list({flag(true), flag(true), flag(true)})});
      bc.outDtypes = {DType::Float64, DType::Float64, DType::Float64};
      const Bound bb(bc);
      const std::vector<Tensor> grads = bb.rule().point(bb.args(), ctx);
      // vjp entries follow the forward's tensor inputs: x, then weight/bias/rm/rv when present.
      const OpArgs fa = fb.args();
      const std::vector<ValueRef> refs = fa.tensorRefs();
      for (std::size_t e = 0; e < refs.size(); ++e) {
        const Tensor* t = &fc.inputs[static_cast<std::size_t>(std::stoi(refs[e].name.substr(2)))];
        const Tensor* expected = nullptr;
        if (t == &fc.inputs[0]) expected = &grads[0];
        if (t == tensorArg(1)) expected = &grads[1];
        if (t == tensorArg(2)) expected = &grads[2];
        if (!expected || expected->numel() == 0) continue;
        const double d = relDiff(*vjp[e], *expected);
        QVERIFY2(d < 1e-9, qPrintable(QStringLiteral("case %1 (%2) input %3: backward vs vjp %4")
                                          .arg(i)
                                          .arg(training ? "train" : "eval")
                                          .arg(e)
                                          .arg(d)));
        worst = std::fmax(worst, d);
        ++compared;
      }
    }
    qInfo(
        "native_batch_norm_backward vs the vjp of native_batch_norm: %d tensors, max rel diff "
        "%.3g",
        compared, worst);
    QVERIFY(compared > 300);
  }
  void evalStatisticsFollowTheTrace() {
    // Eval mode: save_mean/save_invstd are [0] (PyTorch CPU) unless the trace says [C] (CUDA and
    // the decomposition return running_mean and 1/sqrt(running_var + eps)).
    std::mt19937_64 rng(5);
    OpContext ctx{modelFor(std::nullopt), cpuBackend(), &rng};
    OpCase c;
    c.op = "aten.native_batch_norm.default";
    c.precision = modelFor(std::nullopt);
    c.inputs = {uniform({2, 3, 4}, DType::Float32, false, rng, 1.0),
                Tensor::point({3}, DType::Float32, {0.5, -1.0, 2.0}),
                Tensor::point({3}, DType::Float32, {0.25, 1.0, 4.0})};
    c.args = {in(0), none(), none(), in(1), in(2), flag(false), num(0.1), num(0.0)};
    c.outDtypes = {DType::Float32, DType::Float32, DType::Float32};
    const Bound empty(c, {{2, 3, 4}, {0}, {0}}), perChannel(c, {{2, 3, 4}, {3}, {3}});
    for (const auto& r :
         {empty.rule().point(empty.args(), ctx), empty.rule().interval(empty.args(), ctx),
          empty.rule().random(empty.args(), ctx)}) {
      QCOMPARE(r[1].shape(), Shape{0});
      QCOMPARE(r[2].shape(), Shape{0});
    }
    const std::vector<Tensor> p = perChannel.rule().point(perChannel.args(), ctx);
    const std::vector<Tensor> iv = perChannel.rule().interval(perChannel.args(), ctx);
    QCOMPARE(p[1].shape(), Shape{3});
    QCOMPARE(p[1].values()[1], -1.0);
    QCOMPARE(p[2].values()[2], 0.5);  // 1/sqrt(4 + 0)
    QVERIFY(contains(iv[2].at(2), 0.5) && contains(iv[1].at(0), 0.5));
  }
  /// adjointLocalError in training (a channel's statistics shared by its elements,
  /// ops::norm::normRowAdjoint): random cases of every format against 100 executions each, the
  /// bound and the probabilistic term (adjointFailure, channel_norm_cases.h).
  void adjointLocalErrorBoundsTheExecutions() {
    checkAdjointCases("native_batch_norm", forward(BnOp::Native, 64), 19);
    checkAdjointCases("native_batch_norm (short channels)", forward(BnOp::Native), 20);
  }
  /// Channels of 4,096 fp32 elements (centred, and shifted to 100): the adjoint term against 60
  /// executions for three adjoints (ones, ∝ y, random signs), and against the per-element worst
  /// cases put in quadrature that the probabilistic method used before.
  void adjointTermOnLargeChannels() {
    std::mt19937_64 rng(23);
    for (double off : {0.0, 100.0})
      checkLargeRows(largeNormCase("aten.native_batch_norm.default", {16, 4, 16, 16}, 4, off,
                                   {none(), none(), flag(true), num(0.1), num(1e-5)}, rng),
                     rng, "native_batch_norm", off);
  }
  /// A training-mode channel whose enclosures are far wider than its spread (every element in
  /// [−8, 8]: the variance's enclosure reaches 0, sup rstd = 1/sqrt(eps)) keeps its outputs near
  /// sqrt(n − 1)·|w| + |b| (Samuelson's bound, kernels::normalizedBound, in every affine form):
  /// within 1.1 times it, where 16·316·|w| was the bound before (a tenth of that with bf16 or
  /// fp16 statistics); and no execution escapes, of
  /// random points of the box nor of the rows that reach the bound (one element of the channel
  /// at one end, the rest at the other).
  void wideChannelsStayWithinSamuelsonsBound() {
    std::mt19937_64 rng(47);
    for (Format f : kFormats) {
      const DType t = dtypeFor(f);
      const Shape xs{4, 2, 16};  // 64 elements per channel
      const std::int64_t n = 64;
      const double lo = roundToFormat(-8.0, f, RoundingDirection::Down),
                   hi = roundToFormat(8.0, f, RoundingDirection::Up);
      OpCase c;
      c.op = "aten.native_batch_norm.default";
      c.precision = modelFor(std::nullopt);
      c.inputs = {
          Tensor::interval(xs, t, std::vector<double>(128, lo), std::vector<double>(128, hi)),
          uniform({2}, t, true, rng, 0.5, 1.0), uniform({2}, t, false, rng, 0.5)};
      c.args = {in(0), in(1), in(2), none(), none(), flag(true), num(0.1), num(1e-5)};
      c.outDtypes = {t, t, t};
      double wMax = 0.0, bMax = 0.0;
      for (std::int64_t k = 0; k < 2; ++k) {
        wMax = std::max(wMax, kernels::magnitude(c.inputs[1].at(k)));
        bMax = std::max(bMax, std::fabs(c.inputs[2].at(k).lo));
      }
      const std::vector<Tensor> encl = RuleCall(c).interval();
      // bf16/fp16 inputs: PyTorch may store the mean and the CPU form's α and β in that format
      // (an error of ~2^-8·8 in μ̂, times sup rstd = 316): a tenth of 16·316·|w| there.
      const bool stored = f == Format::Bf16 || f == Format::Fp16;
      const double limit = stored ? 0.1 * 16.0 * 316.0 * wMax + bMax
                                  : 1.1 * std::sqrt(static_cast<double>(n - 1)) * wMax + bMax;
      for (std::int64_t i = 0; i < encl[0].numel(); ++i)
        QVERIFY2(kernels::magnitude(encl[0].at(i)) <= limit,
                 qPrintable(QStringLiteral("%1: |y[%2]| up to %3 > %4")
                                .arg(formatName(f))
                                .arg(i)
                                .arg(kernels::magnitude(encl[0].at(i)))
                                .arg(limit)));
      const EnclosureReport r = checkEnclosure(c, 100, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
      for (double top : {lo, hi}) {
        std::vector<double> x(128, top == lo ? hi : lo);
        x[0] = top;  // element 0 of channel 0 at one end, the rest of the channel at the other
        OpCase pt = c;
        pt.inputs[0] = Tensor::point(xs, t, x);
        pt.inputs[1] = sampleInside(c.inputs[1], rng);
        const RuleCall call(pt);
        for (int e = 0; e <= 20; ++e) {
          const std::vector<Tensor> out = e == 0 ? call.point() : call.random(rng);
          for (std::int64_t i = 0; i < out[0].numel(); ++i) {
            const double v = out[0].values()[static_cast<std::size_t>(i)];
            QVERIFY2(contains(encl[0].at(i), v),
                     qPrintable(QStringLiteral("%1: y[%2] = %3 outside [%4, %5]")
                                    .arg(formatName(f))
                                    .arg(i)
                                    .arg(v, 0, 'g', 17)
                                    .arg(encl[0].at(i).lo, 0, 'g', 17)
                                    .arg(encl[0].at(i).hi, 0, 'g', 17)));
          }
        }
      }
    }
  }
  /// Products that overflow fp32 where the normalized value does not: w·(x − μ̂) in CUDA's form
  /// (x = ±100, w = 1e37: t·w = 1e37 but fl(1e37·100) = inf) and fl(x·α) in the CPU form (x = 2,
  /// α = r·w = 1.8e38). The candidate then outputs inf; every execution stays inside (a review
  /// found both left out).
  void overflowingProductsStayInside() {
    std::mt19937_64 rng(53);
    for (const auto& [x, w] : {std::pair{std::vector<double>{-100.0, 100.0}, 1e37},
                               std::pair{std::vector<double>{0.0, 2.0}, 1.8e38}}) {
      OpCase c;
      c.op = "aten.native_batch_norm.default";
      c.precision = modelFor(std::nullopt);
      const DType t = DType::Float32;
      c.inputs = {
          Tensor::point({2, 1}, t, x),
          Tensor::point({1}, t, {roundToFormat(w, Format::Fp32, RoundingDirection::Nearest)}),
          Tensor::point({1}, t, {0.0})};
      c.args = {in(0), in(1), in(2), none(), none(), flag(true), num(0.1), num(1e-5)};
      c.outDtypes = {t, t, t};
      const EnclosureReport r = checkEnclosure(c, 400, rng);
      QVERIFY2(r.escapes == 0, r.firstEscape.c_str());
    }
  }
  void badArgumentsAreErrors() {
    std::mt19937_64 rng(4);
    OpCase c = bnForwardCase(BnOp::NoTraining, Format::Fp32, false, rng);
    c.op = "aten.native_batch_norm.default";
    // eval without running stats
    OpCase noStats = c;
    noStats.args = {in(0), none(), none(), none(), none(), flag(false), num(0.1), num(1e-5)};
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(noStats, 1, rng));
    // a rank-1 input
    OpCase rank1 = noStats;
    rank1.inputs[0] = Tensor::point({3}, DType::Float32, {1.0, 2.0, 3.0});
    rank1.args[5] = flag(true);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(rank1, 1, rng));
    // a weight of the wrong size
    OpCase badWeight = noStats;
    badWeight.args[5] = flag(true);
    badWeight.inputs.push_back(Tensor::point({99}, DType::Float32, std::vector<double>(99, 1.0)));
    badWeight.args[1] = in(static_cast<int>(badWeight.inputs.size()) - 1);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(badWeight, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestBatchNormOps)
#include "test_batch_norm_ops.moc"
