#include "core/interval/format_names.h"

#include <array>
#include <utility>

namespace lossbound {

std::string_view formatName(Format f) {
  switch (f) {
    case Format::Fp64:
      return "fp64";
    case Format::Fp32:
      return "fp32";
    case Format::Tf32:
      return "tf32";
    case Format::Bf16:
      return "bf16";
    case Format::Fp16:
      return "fp16";
  }
  return "fp64";
}

std::optional<Format> parseFormat(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  static constexpr std::array<std::pair<std::string_view, Format>, 13> kNames{{
      {"fp64", Format::Fp64},
      {"float64", Format::Fp64},
      {"double", Format::Fp64},
      {"fp32", Format::Fp32},
      {"float32", Format::Fp32},
      {"float", Format::Fp32},
      {"tf32", Format::Tf32},
      {"bf16", Format::Bf16},
      {"bfloat16", Format::Bf16},
      {"fp16", Format::Fp16},
      {"float16", Format::Fp16},
      {"half", Format::Fp16},
      {"binary64", Format::Fp64},
  }};
  for (const auto& [n, f] : kNames)
    if (n == name) return f;
  return std::nullopt;
}

}  // namespace lossbound
