#pragma once
// The vocabulary of the interval kernels a Backend may offer (core/backend.h): which operation,
// in which precision, on which host arrays. Plain C++ (no CUDA types); the bodies that give these
// operations their meaning are in core/kernels/kernel_bodies.h.

#include "core/interval/hd.h"
#include "core/interval/precision.h"

#include <cstdint>

namespace lossbound::kernels {

/// Elementwise operations with one interval operand.
enum class UnaryOp : int {
  Neg,
  Abs,
  Sqr,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Exp,
  Expm1,
  Log,
  Log1p,
  Tanh,
  Erf,
  Sigmoid,
  Relu,
  GeluErf,  ///< gelu(x, approximate='none') = x·0.5·(1 + erf(x·√½)), composed in the compute format
  Sin,
  Cos,
  Silu,         ///< x / (1 + exp(−x)) or x·(1 / (1 + exp(−x))), composed in the compute format
  PowScalar,    ///< x^p for the Python number p = ElementwiseModel::exponent (pow.Tensor_Scalar)
  Hardswish,    ///< x·min(max(x + 3, 0), 6)/6 or ·RN32(1/6) (core/kernels/piecewise_activation.h)
  Hardsigmoid,  ///< min(max(x + 3, 0), 6)/6 or ·RN32(1/6)
  GeluTanh,     ///< gelu(x, approximate='tanh') (core/kernels/smooth_activation.h)
  Hardtanh,     ///< min(max(x, lo), hi), lo and hi from the model (ReLU6: 0, 6)
  Round,        ///< x stored in model.storage: a floating cast (_to_copy to a float dtype)
  Trunc,        ///< x rounded toward zero: a cast to an integer dtype (trunc is monotone)
  NonZero,      ///< x != 0 as 0, 1 or [0, 1]: a cast to bool
  Floor,        ///< floor(x): exact and nondecreasing, so [floor(lo), floor(hi)]
  Ceil,         ///< ceil(x), likewise
  RoundEven,    ///< torch.round: to the nearest integer, half to even (rint), likewise
  Clamp,        ///< clamp(x, lo, hi) with Python bounds (±inf: none), exact, stored
  Sign          ///< sign(x) = (0 < x) − (x < 0), NaN giving 0 as PyTorch's kernels: exact
};
/// Number of UnaryOp values (for tests and tables).
inline constexpr int kUnaryOpCount = 31;

/// Elementwise operations with two interval operands. DivRecip is a division by a scalar that
/// the candidate may carry out as x · RN(1/y) (PyTorch's kernels do for a 0-d divisor). Eq … Ge
/// are the comparisons (exact: 1 surely true, 0 surely false, [0, 1] uncertain). GeluBackward is
/// gelu_backward(grad, x, approximate='none'), composed in the compute format.
enum class BinaryOp : int {
  Add,
  Sub,
  Mul,
  Div,
  Min,
  Max,
  DivRecip,
  Eq,
  Ne,
  Lt,
  Gt,
  Le,
  Ge,
  GeluBackward,
  HardswishBackward,    ///< (grad, self): core/kernels/piecewise_activation.h
  HardsigmoidBackward,  ///< (grad, self)
  SigmoidBackward,      ///< (grad, output): core/kernels/smooth_activation.h
  TanhBackward,         ///< (grad, output)
  SiluBackward,         ///< (grad, self)
  GeluTanhBackward,     ///< gelu_backward(grad, self, approximate='tanh')
  HardtanhBackward      ///< (grad, self): 0 outside (lo, hi), lo and hi from the model
};
/// Number of BinaryOp values.
inline constexpr int kBinaryOpCount = 21;

/// True for the comparisons Eq … Ge.
LB_HD constexpr bool isComparison(BinaryOp op) {
  return static_cast<int>(op) >= static_cast<int>(BinaryOp::Eq) &&
         static_cast<int>(op) <= static_cast<int>(BinaryOp::Ge);
}

/// A comparison in the interval domain: which outcomes some pair of values in the operands'
/// enclosures can give.
struct Tri {
  bool canTrue;
  bool canFalse;
};

/// How the candidate computes one elementwise op: the format it computes in (PyTorch's opmath:
/// fp32 for bf16/fp16/fp32 storage), the format it stores the result in, and the extra error of
/// its implementation in ulps of the compute format (0 for the correctly rounded operations;
/// core/ops' modelUlps(fn, compute) — published libm error + 1 — for transcendental functions).
struct ElementwiseModel {
  Format compute = Format::Fp64;
  Format storage = Format::Fp64;
  int ulps = 0;
  double exponent = 0.0;  ///< UnaryOp::PowScalar: the exponent p
  int expUlps = 0;  ///< BinaryOp::GeluBackward: exp's ulps (ulps: erf's; kernels::activationLibm)
  double clampLo = 0.0;  ///< UnaryOp::Hardtanh, BinaryOp::HardtanhBackward: min_val; Clamp: min
  double clampHi = 0.0;  ///< and max_val (Clamp: max)
};

/// How the candidate computes a sum (any order): accumulation format (2u when truncating) and
/// storage format — the arguments of ops::roundedSumEnclosure.
struct SumModel {
  Format accumulation = Format::Fp64;
  Format storage = Format::Fp64;
  bool truncating = false;
  bool mean = false;   ///< divide by the count: a mean (kernels::meanFinish)
  bool exact = false;  ///< an integer sum: the enclosure of the exact sum, nothing rounds
  int extremum = 0;    ///< 1: the row's maximum (amax), -1: its minimum (amin), 0: a sum
  /// A vector norm of the row (kernels::normTerm, normFinish): 1 the sum of |x| (ord 1; with
  /// extremum 1, ord inf: the maximum of |x|), 2 the square root of the sum of x² (ord 2); 0 none.
  int norm = 0;
};

/// Read-only interval operand in host memory: n lower and n upper endpoints (hi may equal lo for
/// a point operand).
struct ConstIntervalSpan {
  const double* lo = nullptr;
  const double* hi = nullptr;
};

/// Writable interval result in host memory.
struct IntervalSpan {
  double* lo = nullptr;
  double* hi = nullptr;
};

/// A batch of `count` products of one shape m×k · k×n (bmm, baddbmm, a broadcast matmul): the
/// operand A of product i starts at element i·aStride, B at i·bStride (a stride of 0: one operand
/// shared by every product), the result and the bias at i·m·n.
struct GemmBatch {
  std::int64_t count = 1;
  std::int64_t aStride = 0;
  std::int64_t bStride = 0;

  /// Returns the elements an operand of `slice` elements spans with `stride`.
  static constexpr std::int64_t extent(std::int64_t count, std::int64_t stride,
                                       std::int64_t slice) {
    return count <= 0 ? 0 : (count - 1) * stride + slice;
  }
};

}  // namespace lossbound::kernels
