#pragma once
// Helpers shared by the neural-network op families of Engine B (activation, softmax, norm,
// embedding, loss). A formula is written once against a *domain* and evaluated in four of them:
// - PointDomain: binary64 with the host libm (the reference evaluation);
// - IntervalDomain: every elementary operation is enclosed exactly (directed rounding) and then
//   rounded outward to the compute format c, which encloses the correctly rounded result in c;
//   every libm call is enclosed by its exact value widened by modelUlps ulps of c (the libm table
//   of libm_model.h) and intersected with the function's range (exp >= 0, expm1 >= -1, tanh and
//   erf in [-1, 1]: libms preserve it); constants are enclosed with their rounding to c;
// - RandomDomain: every operation rounded to nearest in c (binary64 then c is correct rounding for
//   + − × ÷ since 53 ≥ 2p + 2, Figueroa 1995), libm results perturbed within the published ulps;
// - AdDomain: reverse-mode automatic differentiation on a tape (point arithmetic), so every vjp
//   comes from the same formula as the point rule.
// Piecewise formulas (hardswish, leaky_relu, softplus's threshold, ...) use max/min and
// select(gt/ge(a, b), then, else): a definite comparison in the point, random and AD domains (AD
// differentiates the branch taken; max/min keep their first operand on a tie, as std::max/min
// do); in the interval domain the comparison is three-valued and an undecided one gives the hull
// of both branches, each evaluated on the whole interval (callers clamp the operand with max/min
// first where that keeps a branch tight).
// Row helpers split a tensor into (outer, n, inner) blocks along one dimension.

#include "core/interval/elementary.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/kernel_types.h"
#include "core/ops/formats.h"
#include "core/ops/libm_model.h"
#include "core/ops/op_rule.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace lossbound::ops::nn {

/// The libm functions used by the formulas (core/kernels/smooth_activation.h).
using Fn = kernels::Fn;

/// A mathematical constant: its binary64 value and an enclosure of the exact value.
using Const = kernels::Const;

/// Returns the constant with value v whose exact value is within `ulps` binary64 ulps of v.
inline Const nearConst(double v, int ulps = 4) {
  double lo = v, hi = v;
  for (int i = 0; i < ulps; ++i) {
    lo = std::nextafter(lo, -HUGE_VAL);
    hi = std::nextafter(hi, HUGE_VAL);
  }
  return {v, {lo, hi}};
}

/// Returns the LibmFn of the libm_model.h ulp table for fn.
inline LibmFn libmFn(Fn f) {
  switch (f) {
    case Fn::Exp:
      return LibmFn::Exp;
    case Fn::Log:
      return LibmFn::Log;
    case Fn::Tanh:
      return LibmFn::Tanh;
    case Fn::Erf:
      return LibmFn::Erf;
    case Fn::Expm1:
      return LibmFn::Expm1;
    case Fn::Log1p:
      return LibmFn::Log1p;
  }
  return LibmFn::Exp;
}

/// Returns f(x) from the host libm.
inline double libm(Fn f, double x) {
  switch (f) {
    case Fn::Exp:
      return std::exp(x);
    case Fn::Log:
      return std::log(x);
    case Fn::Tanh:
      return std::tanh(x);
    case Fn::Erf:
      return std::erf(x);
    case Fn::Expm1:
      return std::expm1(x);
    case Fn::Log1p:
      return std::log1p(x);
  }
  return x;
}

/// A comparison in the interval domain (kernels::Tri: the device domain gives the same).
using Tri = kernels::Tri;

/// Binary64 point evaluation.
struct PointDomain {
  using V = double;
  V add(V a, V b) const { return a + b; }
  V sub(V a, V b) const { return a - b; }
  V mul(V a, V b) const { return a * b; }
  V div(V a, V b) const { return a / b; }
  V sqr(V a) const { return a * a; }
  V sqrtV(V a) const { return std::sqrt(a); }
  V fn(Fn f, V a) const { return libm(f, a); }
  V k(const Const& c) const { return c.value; }
  V lit(double v) const { return v; }
  V max(V a, V b) const { return a < b ? b : a; }
  V min(V a, V b) const { return b < a ? b : a; }
  bool gt(V a, V b) const { return a > b; }
  bool ge(V a, V b) const { return a >= b; }
  V select(bool c, V a, V b) const { return c ? a : b; }
};

