// Advanced indexing and masks: index.Tensor index_put (accumulate or not; index_put_
// _index_put_impl_ _unsafe_index _unsafe_index_put) masked_select nonzero masked_scatter.
//
// aten.index(x, indices): PyTorch advanced indexing (long indices broadcast together, bool masks
// replaced by their nonzero coordinates, negative indices wrapped; the indexed dims go in place
// when adjacent, else first): an exact selection in every domain, zero local error; the vjp adds
// the gradient back at the selected positions.
// aten.index_put(x, indices, values, accumulate): accumulate=False writes exactly, a position
// written more than once holds any one of its candidates (the hull; the local error covers each);
// x[mask] = v with one value v and a bool mask over leading dims is where(mask, v, x), exact, in
// the interval domain a selection (kernels::selectBody in binary64: an uncertain mask entry gives
// the hull of v and x, which holds either outcome) that the device runs too;
// accumulate=True sums the base element and its k values in any order, every partial sum rounded
// to F: |fl(Σ) − Σ| <= γ_k Σ|terms| (Higham 2002, eq. 4.4; scatter_writes.h).
// aten.masked_select(x, mask): the elements of x (broadcast with mask) where mask is true, in
// row-major order, exact. Its length depends on the mask: the mask must be exact (a mask that
// depends on rounded values is refused, naming the node), and a count that differs from the
// trace's is reported as such (the later shapes of the program were traced for that count).
// aten.nonzero(x): the coordinates of the nonzero elements (NaN counts as nonzero), one row per
// element in row-major order, exact. Like masked_select, its length depends on the values: every
// element must be certainly zero or certainly nonzero (an enclosure holding 0 and other values is
// refused, naming the element), and a count that differs from the trace's is reported as such.
// aten.masked_scatter(x, mask, source): x (broadcast with mask) with its masked positions taking
// source's elements in order, exact.
// Index tensors and masks must be exact (index_map.h).
#include "core/kernels/kernel_bodies.h"
#include "core/ops/broadcasting.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/index_map.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"
#include "core/ops/scatter_writes.h"

#include <algorithm>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// One index per dim of x after expanding bool masks: the long values and their shape, or none.
struct DimIndex {
  bool present = false;
  Shape shape;
  std::vector<std::int64_t> values;
};

