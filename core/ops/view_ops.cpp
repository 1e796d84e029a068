// Views and copies: view _unsafe_view _reshape_alias reshape expand t transpose permute slice
// narrow select unsqueeze squeeze (.dim, .dims, .default) flip roll repeat cat stack split
// split_with_sizes chunk unbind clone detach lift_fresh_copy alias contiguous tril triu copy_
// _to_copy to, and the *_copy forms of the views that functionalized PyTorch 2.x traces emit
// (view_copy expand_copy permute_copy t_copy transpose_copy slice_copy select_copy unsqueeze_copy
// squeeze_copy alias_copy detach_copy narrow_copy split_copy split_with_sizes_copy unbind_copy):
// a *_copy op has the values of its view, so it has the view's rule.
//
// Every op here except _to_copy/copy_ only moves values: all domains share one index map
// (output element i ← input offset map[i]), intervals stay intervals and points stay points, the
// local error is zero and the vjp scatters the gradient back through the same map. _to_copy
// rounds to the target dtype: correctly rounded casts (IEEE 754-2019 §5.4.2; bf16 from fp32 by
// round-to-nearest-even, as PyTorch's c10::BFloat16 does), so the interval rule is roundOutward
// and the random rule round-to-nearest; float → integer casts truncate toward zero.
#include "core/kernels/kernel_bodies.h"
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/gather_rule.h"
#include "core/ops/index_map.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/registry.h"
#include "core/ops/rule_helpers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

using Gather = IndexMap;

/// Resolves a view size list with at most one -1 against numel n.
Shape inferSize(const OpArgs& a, std::vector<std::int64_t> size, std::int64_t n) {
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (infer >= 0) a.fail("only one dimension can be inferred");
      infer = static_cast<int>(i);
    } else {
      known *= size[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      a.fail("cannot infer a dimension of " + shapeString(size) + " for " + std::to_string(n) +
             " elements");
    size[static_cast<std::size_t>(infer)] = n / known;
  }
  if (numel(size) != n)
    a.fail("shape " + shapeString(size) + " is invalid for " + std::to_string(n) + " elements");
  return size;
}

// ---------------------------------------------------------------------------------------------
// Single-input gathers

/// view / reshape: shares storage (no copy); exact, vjp reshapes the gradient back.
class ReshapeRule final : public OpRule {
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
    std::vector<std::optional<Tensor>> out;
    if (isFloating(x.dtype()))
      out.emplace_back(g[0].reshaped(x.shape()).withDtype(x.dtype()));
    else
      out.emplace_back(std::nullopt);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  static std::vector<Tensor> apply(const OpArgs& a, OpContext&) {
    const Tensor& x = a.tensor(0);
    return std::vector<Tensor>{x.reshaped(inferSize(a, a.intListArg(1, "size"), x.numel()))};
  }
};

Gather identity(const OpArgs&, const Shape& s) { return identityMap(s); }

Gather expandGather(const OpArgs& a, const Shape& s) {
  const auto size = a.intListArg(1, "size");
  if (size.size() < s.size())
    a.fail("expand: target " + shapeString(size) + " has fewer dims than " + shapeString(s));
  const auto st = contiguousStrides(s);
  Shape out(size.size());
  std::vector<std::int64_t> strides(size.size(), 0);
  const std::size_t lead = size.size() - s.size();
  for (std::size_t d = 0; d < size.size(); ++d) {
    if (d < lead) {
      if (size[d] < 0) a.fail("expand: -1 is not allowed for a new leading dimension");
      out[d] = size[d];
      continue;
    }
    const std::int64_t in = s[d - lead];
    const std::int64_t want = size[d] == -1 ? in : size[d];
    if (in != want && in != 1)
      a.fail("expand: cannot expand " + shapeString(s) + " to " + shapeString(size));
    out[d] = want;
    strides[d] = in == want ? st[d - lead] : 0;
  }
  return stridedMap(out, strides, 0);
}

Gather permuteGather(const Shape& s, const std::vector<int>& perm) {
  const auto st = contiguousStrides(s);
  Shape out;
  std::vector<std::int64_t> strides;
  for (int p : perm) {
    out.push_back(s[static_cast<std::size_t>(p)]);
    strides.push_back(st[static_cast<std::size_t>(p)]);
  }
  return stridedMap(out, strides, 0);
}

