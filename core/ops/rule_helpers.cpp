// Ready-made localError and vjp results for exact and non-differentiable ops.
#include "core/ops/rule_helpers.h"

namespace lossbound::ops {

std::vector<Tensor> zeroLocalError(std::span<const Tensor> outputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : outputs) out.push_back(Tensor::full(t.shape(), t.dtype(), 0.0));
  return out;
}

std::vector<std::optional<Tensor>> noGradients(const OpArgs& args) {
  std::vector<std::optional<Tensor>> out;
  for (const Tensor* t : args.tensorInputs()) {
    if (isFloating(t->dtype()))
      out.emplace_back(Tensor::full(t->shape(), t->dtype(), 0.0));
    else
      out.emplace_back(std::nullopt);
  }
  return out;
}

}  // namespace lossbound::ops
