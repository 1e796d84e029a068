// Activation op rules (relu threshold_backward gelu gelu_backward silu silu_backward sigmoid
// sigmoid_backward tanh tanh_backward relu_ sigmoid_ tanh_): per op and precision, 1,000 random
// cases (shapes with size-0 and size-1 dims, wide value ranges, point and interval inputs) with
// zero escapes from the interval rule, |random − point| ≤ localError, and vjp against finite
// differences.
#include "core/backend.h"
#include "core/kernels/smooth_activation.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "tests/core/interval/mpfr_real.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

double spreadFor(Format f) { return f == Format::Fp16 ? 4.0 : 12.0; }

CaseMaker unary(const std::string& op, std::vector<IrValue> extra = {},
                std::map<std::string, IrValue> kwargs = {}) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = op;
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = randomShape(static_cast<int>(rng() % 4), rng);
    // Half the cases near the interesting range (|x| ≲ 8), half with a wide dynamic range.
    c.inputs.push_back(rng() % 2 ? uniform(s, t, iv, rng, 8.0)
                                 : values(s, t, iv, rng, spreadFor(f)));
    c.args.push_back(in(0));
    for (const auto& e : extra) c.args.push_back(e);
    c.kwargs = kwargs;
    c.outDtypes = {t};
    return c;
  };
}

/// Backward ops (grad, v): v is the forward input, or the forward output when `outputRange` > 0
/// (values uniform in [outputLo, outputRange]).
CaseMaker binary(const std::string& op, double outputLo, double outputHi,
                 std::vector<IrValue> extra = {}, std::map<std::string, IrValue> kwargs = {}) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = op;
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = randomShape(static_cast<int>(rng() % 4), rng);
    const Shape sx = rng() % 4 == 0 ? broadcastableTo(s, rng) : s;
    c.inputs.push_back(values(s, t, iv, rng, spreadFor(f)));
    if (outputHi > outputLo) {
      const double a = 0.5 * (outputHi - outputLo), m = 0.5 * (outputHi + outputLo);
      c.inputs.push_back(uniform(sx, t, iv, rng, a, m));
    } else {
      c.inputs.push_back(rng() % 2 ? uniform(sx, t, iv, rng, 8.0)
                                   : values(sx, t, iv, rng, spreadFor(f)));
    }
    c.args = {in(0), in(1)};
    for (const auto& e : extra) c.args.push_back(e);
    c.kwargs = kwargs;
    c.outDtypes = {t};
    return c;
  };
}

/// Moderate values for finite differences (|x| ≤ 3).
CaseMaker forVjp(CaseMaker m) {
  return [m](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c = m(f, iv, rng);
    for (auto& x : c.inputs) {
      std::vector<double> v(static_cast<std::size_t>(x.numel()));
      std::uniform_real_distribution<double> u(-3.0, 3.0);
      for (double& e : v) e = u(rng);
      x = Tensor::point(x.shape(), x.dtype(), v);
    }
    return c;
  };
}

IrValue str(const std::string& s) {
  IrValue v;
  v.kind = IrValue::Kind::String;
  v.stringValue = s;
  return v;
}

/// gelu inputs: `body` uniform in [-8, 8], `wide` in [-40, 40], as many ±2^e with e uniform in
/// [expoLo, expoHi], then `special`.
std::vector<double> geluInputs(unsigned seed, int body, int wide, double expoLo, double expoHi,
                               std::initializer_list<double> special) {
  std::mt19937_64 rng(seed);
  std::vector<double> xs;
  std::uniform_real_distribution<double> b(-8.0, 8.0), w(-40.0, 40.0), e(expoLo, expoHi);
  for (int i = 0; i < body; ++i) xs.push_back(b(rng));
  for (int i = 0; i < wide; ++i) xs.push_back(w(rng));
  for (int i = 0; i < wide; ++i) xs.push_back((i % 2 ? 1.0 : -1.0) * std::exp2(e(rng)));
  xs.insert(xs.end(), special.begin(), special.end());
  return xs;
}

}  // namespace

