// Gathers and scatters along one dim: gather scatter (.src, .value) scatter_add index_select
// index_add (and the in-place scatter_ scatter_add_ index_add_, fresh values here).
//
// aten.gather(x, dim, index) and aten.index_select(x, dim, index): exact selections; every domain
// copies the selected endpoints, the local error is zero, the vjp adds the gradient back at the
// selected positions. Indices must be exact (index_map.h: an index that depends on rounded values
// is refused, naming the node).
// aten.scatter(x, dim, index, src / value): exact writes; a position written more than once holds
// any one of its candidates (PyTorch: unspecified), so the interval rule takes their hull and the
// first-order local error covers every candidate (the distance of the point value to the hull).
// A scalar value is stored as RN_F(value): enclosed by roundOutward(value, F).
// aten.scatter_add(x, dim, index, src) and aten.index_add(x, dim, index, source, alpha): each
// target is the sum of its base element and the k source terms sent to it, in any order
// (atomics, sorted or sequential kernels), every partial sum rounded to F:
// |fl(Σ) − Σ| <= γ_k Σ|terms| (Higham 2002, eq. 4.4), see scatter_writes.h; index_add's terms
// alpha·source are exact (fused) or RN_F(alpha·source): enclosed by roundOutward(alpha·source, F)
// with alpha as scalarEnclosure. The local error is the distance of the binary64 point value to
// that enclosure on exact inputs.
#include "core/ops/broadcasting.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/index_map.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"
#include "core/ops/scatter_writes.h"

#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// Returns the offset in a tensor of strides `st` of the coordinates of flat element i of shape
/// `s`, with the coordinate along `dim` replaced by `at` (or kept when at < 0).
std::int64_t offsetWith(const Shape& s, const std::vector<std::int64_t>& st, std::int64_t i,
                        int dim, std::int64_t at) {
  std::int64_t off = 0;
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    const auto du = static_cast<std::size_t>(d);
    const std::int64_t c = i % s[du];
    i /= s[du];
    off += (d == dim && at >= 0 ? at : c) * st[du];
  }
  return off;
}

/// Checks an index value against a dim of size `extent` (no wrapping: PyTorch's gather, scatter,
/// index_select and index_add refuse negative indices).
void checkIndex(const OpArgs& a, std::int64_t v, std::int64_t extent) {
  if (v < 0 || v >= extent)
    a.fail("index " + std::to_string(v) + " is out of range for a dimension of size " +
           std::to_string(extent));
}

/// gather(x, dim, index) as an index map on x (output shape = index shape).
IndexMap gatherMap(const OpArgs& a) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  if (index.rank() != x.rank())
    a.fail("gather: index has rank " + std::to_string(index.rank()) + ", self has rank " +
           std::to_string(x.rank()));
  const int dim = x.rank() == 0 ? 0 : dimArg(a, 1, "dim", x.shape().size());
  const Shape& is = index.shape();
  for (std::size_t d = 0; d < is.size(); ++d)
    if (static_cast<int>(d) != dim && is[d] > x.shape()[d])
      a.fail("gather: index " + shapeString(is) + " is larger than self " + shapeString(x.shape()) +
             " outside dim " + std::to_string(dim));
  const auto idx = exactIndices(a, index, "index");
  const auto st = contiguousStrides(x.shape());
  IndexMap m{is, std::vector<std::int64_t>(idx.size())};
  const std::int64_t extent = x.rank() == 0 ? 1 : x.shape()[static_cast<std::size_t>(dim)];
  for (std::size_t i = 0; i < idx.size(); ++i) {
    checkIndex(a, idx[i], extent);
    m.offsets[i] = offsetWith(is, st, static_cast<std::int64_t>(i), dim, idx[i]);
  }
  return m;
}

/// index_select(x, dim, index) as an index map on x.
IndexMap indexSelectMap(const OpArgs& a) {
  const Tensor& x = a.tensor(0);
  const Tensor& index = a.tensor(2);
  if (index.rank() > 1)
    a.fail("index_select: index must be 0-d or 1-d, found " + shapeString(index.shape()));
  const auto idx = exactIndices(a, index, "index");
  if (x.rank() == 0) {
    for (auto v : idx) checkIndex(a, v, 1);
    return IndexMap{index.shape(), std::vector<std::int64_t>(idx.size(), 0)};
  }
  const int dim = dimArg(a, 1, "dim", x.shape().size());
  const auto du = static_cast<std::size_t>(dim);
  Shape out = x.shape();
  out[du] = static_cast<std::int64_t>(idx.size());
  const auto st = contiguousStrides(x.shape());
  IndexMap m{out, std::vector<std::int64_t>(static_cast<std::size_t>(numel(out)))};
  for (auto v : idx) checkIndex(a, v, x.shape()[du]);
  for (std::size_t i = 0; i < m.offsets.size(); ++i) {
    // the coordinate along dim of output element i picks idx[...]
    const std::int64_t c = (static_cast<std::int64_t>(i) / contiguousStrides(out)[du]) % out[du];
    m.offsets[i] =
        offsetWith(out, st, static_cast<std::int64_t>(i), dim, idx[static_cast<std::size_t>(c)]);
  }
  return m;
}

