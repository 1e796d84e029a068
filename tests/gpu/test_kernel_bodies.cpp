// The host test of the CUDA kernel bodies (core/kernels/kernel_bodies.h). The kernels run these
// LB_HD functions on the device; here they run with the exact host emulation of the rounding table,
// and must give, bit for bit, what the CPU path gives on the same inputs:
// - the CPU helpers of core/ops/libm_model.h and error_bounds.h (widenUlps, libmEnclosure,
//   gammaUp, accumulate/roundedSumEnclosure), composed with core/interval as the CPU rules compose
//   them;
// - every registered CPU elementwise rule (opRegistry) whose op has a kernel body;
// - the softmax / log-softmax row body (core/kernels/softmax_row.h) and the registered CPU rules
//   aten._softmax / aten._log_softmax, along the last and a non-last dim;
// - the registered layer norm rule against the row body of core/kernels/layer_norm_row.h;
// - the same bodies compiled by nvcc's host pass (kernel_bodies_nvcc.cu), in CUDA builds (a
//   CPU-only build does not declare that test function, so nothing is skipped).
// It also checks that the host composition of the GPU interval matmul and of the row sums
// encloses randomized candidate executions (ops::randomDot / ops::randomSum).

#include "core/backend.h"
#include "core/interval/elementary.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/layer_norm_row.h"
#include "core/kernels/softmax_row.h"
#include "core/ops/error_bounds.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"
#include "tests/gpu/host_interval_matmul.h"
#include "tests/gpu/softmax_test_rows.h"

#include <QTest>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>
#if defined(LOSSBOUND_TEST_NVCC_HOST)
#include "tests/gpu/kernel_bodies_nvcc.h"
#endif

using lossbound::Format;
using lossbound::Interval;
using lossbound::kInf;
using lossbound::kernels::BinaryOp;
using lossbound::kernels::ElementwiseModel;
using lossbound::kernels::UnaryOp;
namespace ops = lossbound::ops;

namespace {

constexpr std::size_t kRandomIntervals = 20'000;

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Largest ratio of the two matmul enclosure widths (CPU rule, GPU composition) accepted: the
/// RN-evaluated CPU radius carries 2^-50 inflation constants, the device's directed one does not.
constexpr double kMatmulWidthFactor = 64.0;
bool sameBits(Interval a, Interval b) { return sameBits(a.lo, b.lo) && sameBits(a.hi, b.hi); }

QString show(Interval x) {
  char buf[96];  // hex floats: exact bits (QString::asprintf has no %a)
  std::snprintf(buf, sizeof buf, "[%a, %a]", x.lo, x.hi);
  return QString::fromLatin1(buf);
}

const char* unaryName(UnaryOp op) {
  static const char* names[] = {
      "neg",   "abs",     "sqr",   "sqrt",      "rsqrt",       "reciprocal", "exp",      "expm1",
      "log",   "log1p",   "tanh",  "erf",       "sigmoid",     "relu",       "gelu",     "sin",
      "cos",   "silu",    "pow",   "hardswish", "hardsigmoid", "gelu_tanh",  "hardtanh", "round",
      "trunc", "nonzero", "floor", "ceil",      "round_even",  "clamp",      "sign"};
  static_assert(std::size(names) == lossbound::kernels::kUnaryOpCount);
  return names[static_cast<int>(op)];
}
const char* binaryName(BinaryOp op) {
  static const char* names[] = {"add",
                                "sub",
                                "mul",
                                "div",
                                "min",
                                "max",
                                "div_recip",
                                "eq",
                                "ne",
                                "lt",
                                "gt",
                                "le",
                                "ge",
                                "gelu_backward",
                                "hardswish_backward",
                                "hardsigmoid_backward",
                                "sigmoid_backward",
                                "tanh_backward",
                                "silu_backward",
                                "gelu_tanh_backward",
                                "hardtanh_backward"};
  static_assert(std::size(names) == lossbound::kernels::kBinaryOpCount);
  return names[static_cast<int>(op)];
}

/// The CPU side's interval extension of each unary op, written independently of the kernel
/// bodies' table (a wrong entry there fails the comparison).
Interval cpuUnaryExact(UnaryOp op, Interval x) {
  using namespace lossbound;
  switch (op) {
    case UnaryOp::Neg:
      return neg(x);
    case UnaryOp::Abs:
      return abs(x);
    case UnaryOp::Sqr:
      return sqr(x);
    case UnaryOp::Sqrt:
      return sqrt(x);
    case UnaryOp::Rsqrt:
      return div(Interval{1.0, 1.0}, sqrt(x));
    case UnaryOp::Reciprocal:
      return div(Interval{1.0, 1.0}, x);
    case UnaryOp::Exp:
      return exp(x);
    case UnaryOp::Expm1:
      return expm1(x);
    case UnaryOp::Log:
      return log(x);
    case UnaryOp::Log1p:
      return log1p(x);
    case UnaryOp::Tanh:
      return tanh(x);
    case UnaryOp::Erf:
      return erf(x);
    case UnaryOp::Sigmoid:
      return sigmoid(x);
    case UnaryOp::Relu:
      return max(x, Interval{0.0, 0.0});
    case UnaryOp::Sin:
      return sin(x);
    case UnaryOp::Cos:
      return cos(x);
    case UnaryOp::PowScalar:  // x^3: modelFor's exponent
      return pow(x, 3);
    case UnaryOp::Round:  // a cast to a float dtype: the storage rounding alone
      return x;
    case UnaryOp::Trunc:  // a cast to an integer dtype: toward zero, endpoint by endpoint
      return {std::trunc(x.lo), std::trunc(x.hi)};
    case UnaryOp::Floor:
      return {std::floor(x.lo), std::floor(x.hi)};
    case UnaryOp::Ceil:
      return {std::ceil(x.lo), std::ceil(x.hi)};
    case UnaryOp::RoundEven:  // half to even
      return {std::nearbyint(x.lo), std::nearbyint(x.hi)};
    case UnaryOp::Sign: {  // -1, 0 or 1 at each endpoint (nondecreasing); NaN may be anything
      if (std::isnan(x.lo) || std::isnan(x.hi)) return {-1.0, 1.0};
      const auto sign = [](double v) { return double((0.0 < v) - (v < 0.0)); };  // PyTorch's
      return {sign(x.lo), sign(x.hi)};
    }
    case UnaryOp::NonZero: {  // a cast to bool: 1 unless the value is 0
      const bool zeroOnly = x.lo == 0.0 && x.hi == 0.0;
      const bool mayBeZero = x.lo <= 0.0 && 0.0 <= x.hi;
      return zeroOnly ? Interval{0.0, 0.0} : mayBeZero ? Interval{0.0, 1.0} : Interval{1.0, 1.0};
    }
    case UnaryOp::GeluErf:
    case UnaryOp::Silu:
    case UnaryOp::Hardswish:
    case UnaryOp::Hardsigmoid:
    case UnaryOp::GeluTanh:
    case UnaryOp::Hardtanh:
    case UnaryOp::Clamp:
      break;  // composed in the compute format, or reading the model (cpuUnary)
  }
  return entireInterval();
}

/// A comparison over every pair (a in x, b in y): 1 when it holds for all, 0 for none, [0, 1]
/// otherwise; written from the pairs' extremes, independently of kernels::compareBody.
Interval cpuCompare(BinaryOp op, Interval x, Interval y) {
  bool all = false, none = false;
  switch (op) {
    case BinaryOp::Eq:
    case BinaryOp::Ne:
      all = x.lo == x.hi && y.lo == y.hi && x.lo == y.lo;  // one pair, equal
      none = x.hi < y.lo || y.hi < x.lo;                   // disjoint
      if (op == BinaryOp::Ne) std::swap(all, none);
      break;
    case BinaryOp::Lt:  // max a < min b; min a >= max b
      all = x.hi < y.lo;
      none = x.lo >= y.hi;
      break;
    case BinaryOp::Gt:
      all = x.lo > y.hi;
      none = x.hi <= y.lo;
      break;
    case BinaryOp::Le:
      all = x.hi <= y.lo;
      none = x.lo > y.hi;
      break;
    case BinaryOp::Ge:
      all = x.lo >= y.hi;
      none = x.hi < y.lo;
      break;
    default:
      break;
  }
  return all ? Interval{1.0, 1.0} : none ? Interval{0.0, 0.0} : Interval{0.0, 1.0};
}

Interval cpuBinaryExact(BinaryOp op, Interval x, Interval y) {
  using namespace lossbound;
  switch (op) {
    case BinaryOp::Add:
      return add(x, y);
    case BinaryOp::Sub:
      return sub(x, y);
    case BinaryOp::Mul:
      return mul(x, y);
    case BinaryOp::Div:
    case BinaryOp::DivRecip:  // the true quotient; binaryBodiesMatchCpuPath adds x · RN(1/y)
      return div(x, y);
    case BinaryOp::Min:
      return min(x, y);
    case BinaryOp::Max:
      return max(x, y);
    case BinaryOp::Eq:
    case BinaryOp::Ne:
    case BinaryOp::Lt:
    case BinaryOp::Gt:
    case BinaryOp::Le:
    case BinaryOp::Ge:
      return cpuCompare(op, x, y);
    case BinaryOp::GeluBackward:
    case BinaryOp::HardswishBackward:
    case BinaryOp::HardsigmoidBackward:
    case BinaryOp::SigmoidBackward:
    case BinaryOp::TanhBackward:
    case BinaryOp::SiluBackward:
    case BinaryOp::GeluTanhBackward:
    case BinaryOp::HardtanhBackward:
      break;  // composed in the compute format (cpuBinary)
  }
  return entireInterval();
}

/// The libm function whose ulp table applies to op, if any (as the CPU rules look it up).
std::optional<ops::LibmFn> libmFn(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp:
      return ops::LibmFn::Exp;
    case UnaryOp::Expm1:
      return ops::LibmFn::Expm1;
    case UnaryOp::Log:
      return ops::LibmFn::Log;
    case UnaryOp::Log1p:
      return ops::LibmFn::Log1p;
    case UnaryOp::Tanh:
      return ops::LibmFn::Tanh;
    case UnaryOp::Erf:
      return ops::LibmFn::Erf;
    case UnaryOp::Sigmoid:
      return ops::LibmFn::Sigmoid;
    case UnaryOp::Rsqrt:
      return ops::LibmFn::Rsqrt;
    case UnaryOp::Sin:
      return ops::LibmFn::Sin;
    case UnaryOp::Cos:
      return ops::LibmFn::Cos;
    case UnaryOp::PowScalar:
      return ops::LibmFn::Pow;
    default:
      return std::nullopt;
  }
}

