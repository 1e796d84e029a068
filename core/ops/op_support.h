#pragma once
// Shared helpers for op rules (both engines): output formats under the precision model, PyTorch
// broadcasting over point and interval tensors, storage rounding, the order-free summation bound,
// randomized summation and dot products in a modelled format, the candidate's libm ulp table and
// perturbation, gradient reduction to a broadcast input shape, argument readers, and a rule built
// from lambdas. Conventions used by every rule that calls these helpers:
// - rules read only the *dtypes* of the traced outputs (args.outSpec(k).dtype), never their shapes;
// - interval rules return interval tensors (views keep the point/interval form of their input);
// - random rules read point values (the lower endpoints, if they are given an interval tensor).

#include "core/interval/elementary.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace lossbound::ops {

// ---------------------------------------------------------------------------------------------
// Formats under the precision model

/// Returns the storage format of output k of the node under the precision model (Fp64 for ints).
Format outFormat(const OpArgs& args, const OpContext& ctx, std::size_t k = 0);
/// Returns the format in which an elementwise op with this output dtype computes intermediates
/// (PyTorch's "opmath": fp32 for bf16/fp16/fp32 storage, fp64 for fp64 storage).
Format opmathFormat(const PrecisionModel& pm, DType dtype);
/// Returns the accumulation format of reductions for this output dtype (fp32 for bf16/fp16).
Format accumulationFormat(const PrecisionModel& pm, DType dtype);
/// Returns true for Bool and integer dtypes (no rounding; casts truncate).
bool isIntegral(DType t);
/// Returns the result dtype of a binary op on tensors a and b (PyTorch promotion; 0-d tensors
/// do not promote a dimensioned float tensor of the same category).
DType promoteTypes(const Tensor& a, const Tensor& b);

// ---------------------------------------------------------------------------------------------
// Broadcasting

/// Returns the broadcast shape of the given shapes; calls args.fail() when they do not broadcast.
Shape broadcastAll(const OpArgs& args, const std::vector<Shape>& shapes);

/// Maps output flat indices of a broadcast shape to flat offsets in each input (row-major).
class BroadcastIndex {
 public:
  /// Prepares the mapping from `out` (the broadcast shape) to each of `inputs`.
  BroadcastIndex(const Shape& out, const std::vector<Shape>& inputs);
  /// Returns the number of output elements.
  std::int64_t size() const { return mSize; }
  /// Writes the offset of output element i in every input to offsets[0..inputs).
  void offsets(std::int64_t i, std::int64_t* offsets) const;
  /// Returns true when every input has the output shape (offset == i).
  bool trivial() const { return mTrivial; }

 private:
  Shape mOut;
  std::vector<std::vector<std::int64_t>> mStrides;  // per input, per output dim (0 if broadcast)
  std::int64_t mSize = 0;
  bool mTrivial = true;
};

/// Returns a point tensor of shape broadcast(x) with f(x_i) (f: double → double).
template <typename F>
Tensor mapPoint(const Tensor& x, DType dtype, F&& f) {
  std::vector<double> out(static_cast<std::size_t>(x.numel()));
  const auto v = x.values();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f(v[i]);
  return Tensor::point(x.shape(), dtype, std::move(out));
}

/// Returns r with NaN endpoints replaced by the entire line. Unlike sanitize(), an exact ±inf point
/// is kept: in a tensor it is the IEEE value the candidate holds (a -inf attention mask), exact in
/// every format; the scalar core's reading "overflowed past DBL_MAX" would lose that exactness.
inline Interval tensorElement(Interval r) { return hasNan(r) ? entireInterval() : r; }

/// Returns an interval tensor with f(x_i) (f: Interval → Interval).
template <typename F>
Tensor mapInterval(const Tensor& x, DType dtype, F&& f) {
  const auto n = static_cast<std::size_t>(x.numel());
  std::vector<double> lo(n), hi(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Interval r = tensorElement(f(x.at(static_cast<std::int64_t>(i))));
    lo[i] = r.lo;
    hi[i] = r.hi;
  }
  return Tensor::interval(x.shape(), dtype, std::move(lo), std::move(hi));
}

/// Returns a point tensor of the broadcast shape of a, b with f(a_i, b_i); fails on mismatch.
template <typename F>
Tensor mapPoint2(const OpArgs& args, const Tensor& a, const Tensor& b, DType dtype, F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape()});
  std::vector<double> out(static_cast<std::size_t>(ix.size()));
  const auto av = a.values(), bv = b.values();
  std::int64_t off[2];
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, off);
    out[static_cast<std::size_t>(i)] = f(av[off[0]], bv[off[1]]);
  }
  return Tensor::point(s, dtype, std::move(out));
}

