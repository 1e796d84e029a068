// Piecewise activations and their backward ops: hardswish hardswish_backward hardsigmoid
// hardsigmoid_backward hardtanh hardtanh_backward leaky_relu leaky_relu_backward elu elu_backward
// celu (and the in-place hardswish_ hardsigmoid_ hardtanh_ leaky_relu_ elu_ celu_, which return
// a fresh value here like relu_).
//
// Contracts (every op, through core/ops/activation_rule.h): the interval rule encloses every
// result of the PyTorch 1.13 / 2.x CPU and CUDA kernels for inputs in their enclosures: each
// + − × ÷ correctly rounded in the opmath format c (fp32 for fp32/bf16/fp16 storage, fp64 for
// fp64; Higham 2002 §2.2 standard model, enclosed exactly by outward rounding to c), exp and expm1
// within modelUlps (published + 1) ulps of c (libm_model.h table), the result rounded to the
// storage format. Scalars (negative_slope, alpha, scale, input_scale) are converted to c as the
// kernels do (Scalar::to<opmath_t>); where the CPU and CUDA kernels differ, the interval rule takes
// the hull of both and the random rule picks one per execution:
// - hardswish(x) = x·min(max(x + 3, 0), 6)/6 (CPU) or ·RN32(1/6) (CUDA: `one_sixth(1.0f / 6.0f)`,
//   the fp32 constant even for fp64 tensors);
// - hardsigmoid(x) = min(max(x + 3, 0), 6)/6 (CPU) or ·RN32(1/6) (CUDA);
// - hardswish_backward(g, x) = 0 for x < −3, g·(x/3 + 1/2) for x ≤ 3, else g; the CPU vectorized
//   path tests x >= 3 for the last branch, so at x = 3 it gives g where the scalar path and CUDA
//   give 1.5·g (both enclosed);
// - hardsigmoid_backward(g, x) = g·RN32(1/6) for −3 < x < 3, else 0 (both kernels use the fp32
//   constant; the point rule uses g/6);
// - hardtanh(x, lo, hi) = min(max(x, lo), hi) (ReLU6: lo 0, hi 6); hardtanh_backward(g, x, lo, hi)
//   = x <= lo or x >= hi ? 0 : g;
// - leaky_relu(x, s) = x > 0 ? x : x·s; leaky_relu_backward(g, x, s, is_result) = x > 0 ? g : g·s
//   (PyTorch refuses is_result with s < 0, and so does this rule);
// - elu(x, α, λ, σ) = x > 0 ? x·λ : (exp(x·σ) − 1)·(α·λ) (CPU) or expm1(x·σ)·(α·λ) (CUDA);
//   elu_backward(g, α, λ, σ, is_result, v) = v ≤ 0 ? g·σ·(v + α·λ) (v the result) or
//   g·σ·(α·λ)·exp(v·σ) (v the input), else g·λ; bracketings as in the kernels (left to right);
// - celu(x, α) = elu(x, α, 1, 1/α) with 1/α computed in double (PyTorch's celu calls elu so; its
//   backward is elu_backward with these scalars, which the trace records).
// Breakpoints (x = ±3 for hardswish, hardsigmoid and their backward ops; 0 for leaky_relu, elu and
// theirs): the interval rule splits at them (max/min clamps and three-valued selections, the hull
// of both branches when an enclosure straddles one); the first-order localError of an element
// within one storage rounding of a breakpoint covers both branches over that neighbourhood plus
// the linear term (activation_rule.h), including the jump of hardswish_backward at ±3 and of
// hardsigmoid_backward / leaky_relu_backward / elu_backward at theirs. The vjp follows the branch
// of the point value, as PyTorch's backward ops do at the breakpoint itself (hardswish'(−3) = −1/2,
// hardswish'(3) = 3/2, hardsigmoid'(±3) = 0, leaky_relu'(0) = s, elu'(0) = σ·α·λ).
#include "core/kernels/piecewise_activation.h"
#include "core/ops/activation_rule.h"
#include "core/ops/families.h"
#include "core/ops/registry.h"

#include <memory>
#include <vector>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

struct NoParams {};

// ---------------------------------------------------------------------------------------------
// hardswish, hardsigmoid and their backward ops: the formulas of core/kernels/
// piecewise_activation.h, which the device's kernel bodies share (kKernel: offered to the
// backend's elementwise hooks).

