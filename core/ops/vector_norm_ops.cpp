// Vector norms: linalg_vector_norm (torch.linalg.vector_norm, clip_grad_norm_), norm.ScalarOpt_dim
// and norm.Scalar (F.normalize and Tensor.norm on PyTorch 1.13), for ord 2, 1 and inf.
//
// Error model (PyTorch's CPU and CUDA norm reductions, ReduceOpsKernel.cpp norm_kernel and
// SharedReduceOps.h NormTwoOps / NormOneOps / AbsMaxOps, with no scaling): ord 2 sums the squares
// x_i·x_i in the accumulation format (fp32 for bf16/fp16; PyTorch 1.13's CPU kernels accumulate
// bf16/fp16 norms in the 16-bit type itself except on bf16's vectorised last-dim path, so for
// 16-bit storage the rule takes the hull of both accumulation formats, and the randomized
// executor draws either) in any order, with or without FMA (the vectorised last-dim path uses
// fmadd), takes sqrt in that format and stores the result:
// |fl(Σx²) − Σx²| <= γ_n·Σx² + n·η (Higham 2002, eq. 3.5, dotErrorBound), sqrt correctly rounded
// (IEEE 754). ord 1 sums |x_i| (γ_{n−1}, as sum); ord inf is max|x_i|, exact. Other orders (0,
// −inf, p) are refused by name.
#include "core/kernels/kernel_bodies.h"
#include "core/ops/arg_readers.h"
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
#include <string>