/// Returns the self offset of every element of x[indices] (its shape in IndexMap::shape).
IndexMap advancedIndex(const OpArgs& a, const Shape& s, std::size_t listArg) {
  const std::vector<const Tensor*> list = a.optionalTensorList(listArg);
  std::vector<DimIndex> dims;
  for (const Tensor* t : list) {
    if (!t) {
      dims.push_back({});
      continue;
    }
    const auto v = exactIndices(a, *t, "index");
    if (t->dtype() == DType::Bool || t->dtype() == DType::UInt8) {
      // a mask over the next rank(t) dims: its nonzero coordinates, one long index per dim
      const std::size_t first = dims.size();
      const Shape& ms = t->shape();
      for (std::size_t d = 0; d < ms.size(); ++d)
        if (first + d >= s.size() || ms[d] != s[first + d])
          a.fail("the mask " + shapeString(ms) + " does not match " + shapeString(s) + " at dim " +
                 std::to_string(first + d));
      std::vector<DimIndex> coords(ms.size());
      const auto mst = contiguousStrides(ms);
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] == 0) continue;
        for (std::size_t d = 0; d < ms.size(); ++d)
          coords[d].values.push_back((static_cast<std::int64_t>(i) / mst[d]) % ms[d]);
      }
      for (DimIndex& c : coords) {
        c.present = true;
        c.shape = {static_cast<std::int64_t>(c.values.size())};
        dims.push_back(std::move(c));
      }
      if (ms.empty()) a.fail("a 0-d mask index is not supported");
    } else {
      dims.push_back({true, t->shape(), v});
    }
  }
  if (dims.size() > s.size())
    a.fail("too many indices (" + std::to_string(dims.size()) + ") for " + shapeString(s));
  dims.resize(s.size());
  std::vector<std::size_t> indexed, plain;
  std::vector<Shape> shapes;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].present) {
      indexed.push_back(d);
      shapes.push_back(dims[d].shape);
    } else {
      plain.push_back(d);
    }
  }
  if (indexed.empty()) return identityMap(s);
  const Shape b = broadcastAll(a, shapes);
  const BroadcastIndex bix(b, shapes);
  const bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  // result = before + b + after (adjacent: before = plain dims ahead of the indexed ones)
  Shape before, after;
  std::vector<std::size_t> beforeDims, afterDims;
  for (std::size_t d : plain) {
    if (adjacent && d < indexed.front()) {
      before.push_back(s[d]);
      beforeDims.push_back(d);
    } else {
      after.push_back(s[d]);
      afterDims.push_back(d);
    }
  }
  Shape out = before;
  out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), after.begin(), after.end());
  const auto st = contiguousStrides(s);
  const std::int64_t nb = numel(b), na = numel(after);
  IndexMap m{out, std::vector<std::int64_t>(static_cast<std::size_t>(numel(out)))};
  std::vector<std::int64_t> off(indexed.size());
  for (std::size_t r = 0; r < m.offsets.size(); ++r) {
    const auto ri = static_cast<std::int64_t>(r);
    std::int64_t ai = ri % std::max<std::int64_t>(na, 1);
    const std::int64_t bi = (ri / std::max<std::int64_t>(na, 1)) % std::max<std::int64_t>(nb, 1);
    std::int64_t pi = ri / std::max<std::int64_t>(na * nb, 1);
    std::int64_t o = 0;
    for (std::size_t k = afterDims.size(); k-- > 0;) {
      const std::size_t d = afterDims[k];
      o += (ai % s[d]) * st[d];
      ai /= s[d];
    }
    for (std::size_t k = beforeDims.size(); k-- > 0;) {
      const std::size_t d = beforeDims[k];
      o += (pi % s[d]) * st[d];
      pi /= s[d];
    }
    bix.offsets(bi, off.data());
    for (std::size_t k = 0; k < indexed.size(); ++k) {
      const std::size_t d = indexed[k];
      std::int64_t v = dims[d].values[static_cast<std::size_t>(off[k])];
      if (v < -s[d] || v >= s[d])
        a.fail("index " + std::to_string(v) + " is out of range for dim " + std::to_string(d) +
               " of size " + std::to_string(s[d]));
      if (v < 0) v += s[d];
      o += v * st[d];
    }
    m.offsets[r] = o;
  }
  return m;
}

/// index(x, indices): the advanced-index map in every domain, exact (file comment).
class IndexRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    // x[idx] with one exact integer index tensor on the leading dim (a relative-position bias
    // table, rotary frequencies by position): rows of x taken by index, as embedding does
    // (kernels::tableRow; binary64 storage keeps every endpoint). The backend declines an index
    // outside [0, rows), a negative one included: the map below wraps or reports it. An index
    // of interval form qualifies when every element is exact (an integer cast of exact floats).
    const Tensor& x = a.tensor(0);
    const std::vector<const Tensor*> list = a.optionalTensorList(1);
    const auto exact = [](const Tensor& t) {
      return !t.isInterval() || std::equal(t.lo().begin(), t.lo().end(), t.hi().begin());
    };
    if (list.size() == 1 && list[0] && isIntegral(list[0]->dtype()) &&
        list[0]->dtype() != DType::Bool && list[0]->dtype() != DType::UInt8 && exact(*list[0]) &&
        x.rank() >= 1) {
      Shape out = list[0]->shape();
      out.insert(out.end(), x.shape().begin() + 1, x.shape().end());
      if (auto r = offerTakeRows(ctx.backend, {Format::Fp64, Format::Fp64, 0}, x, *list[0], out,
                                 a.outSpec().dtype, true))
        return {std::move(*r)};
    }
    return apply(a, ctx);
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    if (isFloating(x.dtype()))
      out[0] = scatterAddThrough(g[0], advancedIndex(a, x.shape(), 1), x.shape(), x.dtype());
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  static std::vector<Tensor> apply(const OpArgs& a, OpContext&) {
    const Tensor& x = a.tensor(0);
    return {applyIndexMap(x, advancedIndex(a, x.shape(), 1), a.outSpec().dtype)};
  }
};

