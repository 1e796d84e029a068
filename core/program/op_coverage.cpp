#include "core/program/op_coverage.h"

#include "core/ops/registry.h"

#include <set>

namespace lossbound {

std::vector<UnsupportedOp> unsupportedOps(const Program& program) {
  std::vector<UnsupportedOp> out;
  const OpRegistry& registry = opRegistry();
  for (const Node& n : program.nodes)
    if (!registry.find(n.op)) out.push_back({n.name, n.op});
  return out;
}

std::vector<std::string> unsupportedOpNames(const Program& program) {
  std::set<std::string> names;
  for (const UnsupportedOp& u : unsupportedOps(program)) names.insert(u.op);
  return {names.begin(), names.end()};
}

}  // namespace lossbound
