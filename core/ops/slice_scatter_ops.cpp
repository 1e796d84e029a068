// Slice and select scatters: slice_scatter select_scatter (functionalized writes through a view,
// `labels[:, 20:] = -100`) and slice_backward select_backward (the same with a zero base).
//
// aten.slice_scatter(self, src, dim, start, end, step) / aten.select_scatter(self, src, dim,
// index): self with the slice (select) replaced by src; aten.slice_backward(grad, input_sizes,
// dim, start, end, step) / aten.select_backward(grad, input_sizes, dim, index): zeros with grad
// placed where the forward op read. All four only move values: every domain copies the endpoints
// (an interval src or self keeps its enclosure, the rest stays exact), the local error is zero,
// and the vjp routes the gradient through the same index map (self: the positions not written;
// src / grad: the positions written).
#include "core/ops/families.h"
#include "core/ops/index_map.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <memory>
#include <optional>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

enum class Placement { SliceBackward, SelectBackward, SliceScatter, SelectScatter };

/// slice/select scatter and backward: base (self, or zeros of input_sizes) with the values of
/// the second operand written through the slice/select map; exact in every domain.
class SliceScatterRule final : public OpRule {
 public:
  explicit SliceScatterRule(Placement kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Shape base = baseShape(a);
    const IndexMap m = indexMap(a, base);
    const Tensor& src = values(a);
    std::vector<std::optional<Tensor>> out;
    if (isScatter()) {
      const Tensor& self = a.tensor(0);
      if (isFloating(self.dtype())) {
        std::vector<double> gs(g[0].values().begin(), g[0].values().end());
        for (std::int64_t off : m.offsets) gs[static_cast<std::size_t>(off)] = 0.0;
        out.emplace_back(Tensor::point(base, self.dtype(), std::move(gs)));
      } else {
        out.emplace_back(std::nullopt);
      }
    }
    if (isFloating(src.dtype()))
      out.emplace_back(applyIndexMap(g[0], m, src.dtype()).reshaped(src.shape()));
    else
      out.emplace_back(std::nullopt);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  bool isScatter() const {
    return mKind == Placement::SliceScatter || mKind == Placement::SelectScatter;
  }

  /// The tensor written through the map: src, or the gradient of the backward ops.
  const Tensor& values(const OpArgs& a) const { return a.tensor(isScatter() ? 1 : 0); }

  Shape baseShape(const OpArgs& a) const {
    return isScatter() ? a.tensor(0).shape() : Shape(a.intListArg(1, "input_sizes"));
  }

  /// The map of the slice / select on the base shape (dim at argument 2 in all four ops).
  IndexMap indexMap(const OpArgs& a, const Shape& base) const {
    if (mKind == Placement::SelectBackward || mKind == Placement::SelectScatter)
      return selectMap(a, base, 2);
    if (base.empty()) a.fail("slice of a 0-d tensor");
    const int dim = dimArg(a, 2, "dim", base.size(), 0);
    return sliceMap(base, dim, sliceBounds(a, 3, base[static_cast<std::size_t>(dim)]));
  }

  /// The write as one gather on the backend (a device): output element i takes the written value
  /// whose slice position is i, else self's (scatter) or 0 (backward). Moving values is exact,
  /// so the bits are the host loop's below.
  std::optional<Tensor> offer(const OpArgs& a, Backend& backend, const Tensor& v, const IndexMap& m,
                              const Shape& base, DType t) const {
    if (m.offsets.empty()) return std::nullopt;
    std::vector<std::int64_t> source(static_cast<std::size_t>(numel(base)), -1);
    for (std::size_t i = 0; i < m.offsets.size(); ++i)
      source[static_cast<std::size_t>(m.offsets[i])] = static_cast<std::int64_t>(i);
    if (isScatter()) return offerGatherOver(backend, v, source, a.tensor(0), t);
    return offerGather(backend, v, source, base, t, Interval{0.0, 0.0});
  }

  std::vector<Tensor> apply(const OpArgs& a, OpContext& ctx) const {
    const Tensor& v = values(a);
    const Shape base = baseShape(a);
    const IndexMap m = indexMap(a, base);
    if (numel(m.shape) != v.numel() || (isScatter() && m.shape != v.shape()))
      a.fail("the written values have shape " + shapeString(v.shape()) + ", the " +
             (mKind == Placement::SliceScatter || mKind == Placement::SliceBackward ? "slice"
                                                                                    : "select") +
             " of " + shapeString(base) + " has shape " + shapeString(m.shape));
    const DType t = a.outSpec().dtype;
    if (isScatter() && v.dtype() != a.tensor(0).dtype())
      a.fail("src has dtype " + std::string(dtypeName(v.dtype())) + ", self has " +
             std::string(dtypeName(a.tensor(0).dtype())) + " (a casting write is not modelled)");
    const bool interval = v.isInterval() || (isScatter() && a.tensor(0).isInterval());
    if (auto r = offer(a, ctx.backend, v, m, base, t)) return std::vector<Tensor>{std::move(*r)};
    std::vector<double> lo, hi;
    if (isScatter()) {
      const Tensor& self = a.tensor(0);
      lo.assign(self.lo().begin(), self.lo().end());
      hi.assign(self.hi().begin(), self.hi().end());
    } else {
      lo.assign(static_cast<std::size_t>(numel(base)), 0.0);
      hi = lo;
    }
    for (std::size_t i = 0; i < m.offsets.size(); ++i) {
      lo[static_cast<std::size_t>(m.offsets[i])] = v.lo()[i];
      hi[static_cast<std::size_t>(m.offsets[i])] = v.hi()[i];
    }
    if (!interval) return std::vector<Tensor>{Tensor::point(base, t, std::move(lo))};
    return std::vector<Tensor>{Tensor::interval(base, t, std::move(lo), std::move(hi))};
  }

  Placement mKind;
};

}  // namespace

void registerSliceScatterOps(OpRegistry& r) {
  r.add("aten.slice_backward.default",
        std::make_shared<const SliceScatterRule>(Placement::SliceBackward));
  r.add("aten.select_backward.default",
        std::make_shared<const SliceScatterRule>(Placement::SelectBackward));
  r.add("aten.slice_scatter.default",
        std::make_shared<const SliceScatterRule>(Placement::SliceScatter));
  r.add("aten.select_scatter.default",
        std::make_shared<const SliceScatterRule>(Placement::SelectScatter));
}

}  // namespace lossbound
