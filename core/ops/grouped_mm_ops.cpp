// _grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None): the grouped matrix product of
// mixture-of-experts layers (transformers' grouped_mm experts, PyTorch >= 2.9). offs holds the
// groups' cumulative ends along one dimension:
//   2-D × 3-D: rows [offs[g−1], offs[g]) of self times mat2[g]            -> [M, N]
//   3-D × 2-D: self[g] times columns [offs[g−1], offs[g]) of mat2          -> [M, N]
//   2-D × 2-D: columns of self times rows of mat2 in [offs[g−1], offs[g])  -> [G, M, N]
//   3-D × 3-D: self[g] times mat2[g] (no offs)                             -> [G, M, N]
// Contract: each group is one matrix product, with mm's bound (matmul_ops.cpp; gemm.h:
// γ_k|A||B| + kη, k the group's inner dimension, Rump 1999 midpoint–radius for intervals); an
// empty inner group gives exact zeros. The offsets must be exact (integers). Rows or columns past
// the last offset, which PyTorch leaves uninitialized, and a bias are refused.
// vjp: per group, G·Bᵀ and Aᵀ·G scattered back through the group's index maps.
#include "core/backend.h"
#include "core/ops/families.h"
#include "core/ops/gemm.h"
#include "core/ops/index_map.h"
#include "core/ops/registry.h"

#include <memory>
#include <optional>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// One group's product: A's m×k block and B's k×n block as index maps, and where its m×n result
/// goes (element (r, c) at outBase + r·outLd + c).
struct Group {
  IndexMap a, b;
  std::int64_t m = 0, k = 0, n = 0, outBase = 0, outLd = 0;
};

struct GroupedPlan {
  std::vector<Group> groups;
  Shape outShape;
};