/// The model a CPU rule uses for op on a tensor computed in `compute` and stored in `store`
/// (sigmoid is composed from exp, so it takes exp's ulps; pow is x^3).
ElementwiseModel modelFor(UnaryOp op, Format compute, Format store) {
  if (op == UnaryOp::Hardtanh) {  // hardtanh's defaults, as aten.hardtanh.default without them
    ElementwiseModel m{compute, store, 0};
    m.clampLo = -1.0;
    m.clampHi = 1.0;
    return m;
  }
  if (op == UnaryOp::Clamp) {  // clamp(x, -0.1, 0.3): bounds no binary format holds
    ElementwiseModel m{compute, store, 0};
    m.clampLo = -0.1;
    m.clampHi = 0.3;
    return m;
  }
  if (op == UnaryOp::PowScalar)
    return {compute, store, ops::modelUlps(ops::LibmFn::Pow, compute), 3.0};
  if (op == UnaryOp::Sigmoid || op == UnaryOp::Silu)
    return {compute, store, ops::modelUlps(ops::LibmFn::Exp, compute)};
  if (op == UnaryOp::GeluErf) return {compute, store, ops::modelUlps(ops::LibmFn::Erf, compute)};
  if (op == UnaryOp::GeluTanh) return {compute, store, ops::modelUlps(ops::LibmFn::Tanh, compute)};
  const auto fn = libmFn(op);
  return {compute, store, fn ? ops::modelUlps(*fn, compute) : 0};
}

/// The CPU path of one unary element: the activation rules' IntervalDomain for sigmoid and tanh
/// (the formula of core/ops/activation_ops.cpp), else the exact extension, then libmEnclosure or
/// outward rounding.
Interval cpuUnary(UnaryOp op, Interval x, Format compute, Format store) {
  const ops::nn::IntervalDomain d{compute};
  if (op == UnaryOp::Sigmoid)
    return lossbound::roundOutward(
        d.div(d.lit(1.0), d.add(d.lit(1.0), d.fn(ops::nn::Fn::Exp, d.sub(d.lit(0.0), x)))), store);
  if (op == UnaryOp::Tanh) return lossbound::roundOutward(d.fn(ops::nn::Fn::Tanh, x), store);
  if (op == UnaryOp::Silu) {  // the activation rule's two bracketings, x / e and x · (1 / e)
    const Interval one = d.lit(1.0);
    const Interval e = d.add(one, d.fn(ops::nn::Fn::Exp, d.sub(d.lit(0.0), x)));
    return lossbound::roundOutward(lossbound::hull(d.div(x, e), d.mul(x, d.div(one, e))), store);
  }
  if (op == UnaryOp::GeluErf) {  // the activation rule's formula for approximate='none'
    const ops::nn::Const sqrtHalf = ops::nn::nearConst(M_SQRT1_2, 1);
    const Interval half = d.lit(0.5), one = d.lit(1.0);
    return lossbound::roundOutward(
        d.mul(d.mul(x, half), d.add(one, d.fn(ops::nn::Fn::Erf, d.mul(x, d.k(sqrtHalf))))), store);
  }
  if (op == UnaryOp::Hardswish || op == UnaryOp::Hardsigmoid) {
    // The formula is shared with the rule (core/kernels/piecewise_activation.h), here in the
    // host's IntervalDomain: this checks the device domain's primitives; the formula itself is
    // checked against the randomized executor (tests/core/ops/test_piecewise_activation_ops).
    const bool swish = op == UnaryOp::Hardswish;
    auto f = [&](int v) {
      return swish ? lossbound::kernels::hardswishF(d, x, v)
                   : lossbound::kernels::hardsigmoidF(d, x, v);
    };
    return lossbound::roundOutward(lossbound::hull(f(0), f(1)), store);
  }
  if (op == UnaryOp::Hardtanh)  // the shared formula in the host's IntervalDomain, as hardswish
    return lossbound::roundOutward(lossbound::kernels::hardtanhF(d, x, -1.0, 1.0), store);
  if (op == UnaryOp::GeluTanh)  // the shared formula in the host's IntervalDomain, as hardswish
    return lossbound::roundOutward(lossbound::kernels::activationF(d, op, x, 0), store);
  if (op == UnaryOp::Clamp) {  // the clamp rule's formula before it had a body
    const Interval c = lossbound::min(lossbound::max(x, ops::scalarEnclosure(-0.1, store)),
                                      ops::scalarEnclosure(0.3, store));
    return c.lo == c.hi && std::isinf(c.lo) ? c : lossbound::roundOutward(c, store);
  }
  const Interval exact = cpuUnaryExact(op, x);
  // log(±0) and log1p(-1): the pole's -inf, exact (the unary rule's exception).
  if ((op == UnaryOp::Log || op == UnaryOp::Log1p) && lossbound::isPoleValue(exact)) return exact;
  if (const auto fn = libmFn(op)) return ops::libmEnclosure(exact, *fn, compute, store);
  return lossbound::roundOutward(exact, store);
}

/// True for the activations' backward ops (core/kernels/smooth_activation.h).
bool isActivationBackward(BinaryOp op) {
  return op == BinaryOp::GeluBackward || op == BinaryOp::GeluTanhBackward ||
         op == BinaryOp::SigmoidBackward || op == BinaryOp::TanhBackward ||
         op == BinaryOp::SiluBackward;
}

/// The model a CPU rule uses for a binary op (gelu_backward: erf's and exp's ulps; the tanh form:
/// tanh's; silu_backward: exp's).
ElementwiseModel binaryModelFor(BinaryOp op, Format compute, Format store) {
  ElementwiseModel m{compute, store, 0};
  if (op == BinaryOp::GeluBackward) m.ulps = ops::modelUlps(ops::LibmFn::Erf, compute);
  if (op == BinaryOp::GeluTanhBackward) m.ulps = ops::modelUlps(ops::LibmFn::Tanh, compute);
  if (op == BinaryOp::SiluBackward) m.ulps = ops::modelUlps(ops::LibmFn::Exp, compute);
  if (isActivationBackward(op)) m.expUlps = ops::modelUlps(ops::LibmFn::Exp, compute);
  if (op == BinaryOp::HardtanhBackward) {  // hardtanh's defaults, as in modelFor
    m.clampLo = -1.0;
    m.clampHi = 1.0;
  }
  return m;
}

/// The CPU path of one binary element: gelu_backward by the activation rule's formula for
/// approximate='none' in the IntervalDomain, else the exact extension rounded outward (division
/// by a 0-d divisor: also x times the reciprocal rounded to the compute format).
Interval cpuBinary(BinaryOp op, Interval x, Interval y, Format compute, Format store) {
  if (op == BinaryOp::GeluBackward) {
    const ops::nn::IntervalDomain d{compute};
    const ops::nn::Const sqrtHalf = ops::nn::nearConst(M_SQRT1_2, 1);
    const ops::nn::Const beta = ops::nn::nearConst(M_2_SQRTPI * M_SQRT1_2 * 0.5, 4);
    const Interval half = d.lit(0.5), one = d.lit(1.0);
    const Interval cdf = d.mul(half, d.add(one, d.fn(ops::nn::Fn::Erf, d.mul(y, d.k(sqrtHalf)))));
    const Interval pdf = d.mul(d.k(beta), d.fn(ops::nn::Fn::Exp, d.mul(d.sqr(y), d.lit(-0.5))));
    return lossbound::roundOutward(d.mul(x, d.add(cdf, d.mul(y, pdf))), store);
  }
  if (isActivationBackward(op)) {  // the shared formula in the host's IntervalDomain
    const ops::nn::IntervalDomain d{compute};
    return lossbound::roundOutward(lossbound::kernels::activationBackwardF(d, op, x, y), store);
  }
  if (op == BinaryOp::HardswishBackward || op == BinaryOp::HardsigmoidBackward) {
    // Shared formula in the host's IntervalDomain, as for hardswish in cpuUnary.
    const ops::nn::IntervalDomain d{compute};
    const bool swish = op == BinaryOp::HardswishBackward;
    auto f = [&](int v) {
      return swish ? lossbound::kernels::hardswishBackwardF(d, x, y, v)
                   : lossbound::kernels::hardsigmoidBackwardF(d, x, y, v);
    };
    return lossbound::roundOutward(lossbound::hull(f(0), f(1)), store);
  }
  if (op == BinaryOp::HardtanhBackward) {  // the shared formula, hardtanh's defaults
    const ops::nn::IntervalDomain d{compute};
    return lossbound::roundOutward(lossbound::kernels::hardtanhBackwardF(d, x, y, -1.0, 1.0),
                                   store);
  }
  Interval cpu = lossbound::roundOutward(cpuBinaryExact(op, x, y), store);
  if (op == BinaryOp::DivRecip)  // or x times the reciprocal rounded to the compute format
    cpu = lossbound::hull(
        cpu, lossbound::roundOutward(
                 lossbound::mul(
                     x, lossbound::roundOutward(lossbound::div(Interval{1.0, 1.0}, y), compute)),
                 store));
  return cpu;
}

