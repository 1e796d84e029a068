// Reductions: sum (all forms, dtype), mean (all forms), amax/amin, max.dim/min.dim, max/min,
// all/any (.default, .dim, .dims).
//
// Error model of "any reasonable implementation": the n terms are summed in the accumulation
// format (fp32 for bf16/fp16, else the output's storage format) in any order and bracketing
// (cascade, split, atomics, tree reductions), each addition correctly rounded; the result is
// rounded to the storage format. |fl(Σx) - Σx| <= γ_{n-1} Σ|x_i| for any summation tree
// (Higham 2002, eq. 4.4; Jeannerod–Rump 2013: (n-1)u suffices). mean divides the sum by n, or
// multiplies it by RN(1/n), with the sum held in the accumulation format or first rounded to the
// storage format (PyTorch 1.13 CPU: sum_out into the bf16/fp16 result, then div_(n) — two
// roundings to storage): the interval rule takes the hull of all four. max/min are exact.
#include "core/kernels/kernel_bodies.h"
#include "core/ops/arg_readers.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/random_arith.h"
#include "core/ops/reduction_layout.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// The reduction dims and keepdim of a node (sum/mean/amax/max.dim argument conventions).
struct ReduceArgs {
  std::vector<int> dims;
  bool keepdim = false;
};

enum class Kind { Sum, Mean, Amax, Amin };

ReduceArgs reduceArgs(const OpArgs& a, bool full, int rank) {
  ReduceArgs r;
  if (full) {
    for (int d = 0; d < rank; ++d) r.dims.push_back(d);
    return r;
  }
  r.dims = reduceDims(a, 1, "dim", rank);
  r.keepdim = a.boolArg(2, "keepdim", false);
  return r;
}

