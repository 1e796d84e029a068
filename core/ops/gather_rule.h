#pragma once
// The rule of an op that only moves values by an index map of its single input's shape and its
// arguments (views, flips, repeats, pixel shuffles, nearest upsampling): the map in every domain,
// exact (zero local error), the vjp scattering the gradient back through it.

#include "core/ops/index_map.h"
#include "core/ops/op_rule.h"
#include "core/ops/rule_helpers.h"

#include <optional>
#include <span>
#include <vector>

namespace lossbound::ops {

/// Returns the index map of a single-input view op for input shape s.
using GatherFn = IndexMap (*)(const OpArgs& a, const Shape& s);

/// A single-input view (expand, t, transpose, permute, slice, select, unsqueeze, squeeze, clone,
/// ...): the index map `fn` in every domain, zero local error, vjp scatters back through it.
class GatherRule final : public OpRule {
 public:
  explicit GatherRule(GatherFn fn) : mFn(fn) {}

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
      out.emplace_back(scatterAddThrough(g[0], mFn(a, x.shape()), x.shape(), x.dtype()));
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
  std::vector<Tensor> apply(const OpArgs& a, OpContext& ctx) const {
    const Tensor& x = a.tensor(0);
    return std::vector<Tensor>{gatherVia(ctx.backend, x, mFn(a, x.shape()), x.dtype())};
  }

  GatherFn mFn;
};

}  // namespace lossbound::ops
