// Matrix products: mm, addmm, baddbmm, bmm, mv, matmul (1-D/2-D/N-D with batch broadcasting), dot.
//
// Error model of "any reasonable implementation": the inputs are rounded to the matmul input
// format (tf32, or the storage format) with any direction (round-to-nearest, or truncation on
// tensor cores); the k products are accumulated in the accumulation format (fp32 for
// bf16/fp16/tf32, else the storage format) in any order and bracketing, with or without FMA,
// any split-K blocking; the bias of addmm/baddbmm is one more term; the result is rounded to the
// storage format. Then |fl(A·B) - Ã·B̃| <= γ_k^acc |Ã|·|B̃| + k·η_acc (Higham 2002, eq. 3.5, any
// order; Jeannerod–Rump 2013: k·u suffices) where Ã, B̃ are the rounded inputs.
//
// Probabilistic term (probabilisticLocalError; round to nearest, alpha = 1): the k products and
// the additions of one element (terms = gemmTerms: k, +2 for a bias) are at most 2·terms
// roundings; the products' bounds u|a_i b_i| have Σ(u|a_i b_i|)² <= (u·M)², M = (|A||B|)_ij +
// |bias_ij|, and each of the <= terms − 1 additions rounds a partial sum of magnitude
// <= M(1 + γ_terms), so the root-sum-square of the individual bounds is
// <= u·sqrt(terms)·M·(1 + γ_terms) (√k where the worst case has γ_k ≈ k·u: the Higham–Mary 2019
// model, "A New Approach to Probabilistic Rounding Error Analysis", SIAM J. Sci. Comput. 41,
// applied to each rounding inside the product), in quadrature with the storage rounding, plus
// the input rounding (tf32, possibly truncating: not mean-zero, kept linear) and k·η_acc;
// never above the worst case. Truncating accumulation (biased) and alpha != 1 keep the worst case.
//
// baddbmm is bmm with a bias broadcast to [b, m, n]: its contract is addmm's, per batch.
// The interval, random and local-error kernels live in gemm.h (midpoint–radius GEMM on the
// Backend, Rump 1999); this file plans the (batched, broadcast) products and their adjoints.
#include "core/backend.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/gemm.h"
#include "core/ops/index_map.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

GemmModel gemmModel(const OpArgs& a, const OpContext& ctx) {
  const DType t = a.outSpec().dtype;
  if (!isFloating(t)) a.fail("integer matrix products are not supported");
  return ops::gemmModel(ctx.precision, t);
}

/// The layout of a (batched, broadcast) product: per output batch, the offsets of the A and B
/// matrices; 1-D operands are promoted and squeezed as torch.matmul does.
struct MatmulPlan {
  std::int64_t m = 0, k = 0, n = 0;
  std::vector<std::int64_t> aOff, bOff;  // element offsets per output batch
  Shape outShape;
  Shape aBatch, bBatch, outBatch;
};

/// Returns the plan's products as a GemmBatch when every operand offset is its index times one
/// stride per side (0 or one whole matrix); else a batch of count 0 (not offered).
kernels::GemmBatch evenBatch(const MatmulPlan& p) {
  kernels::GemmBatch b;
  b.count = static_cast<std::int64_t>(p.aOff.size());
  if (b.count > 1) {
    b.aStride = p.aOff[1] - p.aOff[0];
    b.bStride = p.bOff[1] - p.bOff[0];
  }
  const bool strides =
      (b.aStride == 0 || b.aStride == p.m * p.k) && (b.bStride == 0 || b.bStride == p.k * p.n);
  for (std::int64_t i = 0; i < b.count && strides; ++i)
    if (p.aOff[static_cast<std::size_t>(i)] != i * b.aStride ||
        p.bOff[static_cast<std::size_t>(i)] != i * b.bStride)
      return kernels::GemmBatch{0, 0, 0};
  if (!strides) b.count = 0;
  return b;
}