Gather transposeGather(const OpArgs& a, const Shape& s) {
  std::vector<int> perm(s.size());
  std::iota(perm.begin(), perm.end(), 0);
  if (s.size() < 2) return permuteGather(s, perm);
  const int d0 = dimArg(a, 1, "dim0", s.size()), d1 = dimArg(a, 2, "dim1", s.size());
  std::swap(perm[static_cast<std::size_t>(d0)], perm[static_cast<std::size_t>(d1)]);
  return permuteGather(s, perm);
}

Gather tGather(const OpArgs& a, const Shape& s) {
  if (s.size() > 2) a.fail("t() expects a tensor with <= 2 dimensions, found " + shapeString(s));
  std::vector<int> perm(s.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  return permuteGather(s, perm);
}

Gather permuteArgGather(const OpArgs& a, const Shape& s) {
  const auto dims = a.intListArg(1, "dims");
  if (dims.size() != s.size())
    a.fail("permute: " + std::to_string(dims.size()) + " dims for a tensor of rank " +
           std::to_string(s.size()));
  std::vector<int> perm;
  std::vector<bool> seen(s.size(), false);
  for (auto d : dims) {
    int n = 0;
    try {
      n = normalizeDim(d, s.size());
    } catch (const std::out_of_range& e) {
      a.fail(e.what());
    }
    if (seen[static_cast<std::size_t>(n)]) a.fail("permute: repeated dim " + std::to_string(d));
    seen[static_cast<std::size_t>(n)] = true;
    perm.push_back(n);
  }
  return permuteGather(s, perm);
}

Gather sliceArgGather(const OpArgs& a, const Shape& s) {
  if (s.empty()) a.fail("slice() of a 0-d tensor");
  const int dim = dimArg(a, 1, "dim", s.size(), 0);
  return sliceMap(s, dim, sliceBounds(a, 2, s[static_cast<std::size_t>(dim)]));
}

Gather unsqueezeGather(const OpArgs& a, const Shape& s) {
  const int dim = dimArg(a, 1, "dim", s.size() + 1);
  Shape out = s;
  out.insert(out.begin() + dim, 1);
  Gather g = identity(a, s);
  g.shape = out;
  return g;
}

Gather squeezeGather(const OpArgs& a, const Shape& s, bool all) {
  Shape out;
  if (all) {
    for (auto d : s)
      if (d != 1) out.push_back(d);
  } else {
    // squeeze.dim (an int) or squeeze.dims (a list): the listed dims of size 1 go
    std::vector<bool> drop(s.size(), false);
    if (!s.empty())
      for (std::int64_t d : a.intListArg(1, "dim")) {
        try {
          drop[static_cast<std::size_t>(normalizeDim(d, s.size()))] = true;
        } catch (const std::out_of_range& e) {
          a.fail(e.what());
        }
      }
    for (std::size_t d = 0; d < s.size(); ++d)
      if (!drop[d] || s[d] != 1) out.push_back(s[d]);
  }
  Gather g = identity(a, s);
  g.shape = out;
  return g;
}

Gather narrowGather(const OpArgs& a, const Shape& s) {
  if (s.empty()) a.fail("narrow() of a 0-d tensor");
  const int dim = dimArg(a, 1, "dim", s.size());
  const std::int64_t extent = s[static_cast<std::size_t>(dim)];
  std::int64_t start = a.intArg(2, "start");
  const std::int64_t length = a.intArg(3, "length");
  if (start < 0) start += extent;
  if (start < 0 || length < 0 || start + length > extent)
    a.fail("narrow: start " + std::to_string(start) + " and length " + std::to_string(length) +
           " do not fit a dimension of size " + std::to_string(extent));
  return sliceMap(s, dim, SliceBounds{start, length, 1});
}

/// flip(x, dims): reversed along each listed dim (a strided view with negative strides).
Gather flipGather(const OpArgs& a, const Shape& s) {
  std::vector<std::int64_t> strides = contiguousStrides(s);
  std::int64_t base = 0;
  std::vector<bool> seen(s.size(), false);
  for (std::int64_t d : a.intListArg(1, "dims")) {
    int n = 0;
    try {
      n = normalizeDim(d, s.size());
    } catch (const std::out_of_range& e) {
      a.fail(e.what());
    }
    const auto nu = static_cast<std::size_t>(n);
    if (seen[nu]) a.fail("flip: dim " + std::to_string(d) + " appears twice");
    seen[nu] = true;
    if (s[nu] > 0) base += (s[nu] - 1) * strides[nu];
    strides[nu] = -strides[nu];
  }
  if (numel(s) == 0) return identityMap(s);
  return stridedMap(s, strides, base);
}

/// roll(x, shifts, dims): out[..., i, ...] = x[..., (i − shift) mod n, ...] along each dim; with
/// no dims, the flattened tensor is rolled by shifts[0].
Gather rollGather(const OpArgs& a, const Shape& s) {
  const auto shifts = a.intListArg(1, "shifts");
  const auto dims = a.intListArg(2, "dims", std::vector<std::int64_t>{});
  Gather g = identityMap(s);
  const auto n = static_cast<std::int64_t>(g.offsets.size());
  if (n == 0) return g;
  if (dims.empty()) {
    if (shifts.size() != 1) a.fail("roll without dims takes one shift");
    const std::int64_t k = ((shifts[0] % n) + n) % n;
    for (std::int64_t i = 0; i < n; ++i)
      g.offsets[static_cast<std::size_t>(i)] = ((i - k) % n + n) % n;
    return g;
  }
  if (shifts.size() != dims.size())
    a.fail("roll: " + std::to_string(shifts.size()) + " shifts for " + std::to_string(dims.size()) +
           " dims");
  const auto st = contiguousStrides(s);
  for (std::size_t j = 0; j < dims.size(); ++j) {
    int dim = 0;
    try {
      dim = normalizeDim(dims[j], s.size());
    } catch (const std::out_of_range& e) {
      a.fail(e.what());
    }
    const auto du = static_cast<std::size_t>(dim);
    const std::int64_t len = s[du], stride = st[du];
    const std::int64_t k = ((shifts[j] % len) + len) % len;
    if (k == 0) continue;
    // compose: the current map reads offsets[i]; rolling the output along dim moves which
    // output position reads it
    std::vector<std::int64_t> next(g.offsets.size());
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t c = (i / stride) % len;
      const std::int64_t src = i + (((c - k) % len + len) % len - c) * stride;
      next[static_cast<std::size_t>(i)] = g.offsets[static_cast<std::size_t>(src)];
    }
    g.offsets = std::move(next);
  }
  return g;
}