namespace lossbound {

namespace {

using namespace ops;

enum class Ord { Two, One, Inf };

/// The norm's order, dims and keepdim: (self, ord, dim, keepdim) for linalg_vector_norm and
/// norm.ScalarOpt_dim, (self, p) over every dim for norm.Scalar.
struct NormArgs {
  Ord ord = Ord::Two;
  std::vector<int> dims;
  bool keepdim = false;
};

NormArgs normArgs(const OpArgs& a, bool full) {
  NormArgs r;
  // ord (linalg_vector_norm) or p (norm.*), positional in every trace seen
  const double p = optionalNumber(a, 1, "ord").value_or(optionalNumber(a, 1, "p").value_or(2.0));
  if (p == 2.0)
    r.ord = Ord::Two;
  else if (p == 1.0)
    r.ord = Ord::One;
  else if (p == kInf)
    r.ord = Ord::Inf;
  else
    a.fail("vector norm of order " + std::to_string(p) +
           ": Lossbound bounds the orders 2, 1 and inf only");
  const int rank = a.tensor(0).rank();
  if (full)
    for (int d = 0; d < rank; ++d) r.dims.push_back(d);
  else
    r.dims = reduceDims(a, 2, "dim", rank);
  r.keepdim = !full && a.boolArg(3, "keepdim", false);
  if (const auto t = dtypeArg(a, 99); t && *t != a.tensor(0).dtype())
    a.fail("vector norm with dtype= another than the input's: not modelled");
  return r;
}

/// ord 2, 1 and inf of x's rows (see the file comment for the error model).
class VectorNormRule final : public OpRule {
 public:
  explicit VectorNormRule(bool full) : mFull(full) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const NormArgs na = normArgs(a, mFull);
    const ReductionLayout l = reductionLayout(x.shape(), na.dims);
    const auto v = x.values();
    std::vector<double> out(l.outer.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      double s = 0.0;
      for (std::int64_t off : l.inner) {
        const double e = v[static_cast<std::size_t>(l.outer[i] + off)];
        if (na.ord == Ord::Two)
          s += e * e;
        else if (na.ord == Ord::One)
          s += std::fabs(e);
        else
          s = std::isnan(e) || std::isnan(s) ? std::nan("") : std::max(s, std::fabs(e));
      }
      out[i] = na.ord == Ord::Two ? std::sqrt(s) : s;
    }
    return {Tensor::point(reducedShape(x.shape(), na.dims, na.keepdim), a.outSpec().dtype,
                          std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const NormArgs na = normArgs(a, mFull);
    const ReductionLayout l = reductionLayout(x.shape(), na.dims);
    const DType t = a.outSpec().dtype;
    const Shape shape = reducedShape(x.shape(), na.dims, na.keepdim);
    // The row's terms |x| or x², summed (ord 1 and 2: kernels::normFinish) or folded to the
    // largest (ord inf: kernels::rowExtremum) — the bodies a device runs on the same rows.
    kernels::SumModel m;
    m.accumulation = accumulationFormat(ctx.precision, t);
    m.storage = outFormat(a, ctx);
    m.truncating = ctx.precision.truncatingAccumulation;
    m.norm = na.ord == Ord::Two ? 2 : 1;
    m.extremum = na.ord == Ord::Inf ? 1 : 0;
    if (auto r = offerReduction(ctx.backend, m, x, l, shape, t)) return {std::move(*r)};
    const auto n = static_cast<std::int64_t>(l.inner.size());
    std::vector<double> lo(l.outer.size()), hi(l.outer.size()), elo, ehi;
    for (std::size_t i = 0; i < lo.size(); ++i) {
      Interval r{0.0, 0.0};  // the norm of an empty row
      if (na.ord == Ord::Inf && n > 0) {
        elo.clear();
        ehi.clear();
        for (std::int64_t off : l.inner) {
          const Interval e = sanitize(x.at(l.outer[i] + off));
          elo.push_back(e.lo);
          ehi.push_back(e.hi);
        }
        r = kernels::rowExtremum(elo.data(), ehi.data(), n, 1, m);
      } else if (na.ord != Ord::Inf) {
        kernels::SumState s;
        for (std::int64_t off : l.inner)
          kernels::accumulate(s, kernels::normTerm(sanitize(x.at(l.outer[i] + off)), m));
        r = kernels::normFinish(s, static_cast<double>(n), m);
      }
      lo[i] = r.lo;
      hi[i] = r.hi;
    }
    return {Tensor::interval(shape, t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const Tensor& x = a.tensor(0);
    const NormArgs na = normArgs(a, mFull);
    const ReductionLayout l = reductionLayout(x.shape(), na.dims);
    const DType t = a.outSpec().dtype;
    const Format store = outFormat(a, ctx);
    std::mt19937_64& rng = *ctx.rng;
    // PyTorch 1.13 CPU: a 16-bit norm accumulated in its own type (file comment)
    const Format acc = (rng() & 1) ? store : accumulationFormat(ctx.precision, t);
    const auto v = x.values();
    std::vector<double> terms, scratch, out(l.outer.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      terms.clear();
      for (std::int64_t off : l.inner)
        terms.push_back(v[static_cast<std::size_t>(l.outer[i] + off)]);
      double y = 0.0;
      if (na.ord == Ord::Two) {
        // sqrt correctly rounded in binary64, then to acc: innocuous double rounding (53 >= 2p+2)
        y = roundNearest(std::sqrt(randomDot(terms, terms, acc, rng, scratch)), acc);
      } else if (na.ord == Ord::One) {
        for (double& e : terms) e = std::fabs(e);
        y = randomSum(terms, acc, rng);
      } else {
        for (double e : terms)
          y = std::isnan(e) || std::isnan(y) ? std::nan("") : std::max(y, std::fabs(e));
      }
      out[i] = roundNearest(y, store);
    }
    return {Tensor::point(reducedShape(x.shape(), na.dims, na.keepdim), t, std::move(out))};
  }

  /// PyTorch's linalg_vector_norm_backward: g·x/‖x‖ (0 where ‖x‖ = 0), g·sign(x), and for inf
  /// g·sign(x) split evenly among the maxima.
  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outs,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return {std::nullopt};
    const NormArgs na = normArgs(a, mFull);
    const ReductionLayout l = reductionLayout(x.shape(), na.dims);
    const auto gv = g[0].values();
    const auto xv = x.values();
    const auto yv = outs[0].values();
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
    const auto sign = [](double e) { return e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0); };
    for (std::size_t i = 0; i < l.outer.size(); ++i) {
      int count = 0;
      if (na.ord == Ord::Inf)
        for (std::int64_t off : l.inner)
          count += std::fabs(xv[static_cast<std::size_t>(l.outer[i] + off)]) == yv[i];
      for (std::int64_t off : l.inner) {
        const auto k = static_cast<std::size_t>(l.outer[i] + off);
        if (na.ord == Ord::Two)
          gx[k] = yv[i] == 0.0 ? 0.0 : gv[i] * xv[k] / yv[i];
        else if (na.ord == Ord::One)
          gx[k] = gv[i] * sign(xv[k]);
        else if (std::fabs(xv[k]) == yv[i])
          gx[k] = gv[i] * sign(xv[k]) / count;
      }
    }
    return {Tensor::point(x.shape(), x.dtype(), std::move(gx))};
  }

  /// |computed − exact| at the point, the binary64 point value's own error included: ord 2 the
  /// sum-of-squares bound E (acc and binary64) through the sqrt, |√a − √b| <= min(√E,
  /// E/(2√(s − E))), then sqrt's rounding in acc, storage and binary64; ord 1 as sum; inf exact up
  /// to storage.
  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Tensor& x = a.tensor(0);
    const NormArgs na = normArgs(a, mFull);
    const ReductionLayout l = reductionLayout(x.shape(), na.dims);
    const Format store = outFormat(a, ctx), acc = accumulationFormat(ctx.precision, t);
    const auto n = static_cast<std::int64_t>(l.inner.size());
    // either accumulation format (file comment): the larger roundoff and underflow threshold
    const double u =
        std::max(ctx.precision.accumulationRoundoff(t),
                 unitRoundoff(store) * (ctx.precision.truncatingAccumulation ? 2.0 : 1.0));
    const double eta = std::max(smallestSubnormal(acc), smallestSubnormal(store));
    std::vector<double> out(l.outer.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double y = std::fabs(outs[0].values()[i]);
      if (na.ord == Ord::Inf) {
        out[i] = store == Format::Fp64 ? 0.0 : roundingError(y, store, store);
        continue;
      }
      double abs = 0.0;
      for (std::int64_t off : l.inner) {
        const double e = std::fabs(x.values()[static_cast<std::size_t>(l.outer[i] + off)]);
        abs = add_up(abs, na.ord == Ord::Two ? mul_up(e, e) : e);
      }
      double e;
      if (na.ord == Ord::One) {
        e = add_up(sumErrorBound(n, abs, u), sumErrorBound(n, abs, 0x1p-53));
        if (store != acc) e = add_up(e, roundingError(add_up(y, e), store, store));
      } else {
        const double sumErr =
            add_up(dotErrorBound(n, abs, u, eta),
                   dotErrorBound(n, abs, 0x1p-53, smallestSubnormal(Format::Fp64)));
        const double sLo = sub_down(abs, sumErr);
        e = sqrt_up(sumErr);
        if (sLo > 0.0) e = std::min(e, div_up(sumErr, mul_down(2.0, sqrt_down(sLo))));
        const double mag = add_up(y, e);
        // sqrt rounded in acc or in store, then stored
        const double sq =
            std::max(roundingError(mag, acc, store), roundingError(mag, store, store));
        e = add_up(e, add_up(sq, mul_up(0x1p-53, mag)));
      }
      out[i] = e;
    }
    return {Tensor::point(outs[0].shape(), t, std::move(out))};
  }

 private:
  bool mFull;  // norm.Scalar: every dim, no keepdim
};

}  // namespace

void registerVectorNormOps(OpRegistry& r) {
  const auto dims = std::make_shared<const VectorNormRule>(false);
  r.add("aten.linalg_vector_norm.default", dims);
  r.add("aten.norm.ScalarOpt_dim", dims);
  r.add("aten.norm.Scalar", std::make_shared<const VectorNormRule>(true));
}

}  // namespace lossbound