/// gather / index_select: the index map in every domain, exact (file comment).
class SelectAlongRule final : public OpRule {
 public:
  /// Takes whether the op is index_select (else gather).
  explicit SelectAlongRule(bool indexSelect) : mIndexSelect(indexSelect) {}

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
    std::vector<std::optional<Tensor>> out;
    if (isFloating(x.dtype()))
      out.emplace_back(scatterAddThrough(g[0], indexMap(a), x.shape(), x.dtype()));
    else
      out.emplace_back(std::nullopt);
    out.resize(a.tensorInputs().size());
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  IndexMap indexMap(const OpArgs& a) const {
    return mIndexSelect ? indexSelectMap(a) : gatherMap(a);
  }

  std::vector<Tensor> apply(const OpArgs& a, OpContext&) const {
    return {applyIndexMap(a.tensor(0), indexMap(a), a.outSpec().dtype)};
  }

  bool mIndexSelect;
};

enum class Along { Scatter, ScatterValue, ScatterAdd, IndexAdd };

/// scatter scatter.value scatter_add index_add: writes along dim into a copy of x (file comment).
class ScatterAlongRule final : public OpRule {
 public:
  explicit ScatterAlongRule(Along kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const std::vector<ScatterWrite> w = writes(a);
    Tensor src = source(a);
    if (mKind == Along::IndexAdd) {
      const double alpha = a.numberArg(4, "alpha", 1.0);
      src = mapPoint(src, src.dtype(), [alpha](double v) { return alpha * v; });
    }
    return {scatterPoint(a.tensor(0), src, w, mode(), a.outSpec().dtype)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const std::vector<ScatterWrite> w = writes(a);
    Tensor src = source(a);
    if (mKind == Along::ScatterValue && !integral) {
      const Interval v = roundOutward(lossbound::point(src.values()[0]), f);
      src = Tensor::interval({}, t, {v.lo}, {v.hi});
    }
    if (mKind == Along::IndexAdd) {
      const double alpha = a.numberArg(4, "alpha", 1.0);
      if (alpha != 1.0) {
        const Interval al = integral ? lossbound::point(alpha) : scalarEnclosure(alpha, f);
        src = mapInterval(src, src.dtype(), [&](Interval v) {
          const Interval p = mul(al, v);
          return integral ? p : roundOutward(p, f);
        });
      }
    }
    return {scatterInterval(a.tensor(0), src, w, mode(), t, f, integral)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const bool integral = isIntegral(t);
    const Format f = outFormat(a, ctx);
    const std::vector<ScatterWrite> w = writes(a);
    Tensor src = source(a);
    if (mKind == Along::ScatterValue && !integral)
      src = Tensor::scalar(roundNearest(src.values()[0], f), t);
    if (mKind == Along::IndexAdd) {
      const double alpha = a.numberArg(4, "alpha", 1.0);
      if (alpha != 1.0) {
        const double al = integral ? alpha : randomScalar(alpha, f, *ctx.rng);
        const bool fused = (*ctx.rng)() & 1;
        src = mapPoint(src, src.dtype(), [&](double v) {
          return integral || fused ? al * v : roundNearest(al * v, f);
        });
      }
    }
    return {scatterRandom(a.tensor(0), src, w, mode(), t, f, accumulationFormat(ctx.precision, t),
                          integral, *ctx.rng)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor& x = a.tensor(0);
    const Tensor src = source(a);
    auto [gx, gs] =
        scatterVjp(g[0], x.shape(), x.dtype(), src.shape(), src.dtype(), writes(a), mode());
    if (mKind == Along::IndexAdd) {
      const double alpha = a.numberArg(4, "alpha", 1.0);
      gs = mapPoint(gs, gs.dtype(), [alpha](double v) { return alpha * v; });
    }
    std::vector<std::optional<Tensor>> out;
    out.emplace_back(isFloating(x.dtype()) ? std::optional<Tensor>(gx) : std::nullopt);
    out.emplace_back(std::nullopt);  // index
    if (mKind != Along::ScatterValue)
      out.emplace_back(isFloating(src.dtype()) ? std::optional<Tensor>(gs) : std::nullopt);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  ScatterMode mode() const {
    return mKind == Along::ScatterAdd || mKind == Along::IndexAdd ? ScatterMode::Accumulate
                                                                  : ScatterMode::Overwrite;
  }

  /// The written values: src / source, or the scalar value as a 0-d tensor.
  Tensor source(const OpArgs& a) const {
    if (mKind == Along::ScatterValue) {
      if (a.isTensor(3)) a.fail("scatter.value expects a number, found a tensor");
      return Tensor::scalar(a.numberArg(3, "value"), a.outSpec().dtype);
    }
    const Tensor& src = a.tensor(3);
    if (src.dtype() != a.tensor(0).dtype())
      a.fail("src has dtype " + std::string(dtypeName(src.dtype())) + ", self has " +
             std::string(dtypeName(a.tensor(0).dtype())));
    return src;
  }

  std::vector<ScatterWrite> writes(const OpArgs& a) const {
    const Tensor& x = a.tensor(0);
    const Tensor& index = a.tensor(2);
    const Tensor src = source(a);
    const int dim = x.rank() == 0 ? 0 : dimArg(a, 1, "dim", x.shape().size());
    const auto idx = exactIndices(a, index, "index");
    const auto xst = contiguousStrides(x.shape());
    std::vector<ScatterWrite> w;
    if (mKind == Along::IndexAdd) {
      // source.select(dim, i) is added to x.select(dim, index[i])
      if (index.rank() > 1) a.fail("index_add: index must be 0-d or 1-d");
      if (src.rank() != x.rank())
        a.fail("index_add: source " + shapeString(src.shape()) + " and self " +
               shapeString(x.shape()) + " differ in rank");
      const Shape& ss = src.shape();
      for (std::size_t d = 0; d < ss.size(); ++d)
        if (static_cast<int>(d) != dim && ss[d] != x.shape()[d])
          a.fail("index_add: source " + shapeString(ss) + " does not match self " +
                 shapeString(x.shape()) + " outside dim " + std::to_string(dim));
      const std::int64_t extent = x.rank() == 0 ? 1 : x.shape()[static_cast<std::size_t>(dim)];
      const std::int64_t srcExtent = src.rank() == 0 ? 1 : ss[static_cast<std::size_t>(dim)];
      if (static_cast<std::int64_t>(idx.size()) != srcExtent)
        a.fail("index_add: " + std::to_string(idx.size()) + " indices for a source extent of " +
               std::to_string(srcExtent));
      for (auto v : idx) checkIndex(a, v, extent);
      const std::int64_t dimStride = src.rank() == 0 ? 1 : contiguousStrides(ss)[dim];
      for (std::int64_t i = 0; i < src.numel(); ++i) {
        const std::int64_t c = src.rank() == 0 ? 0 : (i / dimStride) % srcExtent;
        w.push_back({offsetWith(ss, xst, i, dim, idx[static_cast<std::size_t>(c)]), i});
      }
      return w;
    }
    if (index.rank() != x.rank())
      a.fail("scatter: index has rank " + std::to_string(index.rank()) + ", self has rank " +
             std::to_string(x.rank()));
    const Shape& is = index.shape();
    for (std::size_t d = 0; d < is.size(); ++d) {
      if (static_cast<int>(d) != dim && is[d] > x.shape()[d])
        a.fail("scatter: index " + shapeString(is) + " is larger than self " +
               shapeString(x.shape()) + " outside dim " + std::to_string(dim));
      if (mKind != Along::ScatterValue && is[d] > src.shape()[d])
        a.fail("scatter: index " + shapeString(is) + " is larger than src " +
               shapeString(src.shape()));
    }
    const std::int64_t extent = x.rank() == 0 ? 1 : x.shape()[static_cast<std::size_t>(dim)];
    const auto sst = contiguousStrides(src.shape());
    for (std::size_t i = 0; i < idx.size(); ++i) {
      checkIndex(a, idx[i], extent);
      const auto ii = static_cast<std::int64_t>(i);
      const std::int64_t from = mKind == Along::ScatterValue ? 0 : offsetWith(is, sst, ii, dim, -1);
      w.push_back({offsetWith(is, xst, ii, dim, idx[i]), from});
    }
    return w;
  }

  Along mKind;
};

}  // namespace

void registerGatherScatterOps(OpRegistry& r) {
  r.add("aten.gather.default", std::make_shared<const SelectAlongRule>(false));
  r.add("aten.index_select.default", std::make_shared<const SelectAlongRule>(true));
  const auto scatter = std::make_shared<const ScatterAlongRule>(Along::Scatter);
  r.add("aten.scatter.src", scatter);
  r.add("aten.scatter_.src", scatter);
  const auto scatterValue = std::make_shared<const ScatterAlongRule>(Along::ScatterValue);
  r.add("aten.scatter.value", scatterValue);
  r.add("aten.scatter_.value", scatterValue);
  const auto scatterAdd = std::make_shared<const ScatterAlongRule>(Along::ScatterAdd);
  r.add("aten.scatter_add.default", scatterAdd);
  r.add("aten.scatter_add_.default", scatterAdd);
  const auto indexAdd = std::make_shared<const ScatterAlongRule>(Along::IndexAdd);
  r.add("aten.index_add.default", indexAdd);
  r.add("aten.index_add_.default", indexAdd);
}

}  // namespace lossbound
