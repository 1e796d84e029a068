#pragma once
// Which nodes of a program the engine can evaluate: the op coverage check against opRegistry().
// Kept out of the IR parser so that reading and parsing a run file need no op registry.

#include "core/ir/ir.h"

#include <string>
#include <vector>

namespace lossbound {

/// One node whose op the engine has no rule for.
struct UnsupportedOp {
  std::string node;  ///< the node name ("gelu_3")
  std::string op;    ///< the aten overload ("aten.gelu.default")
};

/// Returns every node whose op is not in opRegistry(), in program order.
std::vector<UnsupportedOp> unsupportedOps(const Program& program);

/// Returns the distinct ops of unsupportedOps(program), sorted.
std::vector<std::string> unsupportedOpNames(const Program& program);

}  // namespace lossbound
