// Exactly held values of the first-order evaluators (see the header).
#include "core/program/exact_values.h"

#include <algorithm>
#include <exception>

namespace lossbound {

std::vector<bool> ExactValues::operands(
    const OpArgs& args, const std::function<std::size_t(const std::string&)>& slotOf) const {
  std::vector<bool> out;
  out.reserve(args.tensorRefs().size());
  for (const ValueRef& r : args.tensorRefs()) {
    const std::size_t slot = slotOf(r.name);
    const auto k = static_cast<std::size_t>(r.index);
    out.push_back(slot < mLeaves || (k < mFlags[slot].size() && mFlags[slot][k] != 0));
  }
  return out;
}

void ExactValues::evaluated(std::size_t slot, const OpRule& rule, const OpArgs& args,
                            const std::vector<Tensor>& outputs, OpContext& ctx,
                            const std::vector<bool>& operandFlags) {
  if (!std::all_of(operandFlags.begin(), operandFlags.end(), [](bool b) { return b; })) return;
  std::vector<Tensor> local;
  ctx.exactOperands = &operandFlags;
  try {
    local = rule.localError(args, outputs, ctx);
  } catch (const std::exception&) {  // the reverse pass reports it if the node matters
    local.clear();
  }
  ctx.exactOperands = nullptr;
  if (local.size() != outputs.size()) return;
  std::vector<char> flags(outputs.size(), 0);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto e = local[k].values();
    flags[k] = e.size() == static_cast<std::size_t>(outputs[k].numel()) &&
               std::all_of(e.begin(), e.end(), [](double v) { return v == 0.0; });
  }
  mFlags[slot] = std::move(flags);
}

}  // namespace lossbound
