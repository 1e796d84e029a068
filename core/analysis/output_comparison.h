#pragma once
// Where two programs diverge: an envelope for every program output of both programs at the same
// state (the reference's checkpoint), compared output by output (docs/output-envelopes.md).
//
// If both programs compute the same mathematical function, both envelopes of an output contain its
// exact value, so they overlap; disjoint envelopes prove (interval method) or make likely (the
// others) that this output differs. Two ways to bound an output, by method:
// - elementwise (interval, ensemble): an envelope per element; an element is disjoint when the
//   two enclosures do not intersect;
// - one functional per output (first-order, probabilistic): φ(y) = Σ_e s_e·y_e with s the sign
//   pattern of the point difference, bounded to first order by one reverse pass per output and
//   program through the whole program, backward nodes included. Disjoint when the two envelopes
//   of φ are: |φ(ŷ_c) − φ(ŷ_r)| = ‖ŷ_c − ŷ_r‖₁ > B_c + B_r.
// Next to them, per output, the baselines of docs/baselines.md (allclose, fp64-RMSE rule).

#include "core/analysis/analysis_types.h"
#include "core/ir/ir.h"
#include "core/ops/precision_model.h"
#include "core/tensor/tensor_map.h"

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lossbound {

class Backend;

/// How to bound the outputs.
struct OutputComparisonOptions {
  EnvelopeMethod method = EnvelopeMethod::FirstOrder;
  PrecisionModel candidatePrecision;
  PrecisionModel referencePrecision;
  double lambda = 0;      ///< probabilistic: hoeffdingLambda(confidence)
  int ensembleSize = 32;  ///< ensemble: executions per program
  EnsembleOrder ensembleOrder = EnsembleOrder::PerProduct;  ///< ensemble: how orders are drawn
  std::uint64_t seed = 0x5eed;  ///< ensemble and the baselines' rounded executions
  bool baselines = true;        ///< also compute allclose and the fp64-RMSE rule per output
  const std::atomic<bool>* cancel = nullptr;
};

/// Returns one comparison per floating output both programs have, ranked: disjoint outputs
/// first, then by decreasing worst margin. Outputs only one program has are named in `note`.
/// Throws EvaluationError (unsupported op, missing vjp for the functional methods) or Cancelled.
std::vector<OutputComparison> compareOutputs(const Program& candidate,
                                             const TensorMap& candidateInputs,
                                             const Program& reference,
                                             const TensorMap& referenceInputs, Backend& backend,
                                             const OutputComparisonOptions& options,
                                             std::string* note = nullptr);

/// Returns the lower bound on the exact ‖a − b‖₁ from binary64 a and b: the computed sum, reduced
/// by its rounding error (each difference and each addition, γ_{n+1}, Higham 2002 eq. 3.4).
double l1DistanceLowerBound(std::span<const double> a, std::span<const double> b);

}  // namespace lossbound