struct Hardswish {
  using Params = NoParams;
  static constexpr kernels::UnaryOp kKernel = kernels::UnaryOp::Hardswish;
  static Params params(const OpArgs&) { return {}; }
  static int variants(const Params&) { return kernels::kPiecewiseVariants; }
  static std::vector<double> kinks(const Params&) { return {-3.0, 3.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params&, typename D::V x, int variant) {
    return kernels::hardswishF(d, x, variant);
  }
};

struct Hardsigmoid {
  using Params = NoParams;
  static constexpr kernels::UnaryOp kKernel = kernels::UnaryOp::Hardsigmoid;
  static Params params(const OpArgs&) { return {}; }
  static int variants(const Params&) { return kernels::kPiecewiseVariants; }
  static std::vector<double> kinks(const Params&) { return {-3.0, 3.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params&, typename D::V x, int variant) {
    return kernels::hardsigmoidF(d, x, variant);
  }
};

struct HardswishBackward {
  using Params = NoParams;
  static constexpr std::size_t kGradArg = 0, kXArg = 1;
  static constexpr kernels::BinaryOp kKernel = kernels::BinaryOp::HardswishBackward;
  static Params params(const OpArgs&) { return {}; }
  static int variants(const Params&) { return kernels::kPiecewiseVariants; }
  static std::vector<double> kinks(const Params&) { return {-3.0, 3.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params&, typename D::V g, typename D::V x,
                            int variant) {
    return kernels::hardswishBackwardF(d, g, x, variant);
  }
};

struct HardsigmoidBackward {
  using Params = NoParams;
  static constexpr std::size_t kGradArg = 0, kXArg = 1;
  static constexpr kernels::BinaryOp kKernel = kernels::BinaryOp::HardsigmoidBackward;
  static Params params(const OpArgs&) { return {}; }
  static int variants(const Params&) { return kernels::kPiecewiseVariants; }
  static std::vector<double> kinks(const Params&) { return {-3.0, 3.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params&, typename D::V g, typename D::V x,
                            int variant) {
    return kernels::hardsigmoidBackwardF(d, g, x, variant);
  }
};

// ---------------------------------------------------------------------------------------------
// hardtanh (ReLU6 is hardtanh(x, 0, 6))

struct HardtanhParams {
  double lo, hi;
};

HardtanhParams hardtanhParams(const OpArgs& a, std::size_t first) {
  const HardtanhParams p{a.numberArg(first, "min_val", -1.0),
                         a.numberArg(first + 1, "max_val", 1.0)};
  if (!(p.lo <= p.hi))
    a.fail("hardtanh needs min_val <= max_val, found " + std::to_string(p.lo) + " and " +
           std::to_string(p.hi));
  return p;
}

/// min_val and max_val for the kernel bodies (kernels::ElementwiseModel).
void setClamp(const HardtanhParams& p, kernels::ElementwiseModel& m) {
  m.clampLo = p.lo;
  m.clampHi = p.hi;
}

struct Hardtanh {
  using Params = HardtanhParams;
  static constexpr kernels::UnaryOp kKernel = kernels::UnaryOp::Hardtanh;
  static Params params(const OpArgs& a) { return hardtanhParams(a, 1); }
  static void kernelModel(const Params& p, kernels::ElementwiseModel& m) { setClamp(p, m); }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params& p) { return {p.lo, p.hi}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V x, int) {
    return kernels::hardtanhF(d, x, p.lo, p.hi);
  }
};

struct HardtanhBackward {
  using Params = HardtanhParams;
  // hardtanh_backward(grad_output, self, min_val, max_val)
  static constexpr std::size_t kGradArg = 0, kXArg = 1;
  static constexpr kernels::BinaryOp kKernel = kernels::BinaryOp::HardtanhBackward;
  static Params params(const OpArgs& a) { return hardtanhParams(a, 2); }
  static void kernelModel(const Params& p, kernels::ElementwiseModel& m) { setClamp(p, m); }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params& p) { return {p.lo, p.hi}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V g, typename D::V x, int) {
    return kernels::hardtanhBackwardF(d, g, x, p.lo, p.hi);
  }
};

// ---------------------------------------------------------------------------------------------
// leaky_relu

struct LeakyRelu {
  struct Params {
    double slope;
  };
  static Params params(const OpArgs& a) { return {a.numberArg(1, "negative_slope", 0.01)}; }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params&) { return {0.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V x, int) {
    const auto zero = d.lit(0.0);
    return d.select(d.gt(x, zero), d.max(x, zero), d.mul(d.min(x, zero), d.lit(p.slope)));
  }
};

struct LeakyReluBackward {
  struct Params {
    double slope;
  };
  static constexpr std::size_t kGradArg = 0, kXArg = 1;
  static Params params(const OpArgs& a) {
    const double s = a.numberArg(2, "negative_slope");
    if (a.boolArg(3, "self_is_result", false) && s < 0.0)
      a.fail(
          "leaky_relu_backward of an in-place leaky_relu needs negative_slope >= 0 (PyTorch "
          "refuses it too), found " +
          std::to_string(s));
    return {s};
  }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params&) { return {0.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V g, typename D::V x, int) {
    return d.select(d.gt(x, d.lit(0.0)), g, d.mul(g, d.lit(p.slope)));
  }
};

// ---------------------------------------------------------------------------------------------
// elu

struct EluParams {
  double alpha, scale, inputScale;
};

struct Elu {
  using Params = EluParams;
  static Params params(const OpArgs& a) {
    return {a.numberArg(1, "alpha", 1.0), a.numberArg(2, "scale", 1.0),
            a.numberArg(3, "input_scale", 1.0)};
  }
  static int variants(const Params&) { return 2; }
  static std::vector<double> kinks(const Params&) { return {0.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V x, int variant) {
    const auto zero = d.lit(0.0);
    // negcoef = alpha·scale computed in c (Scalar::to<opmath_t> of each, then their product).
    const auto negcoef = d.mul(d.lit(p.alpha), d.lit(p.scale));
    const auto pos = d.mul(d.max(x, zero), d.lit(p.scale));
    const auto t = d.mul(d.min(x, zero), d.lit(p.inputScale));
    // variant 0: CPU (exp(t) − 1)·negcoef; 1: CUDA expm1(t)·negcoef.
    const auto em1 = variant == 0 ? d.sub(d.fn(Fn::Exp, t), d.lit(1.0)) : d.fn(Fn::Expm1, t);
    return d.select(d.gt(x, zero), pos, d.mul(em1, negcoef));
  }
};

struct Celu {
  using Params = EluParams;
  static Params params(const OpArgs& a) {
    const double alpha = a.numberArg(1, "alpha", 1.0);
    if (alpha == 0.0) a.fail("celu needs alpha != 0 (PyTorch divides by it)");
    return {alpha, 1.0, 1.0 / alpha};
  }
  static int variants(const Params& p) { return Elu::variants(p); }
  static std::vector<double> kinks(const Params& p) { return Elu::kinks(p); }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V x, int variant) {
    return Elu::eval(d, p, x, variant);
  }
};

struct EluBackward {
  struct Params {
    EluParams e;
    bool isResult;
  };
  // elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
  static constexpr std::size_t kGradArg = 0, kXArg = 5;
  static Params params(const OpArgs& a) {
    return {{a.numberArg(1, "alpha"), a.numberArg(2, "scale"), a.numberArg(3, "input_scale")},
            a.boolArg(4, "is_result")};
  }
  static int variants(const Params&) { return 1; }
  static std::vector<double> kinks(const Params&) { return {0.0}; }
  template <class D>
  static typename D::V eval(const D& d, const Params& p, typename D::V g, typename D::V v, int) {
    const auto zero = d.lit(0.0);
    const auto negcoef = d.mul(d.lit(p.e.alpha), d.lit(p.e.scale));
    const auto negipt = d.lit(p.e.inputScale);
    const auto vn = d.min(v, zero);
    const auto gk = d.mul(g, negipt);
    const auto neg = p.isResult ? d.mul(gk, d.add(vn, negcoef))
                                : d.mul(d.mul(gk, negcoef), d.fn(Fn::Exp, d.mul(vn, negipt)));
    return d.select(d.gt(v, zero), d.mul(g, d.lit(p.e.scale)), neg);
  }
};

}  // namespace

void registerPiecewiseActivationOps(OpRegistry& r) {
  // In-place variants have the rules of their out-of-place forms: the evaluator gives every node
  // a fresh value (as for relu_).
  const auto hardswish = std::make_shared<UnaryActivationRule<Hardswish>>();
  r.add("aten.hardswish", hardswish);
  r.add("aten.hardswish_.default", hardswish);
  r.add("aten.hardswish_backward", std::make_shared<BinaryActivationRule<HardswishBackward>>());
  const auto hardsigmoid = std::make_shared<UnaryActivationRule<Hardsigmoid>>();
  r.add("aten.hardsigmoid", hardsigmoid);
  r.add("aten.hardsigmoid_.default", hardsigmoid);
  r.add("aten.hardsigmoid_backward", std::make_shared<BinaryActivationRule<HardsigmoidBackward>>());
  const auto hardtanh = std::make_shared<UnaryActivationRule<Hardtanh>>();
  r.add("aten.hardtanh", hardtanh);
  r.add("aten.hardtanh_.default", hardtanh);
  r.add("aten.hardtanh_backward", std::make_shared<BinaryActivationRule<HardtanhBackward>>());
  const auto leaky = std::make_shared<UnaryActivationRule<LeakyRelu>>();
  r.add("aten.leaky_relu", leaky);
  r.add("aten.leaky_relu_.default", leaky);
  r.add("aten.leaky_relu_backward", std::make_shared<BinaryActivationRule<LeakyReluBackward>>());
  const auto elu = std::make_shared<UnaryActivationRule<Elu>>();
  r.add("aten.elu", elu);
  r.add("aten.elu_.default", elu);
  r.add("aten.elu_backward", std::make_shared<BinaryActivationRule<EluBackward>>());
  const auto celu = std::make_shared<UnaryActivationRule<Celu>>();
  r.add("aten.celu", celu);
  r.add("aten.celu_.default", celu);
}

}  // namespace lossbound