/// sum mean amax amin max min (full or over dims): the order-free sum bound γ_{n−1}Σ|x| in the
/// accumulation format, the hull of the four mean variants (file comment); extrema are exact.
class ReduceRule final : public OpRule {
 public:
  /// Takes the reduction and whether it is over every dim without keepdim (sum.default, ...).
  ReduceRule(Kind kind, bool full) : mKind(kind), mFull(full) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    const auto v = x.values();
    std::vector<double> out(l.outer.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      double s = mKind == Kind::Amax ? -kInf : (mKind == Kind::Amin ? kInf : 0.0);
      for (std::int64_t off : l.inner) {
        const double e = v[static_cast<std::size_t>(l.outer[i] + off)];
        if (mKind == Kind::Sum || mKind == Kind::Mean)
          s += e;
        else if (std::isnan(e) || std::isnan(s))
          s = std::nan("");
        else
          s = mKind == Kind::Amax ? std::max(s, e) : std::min(s, e);
      }
      if (mKind == Kind::Mean) s /= static_cast<double>(l.inner.size());
      out[i] = s;
    }
    if ((mKind == Kind::Amax || mKind == Kind::Amin) && l.inner.empty() && !out.empty())
      a.fail("max/min of an empty dimension");
    return {Tensor::point(reducedShape(x.shape(), ra.dims, ra.keepdim), a.outSpec().dtype,
                          std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const auto n = static_cast<std::int64_t>(l.inner.size());
    const bool extremum = mKind == Kind::Amax || mKind == Kind::Amin;
    const kernels::SumModel model{acc,
                                  store,
                                  ctx.precision.truncatingAccumulation,
                                  mKind == Kind::Mean,
                                  integral,
                                  mKind == Kind::Amax ? 1 : (mKind == Kind::Amin ? -1 : 0)};
    if (mKind == Kind::Sum || extremum || (mKind == Kind::Mean && !integral))
      if (auto r = offerReduction(ctx.backend, model, x, l,
                                  reducedShape(x.shape(), ra.dims, ra.keepdim), t))
        return {std::move(*r)};
    std::vector<double> lo(l.outer.size()), hi(l.outer.size());
    for (std::size_t i = 0; i < lo.size(); ++i) {
      Interval r;
      if (extremum) {
        if (n == 0) a.fail("max/min of an empty dimension");
        // The row's elements gathered in the order of l.inner (kernels::rowExtremum, which a
        // device runs on the gathered rows).
        std::vector<double> elo(static_cast<std::size_t>(n)), ehi(elo.size());
        for (std::size_t k = 0; k < elo.size(); ++k) {
          const Interval e = x.at(l.outer[i] + l.inner[k]);
          elo[k] = e.lo;
          ehi[k] = e.hi;
        }
        r = kernels::rowExtremum(elo.data(), ehi.data(), n, 1, model);
      } else {
        SumEnclosure s{{0.0, 0.0}, 0.0};
        for (std::int64_t off : l.inner) accumulate(s, sanitize(x.at(l.outer[i] + off)));
        if (integral) {
          r = s.sum;
        } else if (mKind == Kind::Sum) {
          r = roundedSumEnclosure(s, n, acc, store, ctx.precision.truncatingAccumulation);
        } else if (n == 0) {
          r = entireInterval();  // 0/0: NaN in every implementation
        } else {
          // The hull of the four mean variants, as the row kernels compute it.
          r = kernels::meanFinish(kernels::SumState{s.sum, s.absSumUp}, static_cast<double>(n), acc,
                                  store, ctx.precision.truncatingAccumulation);
        }
      }
      lo[i] = r.lo;
      hi[i] = r.hi;
    }
    return {Tensor::interval(reducedShape(x.shape(), ra.dims, ra.keepdim), t, std::move(lo),
                             std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    if (mKind == Kind::Amax || mKind == Kind::Amin) {
      std::vector<Tensor> r = point(a, ctx);
      const Format store = outFormat(a, ctx);
      if (!isIntegral(a.outSpec().dtype)) r[0] = roundNearestTensor(r[0], store);
      return r;
    }
    const Tensor& x = a.tensor(0);
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    std::mt19937_64& rng = *ctx.rng;
    const auto v = x.values();
    std::vector<double> terms, out(l.outer.size());
    const double n = static_cast<double>(l.inner.size());
    const bool recip = (rng() & 1) != 0;
    const bool sumToStorage = (rng() & 2) != 0;  // torch CPU: sum_out in the output dtype, div_
    for (std::size_t i = 0; i < out.size(); ++i) {
      terms.clear();
      for (std::int64_t off : l.inner)
        terms.push_back(v[static_cast<std::size_t>(l.outer[i] + off)]);
      if (integral) {
        double s = 0.0;
        for (double e : terms) s += e;
        out[i] = s;
        continue;
      }
      double s = randomSum(terms, acc, rng);
      if (mKind == Kind::Mean && sumToStorage) s = roundNearest(s, store);
      if (mKind == Kind::Mean)
        s = recip ? mulIn(s, roundNearest(1.0 / n, acc), acc) : roundNearest(s / n, acc);
      out[i] = roundNearest(s, store);
    }
    return {Tensor::point(reducedShape(x.shape(), ra.dims, ra.keepdim), t, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return {std::nullopt};
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    const auto gv = g[0].values();
    const auto xv = x.values();
    const auto yv = outs[0].values();
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
    const double n = static_cast<double>(l.inner.size());
    for (std::size_t i = 0; i < l.outer.size(); ++i) {
      if (mKind == Kind::Sum || mKind == Kind::Mean) {
        const double gi = mKind == Kind::Mean ? gv[i] / n : gv[i];
        for (std::int64_t off : l.inner) gx[static_cast<std::size_t>(l.outer[i] + off)] = gi;
      } else {
        // amax/amin: the gradient is split evenly among the maxima (PyTorch's amax backward).
        int count = 0;
        for (std::int64_t off : l.inner)
          count += xv[static_cast<std::size_t>(l.outer[i] + off)] == yv[i];
        for (std::int64_t off : l.inner)
          if (xv[static_cast<std::size_t>(l.outer[i] + off)] == yv[i])
            gx[static_cast<std::size_t>(l.outer[i] + off)] = gv[i] / count;
      }
    }
    return {Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t)) return zeroLocalError(outs);
    const Tensor& x = a.tensor(0);
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    if (mKind == Kind::Amax || mKind == Kind::Amin)
      return {mapPoint(outs[0], t, [&](double y) {
        return store == Format::Fp64 ? 0.0 : roundingError(y, store, store);
      })};
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    const auto n = static_cast<std::int64_t>(l.inner.size());
    const double u = ctx.precision.accumulationRoundoff(t);
    std::vector<double> out(l.outer.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      double abs = 0.0;
      for (std::int64_t off : l.inner)
        abs = add_up(abs, std::fabs(x.values()[static_cast<std::size_t>(l.outer[i] + off)]));
      // the binary64 reference sum has its own γ_{n-1}^64 error
      double e = add_up(sumErrorBound(n, abs, u), sumErrorBound(n, abs, 0x1p-53));
      const double y = outs[0].values()[i];
      // Each later rounding acts on a value of magnitude <= |y| + (the error so far).
      const auto mag = [&] { return add_up(std::fabs(y), e); };
      if (mKind == Kind::Mean && n > 0) {
        e = div_up(e, static_cast<double>(n));
        // the sum may be rounded to storage before the division (torch CPU sum_out + div_)
        if (store != acc) e = add_up(e, roundingError(mag(), store, store));
        // s / n, or s · RN(1/n): at most two roundings in acc
        e = add_up(e, mul_up(roundingError(mag(), acc, acc), 2.0));
      }
      if (store != acc) e = add_up(e, roundingError(mKind == Kind::Mean ? mag() : y, store, store));
      out[i] = e;
    }
    return {Tensor::point(outs[0].shape(), t, std::move(out))};
  }

  // Probabilistic term of sum and mean (round to nearest): the n − 1 additions round partial
  // sums, u·partialSumsRootSquares(|x|) in quadrature (Higham & Mary 2019; the k-th largest
  // partial sum of any tree is at most the sum of the n − k + 1 largest terms); mean: that over
  // n, and its one or two division roundings u|y| each; a storage format coarser than the
  // accumulation format rounds the sum before the division and the result, u_s|y| each; the
  // binary64 point value's own error γ_{n−1}^{64}·Σ|x| (over n for mean) and the divisions' and
  // storage's underflow stay linear. The
  // evaluator never uses it above localError. Truncating accumulation is biased: none.
  std::vector<Tensor> probabilisticLocalError(const OpArgs& a, std::span<const Tensor> outs,
                                              OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (isIntegral(t) || (mKind != Kind::Sum && mKind != Kind::Mean) ||
        ctx.precision.truncatingAccumulation)
      return {};
    const Tensor& x = a.tensor(0);
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    const auto n = static_cast<std::int64_t>(l.inner.size());
    const double u = unitRoundoff(acc), uS = store == acc ? 0.0 : unitRoundoff(store);
    const double nd = std::max<double>(1.0, static_cast<double>(n));
    const auto sq = [](double v) { return mul_up(v, v); };
    std::vector<double> out(l.outer.size()), terms(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < out.size(); ++i) {
      double abs = 0.0;
      for (std::size_t j = 0; j < terms.size(); ++j) {
        terms[j] = x.values()[static_cast<std::size_t>(l.outer[i] + l.inner[j])];
        abs = add_up(abs, std::fabs(terms[j]));
      }
      const double y = std::fabs(outs[0].values()[i]);
      double squares = sq(mul_up(u, partialSumsRootSquares(terms)));
      double point = sumErrorBound(n, abs, 0x1p-53);
      if (mKind == Kind::Mean) {
        squares = add_up(div_up(squares, mul_up(nd, nd)), mul_up(2.0, sq(mul_up(u, y))));
        point = add_up(div_up(point, nd), 2.0 * smallestSubnormal(acc));  // + underflow
      }
      if (uS > 0.0) point = add_up(point, 2.0 * smallestSubnormal(store));
      squares = add_up(squares, mul_up(mKind == Kind::Mean ? 2.0 : 1.0, sq(mul_up(uS, y))));
      out[i] = add_up(sqrt_up(squares), point);
    }
    return {Tensor::point(outs[0].shape(), t, std::move(out))};
  }

 private:
  Kind mKind;
  bool mFull;  // sum.default / mean.default / max.default: every dim, no keepdim
};

/// max.dim / min.dim: (values, indices), exact. Indices of interval inputs: every position that can
/// hold the extremum (its enclosure reaches the largest lower bound) is possible.
class ArgExtremumRule final : public OpRule {
 public:
  explicit ArgExtremumRule(bool isMax) : mIsMax(isMax) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return compute(a, false);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    return compute(a, true);
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return point(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return std::vector<std::optional<Tensor>>{std::nullopt};
    const int dim =
        x.rank() == 0 ? 0 : normalizeDim(a.intArg(1, "dim"), static_cast<std::size_t>(x.rank()));
    const std::vector<int> dims = x.rank() == 0 ? std::vector<int>{} : std::vector<int>{dim};
    const ReductionLayout l = reductionLayout(x.shape(), dims);
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
    for (std::size_t i = 0; i < l.outer.size(); ++i) {
      const auto idx = static_cast<std::size_t>(outs[1].values()[i]);
      gx[static_cast<std::size_t>(l.outer[i] + l.inner[idx])] = g[0].values()[i];
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// Returns (values, indices): points with the first extremum, or their enclosures.
  std::vector<Tensor> compute(const OpArgs& a, bool intervals) const {
    const Tensor& x = a.tensor(0);
    const int dim = [&] {
      try {
        return normalizeDim(a.intArg(1, "dim"), static_cast<std::size_t>(x.rank()));
      } catch (const std::out_of_range& e) {
        a.fail(e.what());
      }
    }();
    const bool keepdim = a.boolArg(2, "keepdim", false);
    const std::vector<int> dims = x.rank() == 0 ? std::vector<int>{} : std::vector<int>{dim};
    const ReductionLayout l = reductionLayout(x.shape(), dims);
    if (l.inner.empty() && !l.outer.empty()) a.fail("max/min of an empty dimension");
    const std::size_t no = l.outer.size();
    std::vector<double> vlo(no), vhi(no), ilo(no), ihi(no);
    for (std::size_t i = 0; i < no; ++i) {
      // point: first extremum; interval: value hull and candidate index range
      std::size_t best = 0;
      Interval bestV = x.at(l.outer[i] + l.inner[0]);
      Interval ext = bestV;
      for (std::size_t j = 1; j < l.inner.size(); ++j) {
        const Interval e = x.at(l.outer[i] + l.inner[j]);
        if (mIsMax ? e.lo > bestV.lo : e.lo < bestV.lo) {
          bestV = e;
          best = j;
        }
        ext = mIsMax ? max(ext, e) : min(ext, e);
      }
      vlo[i] = ext.lo;
      vhi[i] = ext.hi;
      if (!intervals) {
        ilo[i] = ihi[i] = static_cast<double>(best);
        continue;
      }
      double first = -1, last = -1;
      for (std::size_t j = 0; j < l.inner.size(); ++j) {
        const Interval e = x.at(l.outer[i] + l.inner[j]);
        const bool possible = mIsMax ? e.hi >= ext.lo : e.lo <= ext.hi;
        if (possible) {
          if (first < 0) first = static_cast<double>(j);
          last = static_cast<double>(j);
        }
      }
      ilo[i] = first;
      ihi[i] = last;
    }
    const Shape s = reducedShape(x.shape(), dims, keepdim);
    if (!intervals)
      return std::vector<Tensor>{Tensor::point(s, a.outSpec(0).dtype, vlo),
                                 Tensor::point(s, DType::Int64, ilo)};
    return std::vector<Tensor>{Tensor::interval(s, a.outSpec(0).dtype, vlo, vhi),
                               Tensor::interval(s, DType::Int64, ilo, ihi)};
  }

  bool mIsMax;  // max.dim (else min.dim)
};

/// Returns 1 / 0 when every value of x is nonzero / zero, nothing when x holds both.
std::optional<bool> truthOf(Interval x) {
  if (hasNan(x)) return std::nullopt;
  if (x.lo == 0.0 && x.hi == 0.0) return false;
  if (x.lo > 0.0 || x.hi < 0.0) return true;
  return std::nullopt;
}

/// all / any (full, over one dim or a list of dims): exact logic; uncertain elements give [0, 1]
/// unless a certain element decides the result (file comment).
class LogicalReduceRule final : public OpRule {
 public:
  /// Takes whether it is `all` (else `any`) and whether it reduces every dim (.default).
  LogicalReduceRule(bool isAll, bool full) : mAll(isAll), mFull(full) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return {interval(a, ctx)[0].midpoint()};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const ReduceArgs ra = reduceArgs(a, mFull, x.rank());
    const ReductionLayout l = reductionLayout(x.shape(), ra.dims);
    std::vector<double> lo(l.outer.size()), hi(l.outer.size());
    for (std::size_t i = 0; i < lo.size(); ++i) {
      // all: decided false by a certain zero; any: decided true by a certain nonzero
      bool decided = false, uncertain = false;
      for (std::int64_t off : l.inner) {
        const auto t = truthOf(x.at(l.outer[i] + off));
        if (!t)
          uncertain = true;
        else if (*t != mAll)
          decided = true;
      }
      const double result = decided ? (mAll ? 0.0 : 1.0) : (mAll ? 1.0 : 0.0);
      lo[i] = hi[i] = result;
      if (!decided && uncertain) {
        lo[i] = 0.0;
        hi[i] = 1.0;
      }
    }
    const Shape s = reducedShape(x.shape(), ra.dims, ra.keepdim);
    const DType t = a.outSpec().dtype;
    if (x.isInterval()) return {Tensor::interval(s, t, std::move(lo), std::move(hi))};
    return {Tensor::point(s, t, std::move(lo))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return {interval(a, ctx)[0].midpoint()};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    return std::vector<std::optional<Tensor>>(a.tensorInputs().size());
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  bool mAll;   // all (else any)
  bool mFull;  // .default: every dim, no keepdim
};

}  // namespace

void registerReductionOps(OpRegistry& r) {
  r.add("aten.sum.default", std::make_shared<const ReduceRule>(Kind::Sum, true));
  r.add("aten.sum.dim_IntList", std::make_shared<const ReduceRule>(Kind::Sum, false));
  r.add("aten.mean.default", std::make_shared<const ReduceRule>(Kind::Mean, true));
  r.add("aten.mean.dim", std::make_shared<const ReduceRule>(Kind::Mean, false));
  r.add("aten.amax.default", std::make_shared<const ReduceRule>(Kind::Amax, false));
  r.add("aten.amin.default", std::make_shared<const ReduceRule>(Kind::Amin, false));
  r.add("aten.max.default", std::make_shared<const ReduceRule>(Kind::Amax, true));
  r.add("aten.min.default", std::make_shared<const ReduceRule>(Kind::Amin, true));
  r.add("aten.max.dim", std::make_shared<const ArgExtremumRule>(true));
  r.add("aten.min.dim", std::make_shared<const ArgExtremumRule>(false));
  for (const bool isAll : {true, false}) {
    const std::string name = isAll ? "aten.all" : "aten.any";
    r.add(name + ".default", std::make_shared<const LogicalReduceRule>(isAll, true));
    const auto dims = std::make_shared<const LogicalReduceRule>(isAll, false);
    r.add(name + ".dim", dims);
    r.add(name + ".dims", dims);
  }
  registerVectorNormOps(r);  // core/ops/vector_norm_ops.cpp
}

}  // namespace lossbound