/// repeat(x, repeats): x tiled repeats[d] times along dim d, x's shape padded with leading 1s to
/// len(repeats) dims. Output dim d holds (k, j), k < repeats[d], j < size[d], at k·size[d] + j, so
/// the row-major output is the strided map over [r0, s0, r1, s1, ...] with stride 0 along each r.
Gather repeatGather(const OpArgs& a, const Shape& s) {
  const auto reps = a.intListArg(1, "repeats");
  if (reps.size() < s.size())
    a.fail("repeat: expected at least " + std::to_string(s.size()) + " repeat counts for " +
           shapeString(s) + ", found " + std::to_string(reps.size()));
  const std::size_t lead = reps.size() - s.size();
  const auto st = contiguousStrides(s);
  Shape sizes, out;
  std::vector<std::int64_t> strides;
  for (std::size_t d = 0; d < reps.size(); ++d) {
    if (reps[d] < 0)
      a.fail("repeat: expected repeat counts >= 0, found " + std::to_string(reps[d]));
    const std::int64_t in = d < lead ? 1 : s[d - lead];
    sizes.insert(sizes.end(), {reps[d], in});
    strides.insert(strides.end(), {0, d < lead ? 0 : st[d - lead]});
    out.push_back(reps[d] * in);
  }
  Gather g = stridedMap(sizes, strides, 0);
  g.shape = out;
  return g;
}

Gather triGather(const OpArgs& a, const Shape& s, bool lower) {
  // Not a pure gather: masked elements become zero. Encoded as offset -1 (see triRule).
  if (s.size() < 2) a.fail("tril/triu need a tensor with >= 2 dimensions, found " + shapeString(s));
  const std::int64_t diag = a.intArg(1, "diagonal", 0);
  Gather g = identity(a, s);
  const std::int64_t rows = s[s.size() - 2], cols = s.back();
  for (std::size_t i = 0; i < g.offsets.size(); ++i) {
    const std::int64_t c = static_cast<std::int64_t>(i) % cols,
                       r = (static_cast<std::int64_t>(i) / cols) % rows;
    const bool keep = lower ? c - r <= diag : c - r >= diag;
    if (!keep) g.offsets[i] = -1;
  }
  return g;
}