MatmulPlan planMatmul(const OpArgs& args, const Shape& as, const Shape& bs) {
  if (as.empty() || bs.empty()) args.fail("matmul operands must have at least one dimension");
  MatmulPlan p;
  Shape a = as, b = bs;
  const bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), 1);
  if (bVec) b.push_back(1);
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  if (b[b.size() - 2] != p.k)
    args.fail("matrix product of shapes " + shapeString(as) + " and " + shapeString(bs) +
              ": inner dimensions " + std::to_string(p.k) + " and " +
              std::to_string(b[b.size() - 2]) + " differ");
  p.aBatch = Shape(a.begin(), a.end() - 2);
  p.bBatch = Shape(b.begin(), b.end() - 2);
  const auto ob = broadcastShapes(p.aBatch, p.bBatch);
  if (!ob)
    args.fail("batch dimensions " + shapeString(p.aBatch) + " and " + shapeString(p.bBatch) +
              " do not broadcast");
  p.outBatch = *ob;
  const BroadcastIndex ix(p.outBatch, {p.aBatch, p.bBatch});
  std::int64_t off[2];
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, off);
    p.aOff.push_back(off[0] * p.m * p.k);
    p.bOff.push_back(off[1] * p.k * p.n);
  }
  p.outShape = p.outBatch;
  if (!aVec) p.outShape.push_back(p.m);
  if (!bVec) p.outShape.push_back(p.n);
  return p;
}

/// Checks the ranks torch requires for mm (2, 2), bmm (3, 3, equal batch), dot (1, 1).
void checkRanks(const OpArgs& a, const Tensor& x, const Tensor& y, int rank, bool sameBatch) {
  if (x.rank() != rank || y.rank() != rank)
    a.fail("expected two " + std::to_string(rank) + "-D operands, found shapes " +
           shapeString(x.shape()) + " and " + shapeString(y.shape()));
  if (sameBatch && x.shape()[0] != y.shape()[0])
    a.fail("batch sizes differ: " + shapeString(x.shape()) + " and " + shapeString(y.shape()));
}

// ---------------------------------------------------------------------------------------------
// Rules

enum class Kind { Mm, Bmm, Mv, Matmul, Dot, Addmm, Baddbmm };

/// mm bmm mv matmul dot addmm baddbmm: the midpoint–radius enclosure of gemm.h on the Backend's
/// GEMMs; random with random input rounding, order and blocking; localError γ_k|A||B| + kη.
class MatmulRule final : public OpRule {
 public:
  explicit MatmulRule(Kind kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override;
  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override;
  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override;
  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> outputs,
                                         std::span<const Tensor> g, OpContext& ctx) const override;
  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override;
  std::vector<Tensor> probabilisticLocalError(const OpArgs& a, std::span<const Tensor> outs,
                                              OpContext& ctx) const override;

 private:
  /// Returns |alpha|·(|A|·|B|) + |beta|·|bias| per output element (binary64 RN GEMM).
  std::vector<double> magnitudes(const OpArgs& a, const MatmulPlan& p, OpContext& ctx) const;
  /// Computes |alpha|·|A|·|B| + |beta|·|bias| (magnitudes, without the memo).
  std::vector<double> magnitudesOf(const OpArgs& a, const MatmulPlan& p, OpContext& ctx) const;

  bool hasBias() const { return mKind == Kind::Addmm || mKind == Kind::Baddbmm; }
  std::size_t aIdx() const { return hasBias() ? 1 : 0; }
  std::size_t bIdx() const { return hasBias() ? 2 : 1; }

  MatmulPlan plan(const OpArgs& a) const {
    const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
    switch (mKind) {
      case Kind::Mm:
      case Kind::Addmm:
        checkRanks(a, x, y, 2, false);
        break;
      case Kind::Bmm:
      case Kind::Baddbmm:
        checkRanks(a, x, y, 3, true);
        break;
      case Kind::Dot:
        checkRanks(a, x, y, 1, false);
        break;
      case Kind::Mv:
        if (x.rank() != 2 || y.rank() != 1)
          a.fail("expected a 2-D matrix and a 1-D vector, found shapes " + shapeString(x.shape()) +
                 " and " + shapeString(y.shape()));
        break;
      case Kind::Matmul:
        break;
    }
    return planMatmul(a, x.shape(), y.shape());
  }
  double alpha(const OpArgs& a) const { return hasBias() ? a.numberArg(4, "alpha", 1.0) : 1.0; }
  double beta(const OpArgs& a) const { return hasBias() ? a.numberArg(3, "beta", 1.0) : 1.0; }
  /// True when the product has a bias term (bias() has a value).
  bool hasBiasTerm(const OpArgs& a) const { return hasBias() && beta(a) != 0.0; }
  /// The bias broadcast to the output shape ([m, n] for addmm, [b, m, n] for baddbmm); none when
  /// beta is 0 (torch then ignores self, even its infs and NaNs).
  std::optional<Tensor> bias(const OpArgs& a, const MatmulPlan& p) const {
    if (!hasBiasTerm(a)) return std::nullopt;
    return broadcastTo(a, a.tensor(0), p.outShape);
  }