class TestActivationOps : public QObject {
  Q_OBJECT
 private slots:
  void relu() {
    checkAllFormats("relu", unary("aten.relu.default"));
    checkVjpCases("relu", forVjp(unary("aten.relu.default")));
  }
  void thresholdBackward() {
    const auto m = binary("aten.threshold_backward.default", 0, 0, {num(0.0)});
    checkAllFormats("threshold_backward", m);
    checkVjpCases("threshold_backward", forVjp(m));
  }
  void sigmoid() {
    checkAllFormats("sigmoid", unary("aten.sigmoid.default"));
    checkVjpCases("sigmoid", forVjp(unary("aten.sigmoid.default")));
  }
  void tanh() {
    checkAllFormats("tanh", unary("aten.tanh.default"));
    checkVjpCases("tanh", forVjp(unary("aten.tanh.default")));
  }
  void inPlaceVariants() {
    // relu_ sigmoid_ tanh_ (in place): the same contract as the out-of-place forms.
    for (const char* op : {"aten.relu_.default", "aten.sigmoid_.default", "aten.tanh_.default"}) {
      checkAllFormats(op, unary(op));
      checkVjpCases(op, forVjp(unary(op)));
    }
  }
  void silu() {
    checkAllFormats("silu", unary("aten.silu.default"));
    checkVjpCases("silu", forVjp(unary("aten.silu.default")));
  }
  void gelu() {
    checkAllFormats("gelu(none)", unary("aten.gelu.default"));
    checkAllFormats("gelu(tanh)", unary("aten.gelu.default", {}, {{"approximate", str("tanh")}}));
    checkVjpCases("gelu(none)", forVjp(unary("aten.gelu.default")));
    checkVjpCases("gelu(tanh)", forVjp(unary("aten.gelu.default", {str("tanh")})));
  }
  void sigmoidBackward() {
    const auto m = binary("aten.sigmoid_backward.default", 0.0, 1.0);
    checkAllFormats("sigmoid_backward", m);
    checkVjpCases("sigmoid_backward", forVjp(m));
  }
  void tanhBackward() {
    const auto m = binary("aten.tanh_backward.default", -1.0, 1.0);
    checkAllFormats("tanh_backward", m);
    checkVjpCases("tanh_backward", forVjp(m));
  }
  void siluBackward() {
    const auto m = binary("aten.silu_backward.default", 0, 0);
    checkAllFormats("silu_backward", m);
    checkVjpCases("silu_backward", forVjp(m));
  }
  void geluBackward() {
    const auto none = binary("aten.gelu_backward.default", 0, 0);
    const auto tanh =
        binary("aten.gelu_backward.default", 0, 0, {}, {{"approximate", str("tanh")}});
    checkAllFormats("gelu_backward(none)", none);
    checkAllFormats("gelu_backward(tanh)", tanh);
    checkVjpCases("gelu_backward(none)", forVjp(none));
    checkVjpCases("gelu_backward(tanh)", forVjp(tanh));
  }
  void constantsArePyTorchsWithinTheirUlps() {
    // The shared formulas' constants (core/kernels/smooth_activation.h, hex literals so that a
    // device can read them) are PyTorch's binary64 values and nearConst's enclosures.
    using namespace lossbound::kernels;
    const struct {
      Const shared;
      double value;
      int ulps;
    } cases[] = {{sqrtHalfConst(), M_SQRT1_2, 1},
                 {geluBetaNoneConst(), M_2_SQRTPI * M_SQRT1_2 * 0.5, 4},
                 {geluBetaTanhConst(), M_SQRT2 * M_2_SQRTPI * 0.5, 4},
                 {geluKappaConst(), 0.044715, 1},
                 {geluKappa3Const(), 3 * 0.044715, 2}};
    for (const auto& c : cases) {
      const Const near = lossbound::ops::nn::nearConst(c.value, c.ulps);
      // Exact comparisons (QCOMPARE of doubles is fuzzy).
      QVERIFY(c.shared.value == near.value);
      QVERIFY(c.shared.exact.lo == near.exact.lo);
      QVERIFY(c.shared.exact.hi == near.exact.hi);
    }
  }
  /// gelu's closed-form bound of its binary64 point value's error (OpRule::pointError) holds
  /// against MPFR (256 bits) over the body, the tails (where 1 + erf cancels to 0), tiny,
  /// subnormal and huge inputs; it is reported next to the rule's local error in fp64 (which the
  /// first-order replay used for this term before), and is not vacuous (the largest error seen is
  /// a fair part of it).
  void geluPointErrorBoundsTheBinary64Value() {
    const std::vector<double> xs = geluInputs(
        17, 40000, 10000, -1074, 1023,
        {0.0, -0.0, 0x1p-1074, -0x1p-1074, 0x1p-1022, 1.0, -1.0, std::sqrt(2.0), -std::sqrt(2.0),
         -5.9, -6.0, -38.0, -40.0, 1e300, -1e300, 0x1.fffffffffffffp1023, -0x1.fffffffffffffp1023});
    OpCase c;
    c.op = "aten.gelu.default";
    c.precision = modelFor(std::nullopt);
    c.inputs = {Tensor::point({static_cast<std::int64_t>(xs.size())}, DType::Float64, xs)};
    c.args = {in(0)};
    c.outDtypes = {DType::Float64};
    const RuleCall call(c);
    const std::vector<Tensor> bound = call.pointError();
    QCOMPARE(bound.size(), std::size_t{1});
    const auto y = call.point()[0].values();
    const auto r = bound[0].values();
    const std::vector<Tensor> local = call.localError();  // its local error in fp64
    const auto model = local[0].values();
    Real t, exact, err;
    double worst = 0.0, sumBound = 0.0, sumModel = 0.0;  // the sums over the body, |x| <= 8
    for (std::size_t i = 0; i < xs.size(); ++i) {
      mpfr_sqrt_ui(exact, 2, MPFR_RNDN);
      mpfr_set_d(t, xs[i], MPFR_RNDN);
      mpfr_div(t, t, exact, MPFR_RNDN);  // x/√2
      mpfr_erf(exact, t, MPFR_RNDN);
      mpfr_add_ui(exact, exact, 1, MPFR_RNDN);
      mpfr_mul_d(exact, exact, xs[i], MPFR_RNDN);
      mpfr_div_ui(exact, exact, 2, MPFR_RNDN);
      mpfr_set_d(err, y[i], MPFR_RNDN);
      mpfr_sub(err, err, exact, MPFR_RNDN);
      mpfr_abs(err, err, MPFR_RNDN);
      QVERIFY2(mpfr_cmp_d(err, r[i]) <= 0,
               qPrintable(QStringLiteral("gelu(%1): point %2 is %3 off, bound %4")
                              .arg(xs[i], 0, 'g', 17)
                              .arg(y[i], 0, 'g', 17)
                              .arg(mpfr_get_d(err, MPFR_RNDU))
                              .arg(r[i])));
      if (r[i] > 0.0) worst = std::max(worst, mpfr_get_d(err, MPFR_RNDU) / r[i]);
      if (std::fabs(xs[i]) <= 8.0) {
        sumBound += r[i];
        sumModel += model[i];
      }
    }
    qInfo(
        "gelu point error: %zu inputs, largest error / bound %.3f; over |x| <= 8 the bounds sum "
        "to %.3f of its local error in fp64",
        xs.size(), worst, sumBound / sumModel);
    QVERIFY(worst > 0.1);  // the bound is not vacuous
  }