/// index_put(x, indices, values, accumulate): writes through the advanced-index map (file
/// comment); values broadcast to the indexed shape.
class IndexPutRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    return {scatterPoint(a.tensor(0), values(a), writes(a), mode(a), a.outSpec().dtype)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    if (const auto cond = maskCondition(a)) {
      // x[mask] = v with one value: where(mask, v, x), exact (binary64 storage keeps every
      // endpoint); a mask entry that may be either selects the hull, as the overwrite rule does
      // for a position with several candidates. Offered to the backend (kernels::selectBody).
      const kernels::ElementwiseModel exact{Format::Fp64, Format::Fp64, 0};
      const Tensor& x = a.tensor(0);
      const Tensor v = values(a).reshaped({});  // one value, whatever its shape of ones
      if (auto r = offerSelect(ctx.backend, exact, *cond, v, x, x.shape(), t)) return {*r};
      return {mapInterval3(a, *cond, v, x, t, [](Interval c, Interval p, Interval q) {
        return kernels::selectBody(c, p, q, Format::Fp64);
      })};
    }
    return {scatterInterval(a.tensor(0), values(a), writes(a), mode(a), t, outFormat(a, ctx),
                            isIntegral(t))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    return {scatterRandom(a.tensor(0), values(a), writes(a), mode(a), t, outFormat(a, ctx),
                          accumulationFormat(ctx.precision, t), isIntegral(t), *ctx.rng)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const Tensor& v = values(a);
    auto [gx, gv] =
        scatterVjp(g[0], x.shape(), x.dtype(), v.shape(), v.dtype(), writes(a), mode(a));
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    if (isFloating(x.dtype())) out.front() = gx;
    if (isFloating(v.dtype())) out.back() = gv;
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  static const Tensor& values(const OpArgs& a) {
    const Tensor& v = a.tensor(2);
    if (v.dtype() != a.tensor(0).dtype())
      a.fail("values have dtype " + std::string(dtypeName(v.dtype())) + ", self has " +
             std::string(dtypeName(a.tensor(0).dtype())));
    return v;
  }

  /// The mask of x[mask] = v when that is all the write is: no accumulation, one bool index of
  /// rank >= 1 over the leading dims of x, and one value that broadcasts to the indexed shape
  /// [count, x's other dims] (the shapes the point and random rules accept); returned shaped to
  /// broadcast against x (trailing dims of 1). Otherwise nothing (the general scatter).
  static std::optional<Tensor> maskCondition(const OpArgs& a) {
    const std::vector<const Tensor*> list = a.optionalTensorList(1);
    const Tensor& x = a.tensor(0);
    const Tensor& v = values(a);
    if (mode(a) != ScatterMode::Overwrite || list.size() != 1 || !list[0] || v.numel() != 1)
      return std::nullopt;
    const Tensor& m = *list[0];
    const Shape& ms = m.shape();
    if ((m.dtype() != DType::Bool && m.dtype() != DType::UInt8) || ms.empty() ||
        ms.size() > x.shape().size() || !std::equal(ms.begin(), ms.end(), x.shape().begin()) ||
        v.shape().size() > 1 + x.shape().size() - ms.size())
      return std::nullopt;
    Shape s = ms;
    s.resize(x.shape().size(), 1);
    return m.reshaped(std::move(s));
  }

  static ScatterMode mode(const OpArgs& a) {
    return a.boolArg(3, "accumulate", false) ? ScatterMode::Accumulate : ScatterMode::Overwrite;
  }

  static std::vector<ScatterWrite> writes(const OpArgs& a) {
    const Tensor& x = a.tensor(0);
    const Tensor& v = values(a);
    const IndexMap m = advancedIndex(a, x.shape(), 1);
    if (broadcastAll(a, {v.shape(), m.shape}) != m.shape)
      a.fail("values " + shapeString(v.shape()) + " do not broadcast to the indexed shape " +
             shapeString(m.shape));
    const BroadcastIndex bix(m.shape, {v.shape()});
    std::vector<ScatterWrite> w(m.offsets.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      std::int64_t src = 0;
      bix.offsets(static_cast<std::int64_t>(i), &src);
      w[i] = {m.offsets[i], src};
    }
    return w;
  }
};

/// Returns the offsets in x of the elements of x broadcast with mask where mask is true (shape:
/// [count]), and the broadcast shape in *common.
IndexMap maskedPositions(const OpArgs& a, const Tensor& x, const Tensor& mask, Shape* common) {
  if (mask.dtype() != DType::Bool && mask.dtype() != DType::UInt8)
    a.fail("the mask must be bool, found " + std::string(dtypeName(mask.dtype())));
  const auto mv = exactIndices(a, mask, "mask");
  *common = broadcastAll(a, {x.shape(), mask.shape()});
  const BroadcastIndex bix(*common, {x.shape(), mask.shape()});
  IndexMap m;
  std::int64_t off[2];
  for (std::int64_t i = 0; i < bix.size(); ++i) {
    bix.offsets(i, off);
    if (mv[static_cast<std::size_t>(off[1])] != 0) m.offsets.push_back(off[0]);
  }
  m.shape = {static_cast<std::int64_t>(m.offsets.size())};
  return m;
}

/// masked_select(x, mask): the selected elements in every domain, exact (file comment).
class MaskedSelectRule final : public OpRule {
 public:
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
    const Tensor& x = a.tensor(0);
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    Shape common;
    if (isFloating(x.dtype()))
      out[0] = scatterAddThrough(g[0], maskedPositions(a, x, a.tensor(1), &common), x.shape(),
                                 x.dtype());
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  static std::vector<Tensor> apply(const OpArgs& a, OpContext&) {
    const Tensor& x = a.tensor(0);
    Shape common;
    const IndexMap m = maskedPositions(a, x, a.tensor(1), &common);
    const Shape& traced = a.outSpec().shape;
    if (traced.size() == 1 && traced[0] != m.shape[0])
      a.fail("the mask selects " + std::to_string(m.shape[0]) + " elements here, " +
             std::to_string(traced[0]) +
             " when the program was traced: its later shapes hold only for that count (record "
             "the program again for this batch)");
    return {applyIndexMap(x, m, a.outSpec().dtype)};
  }
};

/// nonzero(x): the coordinates of the nonzero elements in every domain, exact (file comment).
class NonzeroRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override { return apply(a); }

  std::vector<Tensor> interval(const OpArgs& a, OpContext&) const override { return apply(a); }

  std::vector<Tensor> random(const OpArgs& a, OpContext&) const override { return apply(a); }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor>, OpContext&) const override {
    return noGradients(a);
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  static std::vector<Tensor> apply(const OpArgs& a) {
    const Tensor& x = a.tensor(0);
    const Shape& s = x.shape();
    const auto st = contiguousStrides(s);
    const auto lo = x.lo(), hi = x.hi();
    std::vector<double> coords;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < lo.size(); ++i) {
      const bool zero = lo[i] == 0 && hi[i] == 0;
      const bool nonzero = std::isnan(lo[i]) || std::isnan(hi[i]) || lo[i] > 0 || hi[i] < 0;
      if (!zero && !nonzero)
        a.fail("nonzero: element " + std::to_string(i) + " of " + shapeString(s) + " is [" +
               std::to_string(lo[i]) + ", " + std::to_string(hi[i]) +
               "], zero or not depending on rounded values; the number of nonzero elements sets "
               "the output's shape and must be exact");
      if (zero) continue;
      ++count;
      for (std::size_t d = 0; d < s.size(); ++d)
        coords.push_back(static_cast<double>((static_cast<std::int64_t>(i) / st[d]) % s[d]));
    }
    const Shape& traced = a.outSpec().shape;
    if (traced.size() == 2 && traced[0] != count)
      a.fail("nonzero finds " + std::to_string(count) + " nonzero elements here, " +
             std::to_string(traced[0]) +
             " when the program was traced: its later shapes hold only for that count (record "
             "the program again for this batch)");
    return {Tensor::point({count, static_cast<std::int64_t>(s.size())}, DType::Int64,
                          std::move(coords))};
  }
};