  Kind mKind;
};

std::vector<Tensor> MatmulRule::point(const OpArgs& a, OpContext& ctx) const {
  const MatmulPlan p = plan(a);
  const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
  const std::int64_t mn = p.m * p.n;
  std::vector<double> out(static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size())));
  for (std::size_t bi = 0; bi < p.aOff.size(); ++bi)
    ctx.backend.gemm(x.values().data() + p.aOff[bi], y.values().data() + p.bOff[bi],
                     out.data() + static_cast<std::int64_t>(bi) * mn, p.m, p.k, p.n, false);
  const double al = alpha(a), be = beta(a);
  if (const auto b = bias(a, p))
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = al * out[i] + be * b->values()[i];
  else if (al != 1.0)
    for (double& v : out) v *= al;
  return {Tensor::point(p.outShape, a.outSpec().dtype, std::move(out))};
}

std::vector<Tensor> MatmulRule::interval(const OpArgs& a, OpContext& ctx) const {
  const MatmulPlan p = plan(a);
  const GemmModel gm = gemmModel(a, ctx);
  const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
  const std::int64_t mn = p.m * p.n;
  const auto total = static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size()));
  std::vector<double> lo(total), hi(total);
  // Products at evenly spaced offsets of whole operands (one product, bmm, baddbmm, a matmul
  // broadcast over one side): offered to the backend's intervalGemm hook (the same split and
  // finishing bodies, kernels/interval_gemm.h), the bias broadcast through the gather hook, so
  // that a device-resident replay keeps the products on the device.
  const bool withBias = hasBias() && beta(a) != 0.0;
  const kernels::GemmBatch batch = evenBatch(p);
  bool offer = ctx.backend.offersIntervalKernels() && batch.count > 0 &&
               x.numel() == kernels::GemmBatch::extent(batch.count, batch.aStride, p.m * p.k) &&
               y.numel() == kernels::GemmBatch::extent(batch.count, batch.bStride, p.k * p.n) &&
               total > 0;
  if (offer && withBias) {
    const Shape& bs = a.tensor(0).shape();
    offer = bs.size() <= p.outShape.size();
    for (std::size_t d = bs.size(), e = p.outShape.size(); offer && d-- > 0 && e-- > 0;)
      offer = bs[d] == 1 || bs[d] == p.outShape[e];
  }
  if (offer) {
    std::optional<Tensor> b;
    if (withBias) {
      const Tensor& bias0 = a.tensor(0);
      // The broadcast of the bias to the output shape as an index map (right-aligned, size-1
      // dims repeat): the values broadcastTo gives.
      std::vector<std::int64_t> strides(p.outShape.size(), 0);
      std::int64_t s = 1;
      for (std::size_t d = bias0.shape().size(), e = p.outShape.size(); d-- > 0 && e-- > 0;) {
        strides[e] = bias0.shape()[d] == 1 ? 0 : s;
        s *= bias0.shape()[d];
      }
      const IndexMap map = stridedMap(p.outShape, strides, 0);
      b = offerGather(ctx.backend, bias0, map.offsets, map.shape, bias0.dtype(), {0.0, 0.0});
      if (!b) b = applyIndexMap(bias0, map, bias0.dtype());
    }
    const kernels::GemmFinish fin = intervalGemmFinish(p.k, gm, b.has_value(), alpha(a), beta(a));
    const kernels::ConstIntervalSpan bs =
        b ? kernels::ConstIntervalSpan{b->lo().data(), b->hi().data()}
          : kernels::ConstIntervalSpan{};
    if (ctx.backend.intervalGemm({x.lo().data(), x.hi().data()}, {y.lo().data(), y.hi().data()}, bs,
                                 p.m, p.k, p.n, batch, gm.in, fin, {lo.data(), hi.data()}))
      return {Tensor::interval(p.outShape, a.outSpec().dtype, std::move(lo), std::move(hi))};
  }
  std::vector<Interval> biasIv;
  if (const auto b = bias(a, p)) {
    biasIv.resize(total);
    for (std::size_t i = 0; i < total; ++i) biasIv[i] = b->at(static_cast<std::int64_t>(i));
  }
  for (std::size_t bi = 0; bi < p.aOff.size(); ++bi) {
    const std::int64_t o = static_cast<std::int64_t>(bi) * mn;
    intervalGemm(ctx.backend, x, p.aOff[bi], y, p.bOff[bi], p.m, p.k, p.n, gm,
                 biasIv.empty() ? nullptr : biasIv.data() + o, alpha(a), beta(a), lo.data() + o,
                 hi.data() + o);
  }
  return {Tensor::interval(p.outShape, a.outSpec().dtype, std::move(lo), std::move(hi))};
}