/// (compute, storage) pairs of the candidate formats: fp64, fp32, bf16/fp16 with fp32 opmath.
const std::vector<std::pair<Format, Format>> kFormatPairs = {{Format::Fp64, Format::Fp64},
                                                             {Format::Fp32, Format::Fp32},
                                                             {Format::Fp32, Format::Bf16},
                                                             {Format::Fp32, Format::Fp16}};

/// Scalars that exercise the edges: signed zeros, subnormals, format limits, infinities, NaN.
std::vector<double> edgeValues() {
  return {0.0,
          -0.0,
          0x1p-1074,
          -0x1p-1074,
          0x1p-1022,
          -0x1p-149,
          0x1p-133,
          1e-300,
          1e-8,
          -1e-8,
          0.5,
          -0.5,
          1.0,
          -1.0,
          2.0,
          3.0,
          -7.25,
          0.1,
          -0.1,
          10.0,
          88.7,
          -88.7,
          700.0,
          -745.2,
          1e10,
          65504.0,
          3.4e38,
          -3.4e38,
          1e300,
          0x1.fffffffffffffp1023,
          -0x1.fffffffffffffp1023,
          kInf,
          -kInf,
          std::nan("")};
}

/// Intervals from pairs of edge values, random intervals of mixed magnitudes, points, NaN and
/// empty operands.
std::vector<Interval> testIntervals(std::uint64_t seed, std::size_t randomCount) {
  std::vector<Interval> v;
  const std::vector<double> e = edgeValues();
  for (double a : e)
    for (double b : e) v.push_back({a, b});  // includes lo > hi (empty) and NaN endpoints
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-40, 40);
  std::uniform_real_distribution<double> width(0.0, 1.0);
  for (std::size_t i = 0; i < randomCount; ++i) {
    const double a = std::ldexp(mant(rng), expo(rng));
    const int kind = static_cast<int>(i % 4);
    const double w = kind == 0 ? 0.0 : std::fabs(a) * std::ldexp(width(rng), -10 * kind);
    v.push_back({a, a + w});
  }
  return v;
}

/// One layer norm input: rows×n values, optional weight and bias (empty: None), dtype, eps.
struct LayerNormInput {
  std::int64_t rows = 0, n = 0;
  lossbound::kernels::test::HostIntervals x, w, b;
  lossbound::DType dtype = lossbound::DType::Float32;
  double eps = 1e-5;
};

/// Returns layer norm inputs of every kind: normal points, a large mean with a small spread,
/// wide intervals across zero, constant rows (eps 0), huge values, an infinite endpoint; point
/// and interval weights and biases, or None; rows of 1 to 4096 elements; the four dtypes.
std::vector<LayerNormInput> layerNormInputs(std::uint64_t seed) {
  using lossbound::DType;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<LayerNormInput> v;
  for (DType t : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16})
    for (std::int64_t n : {1, 2, 7, 33, 768, 4096})
      for (int kind = 0; kind < 6; ++kind) {
        LayerNormInput in;
        in.rows = n > 100 ? 2 : 4;
        in.n = n;
        in.dtype = t;
        in.eps = kind == 3 ? 0.0 : 1e-5;
        const double huge = t == DType::Float64 ? 1e300 : t == DType::Float16 ? 2e4 : 1e37;
        const double c0 = normal(rng);
        for (std::int64_t i = 0; i < in.rows * n; ++i) {
          double x = kind == 1 ? 1000.0 + 1e-3 * normal(rng) : kind == 3 ? c0 : normal(rng);
          if (kind == 4) x *= huge;
          const double w =
              kind == 2 ? 2.0 * std::fabs(x) : (i % 3 == 0 ? 1e-4 * std::fabs(x) : 0.0);
          in.x.lo.push_back(x - w);
          in.x.hi.push_back(x + w);
        }
        if (kind == 5) in.x.hi[static_cast<std::size_t>(n / 2)] = kInf;
        const int wb = static_cast<int>(rng() % 8);  // bit 0 weight, bit 1 bias, bit 2 intervals
        for (int which = 0; which < 2; ++which) {
          if (!(wb & (1 << which))) continue;
          auto& p = which == 0 ? in.w : in.b;
          for (std::int64_t j = 0; j < n; ++j) {
            const double c = which == 0 ? 1.0 + 0.3 * normal(rng) : 0.5 * normal(rng);
            const double r = (wb & 4) ? 1e-2 * std::fabs(c) : 0.0;
            p.lo.push_back(c - r);
            p.hi.push_back(c + r);
          }
        }
        v.push_back(std::move(in));
      }
  return v;
}

/// Returns {out, mean, rstd} of the registered CPU rule aten.native_layer_norm.default on `in`
/// (default precision model: traced dtypes), as lo/hi arrays.
std::vector<lossbound::kernels::test::HostIntervals> cpuLayerNorm(const LayerNormInput& in,
                                                                  lossbound::Backend& backend) {
  using namespace lossbound;
  const Tensor x = Tensor::interval({in.rows, in.n}, in.dtype, in.x.lo, in.x.hi);
  std::optional<Tensor> w, b;
  if (!in.w.lo.empty()) w = Tensor::interval({in.n}, in.dtype, in.w.lo, in.w.hi);
  if (!in.b.lo.empty()) b = Tensor::interval({in.n}, in.dtype, in.b.lo, in.b.hi);
  auto value = [](IrValue::Kind k) {
    IrValue v;
    v.kind = k;
    return v;
  };
  Node node;
  node.name = "ln0";
  node.op = "aten.native_layer_norm.default";
  IrValue ref = value(IrValue::Kind::Ref), shape = value(IrValue::Kind::List);
  ref.ref.name = "x";
  IrValue extent = value(IrValue::Kind::Int);
  extent.intValue = in.n;
  shape.list.push_back(extent);
  node.args = {ref, shape, value(IrValue::Kind::None), value(IrValue::Kind::None),
               value(IrValue::Kind::Float)};
  if (w) {
    node.args[2] = ref;
    node.args[2].ref.name = "w";
  }
  if (b) {
    node.args[3] = ref;
    node.args[3].ref.name = "b";
  }
  node.args[4].floatValue = in.eps;
  node.outputs = {{Shape{in.rows, in.n}, in.dtype},
                  {Shape{in.rows, 1}, in.dtype},
                  {Shape{in.rows, 1}, in.dtype}};
  const OpArgs args(node, [&](const ValueRef& r) -> const Tensor& {
    return r.name == "w" ? *w : r.name == "b" ? *b : x;
  });
  const PrecisionModel precision;
  OpContext ctx{precision, backend, nullptr};
  std::vector<kernels::test::HostIntervals> out;
  for (const Tensor& t : opRegistry().find(node.op)->interval(args, ctx))
    out.push_back({std::vector<double>(t.lo().begin(), t.lo().end()),
                   std::vector<double>(t.hi().begin(), t.hi().end())});
  return out;
}

/// Returns the model the CPU rule uses for dtype t under the default precision model.
lossbound::kernels::LayerNormModel layerNormModel(lossbound::DType t, double eps) {
  const lossbound::PrecisionModel precision;
  const Format store = precision.storageFor(t), compute = ops::accumulationFormat(precision, t);
  return {compute, store, store, store, eps, ops::modelUlps(ops::LibmFn::Rsqrt, compute)};
}

/// The row body's signature, for running the g++ and the nvcc compilations alike.
using LayerNormRowFn = void (*)(const double*, const double*, std::int64_t, const double*,
                                const double*, const double*, const double*,
                                const lossbound::kernels::LayerNormModel&, double*, double*,
                                Interval*, Interval*);

/// Returns {out, mean, rstd} of `row` applied to every row of `in`.
std::vector<lossbound::kernels::test::HostIntervals> bodyLayerNorm(const LayerNormInput& in,
                                                                   LayerNormRowFn row) {
  const auto m = layerNormModel(in.dtype, in.eps);
  const auto nn = static_cast<std::size_t>(in.n), rows = static_cast<std::size_t>(in.rows);
  std::vector<lossbound::kernels::test::HostIntervals> out(3);
  out[0].lo.resize(rows * nn);
  out[0].hi.resize(rows * nn);
  auto opt = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
  for (std::size_t r = 0; r < rows; ++r) {
    Interval mean{}, rstd{};
    row(in.x.lo.data() + r * nn, in.x.hi.data() + r * nn, in.n, opt(in.w.lo), opt(in.w.hi),
        opt(in.b.lo), opt(in.b.hi), m, out[0].lo.data() + r * nn, out[0].hi.data() + r * nn, &mean,
        &rstd);
    out[1].lo.push_back(mean.lo);
    out[1].hi.push_back(mean.hi);
    out[2].lo.push_back(rstd.lo);
    out[2].hi.push_back(rstd.hi);
  }
  return out;
}

