// Piecewise and softplus-family activation rules (hardswish hardsigmoid leaky_relu elu softplus
// mish, their backward ops and in-place forms): per op and precision, 1,000 random cases (shapes
// with size-0 and size-1 dims, wide value ranges, point and interval inputs, a quarter of the
// elements placed exactly on or next to the breakpoints) with zero escapes from the interval rule
// and |random − point| ≤ localError; vjp against finite differences away from the breakpoints;
// each backward op against the vjp of its forward op in point arithmetic (breakpoints included);
// and the first-order contract next to a breakpoint: for an input moved by up to one storage
// rounding, |computed − point − slope·δ| ≤ localError.
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

double spreadFor(Format f) { return f == Format::Fp16 ? 4.0 : 12.0; }

/// Replaces about a quarter of the elements of t (point or interval) by breakpoints or their
/// neighbours in the storage format (interval elements become degenerate or straddle them).
Tensor withKinks(const Tensor& t, const std::vector<double>& kinks, std::mt19937_64& rng) {
  if (kinks.empty() || t.numel() == 0) return t;
  const Format f = storageFormat(t.dtype()).value_or(Format::Fp64);
  std::vector<double> lo(t.lo().begin(), t.lo().end()), hi(t.hi().begin(), t.hi().end());
  for (std::size_t i = 0; i < lo.size(); ++i) {
    if (rng() % 4 != 0) continue;
    double k = roundToFormat(kinks[rng() % kinks.size()], f, RoundingDirection::Nearest);
    switch (rng() % 4) {
      case 1:
        k = roundToFormat(std::nextafter(k, -HUGE_VAL), f, RoundingDirection::Down);
        break;
      case 2:
        k = roundToFormat(std::nextafter(k, HUGE_VAL), f, RoundingDirection::Up);
        break;
      default:
        break;
    }
    lo[i] = hi[i] = k;
    if (t.isInterval() && rng() % 2) {  // straddle the breakpoint
      lo[i] = roundToFormat(std::nextafter(k, -HUGE_VAL), f, RoundingDirection::Down);
      hi[i] = roundToFormat(std::nextafter(k, HUGE_VAL), f, RoundingDirection::Up);
    }
  }
  return t.isInterval() ? Tensor::interval(t.shape(), t.dtype(), lo, hi)
                        : Tensor::point(t.shape(), t.dtype(), lo);
}

Tensor someValues(const Shape& s, DType t, bool iv, Format f, std::mt19937_64& rng) {
  return rng() % 2 ? uniform(s, t, iv, rng, 8.0) : values(s, t, iv, rng, spreadFor(f));
}

/// y = op(x, extra...); x has kinks at `kinks`.
CaseMaker unary(const std::string& op, std::vector<IrValue> extra = {},
                std::vector<double> kinks = {}) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = op;
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = randomShape(static_cast<int>(rng() % 4), rng);
    c.inputs.push_back(withKinks(someValues(s, t, iv, f, rng), kinks, rng));
    c.args.push_back(in(0));
    for (const auto& e : extra) c.args.push_back(e);
    c.outDtypes = {t};
    return c;
  };
}

/// z = op(grad, x, extra...) (or the positions given by `layout`: a callback placing in(0)=grad
/// and in(1)=x among the constants).
using Layout = std::function<std::vector<IrValue>()>;
CaseMaker binary(const std::string& op, Layout layout, std::vector<double> kinks, double xLo = 0.0,
                 double xHi = 0.0) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = op;
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = randomShape(static_cast<int>(rng() % 4), rng);
    const Shape sx = rng() % 4 == 0 ? broadcastableTo(s, rng) : s;
    c.inputs.push_back(values(s, t, iv, rng, spreadFor(f)));
    const Tensor x = xHi > xLo ? uniform(sx, t, iv, rng, 0.5 * (xHi - xLo), 0.5 * (xHi + xLo))
                               : someValues(sx, t, iv, f, rng);
    c.inputs.push_back(withKinks(x, kinks, rng));
    c.args = layout();
    c.outDtypes = {t};
    return c;
  };
}

Layout gradSelf(std::vector<IrValue> extra = {}) {
  return [extra] {
    std::vector<IrValue> a{in(0), in(1)};
    for (const auto& e : extra) a.push_back(e);
    return a;
  };
}

/// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result).
Layout eluBackwardLayout(double alpha, double scale, double inputScale, bool isResult) {
  return [=] {
    return std::vector<IrValue>{in(0),           num(alpha),     num(scale),
                                num(inputScale), flag(isResult), in(1)};
  };
}