std::vector<Tensor> MatmulRule::random(const OpArgs& a, OpContext& ctx) const {
  const MatmulPlan p = plan(a);
  const GemmModel gm = gemmModel(a, ctx);
  const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
  const std::int64_t mn = p.m * p.n;
  std::vector<double> out(static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size())));
  const auto b = bias(a, p);
  for (std::size_t bi = 0; bi < p.aOff.size(); ++bi) {
    const std::int64_t o = static_cast<std::int64_t>(bi) * mn;
    randomGemm(x, p.aOff[bi], y, p.bOff[bi], p.m, p.k, p.n, gm,
               b ? b->values().data() + o : nullptr, alpha(a), beta(a), *ctx.rng, out.data() + o,
               ctx.orderPerProduct ? GemmOrder::PerProduct : GemmOrder::PerElement);
  }
  return {Tensor::point(p.outShape, a.outSpec().dtype, std::move(out))};
}

std::vector<std::optional<Tensor>> MatmulRule::vjp(const OpArgs& a, std::span<const Tensor>,
                                                   std::span<const Tensor> g,
                                                   OpContext& ctx) const {
  const MatmulPlan p = plan(a);
  const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
  const double al = alpha(a);
  // Per output batch: gA += al·G·Bᵀ, gB += al·Aᵀ·G, accumulated into the (broadcast) batch.
  std::vector<double> ga(static_cast<std::size_t>(x.numel()), 0.0),
      gb(static_cast<std::size_t>(y.numel()), 0.0);
  const std::int64_t m = p.m, k = p.k, n = p.n;
  std::vector<double> bt(static_cast<std::size_t>(k * n)), at(static_cast<std::size_t>(m * k));
  std::vector<double> tmpA(static_cast<std::size_t>(m * k)), tmpB(static_cast<std::size_t>(k * n));
  const auto gv = g[0].values();
  for (std::size_t bi = 0; bi < p.aOff.size(); ++bi) {
    const double* A = x.values().data() + p.aOff[bi];
    const double* B = y.values().data() + p.bOff[bi];
    const double* G = gv.data() + static_cast<std::int64_t>(bi) * m * n;
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = 0; j < n; ++j) bt[static_cast<std::size_t>(j * k + i)] = B[i * n + j];
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; ++j) at[static_cast<std::size_t>(j * m + i)] = A[i * k + j];
    ctx.backend.gemm(G, bt.data(), tmpA.data(), m, n, k, false);
    ctx.backend.gemm(at.data(), G, tmpB.data(), k, m, n, false);
    for (std::size_t i = 0; i < tmpA.size(); ++i)
      ga[static_cast<std::size_t>(p.aOff[bi]) + i] += al * tmpA[i];
    for (std::size_t i = 0; i < tmpB.size(); ++i)
      gb[static_cast<std::size_t>(p.bOff[bi]) + i] += al * tmpB[i];
  }
  std::vector<std::optional<Tensor>> out;
  if (hasBias()) {
    const double be = beta(a);
    const Tensor gs = mapPoint(g[0], g[0].dtype(), [be](double v) { return be * v; });
    out.emplace_back(sumToShape(gs, a.tensor(0).shape()).withDtype(a.tensor(0).dtype()));
  }
  out.emplace_back(Tensor::point(x.shape(), x.dtype(), std::move(ga)));
  out.emplace_back(Tensor::point(y.shape(), y.dtype(), std::move(gb)));
  return out;
}

