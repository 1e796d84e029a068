#include "core/ops/registry.h"

#include "core/ops/families.h"

namespace lossbound {

void OpRegistry::add(std::string op, std::shared_ptr<const OpRule> rule) {
  mRules[std::move(op)] = std::move(rule);
}

const OpRule* OpRegistry::find(std::string_view op) const {
  if (auto it = mRules.find(op); it != mRules.end()) return it->second.get();
  // "aten.add.Tensor" → packet "aten.add"
  const auto lastDot = op.rfind('.');
  if (lastDot != std::string_view::npos && lastDot > 5) {
    if (auto it = mRules.find(op.substr(0, lastDot)); it != mRules.end()) return it->second.get();
  }
  return nullptr;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(mRules.size());
  for (const auto& [name, rule] : mRules) out.push_back(name);
  return out;
}

const OpRegistry& opRegistry() {
  // The explicit list of op families; each family file registers its ops by name.
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerElementwiseOps(r);
    registerMatmulOps(r);
    registerReductionOps(r);
    registerViewOps(r);
    registerCreationOps(r);
    registerOptimizerOps(r);
    registerActivationOps(r);
    registerSoftmaxOps(r);
    registerNormOps(r);
    registerBatchNormOps(r);
    registerGroupNormOps(r);
    registerEmbeddingOps(r);
    registerLossOps(r);
    registerPiecewiseActivationOps(r);
    registerSoftplusMishOps(r);
    registerMaxPoolOps(r);
    registerAvgPoolOps(r);
    registerConvOps(r);
    registerSliceScatterOps(r);
    registerPadOps(r);
    registerCumsumOps(r);
    registerGatherScatterOps(r);
    registerAdvancedIndexOps(r);
    return r;
  }();
  return registry;
}

}  // namespace lossbound