/// Returns an interval tensor of the broadcast shape of a, b with f(a_i, b_i) (Intervals).
template <typename F>
Tensor mapInterval2(const OpArgs& args, const Tensor& a, const Tensor& b, DType dtype, F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape()});
  std::vector<double> lo(static_cast<std::size_t>(ix.size())), hi(lo.size());
  std::int64_t off[2];
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, off);
    const Interval r = tensorElement(f(a.at(off[0]), b.at(off[1])));
    lo[static_cast<std::size_t>(i)] = r.lo;
    hi[static_cast<std::size_t>(i)] = r.hi;
  }
  return Tensor::interval(s, dtype, std::move(lo), std::move(hi));
}

/// Returns a point tensor of the broadcast shape of a, b, c with f(a_i, b_i, c_i).
template <typename F>
Tensor mapPoint3(const OpArgs& args, const Tensor& a, const Tensor& b, const Tensor& c, DType dtype,
                 F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape(), c.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape(), c.shape()});
  std::vector<double> out(static_cast<std::size_t>(ix.size()));
  const auto av = a.values(), bv = b.values(), cv = c.values();
  std::int64_t off[3];
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, off);
    out[static_cast<std::size_t>(i)] = f(av[off[0]], bv[off[1]], cv[off[2]]);
  }
  return Tensor::point(s, dtype, std::move(out));
}

/// Returns an interval tensor of the broadcast shape of a, b, c with f(a_i, b_i, c_i).
template <typename F>
Tensor mapInterval3(const OpArgs& args, const Tensor& a, const Tensor& b, const Tensor& c,
                    DType dtype, F&& f) {
  const Shape s = broadcastAll(args, {a.shape(), b.shape(), c.shape()});
  const BroadcastIndex ix(s, {a.shape(), b.shape(), c.shape()});
  std::vector<double> lo(static_cast<std::size_t>(ix.size())), hi(lo.size());
  std::int64_t off[3];
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, off);
    const Interval r = tensorElement(f(a.at(off[0]), b.at(off[1]), c.at(off[2])));
    lo[static_cast<std::size_t>(i)] = r.lo;
    hi[static_cast<std::size_t>(i)] = r.hi;
  }
  return Tensor::interval(s, dtype, std::move(lo), std::move(hi));
}

/// Returns x broadcast (materialized) to shape `s`; fails through args when it does not fit.
Tensor broadcastTo(const OpArgs& args, const Tensor& x, const Shape& s);
/// Returns g summed over the dimensions that broadcasting added or expanded to reach g's shape
/// from `s` (the gradient of an input of shape s); point arithmetic.
Tensor sumToShape(const Tensor& g, const Shape& s);

// ---------------------------------------------------------------------------------------------
// Storage rounding

/// Returns x rounded to nearest (ties to even) in f: (double)(float)x for fp32/tf32 storage is
/// fp32; roundToFormat(x, f, Nearest) for bf16/fp16; x itself for fp64.
double roundNearest(double x, Format f);
/// Returns x rounded toward zero in f (tensor cores' tf32 truncation, for the random domain).
double roundTowardZero(double x, Format f);
/// Returns an interval tensor whose elements are roundOutward(t_i, f): encloses every value of
/// an enclosure stored in f with any rounding direction. Integral dtypes are returned unchanged.
Tensor roundOutwardTensor(const Tensor& t, Format f);
/// Returns a point tensor with every element rounded to nearest in f (random domain).
Tensor roundNearestTensor(const Tensor& t, Format f);
/// Returns the enclosure of what a Python scalar s becomes in an op computing in storage f:
/// {s} hull RN_fp32(s) hull RN_f(s) (PyTorch casts scalars to opmath or to the tensor dtype).
Interval scalarEnclosure(double s, Format f);
/// Returns one of s, RN_fp32(s), RN_f(s) at random (the random-domain counterpart).
double randomScalar(double s, Format f, std::mt19937_64& rng);

// ---------------------------------------------------------------------------------------------
// Order-free summation bounds