std::vector<double> MatmulRule::magnitudes(const OpArgs& a, const MatmulPlan& p,
                                           OpContext& ctx) const {
  // The same bits under every precision model: computed once per node where the evaluator
  // keeps a memo (the modelled and the binary64 local errors, and the probabilistic term).
  static const std::string key = "matmul.magnitudes";
  if (ctx.nodeMemo) {
    if (const auto it = ctx.nodeMemo->find(key); it != ctx.nodeMemo->end()) return it->second;
    std::vector<double> mag = magnitudesOf(a, p, ctx);
    ctx.nodeMemo->emplace(key, mag);
    return mag;
  }
  return magnitudesOf(a, p, ctx);
}

std::vector<double> MatmulRule::magnitudesOf(const OpArgs& a, const MatmulPlan& p,
                                             OpContext& ctx) const {
  const Tensor &x = a.tensor(aIdx()), &y = a.tensor(bIdx());
  const std::int64_t mn = p.m * p.n;
  std::vector<double> mag(static_cast<std::size_t>(mn * static_cast<std::int64_t>(p.aOff.size())));
  for (std::size_t bi = 0; bi < p.aOff.size(); ++bi)
    ctx.backend.gemm(x.values().data() + p.aOff[bi], y.values().data() + p.bOff[bi],
                     mag.data() + static_cast<std::int64_t>(bi) * mn, p.m, p.k, p.n, true);
  const auto b = bias(a, p);
  const double al = std::fabs(alpha(a)), be = std::fabs(beta(a));
  for (std::size_t i = 0; i < mag.size(); ++i) {
    mag[i] = mul_up(al, mag[i]);
    if (b) mag[i] = add_up(mag[i], mul_up(be, std::fabs(b->values()[i])));
  }
  return mag;
}

std::vector<Tensor> MatmulRule::localError(const OpArgs& a, std::span<const Tensor> outs,
                                           OpContext& ctx) const {
  const MatmulPlan p = plan(a);
  const GemmModel gm = gemmModel(a, ctx);
  const GemmLocalBound bound(gm, p.k, gemmTerms(p.k, hasBiasTerm(a), alpha(a)), beta(a));
  std::vector<double> out = magnitudes(a, p, ctx);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = bound(out[i], outs[0].values()[i]);
  return {Tensor::point(outs[0].shape(), outs[0].dtype(), std::move(out))};
}

std::vector<Tensor> MatmulRule::probabilisticLocalError(const OpArgs& a,
                                                        std::span<const Tensor> outs,
                                                        OpContext& ctx) const {
  const MatmulPlan p = plan(a);
  const GemmModel gm = gemmModel(a, ctx);
  const GemmSpreadBound spread(gm, p.k, gemmTerms(p.k, hasBiasTerm(a), alpha(a)),
                               ctx.precision.truncatingAccumulation, alpha(a), beta(a));
  if (!spread.applies()) return {};
  std::vector<double> out = magnitudes(a, p, ctx);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = spread(out[i], outs[0].values()[i]);
  return {Tensor::point(outs[0].shape(), outs[0].dtype(), std::move(out))};
}

}  // namespace

void registerMatmulOps(OpRegistry& r) {
  r.add("aten.mm.default", std::make_shared<const MatmulRule>(Kind::Mm));
  r.add("aten.bmm.default", std::make_shared<const MatmulRule>(Kind::Bmm));
  r.add("aten.matmul.default", std::make_shared<const MatmulRule>(Kind::Matmul));
  r.add("aten.dot.default", std::make_shared<const MatmulRule>(Kind::Dot));
  r.add("aten.mv.default", std::make_shared<const MatmulRule>(Kind::Mv));
  r.add("aten.addmm.default", std::make_shared<const MatmulRule>(Kind::Addmm));
  r.add("aten.baddbmm.default", std::make_shared<const MatmulRule>(Kind::Baddbmm));
}

}  // namespace lossbound
