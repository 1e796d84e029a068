#pragma once
// The explicit registry of supported aten ops. An op that is not here is an error that names it.

#include "core/ops/op_rule.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// One op family: the ops one register function adds, with what their rules bound.
struct OpFamily {
  std::string name;              ///< short name ("Elementwise")
  std::string description;       ///< one line: the ops and where their bounds come from
  std::vector<std::string> ops;  ///< registered names in registration order
};

/// Maps aten op names to their rules.
class OpRegistry {
 public:
  /// Starts a family: the names added after this call belong to it (until the next call).
  void beginFamily(std::string name, std::string description);
  /// Registers `rule` for `op`, either a full overload ("aten.add.Tensor") or a packet
  /// ("aten.add", matching every overload not registered more specifically). A name registered
  /// again is replaced and moves to the current family.
  void add(std::string op, std::shared_ptr<const OpRule> rule);
  /// Returns the rule for an overload ("aten.add.Tensor"): exact match first, then its packet;
  /// nullptr when unsupported.
  const OpRule* find(std::string_view op) const;
  /// Returns all registered names, sorted.
  std::vector<std::string> names() const;
  /// Returns the families in registration order (names added before any beginFamily call are in
  /// a family named "Other").
  const std::vector<OpFamily>& families() const { return mFamilies; }

 private:
  std::map<std::string, std::shared_ptr<const OpRule>, std::less<>> mRules;
  std::vector<OpFamily> mFamilies;
};

/// Returns the registry with every supported op (built once, thread-safe).
const OpRegistry& opRegistry();

}  // namespace lossbound