/// Returns "" when a and b ({out, mean, rstd}) have the same bits, else the first difference.
QString layerNormDiff(const std::vector<lossbound::kernels::test::HostIntervals>& a,
                      const std::vector<lossbound::kernels::test::HostIntervals>& b) {
  const char* names[] = {"out", "mean", "rstd"};
  for (std::size_t k = 0; k < 3; ++k) {
    if (a[k].lo.size() != b[k].lo.size()) return QStringLiteral("%1: sizes differ").arg(names[k]);
    for (std::size_t i = 0; i < a[k].lo.size(); ++i) {
      const Interval x{a[k].lo[i], a[k].hi[i]}, y{b[k].lo[i], b[k].hi[i]};
      if (!sameBits(x, y))
        return QStringLiteral("%1[%2]: %3 vs %4").arg(names[k]).arg(i).arg(show(x), show(y));
    }
  }
  return {};
}

}  // namespace

class TestKernelBodies : public QObject {
  Q_OBJECT

 private slots:
  void widenAndGammaMatchCpuHelpers();
  void unaryBodiesMatchCpuPath();
  void clampWithANaNBoundIsTheWholeLine();
  void binaryBodiesMatchCpuPath();
  void storeBodyIsOutwardRounding();
  void sumBodiesMatchCpuHelpers();
  void bodiesMatchRegisteredCpuRules();
  void layerNormBodyMatchesRegisteredCpuRule();
#if defined(LOSSBOUND_TEST_NVCC_HOST)  // a CPU-only build has no nvcc unit: no test, not a skip
  void nvccHostPassMatchesHostCompiler();
#endif
  void matmulCompositionEnclosesRandomCandidates();
  void matmulFinishEdgeCases();
  void matmulCompositionMatchesCpuRule();
  void treeSumEnclosesRandomOrders();
  void softmaxBodyMatchesRegisteredCpuRules();
};

