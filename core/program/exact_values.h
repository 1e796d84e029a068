#pragma once
// Which values the candidate holds exactly at their point values, for the first-order evaluators.
//
// The first-order local error r_k of an operation bounds its rounding at the point operands. That
// is a first-order bound of its rounding at the candidate's operands only where it is continuous
// in them: an operation whose point result is representable rounds nothing there, but a nearby
// operand (one carrying upstream error) moves the result off the grid, a first-order rounding. So
// a rule may take such a rounding as zero only when the candidate holds its operands exactly
// (OpContext::exactOperands): the program inputs, the constants, and the outputs of nodes whose
// operands are all exact and whose local error is zero everywhere (an attention mask cast to the
// dtype, 1 − m, (1 − m)·finfo.min, views and selections of exact values, integer arithmetic).

#include "core/ops/op_rule.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace lossbound {

class ExactValues {
 public:
  /// `leaves`: the input and constant slots (exact); `slots`: every slot, the nodes' after them.
  ExactValues(std::size_t leaves, std::size_t slots) : mLeaves(leaves), mFlags(slots) {}

  /// Returns one flag per OpArgs::tensorInputs() entry; `slotOf` maps a value name to its slot.
  std::vector<bool> operands(const OpArgs& args,
                             const std::function<std::size_t(const std::string&)>& slotOf) const;

  /// After node `slot`'s point evaluation: when its operands are all exact, runs the rule's local
  /// error under `ctx` and marks as exact the outputs whose bound is zero everywhere. A rule that
  /// cannot give a local error leaves its outputs inexact.
  void evaluated(std::size_t slot, const OpRule& rule, const OpArgs& args,
                 const std::vector<Tensor>& outputs, OpContext& ctx,
                 const std::vector<bool>& operandFlags);

 private:
  std::size_t mLeaves;
  std::vector<std::vector<char>> mFlags;  // per node slot: one per output; empty: none exact
};

}  // namespace lossbound