/// masked_scatter(x, mask, source): masked positions take source's elements in order, exact.
class MaskedScatterRule final : public OpRule {
 public:
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
    const Tensor& x = a.tensor(0);
    const Tensor& src = a.tensor(2);
    Shape common;
    const auto w = writes(a, &common);
    auto [gb, gs] =
        scatterVjp(g[0], common, x.dtype(), src.shape(), src.dtype(), w, ScatterMode::Overwrite);
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    if (isFloating(x.dtype())) out[0] = sumToShape(gb, x.shape()).withDtype(x.dtype());
    if (isFloating(src.dtype())) out[2] = gs;
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// The writes into x broadcast to the common shape: the k-th true mask position takes source
  /// element k.
  static std::vector<ScatterWrite> writes(const OpArgs& a, Shape* common) {
    const Tensor& x = a.tensor(0);
    const Tensor& mask = a.tensor(1);
    const Tensor& src = a.tensor(2);
    if (src.dtype() != x.dtype())
      a.fail("source has dtype " + std::string(dtypeName(src.dtype())) + ", self has " +
             std::string(dtypeName(x.dtype())));
    const auto mv = exactIndices(a, mask, "mask");
    *common = broadcastAll(a, {x.shape(), mask.shape()});
    const BroadcastIndex bix(*common, {mask.shape()});
    std::vector<ScatterWrite> w;
    for (std::int64_t i = 0; i < bix.size(); ++i) {
      std::int64_t off = 0;
      bix.offsets(i, &off);
      if (mv[static_cast<std::size_t>(off)] != 0)
        w.push_back({i, static_cast<std::int64_t>(w.size())});
    }
    if (static_cast<std::int64_t>(w.size()) > src.numel())
      a.fail("the mask selects " + std::to_string(w.size()) + " positions, source has only " +
             std::to_string(src.numel()) + " elements");
    return w;
  }