void TestKernelBodies::widenAndGammaMatchCpuHelpers() {
  const auto xs = testIntervals(1, 2'000);
  for (const auto& [compute, store] : kFormatPairs) {
    for (int ulps = 0; ulps <= 8; ++ulps)
      for (Interval x : xs) {
        const Interval gpu = lossbound::kernels::widenUlps(x, ulps, compute);
        const Interval cpu = ops::widenUlps(x, ulps, compute);
        if (!sameBits(gpu, cpu))
          QFAIL(qPrintable(QStringLiteral("widenUlps(%1, %2): gpu %3, cpu %4")
                               .arg(show(x))
                               .arg(ulps)
                               .arg(show(gpu), show(cpu))));
      }
    (void)store;
  }
  for (std::int64_t n : {0, 1, 2, 3, 17, 1000, 1 << 20, 1 << 30})
    for (double u : {0x1p-53, 0x1p-24, 0x1p-11, 0x1p-8})
      QVERIFY2(sameBits(lossbound::kernels::gammaUp(static_cast<double>(n), u), ops::gammaUp(n, u)),
               qPrintable(QStringLiteral("gammaUp(%1, %2)").arg(n).arg(u)));
}

void TestKernelBodies::clampWithANaNBoundIsTheWholeLine() {
  // torch.clamp(x, nan) is NaN everywhere: no bound may be dropped (a review found the first
  // body skipping it, as `nan > -inf` is false).
  for (const auto& [lo, hi] : {std::pair{std::nan(""), HUGE_VAL},
                               std::pair{-HUGE_VAL, std::nan("")}, std::pair{std::nan(""), 1.0}})
    for (Interval x : {Interval{0.25, 0.5}, Interval{-3.0, 7.0}, Interval{2.0, 2.0}}) {
      ElementwiseModel m{Format::Fp32, Format::Fp32, 0};
      m.clampLo = lo;
      m.clampHi = hi;
      const Interval r = lossbound::kernels::unaryBody(UnaryOp::Clamp, x, m);
      QVERIFY2(r.lo == -HUGE_VAL && r.hi == HUGE_VAL, qPrintable(show(r)));
    }
}

void TestKernelBodies::unaryBodiesMatchCpuPath() {
  const auto xs = testIntervals(2, kRandomIntervals);
  std::size_t checked = 0;
  for (int o = 0; o < lossbound::kernels::kUnaryOpCount; ++o) {
    const auto op = static_cast<UnaryOp>(o);
    for (const auto& [compute, store] : kFormatPairs)
      for (Interval x : xs) {
        const Interval gpu = lossbound::kernels::unaryBody(op, x, modelFor(op, compute, store));
        const Interval cpu = cpuUnary(op, x, compute, store);
        if (!sameBits(gpu, cpu))
          QFAIL(qPrintable(QStringLiteral("%1(%2) compute %3 store %4: kernel body %5, CPU %6")
                               .arg(unaryName(op), show(x))
                               .arg(static_cast<int>(compute))
                               .arg(static_cast<int>(store))
                               .arg(show(gpu), show(cpu))));
        ++checked;
      }
  }
  QVERIFY(checked > 1'000'000);
}

void TestKernelBodies::binaryBodiesMatchCpuPath() {
  const auto xs = testIntervals(3, 3'000);
  const auto ys = testIntervals(4, 3'000);
  for (int o = 0; o < lossbound::kernels::kBinaryOpCount; ++o) {
    const auto op = static_cast<BinaryOp>(o);
    for (const auto& [compute, store] : kFormatPairs)
      for (std::size_t i = 0; i < xs.size(); ++i) {
        // Pair every x with a y from another position, and every edge x with every edge y.
        const Interval x = xs[i], y = ys[(i * 7919) % ys.size()];
        const ElementwiseModel model = binaryModelFor(op, compute, store);
        const Interval gpu = lossbound::kernels::binaryBody(op, x, y, model);
        const Interval cpu = cpuBinary(op, x, y, compute, store);
        if (!sameBits(gpu, cpu))
          QFAIL(qPrintable(QStringLiteral("%1(%2, %3) store %4: kernel body %5, CPU %6")
                               .arg(binaryName(op), show(x), show(y))
                               .arg(static_cast<int>(store))
                               .arg(show(gpu), show(cpu))));
      }
  }
}

void TestKernelBodies::storeBodyIsOutwardRounding() {
  // Point values: the stored enclosure must contain RN in the format (what the candidate stores),
  // with endpoints representable in the format.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> d(-1e6, 1e6);
  for (int i = 0; i < 100'000; ++i) {
    const double v = d(rng);
    const Interval s32 = lossbound::kernels::storeBody({v, v}, Format::Fp32);
    const double rn32 = static_cast<double>(static_cast<float>(v));
    QVERIFY(lossbound::contains(s32, rn32));
    QCOMPARE(static_cast<double>(static_cast<float>(s32.lo)), s32.lo);
    QCOMPARE(static_cast<double>(static_cast<float>(s32.hi)), s32.hi);
    for (Format f : {Format::Bf16, Format::Fp16, Format::Tf32}) {
      const Interval s = lossbound::kernels::storeBody({v, v}, f);
      QVERIFY(lossbound::contains(s, ops::roundNearest(v, f)));
      QVERIFY(sameBits(s, lossbound::roundOutward({v, v}, f)));
    }
  }
}

void TestKernelBodies::sumBodiesMatchCpuHelpers() {
  const auto xs = testIntervals(6, 5'000);
  std::mt19937_64 rng(7);
  for (std::size_t n :
       {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{64}, std::size_t{1000}}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<Interval> terms;
      for (std::size_t i = 0; i < n; ++i) {
        Interval x = xs[rng() % xs.size()];
        if (lossbound::hasNan(x) || lossbound::isEmpty(x)) x = {0.0, 1.0};
        terms.push_back(x);
      }
      for (const auto& [acc, store] : kFormatPairs)
        for (bool truncating : {false, true}) {
          lossbound::kernels::SumState g;
          ops::SumEnclosure c{{0.0, 0.0}, 0.0};
          for (Interval x : terms) {
            lossbound::kernels::accumulate(g, x);
            ops::accumulate(c, x);
          }
          const Interval gpu =
              lossbound::kernels::sumFinish(g, static_cast<double>(n), acc, store, truncating);
          const Interval cpu =
              ops::roundedSumEnclosure(c, static_cast<std::int64_t>(n), acc, store, truncating);
          QVERIFY2(
              sameBits(gpu, cpu),
              qPrintable(
                  QStringLiteral("n %1: kernel body %2, CPU %3").arg(n).arg(show(gpu), show(cpu))));
        }
    }
  }
}

void TestKernelBodies::bodiesMatchRegisteredCpuRules() {
  // Float32 tensors: the CPU rules compute in fp32 opmath and store in fp32.
  const std::map<std::string, UnaryOp> unaryOps = {
      {"aten.neg.default", UnaryOp::Neg},
      {"aten.abs.default", UnaryOp::Abs},
      {"aten.sqrt.default", UnaryOp::Sqrt},
      {"aten.rsqrt.default", UnaryOp::Rsqrt},
      {"aten.reciprocal.default", UnaryOp::Reciprocal},
      {"aten.exp.default", UnaryOp::Exp},
      {"aten.expm1.default", UnaryOp::Expm1},
      {"aten.log.default", UnaryOp::Log},
      {"aten.log1p.default", UnaryOp::Log1p},
      {"aten.tanh.default", UnaryOp::Tanh},
      {"aten.erf.default", UnaryOp::Erf},
      {"aten.sigmoid.default", UnaryOp::Sigmoid},
      {"aten.relu.default", UnaryOp::Relu},
      {"aten.gelu.default", UnaryOp::GeluErf},
      {"aten.sin.default", UnaryOp::Sin},
      {"aten.cos.default", UnaryOp::Cos},
      {"aten.silu.default", UnaryOp::Silu},
      {"aten.hardswish.default", UnaryOp::Hardswish},
      {"aten.hardsigmoid.default", UnaryOp::Hardsigmoid},
      {"aten.hardtanh.default", UnaryOp::Hardtanh},
      {"aten.floor.default", UnaryOp::Floor},
      {"aten.ceil.default", UnaryOp::Ceil},
      {"aten.round.default", UnaryOp::RoundEven},
      {"aten.trunc.default", UnaryOp::Trunc},
      {"aten.sign.default", UnaryOp::Sign}};
  const std::map<std::string, BinaryOp> binaryOps = {
      {"aten.add.Tensor", BinaryOp::Add},
      {"aten.sub.Tensor", BinaryOp::Sub},
      {"aten.mul.Tensor", BinaryOp::Mul},
      {"aten.div.Tensor", BinaryOp::Div},
      {"aten.minimum.default", BinaryOp::Min},
      {"aten.maximum.default", BinaryOp::Max},
      {"aten.eq.Tensor", BinaryOp::Eq},
      {"aten.ne.Tensor", BinaryOp::Ne},
      {"aten.lt.Tensor", BinaryOp::Lt},
      {"aten.gt.Tensor", BinaryOp::Gt},
      {"aten.le.Tensor", BinaryOp::Le},
      {"aten.ge.Tensor", BinaryOp::Ge},
      {"aten.gelu_backward.default", BinaryOp::GeluBackward},
      {"aten.hardswish_backward.default", BinaryOp::HardswishBackward},
      {"aten.hardsigmoid_backward.default", BinaryOp::HardsigmoidBackward},
      {"aten.sigmoid_backward.default", BinaryOp::SigmoidBackward},
      {"aten.tanh_backward.default", BinaryOp::TanhBackward},
      {"aten.silu_backward.default", BinaryOp::SiluBackward},
      {"aten.hardtanh_backward.default", BinaryOp::HardtanhBackward}};
  // A new body must be listed here with its op (UnaryOp::Sqr has no aten op of its own;
  // UnaryOp::PowScalar is aten.pow.Tensor_Scalar with its exponent, which this table cannot pass:
  // tests/gpu/test_kernel_offload compares it with the rule; BinaryOp::DivRecip is
  // aten.div.Tensor with a 0-d divisor, checked below; UnaryOp::GeluTanh and
  // BinaryOp::GeluTanhBackward are gelu and gelu_backward with approximate='tanh', below;
  // UnaryOp::Round and NonZero are _to_copy to a float or bool dtype, which
  // tests/gpu/test_kernel_offload compares with the rule; Trunc is also the cast to an integer;
  // Clamp is clamp with its Python bounds, compared there too).
  QCOMPARE(static_cast<int>(unaryOps.size()), lossbound::kernels::kUnaryOpCount - 6);
  QCOMPARE(static_cast<int>(binaryOps.size()), lossbound::kernels::kBinaryOpCount - 2);

  // Finite, non-empty operands (what a Tensor can hold); a second set inside (0, inf) for the
  // rules that refuse operands outside their domain (log, sqrt, ... of an empty result).
  std::vector<double> lo, hi, plo, phi;
  for (Interval v : testIntervals(8, 4'000)) {
    if (lossbound::hasNan(v) || lossbound::isEmpty(v) || !std::isfinite(v.lo) ||
        !std::isfinite(v.hi))
      continue;
    lo.push_back(v.lo);
    hi.push_back(v.hi);
    if (v.lo > 0.0) {
      plo.push_back(v.lo);
      phi.push_back(v.hi);
    }
  }
  // Float32 tensors (fp32 opmath and storage), then Float64 ones (fp64): the libm functions'
  // modelled ulps differ between the two, so a rule that gives one function another's ulps fails.
  lossbound::DType dtype = lossbound::DType::Float32;
  Format format = Format::Fp32;
  auto tensors = [&dtype](const std::vector<double>& l, const std::vector<double>& h) {
    std::vector<double> l2, h2;
    for (std::size_t i = 0; i < l.size(); ++i) {
      l2.push_back(l[(i * 7919) % l.size()]);
      h2.push_back(h[(i * 7919) % l.size()]);
    }
    const lossbound::Shape shape{static_cast<std::int64_t>(l.size())};
    return std::pair{lossbound::Tensor::interval(shape, dtype, l, h),
                     lossbound::Tensor::interval(shape, dtype, l2, h2)};
  };
  auto general = tensors(lo, hi), positive = tensors(plo, phi);

  const std::unique_ptr<lossbound::Backend> backend = lossbound::createCpuBackend();
  const lossbound::PrecisionModel precision;
  lossbound::OpContext ctx{precision, *backend, nullptr};
  auto ref = [](const char* name) {
    lossbound::IrValue v;
    v.kind = lossbound::IrValue::Kind::Ref;
    v.ref.name = name;
    return v;
  };

  QStringList compared, missing;
  auto check = [&](const std::string& opName, int arity, auto body, const char* approximate) {
    const lossbound::OpRule* rule = lossbound::opRegistry().find(opName);
    if (!rule) {
      missing << QString::fromStdString(opName);
      return;
    }
    const auto* operands = &general;
    std::vector<lossbound::Tensor> out;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const auto& [x, y] = *operands;
      lossbound::Node node;
      node.name = "node0";
      node.op = opName;
      node.args.push_back(ref("x"));
      if (arity == 2) node.args.push_back(ref("y"));
      if (approximate) {
        lossbound::IrValue a;
        a.kind = lossbound::IrValue::Kind::String;
        a.stringValue = approximate;
        node.kwargs["approximate"] = a;
      }
      node.outputs.push_back({x.shape(), dtype});
      auto lookup = [&](const lossbound::ValueRef& r) -> const lossbound::Tensor& {
        return r.name == "x" ? x : y;
      };
      try {
        const lossbound::OpArgs args(node, lookup);
        out = rule->interval(args, ctx);
        break;
      } catch (const std::exception& e) {
        if (attempt == 1)
          QFAIL(qPrintable(QStringLiteral("CPU rule %1 throws on positive operands: %2")
                               .arg(QString::fromStdString(opName), e.what())));
        operands = &positive;  // the rule refuses operands outside its domain
      }
    }
    const auto& [x, y] = *operands;
    QCOMPARE(out.size(), std::size_t{1});
    QCOMPARE(out[0].numel(), x.numel());
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const Interval g = body(x.at(i), y.at(i));
      if (!sameBits(g, out[0].at(i)))
        QFAIL(qPrintable(QStringLiteral("%1 element %2 (x %3, y %4): kernel body %5, CPU rule %6")
                             .arg(QString::fromStdString(opName))
                             .arg(i)
                             .arg(show(x.at(i)), show(y.at(i)), show(g), show(out[0].at(i)))));
    }
    compared << QString::fromStdString(opName) +
                    (approximate ? QStringLiteral(" approximate=") + approximate : QString()) +
                    (operands == &positive ? QStringLiteral(" (positive operands)") : QString());
  };
  const auto unary = [&format](UnaryOp op) {
    return [op, &format](Interval a, Interval) {
      return lossbound::kernels::unaryBody(op, a, modelFor(op, format, format));
    };
  };
  const auto binary = [&format](BinaryOp op) {
    return [op, &format](Interval a, Interval b) {
      return lossbound::kernels::binaryBody(op, a, b, binaryModelFor(op, format, format));
    };
  };
  for (const auto& [dt, f] : {std::pair{lossbound::DType::Float32, Format::Fp32},
                              std::pair{lossbound::DType::Float64, Format::Fp64}}) {
    dtype = dt;
    format = f;
    general = tensors(lo, hi);
    positive = tensors(plo, phi);
    for (const auto& [name, op] : unaryOps) check(name, 1, unary(op), nullptr);
    for (const auto& [name, op] : binaryOps) check(name, 2, binary(op), nullptr);
    check("aten.gelu.default", 1, unary(UnaryOp::GeluTanh), "tanh");
    check("aten.gelu_backward.default", 2, binary(BinaryOp::GeluTanhBackward), "tanh");
  }
  dtype = lossbound::DType::Float32;
  general = tensors(lo, hi);
  // Every op with a kernel body is compared with its CPU rule, except these, whose bodies exist
  // but whose CPU rules are not written yet (so a trace using them is refused as unsupported).
  // A rule that disappears or is renamed fails here; so does a new rule left on this list.
  const QStringList withoutCpuRule = {QStringLiteral("aten.erf.default")};
  missing.sort();
  missing.removeDuplicates();  // once per dtype
  QCOMPARE(missing, withoutCpuRule);
  QCOMPARE(compared.size(), 2 * (static_cast<qsizetype>(unaryOps.size() + binaryOps.size() + 2) -
                                 withoutCpuRule.size()));
  using lossbound::Tensor;
  // aten.div.Tensor by a 0-d divisor: the rule's hull with x · RN(1/y) is BinaryOp::DivRecip.
  {
    const lossbound::OpRule* div = lossbound::opRegistry().find("aten.div.Tensor");
    QVERIFY(div);
    const Tensor& x = general.first;
    int divisors = 0;
    for (std::int64_t j = 0; j < general.second.numel(); j += 97, ++divisors) {
      const Interval yv = general.second.at(j);
      if (yv.lo == 0.0 && yv.hi == 0.0) continue;  // refused by the rule: the quotient is empty
      const Tensor y = Tensor::interval({}, lossbound::DType::Float32, {yv.lo}, {yv.hi});
      lossbound::Node node;
      node.name = "node0";
      node.op = "aten.div.Tensor";
      node.args = {ref("x"), ref("y")};
      node.outputs.push_back({x.shape(), lossbound::DType::Float32});
      const lossbound::OpArgs args(node, [&](const lossbound::ValueRef& r) -> const Tensor& {
        return r.name == "x" ? x : y;
      });
      std::vector<Tensor> out;
      try {
        out = div->interval(args, ctx);
      } catch (const std::exception& e) {
        QFAIL(qPrintable(QStringLiteral("div by 0-d %1: %2").arg(show(yv), e.what())));
      }
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const Interval g = lossbound::kernels::binaryBody(
            BinaryOp::DivRecip, x.at(i), yv, ElementwiseModel{Format::Fp32, Format::Fp32, 0});
        if (!sameBits(g, out[0].at(i)))
          QFAIL(qPrintable(QStringLiteral("div by 0-d %1, element %2 (x %3): kernel body %4, CPU "
                                          "rule %5")
                               .arg(show(yv))
                               .arg(i)
                               .arg(show(x.at(i)), show(g), show(out[0].at(i)))));
      }
    }
    QVERIFY(divisors > 20);
    compared << QStringLiteral("aten.div.Tensor (0-d divisor)");
  }
  qInfo("bit-identical to the CPU rules: %s", qPrintable(compared.join(' ')));
}

void TestKernelBodies::layerNormBodyMatchesRegisteredCpuRule() {
  // aten.native_layer_norm.default on the CPU backend (which offers no layerNormRows hook, so the
  // rule runs the body on the host) against layerNormRow called here with the model the rule
  // should build: the same bits for out, mean and rstd.
  const auto backend = lossbound::createCpuBackend();
  int compared = 0;
  for (const LayerNormInput& in : layerNormInputs(14)) {
    const QString d = layerNormDiff(bodyLayerNorm(in, &lossbound::kernels::layerNormRow),
                                    cpuLayerNorm(in, *backend));
    QVERIFY2(d.isEmpty(), qPrintable(QStringLiteral("dtype %1 n %2: body vs CPU rule: %3")
                                         .arg(static_cast<int>(in.dtype))
                                         .arg(in.n)
                                         .arg(d)));
    ++compared;
  }
  QCOMPARE(compared, 4 * 6 * 6);
  // The body's integer ⌈log2 n⌉ replaces the rule's former std::ceil(std::log2(n)) (the same value
  // below 2^46, as its comment says): every n up to 2^20, and 2^k − 1, 2^k, 2^k + 1 up to 2^46.
  using lossbound::kernels::layer_norm_detail::ceilLog2;
  for (std::int64_t n = 1; n <= (1 << 20); ++n)
    QVERIFY2(ceilLog2(n) == std::ceil(std::log2(static_cast<double>(n))),
             qPrintable(QString::number(n)));
  for (int k = 1; k <= 46; ++k)
    for (std::int64_t d : {-1, 0, 1}) {
      const std::int64_t n = (std::int64_t{1} << k) + d;
      QVERIFY2(ceilLog2(n) == std::ceil(std::log2(static_cast<double>(n))),
               qPrintable(QString::number(n)));
    }
}

#if defined(LOSSBOUND_TEST_NVCC_HOST)
void TestKernelBodies::nvccHostPassMatchesHostCompiler() {
  namespace t = lossbound::kernels::test;
  const auto xs = testIntervals(9, 5'000);
  for (int o = 0; o < lossbound::kernels::kUnaryOpCount; ++o) {
    const auto op = static_cast<UnaryOp>(o);
    for (const auto& [compute, store] : kFormatPairs)
      for (Interval x : xs) {
        const ElementwiseModel model = modelFor(op, compute, store);
        const Interval a = lossbound::kernels::unaryBody(op, x, model),
                       b = t::nvccUnaryBody(op, x, model);
        if (!sameBits(a, b))
          QFAIL(qPrintable(QStringLiteral("%1(%2): g++ %3, nvcc host %4")
                               .arg(unaryName(op), show(x), show(a), show(b))));
      }
  }
  for (int o = 0; o < lossbound::kernels::kBinaryOpCount; ++o) {
    const auto op = static_cast<BinaryOp>(o);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const Interval x = xs[i], y = xs[(i * 7919) % xs.size()];
      const ElementwiseModel model = binaryModelFor(op, Format::Fp32, Format::Bf16);
      const Interval a = lossbound::kernels::binaryBody(op, x, y, model),
                     b = t::nvccBinaryBody(op, x, y, model);
      QVERIFY2(sameBits(a, b),
               qPrintable(QStringLiteral("%1(%2, %3): g++ %4, nvcc host %5")
                              .arg(binaryName(op), show(x), show(y), show(a), show(b))));
    }
  }
  for (Interval x : xs)
    for (Format f : {Format::Fp64, Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16}) {
      QVERIFY(sameBits(lossbound::kernels::storeBody(x, f), t::nvccStoreBody(x, f)));
      double m = 0.0, r = 0.0;
      lossbound::kernels::midRad(x.lo, x.hi, f, &m, &r);
      QVERIFY(sameBits(Interval{m, r}, t::nvccMidRad(x.lo, x.hi, f)));
    }
  std::mt19937_64 rng(10);
  std::uniform_real_distribution<double> d(-10.0, 10.0);
  for (int i = 0; i < 10'000; ++i) {
    const double g1 = d(rng), g2 = std::fabs(d(rng)) * 10.0, g4 = g2 * (1.0 + 1e-3);
    const double k = static_cast<double>(1 + rng() % 4096);
    const bool points = i % 2 == 0;
    const lossbound::kernels::MatmulBound bound =
        lossbound::kernels::makeMatmulBound(k, Format::Fp32, 0x1p-24, points);
    QVERIFY(
        sameBits(lossbound::kernels::matmulFinish(g1, g2, g4, bound, Format::Fp32),
                 t::nvccMatmulFinish(g1, g2, g4, k, Format::Fp32, 0x1p-24, points, Format::Fp32)));
  }
  std::vector<Interval> terms(xs.begin(), xs.begin() + 300);
  for (Interval& x : terms)
    if (lossbound::hasNan(x) || lossbound::isEmpty(x)) x = {-1.0, 2.0};
  lossbound::kernels::SumState s;
  for (Interval x : terms) lossbound::kernels::accumulate(s, x);
  QVERIFY(sameBits(lossbound::kernels::sumFinish(s, 300.0, Format::Fp32, Format::Bf16, false),
                   t::nvccSum(terms.data(), 300, Format::Fp32, Format::Bf16, false)));
  // The softmax row body: every row kind, both ops, the compute formats the rule uses.
  namespace k = lossbound::kernels;
  for (const auto& [c, st] : kFormatPairs)
    for (bool truncating : {false, true}) {
      const int kExp = ops::modelUlps(ops::LibmFn::Exp, c);
      const int kLog = ops::modelUlps(ops::LibmFn::Log, c);
      const k::SoftmaxModel model = k::makeSoftmaxModel(c, st, truncating, kExp, kLog);
      const k::SoftmaxModel nvccModel = t::nvccMakeSoftmaxModel(c, st, truncating, kExp, kLog);
      QVERIFY(std::memcmp(&model, &nvccModel, sizeof model) == 0);
      for (std::int64_t cols : {1, 2, 7, 300}) {
        const std::int64_t rows = 2 * k::test::kSoftmaxRowKinds;
        const k::test::HostIntervals x = k::test::randomSoftmaxRows(rng, rows, cols);
        std::vector<double> lo(static_cast<std::size_t>(cols)), hi(lo.size()),
            scratch(static_cast<std::size_t>(k::softmaxRowScratch(cols)));
        for (bool log : {false, true}) {
          const k::test::HostIntervals want = k::test::hostSoftmaxRows(model, log, x, rows, cols);
          for (std::int64_t r = 0; r < rows; ++r) {
            const auto o = static_cast<std::size_t>(r * cols);
            t::nvccSoftmaxRow(x.lo.data() + o, x.hi.data() + o, cols, model, log, lo.data(),
                              hi.data(), scratch.data());
            for (std::size_t j = 0; j < lo.size(); ++j)
              QVERIFY2(sameBits(Interval{lo[j], hi[j]}, Interval{want.lo[o + j], want.hi[o + j]}),
                       qPrintable(
                           QStringLiteral("softmaxRow log %1 cols %2 row %3 entry %4: "
                                          "g++ %5, nvcc host %6")
                               .arg(log)
                               .arg(cols)
                               .arg(r)
                               .arg(j)
                               .arg(show({want.lo[o + j], want.hi[o + j]}), show({lo[j], hi[j]}))));
          }
        }
      }
    }
  for (const LayerNormInput& in : layerNormInputs(15)) {
    const QString d = layerNormDiff(bodyLayerNorm(in, &lossbound::kernels::layerNormRow),
                                    bodyLayerNorm(in, &t::nvccLayerNormRow));
    QVERIFY2(d.isEmpty(),
             qPrintable(QStringLiteral("layer norm dtype %1 n %2: g++ vs nvcc host: %3")
                            .arg(static_cast<int>(in.dtype))
                            .arg(in.n)
                            .arg(d)));
  }
}
#endif

void TestKernelBodies::matmulCompositionEnclosesRandomCandidates() {
  // The candidate: inputs anywhere in their intervals, rounded to the input format, products and
  // sums in the accumulation format in a random order and bracketing (with or without FMA,
  // ops::randomDot), result rounded to nearest in the storage format.
  struct Case {
    Format input, acc, store;
    double relWidth;
  };
  const Case cases[] = {{Format::Fp64, Format::Fp64, Format::Fp64, 0.0},
                        {Format::Fp32, Format::Fp32, Format::Fp32, 0.0},
                        {Format::Fp32, Format::Fp32, Format::Fp32, 1e-4},
                        {Format::Tf32, Format::Fp32, Format::Fp32, 1e-6},
                        {Format::Bf16, Format::Fp32, Format::Bf16, 1e-3}};
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> scratch;
  for (const Case& cs : cases)
    for (auto [m, k, n] : {std::array<std::int64_t, 3>{3, 1, 2}, {4, 37, 5}, {2, 300, 3}}) {
      lossbound::kernels::test::HostIntervals a, b;
      auto fill = [&](lossbound::kernels::test::HostIntervals& x, std::int64_t count) {
        for (std::int64_t i = 0; i < count; ++i) {
          const double v = normal(rng) * std::ldexp(1.0, static_cast<int>(rng() % 9) - 4);
          const double w = std::fabs(v) * cs.relWidth * unit(rng);
          x.lo.push_back(v - w);
          x.hi.push_back(v + w);
        }
      };
      fill(a, m * k);
      fill(b, k * n);
      const auto c = lossbound::kernels::test::hostIntervalMatmul(
          a, b, m, k, n, cs.input, cs.acc, lossbound::unitRoundoff(cs.acc), cs.store,
          lossbound::kernels::test::naiveGemm());
      for (int trial = 0; trial < 200; ++trial) {
        auto pick = [&](const lossbound::kernels::test::HostIntervals& x, std::size_t i) {
          const int how = static_cast<int>(rng() % 3);
          const double v = how == 0   ? x.lo[i]
                           : how == 1 ? x.hi[i]
                                      : x.lo[i] + (x.hi[i] - x.lo[i]) * unit(rng);
          return ops::roundNearest(v, cs.input);
        };
        std::vector<double> row(static_cast<std::size_t>(k)), col(static_cast<std::size_t>(k));
        const auto i = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(m));
        const auto j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
        for (std::int64_t l = 0; l < k; ++l) {
          row[static_cast<std::size_t>(l)] = pick(a, static_cast<std::size_t>(i * k + l));
          col[static_cast<std::size_t>(l)] = pick(b, static_cast<std::size_t>(l * n + j));
        }
        const double dot = ops::randomDot(row, col, cs.acc, rng, scratch);
        const double stored = ops::roundNearest(dot, cs.store);
        const auto e = static_cast<std::size_t>(i * n + j);
        if (!(c.lo[e] <= stored && stored <= c.hi[e]))
          QFAIL(qPrintable(QStringLiteral("m %1 k %2 n %3 element (%4, %5): candidate %6 outside "
                                          "[%7, %8]")
                               .arg(m)
                               .arg(k)
                               .arg(n)
                               .arg(i)
                               .arg(j)
                               .arg(stored, 0, 'g', 17)
                               .arg(c.lo[e], 0, 'g', 17)
                               .arg(c.hi[e], 0, 'g', 17)));
      }
      // Tightness: point fp64 operands give width 2·rad ≈ 4·γ_k·|A||B| (centre + candidate), no
      // more; this fails if the bound were, say, doubled by mistake.
      if (cs.relWidth == 0.0 && cs.acc == Format::Fp64)
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double p = 0.0;
            for (std::int64_t l = 0; l < k; ++l)
              p += std::fabs(a.lo[static_cast<std::size_t>(i * k + l)]) *
                   std::fabs(b.lo[static_cast<std::size_t>(l * n + j)]);
            const auto e = static_cast<std::size_t>(i * n + j);
            // + two directed roundings per endpoint (c ± r, then ± the candidate term), each at
            // most one ulp <= 2u|c|.
            const double limit = 4.0 * static_cast<double>(k) * 0x1p-53 * p * 1.01 +
                                 8.0 * 0x1p-53 * std::fabs(c.hi[e]) + 1e-300;
            QVERIFY2(c.hi[e] - c.lo[e] <= limit,
                     qPrintable(QStringLiteral("width %1 > %2").arg(c.hi[e] - c.lo[e]).arg(limit)));
          }
    }
}

