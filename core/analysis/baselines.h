#pragma once
// The two checks people use without bounds, computed next to the envelope verdict so the user sees
// where they agree with it and where not (docs/baselines.md says what is compared and why):
// - allclose, as torch.allclose: |a − b| <= atol + rtol·|b| elementwise (rtol 1e-5, atol 1e-8);
// - the fp64-RMSE rule of PyTorch's accuracy checker (torch._dynamo.utils.same with fp64_ref):
//   RMSE(res, fp64) <= m·RMSE(ref, fp64) + tol/10, tol = 1e-4, m = 3 when res is fp16 or bf16,
//   else 2.
// Both are plain arithmetic on values the step replay produced; nothing here evaluates a program.

#include "core/interval/precision.h"

#include <span>

namespace lossbound {

/// The default tolerances of torch.allclose and of the fp64-RMSE rule.
inline constexpr double kAllcloseRtol = 1e-5;
inline constexpr double kAllcloseAtol = 1e-8;
inline constexpr double kRmseTol = 1e-4;

/// What allclose says about `a` against `b` (the second argument of torch.allclose).
struct AllcloseOutcome {
  bool pass = true;       ///< every element within atol + rtol·|b| (false for any NaN)
  double worstRatio = 0;  ///< max over elements of |a − b| / (atol + rtol·|b|); > 1 fails
};

/// What the fp64-RMSE rule says.
struct RmseOutcome {
  bool pass = true;       ///< error <= allowance (false for any NaN)
  double error = 0;       ///< RMSE(res, fp64)
  double allowance = 0;   ///< m·RMSE(ref, fp64) + tol/10
  double multiplier = 2;  ///< m
};

/// Returns torch.allclose(a, b, rtol, atol) elementwise over equally long spans; throws
/// std::invalid_argument when the lengths differ.
AllcloseOutcome allcloseCheck(std::span<const double> a, std::span<const double> b,
                              double rtol = kAllcloseRtol, double atol = kAllcloseAtol);

/// Returns the multiplier m of the fp64-RMSE rule for a result stored in `format`: 3 for fp16 and
/// bf16, 2 otherwise.
double rmseMultiplier(Format format);

/// Returns the fp64-RMSE rule for `res` and `ref` against `fp64` (equally long spans) with the
/// multiplier of `format`; throws std::invalid_argument when the lengths differ.
RmseOutcome rmseCheck(std::span<const double> res, std::span<const double> ref,
                      std::span<const double> fp64, Format format, double tol = kRmseTol);

}  // namespace lossbound