/// _grouped_mm: each group one product with mm's enclosure, execution and local error (the file
/// comment's contract).
class GroupedMmRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    const GroupedPlan p = plan(a);
    std::vector<double> out(static_cast<std::size_t>(numel(p.outShape)), 0.0), tmp;
    forGroups(a, p, [&](const Group& g, const Tensor& A, const Tensor& B) {
      tmp.assign(static_cast<std::size_t>(g.m * g.n), 0.0);
      ctx.backend.gemm(A.values().data(), B.values().data(), tmp.data(), g.m, g.k, g.n, false);
      place(g, tmp, out);
      return true;
    });
    return {Tensor::point(p.outShape, a.outSpec().dtype, std::move(out))};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const GroupedPlan p = plan(a);
    const GemmModel gm = gemmModel(ctx.precision, a.outSpec().dtype);
    const auto total = static_cast<std::size_t>(numel(p.outShape));
    std::vector<double> lo(total, 0.0), hi(total, 0.0), tlo, thi;
    forGroups(a, p, [&](const Group& g, const Tensor& A, const Tensor& B) {
      tlo.assign(static_cast<std::size_t>(g.m * g.n), 0.0);
      thi = tlo;
      intervalGemm(ctx.backend, A, 0, B, 0, g.m, g.k, g.n, gm, nullptr, 1.0, 1.0, tlo.data(),
                   thi.data());
      place(g, tlo, lo);
      place(g, thi, hi);
      return true;
    });
    return {Tensor::interval(p.outShape, a.outSpec().dtype, std::move(lo), std::move(hi))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const GroupedPlan p = plan(a);
    const GemmModel gm = gemmModel(ctx.precision, a.outSpec().dtype);
    std::vector<double> out(static_cast<std::size_t>(numel(p.outShape)), 0.0), tmp;
    forGroups(a, p, [&](const Group& g, const Tensor& A, const Tensor& B) {
      tmp.assign(static_cast<std::size_t>(g.m * g.n), 0.0);
      randomGemm(A, 0, B, 0, g.m, g.k, g.n, gm, nullptr, 1.0, 1.0, *ctx.rng, tmp.data(),
                 ctx.orderPerProduct ? GemmOrder::PerProduct : GemmOrder::PerElement);
      place(g, tmp, out);
      return true;
    });
    return {Tensor::point(p.outShape, a.outSpec().dtype, std::move(out))};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> grads,
                                         OpContext& ctx) const override {
    const GroupedPlan p = plan(a);
    const Tensor &x = a.tensor(0), &y = a.tensor(1);
    std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0),
        gy(static_cast<std::size_t>(y.numel()), 0.0);
    const auto gv = grads[0].values();
    for (const Group& g : p.groups) {
      if (g.m == 0 || g.n == 0 || g.k == 0) continue;
      const Tensor A = applyIndexMap(x, g.a, x.dtype()), B = applyIndexMap(y, g.b, y.dtype());
      std::vector<double> G(static_cast<std::size_t>(g.m * g.n));
      for (std::int64_t r = 0; r < g.m; ++r)
        for (std::int64_t c = 0; c < g.n; ++c)
          G[static_cast<std::size_t>(r * g.n + c)] =
              gv[static_cast<std::size_t>(g.outBase + r * g.outLd + c)];
      // gA = G·Bᵀ (m×k), gB = Aᵀ·G (k×n).
      std::vector<double> Bt = transposed(B.values(), g.k, g.n),
                          At = transposed(A.values(), g.m, g.k);
      std::vector<double> gA(static_cast<std::size_t>(g.m * g.k)),
          gB(static_cast<std::size_t>(g.k * g.n));
      ctx.backend.gemm(G.data(), Bt.data(), gA.data(), g.m, g.n, g.k, false);
      ctx.backend.gemm(At.data(), G.data(), gB.data(), g.k, g.m, g.n, false);
      addThrough(gA, g.a, gx);
      addThrough(gB, g.b, gy);
    }
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    out[0] = Tensor::point(x.shape(), x.dtype(), std::move(gx));
    out[1] = Tensor::point(y.shape(), y.dtype(), std::move(gy));
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const GemmModel gm = gemmModel(ctx.precision, a.outSpec().dtype);
    return *perGroupBound(a, outs[0], ctx, [&](std::int64_t k) {
      return std::optional<GemmLocalBound>(GemmLocalBound(gm, k, gemmTerms(k, false, 1.0)));
    });
  }

  std::vector<Tensor> probabilisticLocalError(const OpArgs& a, std::span<const Tensor> outs,
                                              OpContext& ctx) const override {
    const GemmModel gm = gemmModel(ctx.precision, a.outSpec().dtype);
    const auto r = perGroupBound(a, outs[0], ctx, [&](std::int64_t k) {
      const GemmSpreadBound spread(gm, k, gemmTerms(k, false, 1.0),
                                   ctx.precision.truncatingAccumulation, 1.0, 1.0);
      return spread.applies() ? std::optional<GemmSpreadBound>(spread) : std::nullopt;
    });
    return r ? *r : std::vector<Tensor>{};
  }

 private:
  /// Applies, per group, the bound boundFor(k) (nullopt: it does not apply) to the group's
  /// |A|·|B| and computed values; nullopt when it does not apply to some group.
  template <typename BoundFor>
  static std::optional<std::vector<Tensor>> perGroupBound(const OpArgs& a, const Tensor& y,
                                                          OpContext& ctx, BoundFor&& boundFor) {
    const GroupedPlan p = plan(a);
    std::vector<double> err(static_cast<std::size_t>(y.numel()), 0.0);
    const bool all = forMagnitudes(a, p, ctx, [&](const Group& g, const std::vector<double>& mag) {
      const auto bound = boundFor(g.k);
      if (!bound) return false;
      std::vector<double> e(mag.size());
      for (std::int64_t r = 0; r < g.m; ++r)
        for (std::int64_t c = 0; c < g.n; ++c) {
          const auto i = static_cast<std::size_t>(r * g.n + c);
          e[i] =
              (*bound)(mag[i], y.values()[static_cast<std::size_t>(g.outBase + r * g.outLd + c)]);
        }
      place(g, e, err);
      return true;
    });
    if (!all) return std::nullopt;
    return std::vector<Tensor>{Tensor::point(y.shape(), y.dtype(), std::move(err))};
  }

  static std::vector<double> transposed(std::span<const double> v, std::int64_t rows,
                                        std::int64_t cols) {
    std::vector<double> t(v.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        t[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
    return t;
  }

  static void place(const Group& g, const std::vector<double>& v, std::vector<double>& out) {
    for (std::int64_t r = 0; r < g.m; ++r)
      for (std::int64_t c = 0; c < g.n; ++c)
        out[static_cast<std::size_t>(g.outBase + r * g.outLd + c)] =
            v[static_cast<std::size_t>(r * g.n + c)];
  }

  static void addThrough(const std::vector<double>& v, const IndexMap& m,
                         std::vector<double>& out) {
    for (std::size_t i = 0; i < v.size(); ++i) out[static_cast<std::size_t>(m.offsets[i])] += v[i];
  }

  /// Calls f(group, A block, B block) for every nonempty group while it returns true; returns
  /// false when f did.
  template <typename F>
  static bool forGroups(const OpArgs& a, const GroupedPlan& p, F&& f) {
    for (const Group& g : p.groups) {
      if (g.m == 0 || g.n == 0 || g.k == 0) continue;
      const Tensor A = applyIndexMap(a.tensor(0), g.a, a.tensor(0).dtype()),
                   B = applyIndexMap(a.tensor(1), g.b, a.tensor(1).dtype());
      if (!f(g, A, B)) return false;
    }
    return true;
  }

  /// Calls f(group, |A|·|B| of the group) for every nonempty group while it returns true;
  /// returns false when f did.
  template <typename F>
  static bool forMagnitudes(const OpArgs& a, const GroupedPlan& p, OpContext& ctx, F&& f) {
    return forGroups(a, p, [&](const Group& g, const Tensor& A, const Tensor& B) {
      std::vector<double> mag(static_cast<std::size_t>(g.m * g.n));
      ctx.backend.gemm(A.values().data(), B.values().data(), mag.data(), g.m, g.k, g.n, true);
      return f(g, mag);
    });
  }

  /// Returns offs (positional 2 or keyword), or nullptr when absent or None.
  static const Tensor* offsTensor(const OpArgs& a) {
    if (a.isTensor(2)) return &a.tensor(2);
    const IrValue* k = a.kwarg("offs");
    if (!k || k->kind == IrValue::Kind::None) return nullptr;
    // Keyword tensors follow the positional ones in tensorInputs().
    std::size_t pos = 0;
    for (std::size_t j = 0; j < a.size(); ++j) pos += a.arg(j).kind == IrValue::Kind::Ref;
    for (const auto& [name, v] : a.node().kwargs) {
      if (name == "offs") break;
      pos += v.kind == IrValue::Kind::Ref;
    }
    return a.tensorInputs().at(pos);
  }

  static std::vector<std::int64_t> offsets(const OpArgs& a, std::int64_t groups,
                                           std::int64_t extent, const char* along) {
    const Tensor* op = offsTensor(a);
    if (!op) a.fail("_grouped_mm: offs is required when an operand is 2-D");
    const Tensor& o = *op;
    const std::vector<std::int64_t> ends = exactIndices(a, o, "offs");
    if (o.rank() != 1 || static_cast<std::int64_t>(ends.size()) != groups)
      a.fail("_grouped_mm: offs should hold " + std::to_string(groups) +
             " group ends, found shape " + shapeString(o.shape()));
    std::int64_t prev = 0;
    for (std::int64_t e : ends) {
      if (e < prev || e > extent)
        a.fail("_grouped_mm: offs must be nondecreasing ends within the " + std::string(along) +
               " extent " + std::to_string(extent) + ", found " + std::to_string(e) + " after " +
               std::to_string(prev));
      prev = e;
    }
    if (prev != extent && std::string(along) != "inner")
      a.fail("_grouped_mm: " + std::string(along) + " " + std::to_string(prev) + " to " +
             std::to_string(extent) +
             " are past the last offset (PyTorch leaves them uninitialized): not supported");
    return ends;
  }

  static GroupedPlan plan(const OpArgs& a) {
    const Tensor &x = a.tensor(0), &y = a.tensor(1);
    const IrValue* bias = 3 < a.size() ? &a.arg(3) : a.kwarg("bias");
    if (bias && bias->kind != IrValue::Kind::None)
      a.fail("_grouped_mm with a bias is not supported");
    if (!isFloating(a.outSpec().dtype) || !isFloating(x.dtype()) || !isFloating(y.dtype()))
      a.fail("_grouped_mm of integer tensors is not supported");
    const Shape &xs = x.shape(), &ys = y.shape();
    const auto mismatch = [&] {
      a.fail("_grouped_mm: operands of shapes " + shapeString(xs) + " and " + shapeString(ys) +
             " do not multiply");
    };
    GroupedPlan p;
    if (xs.size() == 2 && ys.size() == 3) {  // groups of rows
      const std::int64_t M = xs[0], K = xs[1], G = ys[0], N = ys[2];
      if (ys[1] != K) mismatch();
      const auto ends = offsets(a, G, M, "rows");
      std::int64_t s = 0;
      for (std::int64_t g = 0; g < G; ++g) {
        const std::int64_t e = ends[static_cast<std::size_t>(g)];
        p.groups.push_back({stridedMap({e - s, K}, {K, 1}, s * K),
                            stridedMap({K, N}, {N, 1}, g * K * N), e - s, K, N, s * N, N});
        s = e;
      }
      p.outShape = {M, N};
    } else if (xs.size() == 3 && ys.size() == 2) {  // groups of columns
      const std::int64_t G = xs[0], M = xs[1], K = xs[2], N = ys[1];
      if (ys[0] != K) mismatch();
      const auto ends = offsets(a, G, N, "columns");
      std::int64_t s = 0;
      for (std::int64_t g = 0; g < G; ++g) {
        const std::int64_t e = ends[static_cast<std::size_t>(g)];
        p.groups.push_back({stridedMap({M, K}, {K, 1}, g * M * K),
                            stridedMap({K, e - s}, {N, 1}, s), M, K, e - s, s, N});
        s = e;
      }
      p.outShape = {M, N};
    } else if (xs.size() == 2 && ys.size() == 2) {  // groups of the inner dimension
      const std::int64_t M = xs[0], K = xs[1], N = ys[1];
      if (ys[0] != K) mismatch();
      const Tensor* o = offsTensor(a);
      if (!o) a.fail("_grouped_mm: offs is required when an operand is 2-D");
      const auto G = o->numel();
      const auto ends = offsets(a, G, K, "inner");
      std::int64_t s = 0;
      for (std::int64_t g = 0; g < G; ++g) {
        const std::int64_t e = ends[static_cast<std::size_t>(g)];
        p.groups.push_back({stridedMap({M, e - s}, {K, 1}, s),
                            stridedMap({e - s, N}, {N, 1}, s * N), M, e - s, N, g * M * N, N});
        s = e;
      }
      p.outShape = {G, M, N};
    } else if (xs.size() == 3 && ys.size() == 3) {  // batched
      if (offsTensor(a)) a.fail("_grouped_mm: offs must not be given when both operands are 3-D");
      const std::int64_t G = xs[0], M = xs[1], K = xs[2], N = ys[2];
      if (ys[0] != G || ys[1] != K) mismatch();
      for (std::int64_t g = 0; g < G; ++g)
        p.groups.push_back({stridedMap({M, K}, {K, 1}, g * M * K),
                            stridedMap({K, N}, {N, 1}, g * K * N), M, K, N, g * M * N, N});
      p.outShape = {G, M, N};
    } else {
      mismatch();
    }
    return p;
  }
};

}  // namespace

void registerGroupedMmOps(OpRegistry& r) {
  r.add("aten._grouped_mm.default", std::make_shared<const GroupedMmRule>());
}

}  // namespace lossbound