/// tril / triu(x, diagonal): the masked gather in every domain (zeros outside), exact.
class TriRule final : public OpRule {
 public:
  explicit TriRule(bool lower) : mLower(lower) {}

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
    if (!isFloating(x.dtype())) return std::vector<std::optional<Tensor>>{std::nullopt};
    return std::vector<std::optional<Tensor>>{
        applyIndexMap(g[0], triGather(a, x.shape(), mLower), x.dtype())};
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  std::vector<Tensor> apply(const OpArgs& a, OpContext& ctx) const {
    const Tensor& x = a.tensor(0);
    return std::vector<Tensor>{
        gatherVia(ctx.backend, x, triGather(a, x.shape(), mLower), x.dtype())};
  }

  bool mLower;  // tril (else triu)
};

// ---------------------------------------------------------------------------------------------
// cat / stack and split / chunk / unbind

/// cat / stack(tensors, dim): concatenation in every domain (legacy empty 1-D tensors skipped
/// for cat), exact; vjp slices the gradient back.
class CatRule final : public OpRule {
 public:
  explicit CatRule(bool stack) : mStack(stack) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx, true);
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    return apply(a, ctx);
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    std::vector<const Tensor*> ts = a.tensorList(0);
    const std::size_t rank = ts.empty() ? 0 : ts[0]->shape().size() + (mStack ? 1 : 0);
    // find the first non-skipped part to fix the rank for cat's legacy empty tensors
    std::size_t r = rank;
    for (const Tensor* t : ts)
      if (mStack || !(t->rank() == 1 && t->numel() == 0)) {
        r = t->shape().size() + (mStack ? 1 : 0);
        break;
      }
    const int dim = dimArg(a, 1, "dim", r, 0);
    const Shape& gs = g[0].shape();
    const std::int64_t outer = numel(Shape(gs.begin(), gs.begin() + dim));
    const std::int64_t gBlock = numel(Shape(gs.begin() + dim, gs.end()));
    std::vector<std::optional<Tensor>> out;
    std::int64_t offset = 0;
    for (const Tensor* t : ts) {
      if (!mStack && t->rank() == 1 && t->numel() == 0) {
        out.emplace_back(Tensor::full(t->shape(), t->dtype(), 0.0));
        continue;
      }
      const std::int64_t extent = mStack ? 1 : t->shape()[static_cast<std::size_t>(dim)];
      const std::int64_t block =
          gBlock / std::max<std::int64_t>(gs[static_cast<std::size_t>(dim)], 1) * extent;
      std::vector<double> v;
      v.reserve(static_cast<std::size_t>(t->numel()));
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < block; ++i)
          v.push_back(g[0].values()[static_cast<std::size_t>(o * gBlock + offset + i)]);
      offset += block;
      if (isFloating(t->dtype()))
        out.emplace_back(Tensor::point(t->shape(), t->dtype(), std::move(v)));
      else
        out.emplace_back(std::nullopt);
    }
    return out;
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// Returns the inputs (legacy empty 1-D tensors skipped for cat) and the concatenation dim.
  std::pair<std::vector<Tensor>, int> layout(const OpArgs& a) const {
    std::vector<const Tensor*> ts = a.tensorList(0);
    std::vector<Tensor> parts;
    for (const Tensor* t : ts) {
      if (!mStack && t->rank() == 1 && t->numel() == 0) continue;
      parts.push_back(*t);
    }
    if (parts.empty() && !ts.empty()) parts.push_back(*ts[0]);  // only legacy empty tensors
    if (parts.empty()) a.fail("cat of an empty list of tensors");
    const std::size_t rank = parts[0].shape().size() + (mStack ? 1 : 0);
    const int dim = dimArg(a, 1, "dim", rank, 0);
    if (mStack) {
      for (Tensor& p : parts) {
        Shape s = p.shape();
        s.insert(s.begin() + dim, 1);
        p = p.reshaped(s);
      }
    }
    for (const Tensor& p : parts) {
      if (p.shape().size() != rank) a.fail("cat: tensors of different ranks");
      for (std::size_t d = 0; d < rank; ++d)
        if (static_cast<int>(d) != dim && p.shape()[d] != parts[0].shape()[d])
          a.fail("cat: shapes " + shapeString(parts[0].shape()) + " and " + shapeString(p.shape()) +
                 " differ outside dim " + std::to_string(dim));
    }
    return std::pair{parts, dim};
  }

  /// The parts moved into place on the backend: one gather per part over the parts before it
  /// (the values are moved, never rounded: the host's bits), or nothing when it declines.
  static std::optional<Tensor> offer(Backend& backend, const std::vector<Tensor>& parts, int dim,
                                     const Shape& out, DType t) {
    const std::int64_t n = numel(out);
    if (!backend.offersIntervalKernels() || n == 0) return std::nullopt;
    const std::int64_t outer = numel(Shape(out.begin(), out.begin() + dim));
    const std::int64_t outBlock = n / std::max<std::int64_t>(outer, 1);
    std::optional<Tensor> acc;
    std::int64_t start = 0;  // the part's first element within an output block
    for (const Tensor& p : parts) {
      const std::int64_t block = numel(Shape(p.shape().begin() + dim, p.shape().end()));
      if (block == 0) continue;
      std::vector<std::int64_t> offsets(static_cast<std::size_t>(n), -1);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < block; ++i)
          offsets[static_cast<std::size_t>(o * outBlock + start + i)] = o * block + i;
      acc = acc ? offerGatherOver(backend, p, offsets, *acc, t)
                : offerGather(backend, p, offsets, out, t, Interval{0.0, 0.0});
      if (!acc) return std::nullopt;
      start += block;
    }
    return acc;
  }

  /// Concatenates; `offerToBackend`: the interval method's offer (the device-resident replay
  /// keeps a cat on the device).
  std::vector<Tensor> apply(const OpArgs& a, OpContext& ctx, bool offerToBackend = false) const {
    const auto [parts, dim] = layout(a);
    Shape out = parts[0].shape();
    out[static_cast<std::size_t>(dim)] = 0;
    bool anyInterval = false;
    for (const Tensor& p : parts) {
      out[static_cast<std::size_t>(dim)] += p.shape()[static_cast<std::size_t>(dim)];
      anyInterval = anyInterval || p.isInterval();
    }
    if (offerToBackend)
      if (auto r = offer(ctx.backend, parts, dim, out, a.outSpec().dtype))
        return std::vector<Tensor>{std::move(*r)};
    const std::int64_t outer = numel(Shape(out.begin(), out.begin() + dim));
    std::vector<double> lo, hi;
    lo.reserve(static_cast<std::size_t>(numel(out)));
    for (std::int64_t o = 0; o < outer; ++o)
      for (const Tensor& p : parts) {
        const std::int64_t block = numel(Shape(p.shape().begin() + dim, p.shape().end()));
        for (std::int64_t i = 0; i < block; ++i) {
          lo.push_back(p.lo()[static_cast<std::size_t>(o * block + i)]);
          if (anyInterval) hi.push_back(p.hi()[static_cast<std::size_t>(o * block + i)]);
        }
      }
    const DType t = a.outSpec().dtype;
    if (anyInterval)
      return std::vector<Tensor>{Tensor::interval(out, t, std::move(lo), std::move(hi))};
    return std::vector<Tensor>{Tensor::point(out, t, std::move(lo))};
  }

  bool mStack;  // stack (else cat)
};

