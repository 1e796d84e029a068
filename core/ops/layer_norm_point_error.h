#pragma once
// The binary64 layer norm's own rounding error in closed form (LayerNormRule::pointError): the
// first-order evaluators' term for the point evaluation they are centred on, without running the
// rigorous moment enclosures a second time under a binary64 model. Derivation: the .cpp.

#include <cstdint>
#include <optional>
#include <vector>

namespace lossbound::ops::norm {

/// Per-element bounds of |point − exact| for the three outputs of the two-pass layer norm as
/// LayerNormRule::point computes it in binary64.
struct LayerNormPointErrors {
  std::vector<double> out;   ///< one per element of x
  std::vector<double> mean;  ///< one per row
  std::vector<double> rstd;  ///< one per row
};

/// Bounds |ŷ − y|, |μ̂ − μ| and |r̂ − r| for `rows` rows of n elements: x the exact inputs, w and
/// b the weight and bias (null: None), y, mean and rstd the point outputs (binary64 values of
/// LayerNormRule::point on these inputs), y, μ, r the exact layer norm of the same values with
/// the same binary64 eps. nullopt where a value is not finite or the variance's relative error
/// may reach 1/2 (the caller then bounds the point error another way).
std::optional<LayerNormPointErrors> layerNormPointErrors(const double* x, const double* w,
                                                         const double* b, std::int64_t rows,
                                                         std::int64_t n, double eps,
                                                         const double* y, const double* mean,
                                                         const double* rstd);

}  // namespace lossbound::ops::norm
