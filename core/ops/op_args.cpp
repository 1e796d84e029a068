#include "core/ops/op_rule.h"

#include <string>

namespace lossbound {

namespace {
const IrValue& noneValue() {
  static const IrValue none;
  return none;
}
}  // namespace

const IrValue& OpArgs::arg(std::size_t i) const {
  return i < mNode->args.size() ? mNode->args[i] : noneValue();
}

const IrValue* OpArgs::kwarg(std::string_view name) const {
  auto it = mNode->kwargs.find(std::string(name));
  return it == mNode->kwargs.end() ? nullptr : &it->second;
}

const IrValue* OpArgs::find(std::size_t i, std::string_view name) const {
  if (i < mNode->args.size() && mNode->args[i].kind != IrValue::Kind::None) return &mNode->args[i];
  if (!name.empty())
    if (const IrValue* v = kwarg(name); v && v->kind != IrValue::Kind::None) return v;
  return nullptr;
}

void OpArgs::fail(const std::string& message) const {
  throw OpError("node '" + mNode->name + "' (" + mNode->op + "): " + message);
}

bool OpArgs::isTensor(std::size_t i) const { return arg(i).kind == IrValue::Kind::Ref; }

const Tensor& OpArgs::tensor(std::size_t i) const {
  if (!isTensor(i)) fail("argument " + std::to_string(i) + " should be a tensor reference");
  // tensors were collected in order of appearance; find the position of argument i's ref
  std::size_t pos = 0;
  auto countRefs = [](const IrValue& v, auto& self) -> std::size_t {
    if (v.kind == IrValue::Kind::Ref) return 1;
    std::size_t n = 0;
    if (v.kind == IrValue::Kind::List)
      for (const auto& e : v.list) n += self(e, self);
    return n;
  };
  for (std::size_t k = 0; k < i; ++k) pos += countRefs(mNode->args[k], countRefs);
  return *mTensors.at(pos);
}

std::vector<const Tensor*> OpArgs::tensorList(std::size_t i) const {
  std::vector<const Tensor*> out = optionalTensorList(i);
  for (const Tensor* t : out)
    if (!t) fail("argument " + std::to_string(i) + " should list only tensors");
  return out;
}

std::vector<const Tensor*> OpArgs::optionalTensorList(std::size_t i) const {
  const IrValue& v = arg(i);
  if (v.kind != IrValue::Kind::List)
    fail("argument " + std::to_string(i) + " should be a list of tensors");
  std::size_t pos = 0;
  auto countRefs = [](const IrValue& x, auto& self) -> std::size_t {
    if (x.kind == IrValue::Kind::Ref) return 1;
    std::size_t n = 0;
    if (x.kind == IrValue::Kind::List)
      for (const auto& e : x.list) n += self(e, self);
    return n;
  };
  for (std::size_t k = 0; k < i; ++k) pos += countRefs(mNode->args[k], countRefs);
  std::vector<const Tensor*> out;
  for (const IrValue& e : v.list) {
    if (e.kind == IrValue::Kind::Ref)
      out.push_back(mTensors.at(pos++));
    else if (e.kind == IrValue::Kind::None)
      out.push_back(nullptr);
    else
      fail("argument " + std::to_string(i) + " should list only tensors and None");
  }
  return out;
}

std::int64_t OpArgs::intArg(std::size_t i, std::string_view name,
                            std::optional<std::int64_t> fallback) const {
  const IrValue* v = find(i, name);
  if (!v) {
    if (fallback) return *fallback;
    fail("missing integer argument " + std::to_string(i) +
         (name.empty() ? "" : " (" + std::string(name) + ")"));
  }
  if (v->kind == IrValue::Kind::Int) return v->intValue;
  if (v->kind == IrValue::Kind::Bool) return v->boolValue ? 1 : 0;
  fail("argument " + std::to_string(i) + " should be an integer");
}

double OpArgs::numberArg(std::size_t i, std::string_view name,
                         std::optional<double> fallback) const {
  const IrValue* v = find(i, name);
  if (!v) {
    if (fallback) return *fallback;
    fail("missing number argument " + std::to_string(i) +
         (name.empty() ? "" : " (" + std::string(name) + ")"));
  }
  if (v->kind == IrValue::Kind::Float) return v->floatValue;
  if (v->kind == IrValue::Kind::Int) return static_cast<double>(v->intValue);
  if (v->kind == IrValue::Kind::Bool) return v->boolValue ? 1.0 : 0.0;
  fail("argument " + std::to_string(i) + " should be a number");
}

bool OpArgs::boolArg(std::size_t i, std::string_view name, std::optional<bool> fallback) const {
  const IrValue* v = find(i, name);
  if (!v) {
    if (fallback) return *fallback;
    fail("missing bool argument " + std::to_string(i) +
         (name.empty() ? "" : " (" + std::string(name) + ")"));
  }
  if (v->kind == IrValue::Kind::Bool) return v->boolValue;
  if (v->kind == IrValue::Kind::Int) return v->intValue != 0;
  fail("argument " + std::to_string(i) + " should be a bool");
}

std::vector<std::int64_t> OpArgs::intListArg(
    std::size_t i, std::string_view name, std::optional<std::vector<std::int64_t>> fallback) const {
  const IrValue* v = find(i, name);
  if (!v) {
    if (fallback) return *fallback;
    fail("missing int-list argument " + std::to_string(i) +
         (name.empty() ? "" : " (" + std::string(name) + ")"));
  }
  if (v->kind == IrValue::Kind::Int) return {v->intValue};
  if (v->kind != IrValue::Kind::List)
    fail("argument " + std::to_string(i) + " should be a list of integers");
  std::vector<std::int64_t> out;
  for (const IrValue& e : v->list) {
    if (e.kind != IrValue::Kind::Int)
      fail("argument " + std::to_string(i) + " should list only integers");
    out.push_back(e.intValue);
  }
  return out;
}

}  // namespace lossbound