enum class Split { Size, Sizes, Chunk, Unbind };

/// split / split_with_sizes / chunk / unbind: one output per piece along dim, exact; vjp
/// scatters every output gradient back.
class SplitRule final : public OpRule {
 public:
  explicit SplitRule(Split kind) : mKind(kind) {}

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
    if (!isFloating(x.dtype())) return std::vector<std::optional<Tensor>>{std::nullopt};
    std::vector<double> out(static_cast<std::size_t>(x.numel()), 0.0);
    const auto gs = gathers(a, x.shape());
    for (std::size_t k = 0; k < gs.size() && k < g.size(); ++k)
      for (std::size_t i = 0; i < gs[k].offsets.size(); ++i)
        out[static_cast<std::size_t>(gs[k].offsets[i])] += g[k].values()[i];
    return std::vector<std::optional<Tensor>>{Tensor::point(x.shape(), x.dtype(), std::move(out))};
  }

  std::vector<Tensor> localError(const OpArgs&, std::span<const Tensor> o,
                                 OpContext&) const override {
    return zeroLocalError(o);
  }

 private:
  /// The pieces as (start, length) along dim.
  std::pair<int, std::vector<std::pair<std::int64_t, std::int64_t>>> pieces(const OpArgs& a,
                                                                            const Shape& s) const {
    if (s.empty()) a.fail("cannot split a 0-d tensor");
    const int dim = dimArg(a, mKind == Split::Unbind ? 1 : 2, "dim", s.size(), 0);
    const std::int64_t extent = s[static_cast<std::size_t>(dim)];
    std::vector<std::pair<std::int64_t, std::int64_t>> p;
    if (mKind == Split::Sizes) {
      std::int64_t start = 0;
      for (auto len : a.intListArg(1, "split_sizes")) {
        p.emplace_back(start, len);
        start += len;
      }
      if (start != extent)
        a.fail("split_with_sizes: sizes sum to " + std::to_string(start) + ", dimension has " +
               std::to_string(extent));
    } else if (mKind == Split::Unbind) {
      for (std::int64_t i = 0; i < extent; ++i) p.emplace_back(i, 1);
    } else {
      std::int64_t size;
      if (mKind == Split::Size) {
        size = a.intArg(1, "split_size");
      } else {
        const std::int64_t chunks = a.intArg(1, "chunks");
        if (chunks <= 0) a.fail("chunk: chunks must be positive");
        size = (extent + chunks - 1) / chunks;
      }
      if (size <= 0 && extent > 0) a.fail("split size must be positive");
      if (extent == 0) p.emplace_back(0, 0);
      for (std::int64_t start = 0; start < extent; start += size)
        p.emplace_back(start, std::min(size, extent - start));
    }
    return std::pair{dim, p};
  }

  std::vector<Gather> gathers(const OpArgs& a, const Shape& s) const {
    const auto [dim, p] = pieces(a, s);
    std::vector<Gather> gs;
    const auto st = contiguousStrides(s);
    for (const auto& [start, len] : p) {
      Shape out = s;
      out[static_cast<std::size_t>(dim)] = len;
      Gather g = stridedMap(out, st, start * st[static_cast<std::size_t>(dim)]);
      if (mKind == Split::Unbind) g.shape.erase(g.shape.begin() + dim);
      gs.push_back(std::move(g));
    }
    return gs;
  }

  std::vector<Tensor> apply(const OpArgs& a, OpContext& ctx) const {
    const Tensor& x = a.tensor(0);
    std::vector<Tensor> out;
    for (const Gather& g : gathers(a, x.shape()))
      out.push_back(gatherVia(ctx.backend, x, g, x.dtype()));
    return out;
  }

  Split mKind;
};

