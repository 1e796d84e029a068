// softplus softplus_backward mish mish_backward (and the in-place mish_, a fresh value here).
//
// Contracts (through core/ops/activation_rule.h): the interval rule encloses every result of the
// PyTorch 1.13 / 2.x CPU and CUDA kernels (same formulas and bracketings on both) for inputs in
// their enclosures: + − × ÷ correctly rounded in the opmath format c (Higham 2002 §2.2), exp,
// log1p and tanh within modelUlps (published + 1) ulps of c (libm_model.h table: CUDA 13 and
// glibc 2.36, measured, not proven), beta and threshold converted to c, the result rounded to the
// storage format:
// - softplus(x, β, t) = RN(x·β) > t ? x : log1p(exp(x·β)) / β;
// - softplus_backward(g, x, β, t) = RN(x·β) > t ? g : (g·z) / (z + 1), z = exp(x·β); where z can
//   overflow c (t > ~88 in fp32) the kernels' inf/inf is NaN and the enclosure is the whole line;
// - mish(x) = x·tanh(log1p(exp(x)));
// - mish_backward(g, x) = g·(t + (x·σ)·(1 − t·t)), σ = 1/(1 + exp(−x)), t = tanh(log1p(exp(x))).
// Breakpoint: softplus switches branch at x·β = t, with a jump of log1p(e^−t)/β (2e-9 for the
// defaults) and a slope change from σ(t) to 1: the interval rule takes the hull of both branches
// when RN(x·β) may lie on either side; the first-order localError of an element within one
// storage rounding of t/β covers both branches (activation_rule.h). mish is smooth.
// Cancellation is real and enclosed: log1p(exp(x)) for x ≪ 0 is exp(x) with a relative error of
// a few ulps, and mish_backward's 1 − t·t for x ≫ 0 loses all digits (absolute error of a few ulps
// of 1 in c), as the kernels do.
#include "core/ops/activation_rule.h"
#include "core/ops/families.h"
#include "core/ops/registry.h"

#include <memory>
#include <type_traits>
#include <vector>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

struct NoParams {};

struct SoftplusParams {
  double beta, threshold;
};

SoftplusParams softplusParams(const OpArgs& a, std::size_t first) {
  SoftplusParams p{a.numberArg(first, "beta", 1.0), a.numberArg(first + 1, "threshold", 20.0)};
  if (p.beta == 0.0) a.fail("softplus needs beta != 0, found 0");
  return p;
}

struct Softplus {
  using Params = SoftplusParams;
  static Params params(const OpArgs& a) { return softplusParams(a, 1); }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params& p) { return {p.threshold / p.beta}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V x, int) {
    const auto beta = d.lit(p.beta);
    const auto xb = d.mul(x, beta);
    return d.select(d.gt(xb, d.lit(p.threshold)), x,
                    d.div(d.fn(Fn::Log1p, d.fn(Fn::Exp, xb)), beta));
  }
};

struct SoftplusBackward {
  using Params = SoftplusParams;
  static constexpr std::size_t kGradArg = 0, kXArg = 1;
  static Params params(const OpArgs& a) { return softplusParams(a, 2); }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params& p) { return {p.threshold / p.beta}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V g, typename D::V x, int) {
    const auto xb = d.mul(x, d.lit(p.beta));
    const auto z = d.fn(Fn::Exp, xb);
    auto inner = d.div(d.mul(g, z), d.add(z, d.lit(1.0)));
    if constexpr (std::is_same_v<D, IntervalDomain>) {
      // z = +inf in c makes the kernels' (g·z)/(z + 1) NaN: nothing is excluded then.
      if (z.hi == HUGE_VAL) inner = entireInterval();
    }
    return d.select(d.gt(xb, d.lit(p.threshold)), g, inner);
  }
};

struct Mish {
  using Params = NoParams;
  static Params params(const OpArgs&) { return {}; }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params&) { return {}; }
  template <class D>
  static typename D::V eval(const D& d, const Params&, typename D::V x, int) {
    return d.mul(x, d.fn(Fn::Tanh, d.fn(Fn::Log1p, d.fn(Fn::Exp, x))));
  }
};

struct MishBackward {
  using Params = NoParams;
  static constexpr std::size_t kGradArg = 0, kXArg = 1;
  static Params params(const OpArgs&) { return {}; }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params&) { return {}; }
  template <class D>
  static typename D::V eval(const D& d, const Params&, typename D::V g, typename D::V x, int) {
    const auto one = d.lit(1.0);
    const auto sigmoid = d.div(one, d.add(one, d.fn(Fn::Exp, d.sub(d.lit(0.0), x))));
    const auto t = d.fn(Fn::Tanh, d.fn(Fn::Log1p, d.fn(Fn::Exp, x)));
    return d.mul(g, d.add(t, d.mul(d.mul(x, sigmoid), d.sub(one, d.sqr(t)))));
  }
};

}  // namespace

void registerSoftplusMishOps(OpRegistry& r) {
  r.add("aten.softplus", std::make_shared<UnaryActivationRule<Softplus>>());
  r.add("aten.softplus_backward", std::make_shared<BinaryActivationRule<SoftplusBackward>>());
  // mish_ has the rule of mish: the evaluator gives every node a fresh value (as for relu_).
  const auto mish = std::make_shared<UnaryActivationRule<Mish>>();
  r.add("aten.mish", mish);
  r.add("aten.mish_.default", mish);
  r.add("aten.mish_backward", std::make_shared<BinaryActivationRule<MishBackward>>());
}

}  // namespace lossbound
