// Strided views and writes: as_strided as_strided_copy as_strided_scatter (functionalized views
// whose geometry torch only expresses through strides, e.g. channels_last tensors).
//
// IR semantics (docs/run-file-format.md, "What the recorder decomposes"): the view indexes the
// input's *row-major elements*, not its storage. The recorder checks that the traced input is
// row-major dense wherever the view can tell and rewrites storage_offset relative to the input.
// aten.as_strided(x, size, stride, storage_offset) / aten.as_strided_copy: the exact gather
// out[i] = x.flat[offset + Σ_k i_k·stride_k]; every domain copies the endpoints (the interval
// rule through the backend's gather hook when it offers one), the local error is zero, the vjp
// adds the gradient back at the positions read (repeated positions accumulate).
// aten.as_strided_scatter(base, src, size, stride, storage_offset): a copy of base whose
// positions offset + Σ_k i_k·stride_k take src[i]. Exact writes; a position written more than
// once holds any one of its candidates (torch's copy_ into an overlapping view leaves the winner
// unspecified), so the interval rule takes their hull (scatter_writes.h, Overwrite; without such a
// position, a gather of src over base through the backend's hook when it offers one) and the
// first-order local error is the distance of the point value to that hull. vjp: base gets the
// gradient with the written positions zeroed, src the gradient gathered at the position it writes
// (for a multiply written position, the write the point value keeps).
// Every position must lie inside x (base): a view that reaches past its elements is refused,
// naming the node, the geometry and the element count.
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/index_map.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"
#include "core/ops/scatter_writes.h"

#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

std::string listString(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Returns the index map of the view (size at argument sizeIdx, stride and storage_offset after
/// it) over the row-major elements of a tensor of shape `in`; fails through args when the
/// geometry is malformed or a position falls outside the tensor's elements.
IndexMap viewMap(const OpArgs& a, const Shape& in, std::size_t sizeIdx) {
  const std::vector<std::int64_t> size = a.intListArg(sizeIdx, "size");
  const std::vector<std::int64_t> stride = a.intListArg(sizeIdx + 1, "stride");
  const std::int64_t offset = a.intArg(sizeIdx + 2, "storage_offset", 0);
  const std::string geometry = "size " + listString(size) + ", stride " + listString(stride) +
                               ", storage_offset " + std::to_string(offset);
  if (size.size() != stride.size()) a.fail(geometry + ": size and stride have different lengths");
  if (offset < 0) a.fail(geometry + ": negative storage_offset");
  std::int64_t last = offset;
  bool empty = false;
  for (std::size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0) a.fail(geometry + ": negative size");
    if (stride[d] < 0) a.fail(geometry + ": negative stride (torch does not support them)");
    if (size[d] == 0) empty = true;
    last += (size[d] - 1) * stride[d];
  }
  const std::int64_t n = numel(in);
  if (!empty && last >= n)
    a.fail(geometry + " reaches element " + std::to_string(last) + " of an input of shape " +
           shapeString(in) + " (" + std::to_string(n) +
           " elements): the view must stay inside the input's row-major elements");
  return stridedMap(Shape(size.begin(), size.end()), stride, offset);
}

/// as_strided(x, size, stride, storage_offset) and as_strided_copy: the exact gather of the file
/// comment.
class AsStridedRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    // A gather through a map made from shapes and IR arguments: a device keeps it resident.
    const Tensor& x = a.tensor(0);
    return {gatherVia(ctx.backend, x, viewMap(a, x.shape(), 1), a.outSpec().dtype)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    if (!isFloating(x.dtype())) return noGradients(a);
    return {scatterAddThrough(g[0], viewMap(a, x.shape(), 1), x.shape(), x.dtype())};
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  std::vector<Tensor> apply(const OpArgs& a, OpContext&) const {
    const Tensor& x = a.tensor(0);
    return {applyIndexMap(x, viewMap(a, x.shape(), 1), a.outSpec().dtype)};
  }
};

/// as_strided_scatter(base, src, size, stride, storage_offset): overwrites through the view, the
/// hull over the writers of a multiply written position (file comment).
class AsStridedScatterRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return {
        scatterPoint(a.tensor(0), source(a), writes(a), ScatterMode::Overwrite, a.outSpec().dtype)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Tensor& base = a.tensor(0);
    const Tensor& src = source(a);
    const std::vector<ScatterWrite> w = writes(a);
    // No position written twice (the geometry says so, not the values): a gather of src over
    // base, which a device keeps resident. Offered when an operand is an interval, the form the
    // host rule returns.
    if (base.isInterval() || src.isInterval()) {
      std::vector<std::int64_t> from(static_cast<std::size_t>(base.numel()), -1);
      bool once = true;
      for (const ScatterWrite& s : w) {
        auto& f = from[static_cast<std::size_t>(s.target)];
        once = once && f < 0;
        f = s.source;
      }
      if (once)
        if (auto r = offerGatherOver(ctx.backend, src, from, base, t)) return {std::move(*r)};
    }
    return {
        scatterInterval(base, src, w, ScatterMode::Overwrite, t, outFormat(a, ctx), isIntegral(t))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format f = outFormat(a, ctx);
    return {scatterRandom(a.tensor(0), source(a), writes(a), ScatterMode::Overwrite, t, f, f,
                          isIntegral(t), *ctx.rng)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& base = a.tensor(0);
    const Tensor& src = source(a);
    auto [gb, gs] = scatterVjp(g[0], base.shape(), base.dtype(), src.shape(), src.dtype(),
                               writes(a), ScatterMode::Overwrite);
    std::vector<std::optional<Tensor>> out;
    out.emplace_back(isFloating(base.dtype()) ? std::optional<Tensor>(gb) : std::nullopt);
    out.emplace_back(isFloating(src.dtype()) ? std::optional<Tensor>(gs) : std::nullopt);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  /// Returns src after checking it has the view's shape and base's dtype.
  static const Tensor& source(const OpArgs& a) {
    const Tensor& base = a.tensor(0);
    const Tensor& src = a.tensor(1);
    if (src.dtype() != base.dtype())
      a.fail("src has dtype " + std::string(dtypeName(src.dtype())) + ", base has " +
             std::string(dtypeName(base.dtype())) + " (a casting write is not modelled)");
    return src;
  }

  /// Returns one write per src element: the base position of the view element it lands on.
  static std::vector<ScatterWrite> writes(const OpArgs& a) {
    const IndexMap m = viewMap(a, a.tensor(0).shape(), 2);
    const Tensor& src = a.tensor(1);
    if (m.shape != src.shape())
      a.fail("src has shape " + shapeString(src.shape()) + ", the view has shape " +
             shapeString(m.shape));
    std::vector<ScatterWrite> w(m.offsets.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = {m.offsets[i], static_cast<std::int64_t>(i)};
    return w;
  }
};

}  // namespace

void registerAsStridedOps(OpRegistry& r) {
  const auto view = std::make_shared<const AsStridedRule>();
  r.add("aten.as_strided.default", view);
  r.add("aten.as_strided_copy.default", view);
  r.add("aten.as_strided_scatter.default", std::make_shared<const AsStridedScatterRule>());
}

}  // namespace lossbound