// ---------------------------------------------------------------------------------------------
// Casts: _to_copy(self, dtype=...) and copy_(self, src) (src cast to self's dtype, broadcast)

double castPoint(double v, DType to) {
  if (to == DType::Bool) return v != 0.0 ? 1.0 : 0.0;
  if (!isFloating(to)) return std::trunc(v);
  return v;
}

/// The kernel body of a cast to `to` (stored in f when floating): kernels::UnaryOp::Round,
/// Trunc or NonZero, run by the host rule and offered to the backend alike.
kernels::UnaryOp castOp(DType to) {
  if (to == DType::Bool) return kernels::UnaryOp::NonZero;
  return isFloating(to) ? kernels::UnaryOp::Round : kernels::UnaryOp::Trunc;
}
kernels::ElementwiseModel castModel(DType to, Format f) {
  const Format s = isFloating(to) ? f : Format::Fp64;  // integers are exact in binary64
  return {s, s, 0};
}

/// _to_copy(self, dtype=...) and copy_(self, src): a correctly rounded cast (file comment);
/// localError is the rounding error of one cast to the output format (0 for an F value held
/// exactly).
class CastRule final : public OpRule {
 public:
  explicit CastRule(bool isCopy) : mIsCopy(isCopy) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const DType to = a.outSpec().dtype;
    return std::vector<Tensor>{
        mapPoint(source(a), to, [to](double v) { return castPoint(v, to); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType to = a.outSpec().dtype;
    const Tensor x = source(a);
    const Format fo = outFormat(a, ctx);
    // Unchanged storage format (and no override): the cast is the identity.
    if (isFloating(to) && isFloating(x.dtype()) && !ctx.precision.override &&
        storageFormat(to) == storageFormat(x.dtype()))
      return std::vector<Tensor>{x.withDtype(to)};
    const kernels::UnaryOp op = castOp(to);
    const kernels::ElementwiseModel model = castModel(to, fo);
    if (auto r = offerUnary(ctx.backend, op, model, x, to)) return {std::move(*r)};
    return std::vector<Tensor>{
        mapInterval(x, to, [&](Interval v) { return kernels::unaryBody(op, v, model); })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const DType to = a.outSpec().dtype;
    const Format fo = outFormat(a, ctx);
    return std::vector<Tensor>{mapPoint(source(a), to, [&](double v) {
      const double c = castPoint(v, to);
      return isFloating(to) ? roundNearest(c, fo) : c;
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    std::vector<std::optional<Tensor>> out;
    const DType to = a.outSpec().dtype;
    if (mIsCopy) {
      const Tensor& dst = a.tensor(0);
      const Tensor& src = a.tensor(1);
      out.emplace_back(isFloating(dst.dtype())
                           ? std::optional<Tensor>(Tensor::full(dst.shape(), dst.dtype(), 0.0))
                           : std::nullopt);
      if (isFloating(src.dtype()) && isFloating(to))
        out.emplace_back(sumToShape(g[0], src.shape()).withDtype(src.dtype()));
      else
        out.emplace_back(std::nullopt);
      return out;
    }
    const Tensor& x = a.tensor(0);
    if (isFloating(x.dtype()) && isFloating(to))
      out.emplace_back(g[0].withDtype(x.dtype()));
    else
      out.emplace_back(std::nullopt);
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    const DType to = a.outSpec().dtype;
    if (!isFloating(to)) return zeroLocalError(o);
    const Format fo = outFormat(a, ctx);
    // an F value held exactly converts exactly (OpContext::exactOperands)
    const bool held = ctx.operandExact(mIsCopy ? 1 : 0);
    return std::vector<Tensor>{mapPoint(o[0], to, [&](double y) {
      if (fo == Format::Fp64) return 0.0;
      return held ? storageRoundingError(y, fo) : roundingError(y, fo, fo);
    })};
  }

 private:
  /// The source tensor, broadcast to the destination shape for copy_.
  Tensor source(const OpArgs& a) const {
    if (!mIsCopy) return a.tensor(0);
    return broadcastTo(a, a.tensor(1), a.tensor(0).shape());
  }

  bool mIsCopy;  // copy_ (else _to_copy)
};

/// Registers the *_copy forms of the views (functionalized 2.x traces): the view's rule.
void registerViewCopies(OpRegistry& r) {
  const auto same = std::make_shared<const GatherRule>(identity);
  r.add("aten.alias_copy.default", same);
  r.add("aten.detach_copy.default", same);
  r.add("aten.expand_copy.default", std::make_shared<const GatherRule>(expandGather));
  r.add("aten.permute_copy.default", std::make_shared<const GatherRule>(permuteArgGather));
  r.add("aten.t_copy.default", std::make_shared<const GatherRule>(tGather));
  r.add("aten.transpose_copy.int", std::make_shared<const GatherRule>(transposeGather));
  r.add("aten.slice_copy.Tensor", std::make_shared<const GatherRule>(sliceArgGather));
  r.add("aten.narrow_copy.default", std::make_shared<const GatherRule>(narrowGather));
  r.add("aten.select_copy.int",
        std::make_shared<const GatherRule>(
            [](const OpArgs& a, const Shape& s) { return selectMap(a, s, 1); }));
  r.add("aten.unsqueeze_copy.default", std::make_shared<const GatherRule>(unsqueezeGather));
  const auto squeezeDim = std::make_shared<const GatherRule>(
      [](const OpArgs& a, const Shape& s) { return squeezeGather(a, s, false); });
  r.add("aten.squeeze_copy.dim", squeezeDim);
  r.add("aten.squeeze_copy.dims", squeezeDim);
  r.add("aten.squeeze_copy.default",
        std::make_shared<const GatherRule>(
            [](const OpArgs& a, const Shape& s) { return squeezeGather(a, s, true); }));
  r.add("aten.split_copy.Tensor", std::make_shared<const SplitRule>(Split::Size));
  r.add("aten.split_with_sizes_copy.default", std::make_shared<const SplitRule>(Split::Sizes));
  r.add("aten.unbind_copy.int", std::make_shared<const SplitRule>(Split::Unbind));
}

}  // namespace

void registerViewOps(OpRegistry& r) {
  const auto reshape = std::make_shared<const ReshapeRule>();
  for (const char* op :
       {"aten.view.default", "aten._unsafe_view.default", "aten._reshape_alias.default",
        "aten.reshape.default", "aten.view_copy.default", "aten._reshape_alias_copy.default",
        "aten._unsafe_view_copy.default"})
    r.add(op, reshape);
  const auto same = std::make_shared<const GatherRule>(identity);
  for (const char* op :
       {"aten.clone.default", "aten.detach.default", "aten.lift_fresh_copy.default",
        "aten.alias.default", "aten.contiguous.default", "aten.lift_fresh.default"})
    r.add(op, same);
  r.add("aten.expand.default", std::make_shared<const GatherRule>(expandGather));
  r.add("aten.t.default", std::make_shared<const GatherRule>(tGather));
  r.add("aten.transpose.int", std::make_shared<const GatherRule>(transposeGather));
  r.add("aten.permute.default", std::make_shared<const GatherRule>(permuteArgGather));
  r.add("aten.slice.Tensor", std::make_shared<const GatherRule>(sliceArgGather));
  r.add("aten.select.int", std::make_shared<const GatherRule>(
                               [](const OpArgs& a, const Shape& s) { return selectMap(a, s, 1); }));
  r.add("aten.unsqueeze.default", std::make_shared<const GatherRule>(unsqueezeGather));
  const auto squeezeDim = std::make_shared<const GatherRule>(
      [](const OpArgs& a, const Shape& s) { return squeezeGather(a, s, false); });
  r.add("aten.squeeze.dim", squeezeDim);
  r.add("aten.squeeze_.dim", squeezeDim);  // in place: a fresh value per node, as for tril_
  r.add("aten.squeeze.dims", squeezeDim);
  r.add("aten.squeeze_.dims", squeezeDim);
  r.add("aten.squeeze.default",
        std::make_shared<const GatherRule>(
            [](const OpArgs& a, const Shape& s) { return squeezeGather(a, s, true); }));
  r.add("aten.tril.default", std::make_shared<const TriRule>(true));
  r.add("aten.triu.default", std::make_shared<const TriRule>(false));
  r.add("aten.tril_.default", std::make_shared<const TriRule>(true));
  r.add("aten.triu_.default", std::make_shared<const TriRule>(false));
  r.add("aten.cat.default", std::make_shared<const CatRule>(false));
  r.add("aten.stack.default", std::make_shared<const CatRule>(true));
  r.add("aten.split.Tensor", std::make_shared<const SplitRule>(Split::Size));
  r.add("aten.split_with_sizes.default", std::make_shared<const SplitRule>(Split::Sizes));
  r.add("aten.chunk.default", std::make_shared<const SplitRule>(Split::Chunk));
  // The unsafe forms (nn.LSTM/GRU's decomposition on torch 2.x) give the same values; they only
  // skip autograd's view tracking.
  r.add("aten.unsafe_split.Tensor", std::make_shared<const SplitRule>(Split::Size));
  r.add("aten.unsafe_split_with_sizes.default", std::make_shared<const SplitRule>(Split::Sizes));
  r.add("aten.unsafe_chunk.default", std::make_shared<const SplitRule>(Split::Chunk));
  r.add("aten.unbind.int", std::make_shared<const SplitRule>(Split::Unbind));
  r.add("aten.narrow.default", std::make_shared<const GatherRule>(narrowGather));
  r.add("aten.flip.default", std::make_shared<const GatherRule>(flipGather));
  r.add("aten.roll.default", std::make_shared<const GatherRule>(rollGather));
  r.add("aten.repeat.default", std::make_shared<const GatherRule>(repeatGather));
  registerViewCopies(r);
  r.add("aten._to_copy.default", std::make_shared<const CastRule>(false));
  const auto to = std::make_shared<const CastRule>(false);
  for (const char* op : {"aten.to.dtype", "aten.to.dtype_layout", "aten.to.device"}) r.add(op, to);
  r.add("aten.copy_.default", std::make_shared<const CastRule>(true));
  r.add("aten.copy.default", std::make_shared<const CastRule>(true));
}

}  // namespace lossbound
