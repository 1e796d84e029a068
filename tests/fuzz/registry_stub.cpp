// An empty op registry for the fuzz build. Debian's clang 14 cannot compile the op families
// (they capture structured bindings in lambdas, which clang supports from version 16), so the
// fuzz targets link the parser and reader without them: every op reads as unsupported, which
// still exercises the unknown-op findings.
#include "core/ops/registry.h"

namespace lossbound {

void OpRegistry::add(std::string op, std::shared_ptr<const OpRule> rule) {
  mRules[std::move(op)] = std::move(rule);
}

const OpRule* OpRegistry::find(std::string_view op) const {
  auto it = mRules.find(op);
  return it == mRules.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::names() const { return {}; }

const OpRegistry& opRegistry() {
  static const OpRegistry registry;
  return registry;
}

}  // namespace lossbound
