#include "core/tensor/dtype.h"

#include <array>
#include <utility>

namespace lossbound {

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::Float64:
      return "float64";
    case DType::Float32:
      return "float32";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float16:
      return "float16";
    case DType::Int64:
      return "int64";
    case DType::Int32:
      return "int32";
    case DType::Int16:
      return "int16";
    case DType::Int8:
      return "int8";
    case DType::UInt8:
      return "uint8";
    case DType::Bool:
      return "bool";
  }
  return "float64";
}

std::optional<DType> parseDType(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  static constexpr std::array<std::pair<std::string_view, DType>, 17> kNames{{
      {"float64", DType::Float64},
      {"double", DType::Float64},
      {"float32", DType::Float32},
      {"float", DType::Float32},
      {"bfloat16", DType::BFloat16},
      {"float16", DType::Float16},
      {"half", DType::Float16},
      {"int64", DType::Int64},
      {"long", DType::Int64},
      {"int32", DType::Int32},
      {"int", DType::Int32},
      {"int16", DType::Int16},
      {"short", DType::Int16},
      {"int8", DType::Int8},
      {"uint8", DType::UInt8},
      {"bool", DType::Bool},
      {"bfloat", DType::BFloat16},
  }};
  for (const auto& [n, t] : kNames)
    if (n == name) return t;
  return std::nullopt;
}

bool isFloating(DType t) { return storageFormat(t).has_value(); }

std::optional<Format> storageFormat(DType t) {
  switch (t) {
    case DType::Float64:
      return Format::Fp64;
    case DType::Float32:
      return Format::Fp32;
    case DType::BFloat16:
      return Format::Bf16;
    case DType::Float16:
      return Format::Fp16;
    default:
      return std::nullopt;
  }
}

}  // namespace lossbound