  static std::vector<Tensor> apply(const OpArgs& a, OpContext&) {
    const Tensor& x = a.tensor(0);
    Shape common;
    const auto w = writes(a, &common);
    const Tensor base = x.shape() == common ? x : broadcastTo(a, x, common);
    const Tensor& src = a.tensor(2);
    if (!base.isInterval() && !src.isInterval())
      return {scatterPoint(base, src, w, ScatterMode::Overwrite, a.outSpec().dtype)};
    // exact writes: the interval form of the same map (no duplicate targets)
    return {scatterInterval(base, src, w, ScatterMode::Overwrite, a.outSpec().dtype, Format::Fp64,
                            true)};
  }
};

}  // namespace

void registerAdvancedIndexOps(OpRegistry& r) {
  const auto index = std::make_shared<const IndexRule>();
  r.add("aten.index.Tensor", index);
  r.add("aten._unsafe_index.Tensor", index);
  const auto indexPut = std::make_shared<const IndexPutRule>();
  for (const char* op : {"aten.index_put.default", "aten.index_put_.default",
                         "aten._index_put_impl_.default", "aten._unsafe_index_put.default"})
    r.add(op, indexPut);
  r.add("aten.masked_select.default", std::make_shared<const MaskedSelectRule>());
  r.add("aten.nonzero.default", std::make_shared<const NonzeroRule>());
  const auto maskedScatter = std::make_shared<const MaskedScatterRule>();
  r.add("aten.masked_scatter.default", maskedScatter);
  r.add("aten.masked_scatter_.default", maskedScatter);
}

}  // namespace lossbound
