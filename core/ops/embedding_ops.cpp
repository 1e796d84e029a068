// Embedding ops: embedding embedding_dense_backward.
//
// Error model: embedding is a row gather, exact (storage rounding only, a no-op for weights
// stored in their format). embedding_dense_backward sums, for every weight row k, the gradient
// rows of the positions whose index is k (except padding_idx, whose row stays 0), in any order:
// PyTorch 1.13 CPU uses index_add_ in the gradient's dtype (every partial sum rounded to the
// storage format s, also for bf16/fp16), CUDA accumulates in fp32 and rounds once. Both are
// enclosed by γ_{m−1}(u_s)·Σ|g| around the exact sum (Higham 2002, eq. 4.4, with the larger of
// the two unit roundoffs), then rounded outward to s. scale_grad_by_freq = true is refused.

#include "core/kernels/embedding_backward.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/nn_support.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;
using namespace ops::nn;

/// Returns the row index of position p, validated against [0, rows).
std::int64_t indexAt(const OpArgs& a, const Tensor& idx, std::int64_t p, std::int64_t rows) {
  const double v = idx.values()[static_cast<std::size_t>(p)];
  const auto k = static_cast<std::int64_t>(v);
  if (static_cast<double>(k) != v || k < 0 || k >= rows)
    a.fail("index " + std::to_string(v) + " at position " + std::to_string(p) +
           " is out of range [0, " + std::to_string(rows) + ")");
  return k;
}

/// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse) = weight[indices]: exact
/// gather, storage rounding only; localError from the enclosure on exact inputs.
class EmbeddingRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return std::vector<Tensor>{gather(a, false, Format::Fp64)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    // Offered to the backend (kernels::tableRow, the same rounding); it declines any index out of
    // range, and gather() below then reports it.
    const Tensor &w = a.tensor(0), &idx = a.tensor(1);
    if (w.rank() == 2 && !isFloating(idx.dtype())) {
      Shape out = idx.shape();
      out.push_back(w.shape()[1]);
      const Format s = outFormat(a, ctx);
      if (auto r = offerTakeRows(ctx.backend, {s, s, 0}, w, idx, out, a.outSpec(0).dtype))
        return {std::move(*r)};
    }
    return std::vector<Tensor>{gather(a, true, outFormat(a, ctx))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return std::vector<Tensor>{
        roundNearestTensor(gather(a, false, Format::Fp64), outFormat(a, ctx))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    // The mathematical derivative (every row, padding_idx included: the forward reads it).
    const Tensor& w = a.tensor(0);
    const Tensor& idx = a.tensor(1);
    const std::int64_t rows = w.shape()[0], dim = w.shape()[1];
    std::vector<double> dw(static_cast<std::size_t>(w.numel()), 0.0);
    for (std::int64_t p = 0; p < idx.numel(); ++p) {
      const std::int64_t k = indexAt(a, idx, p, rows);
      for (std::int64_t j = 0; j < dim; ++j)
        dw[static_cast<std::size_t>(k * dim + j)] +=
            g[0].values()[static_cast<std::size_t>(p * dim + j)];
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(w.shape(), w.dtype(), std::move(dw)),
                                              std::nullopt};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Returns weight[indices] with every value rounded outward to s, as an interval or a point
  /// tensor (the lower endpoints).
  static Tensor gather(const OpArgs& a, bool asInterval, Format s) {
    const Tensor& w = a.tensor(0);
    const Tensor& idx = a.tensor(1);
    if (w.rank() != 2) a.fail("weight should be 2-D, found " + shapeString(w.shape()));
    if (isFloating(idx.dtype())) a.fail("indices should be an integer tensor");
    const std::int64_t rows = w.shape()[0], dim = w.shape()[1];
    Shape out = idx.shape();
    out.push_back(dim);
    std::vector<double> lo(static_cast<std::size_t>(numel(out))), hi(lo.size());
    for (std::int64_t p = 0; p < idx.numel(); ++p) {
      const std::int64_t k = indexAt(a, idx, p, rows);
      for (std::int64_t j = 0; j < dim; ++j) {
        const Interval v = roundOutward(w.at(k * dim + j), s);
        lo[static_cast<std::size_t>(p * dim + j)] = v.lo;
        hi[static_cast<std::size_t>(p * dim + j)] = v.hi;
      }
    }
    const DType t = a.outSpec(0).dtype;
    return asInterval ? Tensor::interval(out, t, std::move(lo), std::move(hi))
                      : Tensor::point(out, t, std::move(lo));
  }
};

/// The validated arguments of embedding_dense_backward.
struct DenseBackward {
  std::int64_t numWeights, padding, dim, positions;
};

DenseBackward denseArgs(const OpArgs& a) {
  const Tensor& g = a.tensor(0);
  const Tensor& idx = a.tensor(1);
  DenseBackward d;
  d.numWeights = a.intArg(2, "num_weights");
  d.padding = a.intArg(3, "padding_idx", -1);
  if (a.boolArg(4, "scale_grad_by_freq", false))
    a.fail("scale_grad_by_freq = True is not supported");
  if (g.rank() != idx.rank() + 1)
    a.fail("grad_output " + shapeString(g.shape()) + " should be indices " +
           shapeString(idx.shape()) + " + [dim]");
  for (int k = 0; k < idx.rank(); ++k)
    if (g.shape()[static_cast<std::size_t>(k)] != idx.shape()[static_cast<std::size_t>(k)])
      a.fail("grad_output " + shapeString(g.shape()) + " does not match indices " +
             shapeString(idx.shape()));
  d.dim = g.shape().back();
  d.positions = idx.numel();
  return d;
}

/// Returns, per weight row, the positions that add into it (padding row: none).
std::vector<std::vector<std::int64_t>> groups(const OpArgs& a, const DenseBackward& d) {
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(d.numWeights));
  const Tensor& idx = a.tensor(1);
  for (std::int64_t p = 0; p < d.positions; ++p) {
    const std::int64_t k = indexAt(a, idx, p, d.numWeights);
    if (k != d.padding) out[static_cast<std::size_t>(k)].push_back(p);
  }
  return out;
}

/// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
/// per weight row, the sum of its positions' gradient rows in any order (γ_{m−1}, file comment).
class EmbeddingDenseBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const DenseBackward d = denseArgs(a);
    const Tensor& g = a.tensor(0);
    std::vector<double> out(static_cast<std::size_t>(d.numWeights * d.dim), 0.0);
    const auto gr = groups(a, d);
    for (std::int64_t k = 0; k < d.numWeights; ++k)
      for (std::int64_t j = 0; j < d.dim; ++j) {
        long double s = 0;
        for (std::int64_t p : gr[static_cast<std::size_t>(k)])
          s += g.values()[static_cast<std::size_t>(p * d.dim + j)];
        out[static_cast<std::size_t>(k * d.dim + j)] = static_cast<double>(s);
      }
    return std::vector<Tensor>{
        Tensor::point({d.numWeights, d.dim}, a.outSpec(0).dtype, std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DenseBackward d = denseArgs(a);
    const Tensor& g = a.tensor(0);
    const DType t = a.outSpec(0).dtype;
    const Format s = outFormat(a, ctx);
    // The larger unit roundoff of storage (CPU index_add_) and accumulation (CUDA).
    const double u =
        std::max(unitRoundoff(s), unitRoundoff(accumulationFormat(ctx.precision, t)) *
                                      (ctx.precision.truncatingAccumulation ? 2.0 : 1.0));
    std::vector<double> lo(static_cast<std::size_t>(d.numWeights * d.dim), 0.0), hi(lo);
    // Column by column through kernels::embeddingBackwardColumn (core/kernels/
    // embedding_backward.h): offered to the backend (a device reads the indices where they
    // are), else here after the indices are checked (an index out of range is reported).
    const kernels::EmbeddingBackwardModel m{u, s, d.numWeights, d.padding};
    const Tensor& idx = a.tensor(1);
    const kernels::ConstIntervalSpan gs{g.lo().data(), g.hi().data()};
    const kernels::IntervalSpan out{lo.data(), hi.data()};
    if (lo.empty() || isFloating(idx.dtype()) ||
        !ctx.backend.embeddingBackward(m, gs, idx.values().data(), d.positions, d.dim, out)) {
      groups(a, d);
      std::vector<double> scratch(static_cast<std::size_t>(2 * d.numWeights));
      for (std::int64_t j = 0; j < d.dim; ++j)
        kernels::embeddingBackwardColumn(gs, idx.values().data(), d.positions, d.dim, j, m, out,
                                         scratch.data());
    }
    return std::vector<Tensor>{
        Tensor::interval({d.numWeights, d.dim}, t, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DenseBackward d = denseArgs(a);
    const Tensor& g = a.tensor(0);
    const DType t = a.outSpec(0).dtype;
    const Format s = outFormat(a, ctx);
    const Format acc = ((*ctx.rng)() & 1) ? s : accumulationFormat(ctx.precision, t);
    std::vector<double> out(static_cast<std::size_t>(d.numWeights * d.dim), 0.0), terms;
    const auto gr = groups(a, d);
    for (std::int64_t k = 0; k < d.numWeights; ++k)
      for (std::int64_t j = 0; j < d.dim; ++j) {
        terms.clear();
        for (std::int64_t p : gr[static_cast<std::size_t>(k)])
          terms.push_back(g.values()[static_cast<std::size_t>(p * d.dim + j)]);
        out[static_cast<std::size_t>(k * d.dim + j)] =
            roundNearest(randomSum(terms, acc, *ctx.rng), s);
      }
    return std::vector<Tensor>{Tensor::point({d.numWeights, d.dim}, t, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> h, OpContext&) const override {
    const DenseBackward d = denseArgs(a);
    const Tensor& g = a.tensor(0);
    const Tensor& idx = a.tensor(1);
    std::vector<double> dg(static_cast<std::size_t>(g.numel()), 0.0);
    for (std::int64_t p = 0; p < d.positions; ++p) {
      const std::int64_t k = indexAt(a, idx, p, d.numWeights);
      if (k == d.padding) continue;
      for (std::int64_t j = 0; j < d.dim; ++j)
        dg[static_cast<std::size_t>(p * d.dim + j)] =
            h[0].values()[static_cast<std::size_t>(k * d.dim + j)];
    }
    return std::vector<std::optional<Tensor>>{Tensor::point(g.shape(), g.dtype(), std::move(dg)),
                                              std::nullopt};
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return localErrorVia(*this, a, o, ctx);
  }
};

}  // namespace

void registerEmbeddingOps(OpRegistry& r) {
  r.add("aten.embedding", std::make_shared<const EmbeddingRule>());
  r.add("aten.embedding_dense_backward", std::make_shared<const EmbeddingDenseBackwardRule>());
}

}  // namespace lossbound
