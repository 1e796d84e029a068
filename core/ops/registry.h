#pragma once
// The explicit registry of supported aten ops. An op that is not here is an error that names it.

#include "core/ops/op_rule.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// Maps aten op names to their rules.
class OpRegistry {
 public:
  /// Registers `rule` for `op`, either a full overload ("aten.add.Tensor") or a packet
  /// ("aten.add", matching every overload not registered more specifically).
  void add(std::string op, std::shared_ptr<const OpRule> rule);
  /// Returns the rule for an overload ("aten.add.Tensor"): exact match first, then its packet;
  /// nullptr when unsupported.
  const OpRule* find(std::string_view op) const;
  /// Returns all registered names, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::shared_ptr<const OpRule>, std::less<>> mRules;
};

/// Returns the registry with every supported op (built once, thread-safe).
const OpRegistry& opRegistry();

}  // namespace lossbound