/// Returns γ_n = n·u / (1 − n·u) rounded upward; +inf when n·u ≥ 1 (Higham 2002, Lemma 3.1).
double gammaUp(std::int64_t n, double u);
/// Returns an upper bound of |fl(Σ x_i) − Σ x_i| for n terms summed in any order and bracketing
/// in a format with unit roundoff u, given absSumUp ≥ Σ|x_i|: γ_{n−1}·Σ|x_i| rounded up
/// (Higham 2002, eq. 4.4 for any summation tree; Jeannerod–Rump 2013 show (n−1)u suffices).
/// Additions are exact in the subnormal range, so no underflow term is needed.
double sumErrorBound(std::int64_t n, double absSumUp, double u);
/// Returns an upper bound of |fl(x·y) − x·y| for a length-n dot product in any order, with or
/// without FMA, where absDotUp ≥ |x|·|y| and eta is the format's smallest subnormal:
/// γ_n·|x|·|y| + n·eta (Higham 2002, eq. 3.5; the n·eta term covers underflow in products).
double dotErrorBound(std::int64_t n, double absDotUp, double u, double eta);
/// Returns the enclosure of Σ x_i over the given element offsets of t, plus an upper bound of
/// Σ|x_i| (both in directed binary64 arithmetic): {sum, absSumUp}.
struct SumEnclosure {
  Interval sum;
  double absSumUp;
};
/// Accumulates one element into a SumEnclosure (directed rounding).
inline void accumulate(SumEnclosure& s, Interval x) {
  s.sum.lo = add_down(s.sum.lo, x.lo);
  s.sum.hi = add_up(s.sum.hi, x.hi);
  const double m = x.hi > -x.lo ? x.hi : -x.lo;
  s.absSumUp = add_up(s.absSumUp, m);
}
/// Returns the enclosure of what any order of summation of n terms in format with roundoff u,
/// then rounding to storage `store`, can give: (sum ± sumErrorBound) → roundOutward(store);
/// entire line when the partial sums may overflow acc's largest finite value.
Interval roundedSumEnclosure(const SumEnclosure& s, std::int64_t n, Format acc, Format store,
                             bool truncating = false);

// ---------------------------------------------------------------------------------------------
// Randomized arithmetic in a modelled format (the random domain)

/// Returns RN_f(a + b) (correctly rounded: binary64 then f is innocuous, 53 ≥ 2p + 2, Figueroa
/// 1995).
double addIn(double a, double b, Format f);
/// Returns RN_f(a · b) (correctly rounded as addIn).
double mulIn(double a, double b, Format f);
/// Returns RN_f(a·b + c) with a single rounding (exact FMA; fp32 via fmaf, fp64 via fma).
double fmaIn(double a, double b, double c, Format f);
/// Sums `terms` in format f: random permutation, then at random either sequential (left to right),
/// a random binary tree, or random-size blocks summed sequentially and then combined; every
/// addition rounded to nearest in f. Reorders `terms` in place.
double randomSum(std::span<double> terms, Format f, std::mt19937_64& rng);
/// Returns the dot product Σ a_i·b_i in accumulation format f in a random order and bracketing:
/// with FMA (sequential chains) or with products rounded to f and then randomSum. `scratch` is
/// reused storage.
double randomDot(std::span<const double> a, std::span<const double> b, Format f,
                 std::mt19937_64& rng, std::vector<double>& scratch);

// ---------------------------------------------------------------------------------------------
// The candidate's libm: ulp table and perturbation

/// Functions whose implementations are not correctly rounded.
/// (Composite functions with cancellation, such as gelu through 1 + erf, need their own bound.)
enum class LibmFn { Exp, Expm1, Log, Log1p, Tanh, Erf, Sigmoid, Pow, Rsqrt };
/// Returns the published maximum error in ulps of fn in compute format f (fp32: max of CUDA 13
/// Programming Guide single-precision table and glibc 2.36 libm-test-ulps "float"; fp64: same
/// tables, "double"; sigmoid counts its exp, add and divide, relative to the result).
int publishedUlps(LibmFn fn, Format f);
/// Returns the ulps used for bounds: publishedUlps + 1 (the tables are measured, not proven).
int modelUlps(LibmFn fn, Format f);
/// Returns x widened outward by `ulps` ulps of format f in relative terms:
/// [lo − ulps·2u·|lo| − ulps·eta, hi + ...] rounded outward (ulp(y) ≤ 2u|y| + eta for any y).
Interval widenUlps(Interval x, int ulps, Format f);
/// Returns v rounded to nearest in f and then moved by a uniform random number of ulps of f in
/// [−publishedUlps, publishedUlps] (the random-domain libm).
double perturbUlps(double v, int publishedUlpsCount, Format f, std::mt19937_64& rng);
/// Returns the interval enclosure of a libm function value in storage `store` computed in
/// compute format `compute`: widenUlps(exact, modelUlps) → roundOutward(store).
Interval libmEnclosure(Interval exact, LibmFn fn, Format compute, Format store);
/// Returns a random-domain libm value: perturbUlps(exactValue) in compute, then RN in store.
double libmRandom(double exactValue, LibmFn fn, Format compute, Format store, std::mt19937_64& rng);
/// Returns the local error bound of a libm result y in store: modelUlps·(2u_c|y| + eta_c)
/// + u_s·|y| + eta_s (compute error, then storage rounding).
double libmLocalError(double y, LibmFn fn, Format compute, Format store);
/// Returns the local error of one correctly rounded operation whose exact result is y, stored in
/// f after being computed in c (double rounding when c ≠ f): u_c|y| + u_f|y|(1+u_c) + eta terms.
double roundingError(double y, Format c, Format f);