  /// gelu's closed-form local error (geluErfLocalError) bounds every execution of the model:
  /// each step rounded to nearest in the compute format (emulated exactly with MPFR at its
  /// precision), the constant RN_c(RN(√½)), erf any value of c within k ulps (of the exact
  /// value's binade) of the exact erf (all of them tried), the result stored in the storage
  /// format; in every storage format.
  /// Its size is reported next to the interval rule's bound (localErrorVia), which it replaces:
  /// that one rounds every step outward and so counts up to an ulp per step more.
  void geluLocalErrorBoundsEveryModelledExecution() {
    const std::vector<double> xs = geluInputs(
        23, 6000, 2000, -60, 14,
        {0.0, 1.0, -1.0, -5.9, -6.0, -6.3418010063566888, -9.0, -38.0, 16384.0, -16384.0});
    const std::unique_ptr<Backend> backend = createCpuBackend(1);
    const OpRule* rule = opRegistry().find("aten.gelu.default");
    for (DType t : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
      const Tensor x = Tensor::point({static_cast<std::int64_t>(xs.size())}, t, xs);
      Node node;
      node.name = "gelu";
      node.op = "aten.gelu.default";
      node.args = {in(0)};
      node.outputs = {TensorSpec{x.shape(), t}};
      const OpArgs args(node, [&](const ValueRef&) -> const Tensor& { return x; });
      const PrecisionModel precision;
      OpContext ctx{precision, *backend, nullptr};
      const Format c = ops::opmathFormat(precision, t), st = ops::outFormat(args, ctx);
      const mpfr_prec_t bits = c == Format::Fp64 ? 53 : 24;
      const int k = ops::modelUlps(ops::LibmFn::Erf, c);
      const std::vector<Tensor> y = rule->point(args, ctx);
      const std::vector<Tensor> closed = rule->localError(args, y, ctx);
      const std::vector<Tensor> enclosure = ops::nn::localErrorVia(*rule, args, y, ctx);
      Real cc(bits), h(bits), tt(bits), e(bits), p(bits), z(bits), xr(256), ex(256), d(256);
      mpfr_set_d(cc, kernels::sqrtHalfConst().value, MPFR_RNDN);  // RN_c of PyTorch's constant
      auto next = [&](double v, int dir) {
        return c == Format::Fp64 ? std::nextafter(v, dir * HUGE_VAL)
                                 : double(std::nextafterf(float(v), float(dir * HUGE_VALF)));
      };
      double worst = 0.0, sumClosed = 0.0, sumEnclosure = 0.0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        mpfr_set_d(xr, xs[i], MPFR_RNDN);
        mpfr_mul_d(h, xr, 0.5, MPFR_RNDN);
        mpfr_mul(tt, xr, cc, MPFR_RNDN);
        mpfr_erf(e, tt, MPFR_RNDN);
        mpfr_erf(ex, tt, MPFR_RNDN);  // the exact erf, 256 bits
        // k ulps of the exact value: ulp = 2^(exponent - bits) for |erf| in [2^(e-1), 2^e); |erf|
        // < 1 even where it rounds to 1 at 256 bits (the far tails): the binade [0.5, 1) then.
        const long exponent = mpfr_cmpabs_ui(ex, 1) >= 0 ? 0 : mpfr_get_exp(ex);
        const double ulp =
            mpfr_zero_p(ex) ? 0.0 : std::ldexp(1.0, static_cast<int>(exponent - bits));
        double dev = 0.0;
        for (int dir : {-1, 1}) {
          double ev = mpfr_get_d(e, MPFR_RNDN);
          for (int j = 0; j <= k + 1; ++j, ev = next(ev, dir)) {
            mpfr_set_d(d, ev, MPFR_RNDN);
            mpfr_sub(d, d, ex, MPFR_RNDN);
            if (std::fabs(mpfr_get_d(d, MPFR_RNDU)) > k * ulp) break;  // outside the model
            mpfr_set_d(p, ev, MPFR_RNDN);
            mpfr_add_ui(p, p, 1, MPFR_RNDN);
            mpfr_mul(z, h, p, MPFR_RNDN);
            const double stored = ops::roundNearest(mpfr_get_d(z, MPFR_RNDN), st);
            dev = std::max(dev, std::fabs(stored - y[0].values()[i]));
          }
        }
        const double bound = closed[0].values()[i];
        QVERIFY2(dev <= bound, qPrintable(QStringLiteral("gelu(%1) in %2: an execution is %3 off "
                                                         "the point value, bound %4")
                                              .arg(xs[i], 0, 'g', 17)
                                              .arg(dtypeName(t).data())
                                              .arg(dev)
                                              .arg(bound)));
        if (bound > 0.0) worst = std::max(worst, dev / bound);
        if (std::fabs(xs[i]) <= 8.0) {
          sumClosed += bound;
          sumEnclosure += enclosure[0].values()[i];
        }
      }
      qInfo(
          "gelu local error in %s: largest execution / bound %.3f; over |x| <= 8 the closed "
          "forms sum to %.3f of the interval rule's",
          dtypeName(t).data(), worst, sumClosed / sumEnclosure);
      QVERIFY(worst > 0.2);  // not vacuous
    }
  }

  void badApproximateIsAnError() {
    std::mt19937_64 rng(2);
    const OpCase c = unary("aten.gelu.default", {str("erf")})(Format::Fp32, false, rng);
    QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
  }
};

QTEST_GUILESS_MAIN(TestActivationOps)
#include "test_activation_ops.moc"
