#include "core/interval/number_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lossbound {

std::string numberText(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // 17 significant digits identify every binary64 value (IEEE 754-2019 §5.12.2).
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", std::clamp(digits, 1, 17), v);
  return buf;
}

}  // namespace lossbound
