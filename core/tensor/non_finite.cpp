#include "core/tensor/non_finite.h"

#include "core/interval/number_text.h"

#include <cmath>

namespace lossbound {

NonFiniteValues findNonFinite(const Tensor& t) {
  NonFiniteValues out;
  out.numel = t.numel();
  const auto lo = t.lo(), hi = t.hi();
  for (std::size_t i = 0; i < lo.size(); ++i) {
    const double a = lo[i], b = hi[i];
    if (std::isfinite(a) && std::isfinite(b)) continue;
    if (std::isnan(a) || std::isnan(b))
      ++out.nan;
    else
      ++out.inf;
    if (out.first < 0) {
      out.first = static_cast<std::int64_t>(i);
      out.firstValue = std::isfinite(a) ? b : a;
    }
  }
  return out;
}

std::vector<NonFiniteValues> findNonFinite(const TensorMap& tensors) {
  std::vector<NonFiniteValues> out;
  for (const auto& [name, t] : tensors) {
    NonFiniteValues v = findNonFinite(t);
    if (v.first < 0) continue;
    v.name = name;
    out.push_back(std::move(v));
  }
  return out;
}

std::string describeNonFinite(const NonFiniteValues& v, const std::string& name) {
  std::string what;
  if (v.nan > 0) what = "NaN at " + std::to_string(v.nan);
  if (v.inf > 0)
    what += (what.empty() ? "" : " and ") + std::string("inf at ") + std::to_string(v.inf);
  return (name.empty() ? v.name : name) + ": " + what + " of " + std::to_string(v.numel) +
         " elements (first at flat index " + std::to_string(v.first) + ": " +
         numberText(v.firstValue) + ")";
}

}  // namespace lossbound
