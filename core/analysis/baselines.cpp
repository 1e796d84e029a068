// allclose and the fp64-RMSE rule (see baselines.h). The arithmetic is plain binary64: these are
// the baselines' own definitions, not bounds, so no directed rounding is needed.
#include "core/analysis/baselines.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace lossbound {

namespace {

void checkLengths(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string(what) + ": expected equally long values, found " +
                                std::to_string(a) + " and " + std::to_string(b));
}

double rmse(std::span<const double> x, std::span<const double> y) {
  if (x.empty()) return 0.0;
  long double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double d = static_cast<long double>(x[i]) - y[i];
    s += d * d;
  }
  return static_cast<double>(std::sqrt(s / static_cast<long double>(x.size())));
}

}  // namespace

AllcloseOutcome allcloseCheck(std::span<const double> a, std::span<const double> b, double rtol,
                              double atol) {
  checkLengths(a.size(), b.size(), "allclose");
  AllcloseOutcome out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a[i] - b[i]);
    const double tol = atol + rtol * std::abs(b[i]);
    // torch.allclose: equal infinities are close; NaN never is (equal_nan=False).
    if (a[i] == b[i]) continue;
    const double ratio = diff / tol;
    if (!(diff <= tol)) out.pass = false;
    if (std::isnan(ratio) || !(ratio <= out.worstRatio)) out.worstRatio = ratio;
  }
  return out;
}

double rmseMultiplier(Format format) {
  return format == Format::Fp16 || format == Format::Bf16 ? 3.0 : 2.0;
}

RmseOutcome rmseCheck(std::span<const double> res, std::span<const double> ref,
                      std::span<const double> fp64, Format format, double tol) {
  checkLengths(res.size(), fp64.size(), "fp64-RMSE rule");
  checkLengths(ref.size(), fp64.size(), "fp64-RMSE rule");
  RmseOutcome out;
  out.multiplier = rmseMultiplier(format);
  out.error = rmse(res, fp64);
  out.allowance = out.multiplier * rmse(ref, fp64) + tol / 10.0;
  out.pass = out.error <= out.allowance;  // false for NaN
  return out;
}

}  // namespace lossbound