/// Enclosure of every execution in compute format c (see the file comment): the device's
/// kernels::ComputeDomain (the same bits for + − × ÷, min, max, comparisons and selections), with
/// the libm functions and constants of the host rules.
struct IntervalDomain : kernels::ComputeDomain {
  V fn(Fn f, V a) const {
    Interval e;
    switch (f) {
      case Fn::Exp:
        e = lossbound::exp(a);
        break;
      case Fn::Log:
        e = lossbound::log(a);
        break;
      case Fn::Tanh:
        e = lossbound::tanh(a);
        break;
      case Fn::Erf:
        e = lossbound::erf(a);
        break;
      case Fn::Expm1:
        e = lossbound::expm1(a);
        break;
      case Fn::Log1p:
        e = lossbound::log1p(a);
        break;
    }
    // The candidate's libm in c: within modelUlps ulps of the exact value (libm_model.h table).
    e = widenUlps(e, modelUlps(libmFn(f), c), c);
    if (f == Fn::Exp) e.lo = std::fmax(e.lo, 0.0);
    if (f == Fn::Expm1) e.lo = std::fmax(e.lo, -1.0);
    if (f == Fn::Tanh || f == Fn::Erf) e = intersect(e, Interval{-1.0, 1.0});
    return round(e);
  }
  V k(const Const& x) const { return round(hull(x.exact, point(x.value))); }
};

/// One random execution in compute format c.
struct RandomDomain {
  using V = double;
  Format c;
  std::mt19937_64* rng;
  V add(V a, V b) const { return roundNearest(a + b, c); }
  V sub(V a, V b) const { return roundNearest(a - b, c); }
  V mul(V a, V b) const { return roundNearest(a * b, c); }
  V div(V a, V b) const { return roundNearest(a / b, c); }
  V sqr(V a) const { return roundNearest(a * a, c); }
  V fn(Fn f, V a) const {
    // Real libms keep results in the function's range (exp >= 0, |tanh|, |erf| <= 1): the model
    // includes that, so perturbed results are clamped into it.
    const double y = perturbUlps(libm(f, a), publishedUlps(libmFn(f), c), c, *rng);
    if (f == Fn::Exp) return std::fmax(y, 0.0);
    if (f == Fn::Expm1) return std::fmax(y, -1.0);
    if (f == Fn::Tanh || f == Fn::Erf) return std::fmin(std::fmax(y, -1.0), 1.0);
    return y;
  }
  V k(const Const& x) const { return roundNearest(x.value, c); }
  V lit(double v) const { return roundNearest(v, c); }
  V max(V a, V b) const { return a < b ? b : a; }
  V min(V a, V b) const { return b < a ? b : a; }
  bool gt(V a, V b) const { return a > b; }
  bool ge(V a, V b) const { return a >= b; }
  V select(bool c, V a, V b) const { return c ? a : b; }
};

// ---------------------------------------------------------------------------------------------
// Reverse-mode AD on a tape

/// A tape of elementary operations with their local partial derivatives.
class Tape {
 public:
  struct Entry {
    int a, b;       // parents (−1: none)
    double da, db;  // partial derivatives with respect to them
  };
  /// Appends an entry and returns its index.
  int push(int a, double da, int b = -1, double db = 0.0) {
    mEntries.push_back({a, b, da, db});
    return static_cast<int>(mEntries.size()) - 1;
  }
  /// Returns a new independent variable's index.
  int leaf() { return push(-1, 0.0); }
  /// Returns the adjoints of every entry given seeds (index, adjoint).
  std::vector<double> backward(const std::vector<std::pair<int, double>>& seeds) const {
    std::vector<double> adj(mEntries.size(), 0.0);
    for (const auto& [i, g] : seeds)
      if (i >= 0) adj[static_cast<std::size_t>(i)] += g;
    propagate(adj);
    return adj;
  }
  /// The adjoints of every entry for one seed (index, adjoint), into `adj` (reused across calls:
  /// the per-element vjps run this once per element).
  void backward(int seed, double g, std::vector<double>& adj) const {
    adj.assign(mEntries.size(), 0.0);
    if (seed >= 0) adj[static_cast<std::size_t>(seed)] += g;
    propagate(adj);
  }
  /// Clears the tape.
  void clear() { mEntries.clear(); }

 private:
  void propagate(std::vector<double>& adj) const {
    for (std::size_t k = mEntries.size(); k-- > 0;) {
      const Entry& e = mEntries[k];
      if (adj[k] == 0.0) continue;
      if (e.a >= 0) adj[static_cast<std::size_t>(e.a)] += adj[k] * e.da;
      if (e.b >= 0) adj[static_cast<std::size_t>(e.b)] += adj[k] * e.db;
    }
  }
  std::vector<Entry> mEntries;
};

/// A value on a tape (id −1: a constant).
struct Var {
  double v = 0.0;
  int id = -1;
};