// ---------------------------------------------------------------------------------------------
// Argument readers

/// Returns the reduction dims of argument i / kwarg `name` normalized to [0, rank), sorted,
/// without duplicates; None, a missing argument or an empty list mean all dims.
std::vector<int> reduceDims(const OpArgs& args, std::size_t i, std::string_view name, int rank);
/// Returns the `dtype` keyword (or positional i when it is a DType constant), if given.
std::optional<DType> dtypeArg(const OpArgs& args, std::size_t i, std::string_view name = "dtype");
/// Returns argument i as a tensor: the referenced tensor, or a 0-d point tensor for a number.
Tensor tensorOrScalar(const OpArgs& args, std::size_t i, DType scalarDtype);
/// Returns true when argument i is a Python number (not a tensor).
bool isNumber(const OpArgs& args, std::size_t i);
/// Returns the shape of reducing `s` over `dims` (keepdim keeps them as size 1).
Shape reducedShape(const Shape& s, const std::vector<int>& dims, bool keepdim);

/// Flat offsets of a reduction of a row-major tensor over `dims`: element j of the group of
/// output element i is at outer[i] + inner[j] (outputs in row-major order of the kept dims).
struct ReductionLayout {
  std::vector<std::int64_t> outer;
  std::vector<std::int64_t> inner;
};
/// Returns the layout of reducing shape s over dims (sorted, normalized).
ReductionLayout reductionLayout(const Shape& s, const std::vector<int>& dims);

// ---------------------------------------------------------------------------------------------
// Rules from lambdas

/// The five functions of an OpRule.
struct RuleFns {
  std::function<std::vector<Tensor>(const OpArgs&, OpContext&)> point;
  std::function<std::vector<Tensor>(const OpArgs&, OpContext&)> interval;
  std::function<std::vector<Tensor>(const OpArgs&, OpContext&)> random;
  std::function<std::vector<std::optional<Tensor>>(const OpArgs&, std::span<const Tensor>,
                                                   std::span<const Tensor>, OpContext&)>
      vjp;
  std::function<std::vector<Tensor>(const OpArgs&, std::span<const Tensor>, OpContext&)> localError;
};
/// Returns an OpRule that forwards to fns (every function must be set).
std::shared_ptr<const OpRule> makeRule(RuleFns fns);

/// Returns an OpRule that forwards to the point/interval/random/vjp/localError member functions
/// of `rule` (one shared immutable copy of it).
template <typename R>
std::shared_ptr<const OpRule> makeRuleOf(R rule) {
  auto r = std::make_shared<const R>(std::move(rule));
  return makeRule({[r](const OpArgs& a, OpContext& c) { return r->point(a, c); },
                   [r](const OpArgs& a, OpContext& c) { return r->interval(a, c); },
                   [r](const OpArgs& a, OpContext& c) { return r->random(a, c); },
                   [r](const OpArgs& a, std::span<const Tensor> o, std::span<const Tensor> g,
                       OpContext& c) { return r->vjp(a, o, g, c); },
                   [r](const OpArgs& a, std::span<const Tensor> o, OpContext& c) {
                     return r->localError(a, o, c);
                   }});
}
/// Returns a localError function reporting zero error (exact ops: views, copies, comparisons).
std::vector<Tensor> zeroLocalError(std::span<const Tensor> outputs);
/// Returns zero gradients of input shapes for differentiable float inputs, nullopt for others.
std::vector<std::optional<Tensor>> noGradients(const OpArgs& args);

}  // namespace lossbound::ops