/// Moderate values for finite differences (|x| ≤ 3), kept away from the breakpoints.
CaseMaker forVjp(CaseMaker m, std::vector<double> kinks = {}) {
  return [m, kinks](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c = m(f, iv, rng);
    for (auto& x : c.inputs) {
      std::vector<double> v(static_cast<std::size_t>(x.numel()));
      std::uniform_real_distribution<double> u(-3.0, 3.0);
      for (double& e : v) {
        do e = u(rng);
        while (std::any_of(kinks.begin(), kinks.end(),
                           [e](double k) { return std::fabs(e - k) < 1e-3; }));
      }
      x = Tensor::point(x.shape(), x.dtype(), v);
    }
    return c;
  };
}

constexpr double kSeluAlpha = 1.6732632423543772, kSeluScale = 1.0507009873554805;

/// The backward op against the vjp of the forward op: backward(g, x) = vjp_forward(x)[g].
/// `backwardArgs` builds the backward node's arguments from the forward case's (g is in1).
void checkBackwardMatchesVjp(
    const std::string& name, const CaseMaker& forward, const std::string& backwardOp,
    std::function<OpCase(const OpCase&, const Tensor& g, const Tensor& y)> backwardCase) {
  std::mt19937_64 rng(std::hash<std::string>{}(name) + 11);
  double worst = 0.0;
  for (int i = 0; i < 200; ++i) {
    const OpCase fc = forward(Format::Fp64, false, rng);
    const RuleCall fwd(fc);
    const Tensor& y = fwd.point()[0];
    const Tensor g = randomPoint(y.shape(), y.dtype(), rng, 3.0);
    const auto grads = fwd.vjp({g});
    const OpCase bc = backwardCase(fc, g, y);
    QCOMPARE(bc.op, backwardOp);
    const RuleCall bwd(bc);
    const Tensor& z = bwd.point()[0];
    QVERIFY(grads[0].has_value());
    for (std::int64_t k = 0; k < z.numel(); ++k) {
      const double a = grads[0]->values()[static_cast<std::size_t>(k)];
      const double b = z.values()[static_cast<std::size_t>(k)];
      // Relative to |g| too: elu_backward from the result computes y + α·λ, which cancels.
      const double gk = std::fabs(g.values()[static_cast<std::size_t>(k)]);
      const double err = std::fabs(a - b) / (std::fabs(a) + std::fabs(b) + gk + 1e-300);
      if (err > worst) worst = err;
      QVERIFY2(err <= 1e-12,
               (name + ": vjp " + std::to_string(a) + " vs backward op " + std::to_string(b) +
                " at x = " + std::to_string(fc.inputs[0].values()[static_cast<std::size_t>(k)]))
                   .c_str());
    }
  }
  qInfo("%-44s backward op vs forward vjp: max rel difference %.3g", name.c_str(), worst);
}