/// Reverse-mode AD evaluation (point arithmetic) recording on `tape`.
struct AdDomain {
  using V = Var;
  Tape* tape;
  V make(double v, int a, double da, int b = -1, double db = 0.0) const {
    if (a < 0 && b < 0) return {v, -1};
    if (a < 0) return {v, tape->push(b, db)};
    return {v, tape->push(a, da, b, db)};
  }
  V leaf(double v) const { return {v, tape->leaf()}; }
  V add(V a, V b) const { return make(a.v + b.v, a.id, 1.0, b.id, 1.0); }
  V sub(V a, V b) const { return make(a.v - b.v, a.id, 1.0, b.id, -1.0); }
  V mul(V a, V b) const { return make(a.v * b.v, a.id, b.v, b.id, a.v); }
  V div(V a, V b) const { return make(a.v / b.v, a.id, 1.0 / b.v, b.id, -a.v / (b.v * b.v)); }
  V sqr(V a) const { return make(a.v * a.v, a.id, 2.0 * a.v); }
  V fn(Fn f, V a) const {
    const double y = libm(f, a.v);
    double d = 0.0;
    switch (f) {
      case Fn::Exp:
        d = y;
        break;
      case Fn::Log:
        d = 1.0 / a.v;
        break;
      case Fn::Tanh:
        d = 1.0 - y * y;
        break;
      case Fn::Erf:
        d = 1.1283791670955126 * std::exp(-a.v * a.v);
        break;  // 2/sqrt(pi)
      case Fn::Expm1:
        d = std::exp(a.v);
        break;
      case Fn::Log1p:
        d = 1.0 / (1.0 + a.v);
        break;
    }
    return make(y, a.id, d);
  }
  V sqrtV(V a) const {
    const double y = std::sqrt(a.v);
    return make(y, a.id, 0.5 / y);
  }
  V k(const Const& x) const { return {x.value, -1}; }
  V lit(double v) const { return {v, -1}; }
  V max(V a, V b) const { return a.v < b.v ? b : a; }
  V min(V a, V b) const { return b.v < a.v ? b : a; }
  bool gt(V a, V b) const { return a.v > b.v; }
  bool ge(V a, V b) const { return a.v >= b.v; }
  V select(bool c, V a, V b) const { return c ? a : b; }
};

// ---------------------------------------------------------------------------------------------
// Rows along one dimension

/// The (outer, n, inner) decomposition of a shape around dimension `dim`: element (o, j, i) is at
/// flat offset (o·n + j)·inner + i.
struct Rows {
  std::int64_t outer = 1, n = 1, inner = 1;
  /// Returns the flat offset of element j of row r (r = o·inner + i).
  std::int64_t at(std::int64_t r, std::int64_t j) const {
    const std::int64_t o = r / inner, i = r % inner;
    return (o * n + j) * inner + i;
  }
  /// Returns the number of rows.
  std::int64_t count() const { return outer * inner; }
};

/// Returns the rows of shape s along dim (dim normalized; a 0-d tensor is one row of one).
inline Rows rowsAlong(const Shape& s, int dim) {
  Rows r;
  if (s.empty()) return r;
  r.n = s[static_cast<std::size_t>(dim)];
  for (int d = 0; d < dim; ++d) r.outer *= s[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(dim) + 1; d < s.size(); ++d) r.inner *= s[d];
  return r;
}

/// Returns the larger of |lo| and |hi| (the magnitude of an interval).
inline double mag(Interval x) { return std::fmax(std::fabs(x.lo), std::fabs(x.hi)); }

/// Returns localError for outputs computed by an interval rule on exact point inputs: the
/// largest distance from the point value to an endpoint of the enclosure (rounded up).
inline Tensor localErrorFromEnclosure(const Tensor& pointOut, const Tensor& encl) {
  std::vector<double> e(static_cast<std::size_t>(pointOut.numel()));
  for (std::size_t i = 0; i < e.size(); ++i) {
    const double y = pointOut.values()[i];
    const Interval r = encl.at(static_cast<std::int64_t>(i));
    if (r.lo == y && r.hi == y) {  // known exactly (also an exact ±inf, e.g. a masked entry)
      e[i] = 0.0;
      continue;
    }
    const double d = std::fmax(sub_up(r.hi, y), sub_up(y, r.lo));
    e[i] = std::isnan(d) ? HUGE_VAL : std::fmax(d, 0.0);
  }
  return Tensor::point(pointOut.shape(), pointOut.dtype(), std::move(e));
}

/// Returns localError for every output from `rule`'s interval rule evaluated on the (exact,
/// point) inputs: the enclosure contains every execution, so its distance to the point value
/// bounds |computed − exact| including the storage rounding.
inline std::vector<Tensor> localErrorVia(const OpRule& rule, const OpArgs& args,
                                         std::span<const Tensor> outputs, OpContext& ctx) {
  const std::vector<Tensor> encl = rule.interval(args, ctx);
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < outputs.size() && k < encl.size(); ++k)
    out.push_back(localErrorFromEnclosure(outputs[k], encl[k]));
  return out;
}

/// Returns a zero-filled tensor with the shape of `like` and dtype t (no gradient / masked output).
inline Tensor zerosLike(const Tensor& like, DType t) { return Tensor::full(like.shape(), t, 0.0); }

}  // namespace lossbound::ops::nn