void TestKernelBodies::matmulFinishEdgeCases() {
  using lossbound::kernels::makeMatmulBound;
  using lossbound::kernels::matmulFinish;
  const auto b = makeMatmulBound(10.0, Format::Fp32, 0x1p-24, false);
  const Interval whole = lossbound::entireInterval();
  QVERIFY(sameBits(matmulFinish(std::nan(""), 1.0, 1.0, b, Format::Fp32), whole));
  QVERIFY(sameBits(matmulFinish(1.0, 1.0, kInf, b, Format::Fp32), whole));
  QVERIFY(sameBits(matmulFinish(kInf, 1.0, 1.0, b, Format::Fp32), whole));
  // A magnitude beyond the accumulator's range: the candidate may overflow.
  QVERIFY(sameBits(matmulFinish(1.0, 1.0, 3.5e38, b, Format::Fp32), whole));
  // k = 0: exact zero.
  const auto b0 = makeMatmulBound(0.0, Format::Fp32, 0x1p-24, true);
  const Interval zero = matmulFinish(0.0, 0.0, 0.0, b0, Format::Fp32);
  QVERIFY(zero.lo == 0.0 && zero.hi == 0.0);
  // The underflow terms keep a zero centre from being a point when k > 0.
  const Interval z =
      matmulFinish(0.0, 0.0, 0.0, makeMatmulBound(3.0, Format::Fp64, 0x1p-53, true), Format::Fp64);
  QVERIFY(z.lo < 0.0 && z.hi > 0.0);
  // Unbounded operand → midRad refuses it.
  double m = 0.0, r = 0.0;
  QVERIFY(!lossbound::kernels::midRad(-kInf, 1.0, Format::Fp64, &m, &r));
  QVERIFY(lossbound::kernels::midRad(1.0, 3.0, Format::Fp64, &m, &r));
  QCOMPARE(m, 2.0);
  QCOMPARE(r, 1.0);
  // Rounding to the input format happens before the split: [1 + 2^-30] is not a bf16 point.
  QVERIFY(lossbound::kernels::midRad(1.0 + 0x1p-30, 1.0 + 0x1p-30, Format::Bf16, &m, &r));
  QVERIFY(m - r <= 1.0 && m + r >= 1.0 + 0x1p-7);
}