/// First order next to a breakpoint. The reference evaluates exact values v on or near a
/// breakpoint k (|v − k| ≤ 2ρ(k), ρ one storage rounding); the candidate holds x = RN(v) in its
/// format and runs the op on x. The first-order method predicts op(v) + slope(v)·(x − v), and
/// charges localError(v) to this op: that must cover the linearization error (the branch switch
/// when x and v lie on different sides of k) besides the rounding. So
///   |random(x) − point(v) − slope(v)·(x − v)| ≤ localError(v) + r(x),
/// with r(x) the rounding of the op at x alone (distance from point(x) to the interval rule's
/// enclosure at x, which contains random(x)): the linearization error of a smooth or linear piece
/// is O(δ²) and within localError(v); a switch of branches is not covered unless localError(v)
/// covers it. `xInput` is the position of x among the case's inputs.
void checkKinkFirstOrder(const std::string& name, const CaseMaker& make,
                         const std::vector<double>& kinks, std::size_t xInput) {
  std::mt19937_64 rng(std::hash<std::string>{}(name) + 13);
  int checks = 0, flipped = 0;
  double worstRatio = 0.0;
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (Format f : kFormats) {
    for (int i = 0; i < 200; ++i) {
      OpCase c = make(f, false, rng);
      const Shape xs = c.inputs[xInput].shape();
      if (c.inputs[xInput].numel() == 0) continue;
      std::vector<double> v(static_cast<std::size_t>(numel(xs))), xc(v.size());
      for (std::size_t k = 0; k < v.size(); ++k) {
        const double kink = kinks[rng() % kinks.size()];
        v[k] = rng() % 4 == 0 ? kink : kink + u(rng) * ops::roundingError(kink, f, f);
        xc[k] = roundToFormat(v[k], f, RoundingDirection::Nearest);
        flipped += (v[k] > kink) != (xc[k] > kink);
      }
      OpCase exact = c, stored = c;
      exact.inputs[xInput] = Tensor::point(xs, c.inputs[xInput].dtype(), v);
      stored.inputs[xInput] = Tensor::point(xs, c.inputs[xInput].dtype(), xc);
      // The other inputs (grad) as the candidate holds them too.
      for (std::size_t j = 0; j < c.inputs.size(); ++j)
        if (j != xInput) exact.inputs[j] = stored.inputs[j] = c.inputs[j];
      const RuleCall ref(exact);
      const Tensor& y = ref.point()[0];
      // Slopes per output element with respect to its own x (skip broadcast x).
      if (xs != y.shape()) continue;
      const Tensor le = ref.localError()[0];
      const auto grads = ref.vjp({Tensor::full(y.shape(), y.dtype(), 1.0)});
      const Tensor& slope = *grads[xInput];
      const RuleCall cand(stored);
      const Tensor encl = cand.interval()[0];
      for (int rep = 0; rep < 3; ++rep) {
        const Tensor r = cand.random(rng)[0];
        for (std::size_t k = 0; k < v.size(); ++k) {
          const double predicted = y.values()[k] + slope.values()[k] * (xc[k] - v[k]);
          const double miss = std::fabs(r.values()[k] - predicted);
          const double yx = cand.point()[0].values()[k];
          const Interval ek = encl.at(static_cast<std::int64_t>(k));
          const double rx = std::fmax(ek.hi - yx, yx - ek.lo);
          const double bound = (le.values()[k] + rx) * (1.0 + 1e-6) + 1e-300;
          ++checks;
          worstRatio = std::fmax(worstRatio, miss / bound);
          QVERIFY2(miss <= bound,
                   qPrintable(QString("%1 %2: v = %3, stored %4, grad %5: the linearization "
                                      "misses by %6 > localError %7")
                                  .arg(QString::fromStdString(name), formatName(f))
                                  .arg(v[k], 0, 'g', 17)
                                  .arg(xc[k], 0, 'g', 17)
                                  .arg(stored.inputs[0].values()[k % static_cast<std::size_t>(
                                                                         stored.inputs[0].numel())],
                                       0, 'g', 17)
                                  .arg(miss, 0, 'g', 17)
                                  .arg(le.values()[k], 0, 'g', 17)));
        }
      }
    }
  }
  qInfo(
      "%-44s first order at breakpoints: %d checks (%d stored across the breakpoint), "
      "max miss/bound %.3g",
      name.c_str(), checks, flipped, worstRatio);
}

}  // namespace

