#pragma once
// Direct calls of one op rule's domains on concrete inputs, for checks the harness does not make:
// a backward op against the vjp of its forward op, and the first-order behaviour of a rule next to
// its breakpoints (inputs named "in0", "in1", ... as in op_harness.h).

#include "core/backend.h"
#include "core/ops/registry.h"
#include "tests/core/ops/op_harness.h"

#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace lossbound::test {

/// One node of an OpCase bound to its inputs; output shapes are taken from point().
class RuleCall {
 public:
  /// Binds the case; throws std::runtime_error when its op is not registered.
  explicit RuleCall(const OpCase& c) : mCase(c), mInputs(c.inputs) {
    mRule = opRegistry().find(c.op);
    if (!mRule) throw std::runtime_error("op " + c.op + " is not registered");
    mNode.name = "case";
    mNode.op = c.op;
    mNode.args = c.args;
    mNode.kwargs = c.kwargs;
    for (DType t : c.outDtypes) mNode.outputs.push_back(TensorSpec{{}, t});
    OpContext ctx = context(nullptr);
    mPoint = mRule->point(args(), ctx);
    for (std::size_t k = 0; k < mPoint.size() && k < mNode.outputs.size(); ++k)
      mNode.outputs[k].shape = mPoint[k].shape();
  }

  /// Returns the point outputs.
  const std::vector<Tensor>& point() const { return mPoint; }
  /// Returns the interval outputs.
  std::vector<Tensor> interval() const {
    OpContext ctx = context(nullptr);
    return mRule->interval(args(), ctx);
  }
  /// Returns one randomized execution.
  std::vector<Tensor> random(std::mt19937_64& rng) const {
    OpContext ctx = context(&rng);
    return mRule->random(args(), ctx);
  }
  /// Returns the vjp at the point outputs for the given output gradients.
  std::vector<std::optional<Tensor>> vjp(const std::vector<Tensor>& outGrads) const {
    OpContext ctx = context(nullptr);
    return mRule->vjp(args(), mPoint, outGrads, ctx);
  }
  /// Returns the local error bounds at the point outputs.
  std::vector<Tensor> localError() const {
    OpContext ctx = context(nullptr);
    return mRule->localError(args(), mPoint, ctx);
  }
  /// Returns the probabilistic local error terms at the point outputs (empty: none).
  std::vector<Tensor> probabilisticLocalError() const {
    OpContext ctx = context(nullptr);
    return mRule->probabilisticLocalError(args(), mPoint, ctx);
  }

 private:
  static Backend& backend() {
    static std::unique_ptr<Backend> b = createCpuBackend();
    return *b;
  }
  OpContext context(std::mt19937_64* rng) const {
    return OpContext{mCase.precision, backend(), rng};
  }
  OpArgs args() const {
    return OpArgs(mNode, [this](const ValueRef& r) -> const Tensor& {
      return mInputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
    });
  }

  OpCase mCase;
  std::vector<Tensor> mInputs;
  Node mNode;
  const OpRule* mRule = nullptr;
  std::vector<Tensor> mPoint;
};

}  // namespace lossbound::test
