// Shared readers of op arguments (reduction dims, dtype, tensor-or-number).
#include "core/ops/arg_readers.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lossbound::ops {

std::vector<int> reduceDims(const OpArgs& args, std::size_t i, std::string_view name, int rank) {
  const IrValue* v = nullptr;
  if (i < args.size() && args.arg(i).kind != IrValue::Kind::None)
    v = &args.arg(i);
  else if (const IrValue* k = args.kwarg(name); k && k->kind != IrValue::Kind::None)
    v = k;
  std::vector<int> dims;
  if (v &&
      (v->kind == IrValue::Kind::Int || (v->kind == IrValue::Kind::List && !v->list.empty()))) {
    for (std::int64_t d : args.intListArg(i, name)) {
      try {
        dims.push_back(normalizeDim(d, static_cast<std::size_t>(rank)));
      } catch (const std::out_of_range& e) {
        args.fail(e.what());
      }
    }
    if (rank == 0) dims.clear();
  } else {
    for (int d = 0; d < rank; ++d) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

std::optional<DType> dtypeArg(const OpArgs& args, std::size_t i, std::string_view name) {
  if (i < args.size() && args.arg(i).kind == IrValue::Kind::DType) return args.arg(i).dtypeValue;
  if (const IrValue* k = args.kwarg(name); k && k->kind == IrValue::Kind::DType)
    return k->dtypeValue;
  return std::nullopt;
}

bool isNumber(const OpArgs& args, std::size_t i) {
  const auto k = args.arg(i).kind;
  return k == IrValue::Kind::Int || k == IrValue::Kind::Float || k == IrValue::Kind::Bool;
}

std::optional<double> optionalNumber(const OpArgs& args, std::size_t i, std::string_view name) {
  if (isNumber(args, i)) return args.numberArg(i, name);
  if (i < args.size() && args.arg(i).kind != IrValue::Kind::None)
    args.fail("argument " + std::to_string(i) + " should be a number or None");
  if (const IrValue* k = args.kwarg(name); k && k->kind != IrValue::Kind::None)
    return args.numberArg(args.size(), name);
  return std::nullopt;
}

Tensor tensorOrScalar(const OpArgs& args, std::size_t i, DType scalarDtype) {
  if (args.isTensor(i)) return args.tensor(i);
  if (!isNumber(args, i))
    args.fail("argument " + std::to_string(i) + " should be a tensor or a number");
  return Tensor::scalar(args.numberArg(i, ""), scalarDtype);
}

}  // namespace lossbound::ops