class TestPiecewiseActivationOps : public QObject {
  Q_OBJECT
 private slots:
  void hardswish() {
    for (const char* op : {"aten.hardswish.default", "aten.hardswish_.default"}) {
      checkAllFormats(op, unary(op, {}, {-3.0, 3.0}));
      checkVjpCases(op, forVjp(unary(op), {-3.0, 3.0}));
    }
  }
  void hardsigmoid() {
    for (const char* op : {"aten.hardsigmoid.default", "aten.hardsigmoid_.default"}) {
      checkAllFormats(op, unary(op, {}, {-3.0, 3.0}));
      checkVjpCases(op, forVjp(unary(op), {-3.0, 3.0}));
    }
  }
  void hardtanh() {
    // nn.Hardtanh's defaults (-1, 1) and ReLU6 (0, 6), MobileNetV2's activation.
    for (const char* op : {"aten.hardtanh.default", "aten.hardtanh_.default"}) {
      checkAllFormats(op, unary(op, {}, {-1.0, 1.0}));
      checkVjpCases(op, forVjp(unary(op), {-1.0, 1.0}));
      checkAllFormats(std::string(op) + " (relu6)", unary(op, {num(0.0), num(6.0)}, {0.0, 6.0}));
    }
  }
  void leakyRelu() {
    for (double slope : {0.01, 0.2, -0.5}) {
      for (const char* op : {"aten.leaky_relu.default", "aten.leaky_relu_.default"}) {
        const std::string name = std::string(op) + " slope " + std::to_string(slope);
        checkAllFormats(name, unary(op, {num(slope)}, {0.0}));
        checkVjpCases(name, forVjp(unary(op, {num(slope)}), {0.0}));
      }
    }
    // The default slope when the argument is left out.
    checkAllFormats("leaky_relu (default slope)", unary("aten.leaky_relu.default", {}, {0.0}));
  }
  void elu() {
    for (const char* op : {"aten.elu.default", "aten.elu_.default"}) {
      checkAllFormats(op, unary(op, {}, {0.0}));
      checkVjpCases(op, forVjp(unary(op), {0.0}));
    }
    const auto selu = unary("aten.elu.default", {num(kSeluAlpha), num(kSeluScale)}, {0.0});
    checkAllFormats("elu (selu constants)", selu);
    checkVjpCases("elu (selu constants)", forVjp(selu, {0.0}));
    const auto scaled = unary("aten.elu.default", {num(0.5), num(2.0), integer(3)}, {0.0});
    checkAllFormats("elu (alpha 0.5, scale 2, input_scale 3)", scaled);
    checkVjpCases("elu (alpha 0.5, scale 2, input_scale 3)", forVjp(scaled, {0.0}));
  }
  void celu() {
    for (const double alpha : {1.0, 0.5, 3.0}) {
      for (const char* op : {"aten.celu.default", "aten.celu_.default"}) {
        const std::string name = std::string(op) + " alpha " + std::to_string(alpha);
        checkAllFormats(name, unary(op, {num(alpha)}, {0.0}));
        checkVjpCases(name, forVjp(unary(op, {num(alpha)}), {0.0}));
      }
    }
    // celu's backward in the trace: elu_backward(g, alpha, 1, 1/alpha, false, x)
    const auto back =
        binary("aten.elu_backward.default", eluBackwardLayout(0.5, 1.0, 2.0, false), {0.0});
    checkAllFormats("elu_backward (celu alpha 0.5)", back);
  }
  void softplus() {
    const auto d = unary("aten.softplus.default", {}, {20.0});
    checkAllFormats("softplus", d);
    checkVjpCases("softplus", forVjp(d));
    const auto b = unary("aten.softplus.default", {num(2.0), num(3.0)}, {1.5});
    checkAllFormats("softplus (beta 2, threshold 3)", b);
    checkVjpCases("softplus (beta 2, threshold 3)", forVjp(b, {1.5}));
  }
  void mish() {
    for (const char* op : {"aten.mish.default", "aten.mish_.default"}) {
      checkAllFormats(op, unary(op));
      checkVjpCases(op, forVjp(unary(op)));
    }
  }
  void backwardOps() {
    const std::vector<std::pair<std::string, CaseMaker>> ops = {
        {"hardswish_backward", binary("aten.hardswish_backward.default", gradSelf(), {-3.0, 3.0})},
        {"hardsigmoid_backward",
         binary("aten.hardsigmoid_backward.default", gradSelf(), {-3.0, 3.0})},
        {"hardtanh_backward (relu6)",
         binary("aten.hardtanh_backward.default", gradSelf({num(0.0), num(6.0)}), {0.0, 6.0})},
        {"leaky_relu_backward",
         binary("aten.leaky_relu_backward.default", gradSelf({num(0.01), flag(false)}), {0.0})},
        {"leaky_relu_backward (result)",
         binary("aten.leaky_relu_backward.default", gradSelf({num(0.2), flag(true)}), {0.0})},
        {"elu_backward (input)",
         binary("aten.elu_backward.default", eluBackwardLayout(kSeluAlpha, kSeluScale, 1.0, false),
                {0.0})},
        {"elu_backward (result)", binary("aten.elu_backward.default",
                                         eluBackwardLayout(1.0, 1.0, 1.0, true), {0.0}, -1.0, 8.0)},
        {"elu_backward (result, scaled)",
         binary("aten.elu_backward.default", eluBackwardLayout(0.5, 2.0, 3.0, true), {0.0}, -1.0,
                8.0)},
        {"softplus_backward",
         binary("aten.softplus_backward.default", gradSelf({num(1.0), num(20.0)}), {20.0})},
        {"softplus_backward (beta 2, threshold 3)",
         binary("aten.softplus_backward.default", gradSelf({num(2.0), num(3.0)}), {1.5})},
        {"mish_backward", binary("aten.mish_backward.default", gradSelf(), {})},
    };
    for (const auto& [name, make] : ops) {
      checkAllFormats(name, make);
      checkVjpCases(name, forVjp(make, {-3.0, 0.0, 1.5, 3.0}));
    }
  }
  void backwardOpsMatchForwardVjp() {
    const auto simple = [](const std::string& op, std::vector<IrValue> extra = {}) {
      return [op, extra](const OpCase& fc, const Tensor& g, const Tensor&) {
        OpCase b;
        b.op = op;
        b.precision = fc.precision;
        b.inputs = {g, fc.inputs[0]};
        b.args = {in(0), in(1)};
        for (const auto& e : extra) b.args.push_back(e);
        b.outDtypes = fc.outDtypes;
        return b;
      };
    };
    checkBackwardMatchesVjp("hardswish", unary("aten.hardswish.default", {}, {-3.0, 3.0}),
                            "aten.hardswish_backward.default",
                            simple("aten.hardswish_backward.default"));
    checkBackwardMatchesVjp("hardsigmoid", unary("aten.hardsigmoid.default", {}, {-3.0, 3.0}),
                            "aten.hardsigmoid_backward.default",
                            simple("aten.hardsigmoid_backward.default"));
    checkBackwardMatchesVjp("hardtanh (relu6)",
                            unary("aten.hardtanh.default", {num(0.0), num(6.0)}, {0.0, 6.0}),
                            "aten.hardtanh_backward.default",
                            simple("aten.hardtanh_backward.default", {num(0.0), num(6.0)}));
    checkBackwardMatchesVjp("leaky_relu", unary("aten.leaky_relu.default", {num(0.1)}, {0.0}),
                            "aten.leaky_relu_backward.default",
                            simple("aten.leaky_relu_backward.default", {num(0.1), flag(false)}));
    checkBackwardMatchesVjp("softplus", unary("aten.softplus.default", {num(2.0), num(3.0)}, {1.5}),
                            "aten.softplus_backward.default",
                            simple("aten.softplus_backward.default", {num(2.0), num(3.0)}));
    checkBackwardMatchesVjp("mish", unary("aten.mish.default"), "aten.mish_backward.default",
                            simple("aten.mish_backward.default"));
    for (bool isResult : {false, true}) {
      checkBackwardMatchesVjp(
          std::string("elu (is_result ") + (isResult ? "true)" : "false)"),
          unary("aten.elu.default", {num(kSeluAlpha), num(kSeluScale), num(1.5)}, {0.0}),
          "aten.elu_backward.default",
          [isResult](const OpCase& fc, const Tensor& g, const Tensor& y) {
            OpCase b;
            b.op = "aten.elu_backward.default";
            b.precision = fc.precision;
            b.inputs = {g, isResult ? y : fc.inputs[0]};
            b.args = eluBackwardLayout(kSeluAlpha, kSeluScale, 1.5, isResult)();
            b.outDtypes = fc.outDtypes;
            return b;
          });
    }
  }
  void firstOrderAtBreakpoints() {
    checkKinkFirstOrder("hardswish", unary("aten.hardswish.default"), {-3.0, 3.0}, 0);
    checkKinkFirstOrder("hardsigmoid", unary("aten.hardsigmoid.default"), {-3.0, 3.0}, 0);
    checkKinkFirstOrder("hardtanh (relu6)", unary("aten.hardtanh.default", {num(0.0), num(6.0)}),
                        {0.0, 6.0}, 0);
    checkKinkFirstOrder("leaky_relu", unary("aten.leaky_relu.default", {num(0.01)}), {0.0}, 0);
    checkKinkFirstOrder("elu", unary("aten.elu.default"), {0.0}, 0);
    checkKinkFirstOrder("celu (alpha 0.5)", unary("aten.celu.default", {num(0.5)}), {0.0}, 0);
    checkKinkFirstOrder("softplus (beta 2, threshold 3)",
                        unary("aten.softplus.default", {num(2.0), num(3.0)}), {1.5}, 0);
    checkKinkFirstOrder("hardswish_backward",
                        binary("aten.hardswish_backward.default", gradSelf(), {}), {-3.0, 3.0}, 1);
    checkKinkFirstOrder("hardsigmoid_backward",
                        binary("aten.hardsigmoid_backward.default", gradSelf(), {}), {-3.0, 3.0},
                        1);
  }
  void badArgumentsAreErrors() {
    std::mt19937_64 rng(3);
    OpCase c = binary("aten.leaky_relu_backward.default", gradSelf({num(-0.5), flag(true)}), {})(
        Format::Fp32, false, rng);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
    OpCase s = unary("aten.softplus.default", {num(0.0)})(Format::Fp32, false, rng);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(s, 1, rng));
    OpCase z = unary("aten.celu.default", {num(0.0)})(Format::Fp32, false, rng);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(z, 1, rng));
    OpCase h = unary("aten.hardtanh.default", {num(2.0), num(1.0)})(Format::Fp32, false, rng);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(h, 1, rng));
    OpCase i = unary("aten.hardswish.default")(Format::Fp32, false, rng);
    i.inputs[0] = Tensor::point({2}, DType::Int64, {1.0, 2.0});
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(i, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestPiecewiseActivationOps)
#include "test_piecewise_activation_ops.moc"
