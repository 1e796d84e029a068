#pragma once
// TRANSITIONAL (removed once every rule is an OpRule subclass): an OpRule built from lambdas.

#include "core/ops/nn_support.h"
#include "core/ops/op_rule.h"

#include <functional>
#include <memory>

namespace lossbound::ops {

/// The five functions of an OpRule.
struct RuleFns {
  std::function<std::vector<Tensor>(const OpArgs&, OpContext&)> point;
  std::function<std::vector<Tensor>(const OpArgs&, OpContext&)> interval;
  std::function<std::vector<Tensor>(const OpArgs&, OpContext&)> random;
  std::function<std::vector<std::optional<Tensor>>(const OpArgs&, std::span<const Tensor>,
                                                   std::span<const Tensor>, OpContext&)>
      vjp;
  std::function<std::vector<Tensor>(const OpArgs&, std::span<const Tensor>, OpContext&)> localError;
};

namespace lambda_detail {
class LambdaRule final : public OpRule {
 public:
  explicit LambdaRule(RuleFns fns) : mFns(std::move(fns)) {}
  std::vector<Tensor> point(const OpArgs& a, OpContext& c) const override {
    return mFns.point(a, c);
  }
  std::vector<Tensor> interval(const OpArgs& a, OpContext& c) const override {
    return mFns.interval(a, c);
  }
  std::vector<Tensor> random(const OpArgs& a, OpContext& c) const override {
    return mFns.random(a, c);
  }
  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> o,
                                         std::span<const Tensor> g, OpContext& c) const override {
    return mFns.vjp(a, o, g, c);
  }
  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& c) const override {
    return mFns.localError(a, o, c);
  }

 private:
  RuleFns mFns;
};
}  // namespace lambda_detail

/// Returns an OpRule that forwards to fns (every function must be set).
inline std::shared_ptr<const OpRule> makeRule(RuleFns fns) {
  return std::make_shared<lambda_detail::LambdaRule>(std::move(fns));
}

/// Returns an OpRule that forwards to the member functions of `rule`.
template <typename R>
std::shared_ptr<const OpRule> makeRuleOf(R rule) {
  auto r = std::make_shared<const R>(std::move(rule));
  return makeRule({[r](const OpArgs& a, OpContext& c) { return r->point(a, c); },
                   [r](const OpArgs& a, OpContext& c) { return r->interval(a, c); },
                   [r](const OpArgs& a, OpContext& c) { return r->random(a, c); },
                   [r](const OpArgs& a, std::span<const Tensor> o, std::span<const Tensor> g,
                       OpContext& c) { return r->vjp(a, o, g, c); },
                   [r](const OpArgs& a, std::span<const Tensor> o, OpContext& c) {
                     return r->localError(a, o, c);
                   }});
}

namespace nn {
/// Returns localErrorVia for a lambda rule.
inline std::vector<Tensor> localErrorVia(const RuleFns& fns, const OpArgs& args,
                                         std::span<const Tensor> outputs, OpContext& ctx) {
  const std::vector<Tensor> encl = fns.interval(args, ctx);
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < outputs.size() && k < encl.size(); ++k)
    out.push_back(localErrorFromEnclosure(outputs[k], encl[k]));
  return out;
}
}  // namespace nn

}  // namespace lossbound::ops