void TestKernelBodies::matmulCompositionMatchesCpuRule() {
  // aten.mm on the CPU backend and the GPU's host composition (the device bodies around the CPU
  // backend's GEMMs) bound the same products two ways: the device finishes every element with
  // directed rounding, the CPU evaluates the radius in round-to-nearest and inflates it (faster
  // without rounding-mode intrinsics). Both must contain every randomized execution of the
  // candidate, and their widths must agree within kMatmulWidthFactor.
  const lossbound::OpRule* rule = lossbound::opRegistry().find("aten.mm.default");
  QVERIFY2(rule, "aten.mm.default is not registered");
  const std::unique_ptr<lossbound::Backend> backend = lossbound::createCpuBackend();
  const lossbound::kernels::test::Gemm cpuGemm =
      [&](const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
          std::int64_t n) { backend->gemm(a, b, c, m, k, n, false); };
  std::mt19937_64 rng(13);
  std::normal_distribution<double> normal(0.0, 1.0);
  double maxRatio = 1.0;
  for (lossbound::DType dtype :
       {lossbound::DType::Float64, lossbound::DType::Float32, lossbound::DType::BFloat16})
    for (double relWidth : {0.0, 1e-4})
      for (auto [m, k, n] : {std::array<std::int64_t, 3>{3, 1, 2}, {6, 40, 5}, {2, 0, 3}}) {
        lossbound::kernels::test::HostIntervals a, b;
        auto fill = [&](lossbound::kernels::test::HostIntervals& x, std::int64_t count) {
          for (std::int64_t i = 0; i < count; ++i) {
            const double v = normal(rng);
            x.lo.push_back(v - std::fabs(v) * relWidth);
            x.hi.push_back(v + std::fabs(v) * relWidth);
          }
        };
        fill(a, m * k);
        fill(b, k * n);
        const lossbound::Tensor ta = lossbound::Tensor::interval({m, k}, dtype, a.lo, a.hi);
        const lossbound::Tensor tb = lossbound::Tensor::interval({k, n}, dtype, b.lo, b.hi);
        lossbound::Node node;
        node.name = "mm0";
        node.op = "aten.mm.default";
        for (const char* name : {"a", "b"}) {
          lossbound::IrValue v;
          v.kind = lossbound::IrValue::Kind::Ref;
          v.ref.name = name;
          node.args.push_back(v);
        }
        node.outputs.push_back({lossbound::Shape{m, n}, dtype});
        const lossbound::OpArgs args(node,
                                     [&](const lossbound::ValueRef& r) -> const lossbound::Tensor& {
                                       return r.name == "a" ? ta : tb;
                                     });
        const lossbound::PrecisionModel precision;
        lossbound::OpContext ctx{precision, *backend, nullptr};
        const lossbound::Tensor cpu = rule->interval(args, ctx).at(0);
        const Format store = precision.storageFor(dtype);
        const Format acc = ops::accumulationFormat(precision, dtype);
        const auto gpu = lossbound::kernels::test::hostIntervalMatmul(
            a, b, m, k, n, precision.matmulInputFor(dtype), acc,
            precision.accumulationRoundoff(dtype), store, cpuGemm);
        // Randomized executions on points drawn from the operand enclosures (endpoints and
        // midpoints), random orders, blockings and FMA.
        std::vector<lossbound::Tensor> runs;
        for (int trial = 0; trial < 200; ++trial) {
          auto pick = [&](const lossbound::kernels::test::HostIntervals& x, std::int64_t r,
                          std::int64_t c) {
            std::vector<double> v;
            for (std::size_t i = 0; i < x.lo.size(); ++i) {
              const int w = static_cast<int>(rng() % 3);
              v.push_back(w == 0 ? x.lo[i] : w == 1 ? x.hi[i] : 0.5 * (x.lo[i] + x.hi[i]));
            }
            return lossbound::Tensor::point({r, c}, dtype, std::move(v));
          };
          const lossbound::Tensor pa = pick(a, m, k), pb = pick(b, k, n);
          const lossbound::OpArgs pargs(
              node, [&](const lossbound::ValueRef& r) -> const lossbound::Tensor& {
                return r.name == "a" ? pa : pb;
              });
          std::mt19937_64 trialRng(1000 + trial);
          lossbound::OpContext rctx{precision, *backend, &trialRng};
          runs.push_back(rule->random(pargs, rctx).at(0));
        }
        for (std::int64_t i = 0; i < m * n; ++i) {
          const Interval g{gpu.lo[static_cast<std::size_t>(i)],
                           gpu.hi[static_cast<std::size_t>(i)]};
          const Interval c = cpu.at(i);
          const QString where = QStringLiteral(
                                    "dtype %1 m %2 k %3 n %4 [%5]: GPU composition %6, "
                                    "CPU aten.mm %7")
                                    .arg(static_cast<int>(dtype))
                                    .arg(m)
                                    .arg(k)
                                    .arg(n)
                                    .arg(i)
                                    .arg(show(g), show(c));
          for (const lossbound::Tensor& run : runs) {
            const double v = run.values()[static_cast<std::size_t>(i)];
            QVERIFY2(
                lossbound::contains(g, v) && lossbound::contains(c, v),
                qPrintable(where + QStringLiteral(": execution %1 escapes").arg(v, 0, 'g', 17)));
          }
          // Widths below 2^-1000 (the CPU's subnormal floor, e.g. k = 0) are not a tightness issue.
          const double wg = std::max(g.hi - g.lo, 0x1p-1000), wc = std::max(c.hi - c.lo, 0x1p-1000);
          QVERIFY2(wg <= kMatmulWidthFactor * wc && wc <= kMatmulWidthFactor * wg,
                   qPrintable(
                       where +
                       QStringLiteral(": widths differ by more than %1x").arg(kMatmulWidthFactor)));
          maxRatio = std::max(maxRatio, std::max(wg / wc, wc / wg));
        }
      }
  qInfo("aten.mm: CPU rule and GPU composition widths within a factor %.3g of each other",
        maxRatio);
}

void TestKernelBodies::treeSumEnclosesRandomOrders() {
  // A tree of merge() (the GPU's block reduction) and the CPU's sequential accumulate() give
  // different sums, but both enclose every fp32 random-order sum (ops::randomSum).
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (std::size_t n : {std::size_t{3}, std::size_t{256}, std::size_t{5000}}) {
    std::vector<Interval> xs;
    for (std::size_t i = 0; i < n; ++i) {
      const double v = normal(rng) * 1e3;
      xs.push_back({v, std::nextafter(v, kInf)});
    }
    // 256 strided partial states merged pairwise, as rowSumKernel does.
    std::vector<lossbound::kernels::SumState> part(256);
    for (std::size_t i = 0; i < n; ++i) lossbound::kernels::accumulate(part[i % 256], xs[i]);
    for (std::size_t s = 128; s > 0; s >>= 1)
      for (std::size_t t = 0; t < s; ++t) part[t] = lossbound::kernels::merge(part[t], part[t + s]);
    const Interval tree = lossbound::kernels::sumFinish(part[0], static_cast<double>(n),
                                                        Format::Fp32, Format::Fp32, false);
    ops::SumEnclosure seq{{0.0, 0.0}, 0.0};
    for (Interval x : xs) ops::accumulate(seq, x);
    const Interval cpu =
        ops::roundedSumEnclosure(seq, static_cast<std::int64_t>(n), Format::Fp32, Format::Fp32);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<double> terms;
      for (Interval x : xs)
        terms.push_back(ops::roundNearest(trial % 2 ? x.lo : x.hi, Format::Fp32));
      const double s = ops::randomSum(terms, Format::Fp32, rng);
      QVERIFY2(lossbound::contains(tree, s) && lossbound::contains(cpu, s),
               qPrintable(QStringLiteral("n %1: sum %2, tree %3, cpu %4")
                              .arg(n)
                              .arg(s, 0, 'g', 17)
                              .arg(show(tree), show(cpu))));
    }
    // The two enclosures differ only by the order of directed additions: widths within 1%.
    const double wt = tree.hi - tree.lo, wc = cpu.hi - cpu.lo;
    QVERIFY(wt <= 1.01 * wc && wc <= 1.01 * wt);
  }
}

void TestKernelBodies::softmaxBodyMatchesRegisteredCpuRules() {
  // Every row of the rule's result must be, bit for bit, the body on that row with the model the
  // rule builds (compute format = accumulationFormat, storage = the output dtype's format, model
  // ulps of exp and log), for the four storage formats, exact and truncating accumulation, the
  // softmax dim last (contiguous rows) and first (strided rows), and half_to_float.
  namespace k = lossbound::kernels;
  using lossbound::DType;
  std::unique_ptr<lossbound::Backend> backend = lossbound::createCpuBackend();
  std::mt19937_64 rng(12);
  struct Types {
    DType in, out;
  };
  const Types types[] = {{DType::Float64, DType::Float64},
                         {DType::Float32, DType::Float32},
                         {DType::BFloat16, DType::BFloat16},
                         {DType::Float16, DType::Float16},
                         {DType::Float16, DType::Float32}};
  std::size_t compared = 0;
  for (const char* op : {"aten._softmax.default", "aten._log_softmax.default"}) {
    const lossbound::OpRule* rule = lossbound::opRegistry().find(op);
    QVERIFY2(rule, op);
    const bool log = std::string(op) == "aten._log_softmax.default";
    for (const Types t : types)
      for (bool truncating : {false, true})
        for (std::int64_t cols : {1, 2, 3, 100, 5000}) {
          const std::int64_t rows =
              cols == 5000 ? 2 * k::test::kSoftmaxRowKinds : 3 * k::test::kSoftmaxRowKinds;
          const k::test::HostIntervals x = k::test::randomSoftmaxRows(rng, rows, cols);
          lossbound::PrecisionModel pm;
          pm.truncatingAccumulation = truncating;
          const Format c = ops::accumulationFormat(pm, t.out), s = pm.storageFor(t.out);
          const k::SoftmaxModel model =
              k::makeSoftmaxModel(c, s, truncating, ops::modelUlps(ops::LibmFn::Exp, c),
                                  ops::modelUlps(ops::LibmFn::Log, c));
          const k::test::HostIntervals want = k::test::hostSoftmaxRows(model, log, x, rows, cols);
          for (bool lastDim : {true, false}) {
            // The same rows as a [rows, cols] tensor with dim −1, or transposed to [cols, rows]
            // with dim 0.
            std::vector<double> lo(x.lo.size()), hi(x.lo.size());
            for (std::int64_t r = 0; r < rows; ++r)
              for (std::int64_t j = 0; j < cols; ++j) {
                const auto from = static_cast<std::size_t>(r * cols + j);
                const auto to = static_cast<std::size_t>(lastDim ? r * cols + j : j * rows + r);
                lo[to] = x.lo[from];
                hi[to] = x.hi[from];
              }
            const lossbound::Shape shape =
                lastDim ? lossbound::Shape{rows, cols} : lossbound::Shape{cols, rows};
            const lossbound::Tensor in = lossbound::Tensor::interval(shape, t.in, lo, hi);
            lossbound::Node node;
            node.name = "node0";
            node.op = op;
            lossbound::IrValue ref, dim, halfToFloat;
            ref.kind = lossbound::IrValue::Kind::Ref;
            ref.ref.name = "x";
            dim.kind = lossbound::IrValue::Kind::Int;
            dim.intValue = lastDim ? -1 : 0;
            halfToFloat.kind = lossbound::IrValue::Kind::Bool;
            halfToFloat.boolValue = t.in != t.out;
            node.args = {ref, dim, halfToFloat};
            node.outputs.push_back({shape, t.out});
            const auto lookup = [&](const lossbound::ValueRef&) -> const lossbound::Tensor& {
              return in;
            };
            const lossbound::OpArgs args(node, lookup);
            lossbound::OpContext ctx{pm, *backend, nullptr};
            const lossbound::Tensor y = rule->interval(args, ctx).at(0);
            for (std::int64_t r = 0; r < rows; ++r)
              for (std::int64_t j = 0; j < cols; ++j) {
                const auto e = static_cast<std::size_t>(r * cols + j);
                const Interval body{want.lo[e], want.hi[e]};
                const Interval cpu = y.at(lastDim ? r * cols + j : j * rows + r);
                if (!sameBits(body, cpu))
                  QFAIL(qPrintable(QStringLiteral("%1 dtype %2 truncating %3 cols %4 %5 row %6 "
                                                  "(kind %7) entry %8 x %9: body %10, CPU rule %11")
                                       .arg(op)
                                       .arg(static_cast<int>(t.out))
                                       .arg(truncating)
                                       .arg(cols)
                                       .arg(lastDim ? "last dim" : "dim 0")
                                       .arg(r)
                                       .arg(r % k::test::kSoftmaxRowKinds)
                                       .arg(j)
                                       .arg(show({x.lo[e], x.hi[e]}), show(body), show(cpu))));
                ++compared;
              }
          }
        }
  }
  qInfo("softmax body = CPU rule on %zu entries", compared);
}

QTEST_GUILESS_MAIN(TestKernelBodies)
#include "test_kernel_bodies.moc"
