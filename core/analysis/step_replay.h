#pragma once
// One replay: the envelope of a step program's loss on given inputs by one envelope method
// (ARCHITECTURE §1), and the adaptation of another run's checkpoint to a program's inputs.
//
// First-order and probabilistic envelopes are centred on the binary64 point evaluation, which has
// rounding errors of its own. Its first-order bound (the same adjoints with binary64 local errors,
// FirstOrderResult::pointBound, ≈ (2^-53 / u)·bound) is added to the radius, plus outward rounding
// of the endpoints.

#include "core/analysis/analysis_types.h"
#include "core/ir/ir.h"
#include "core/ops/precision_model.h"
#include "core/program/evaluator.h"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace lossbound {

class Backend;
class ResidentEvaluator;  // core/program/resident_replay.h

/// Thrown when a checkpoint does not fit a program (missing input, shape or kind mismatch); the
/// message names the input, what the program expects and what the checkpoint holds.
class InputMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How to replay one program evaluation.
struct ReplayOptions {
  EnvelopeMethod method = EnvelopeMethod::FirstOrder;
  PrecisionModel precision;
  double lambda = 0;      ///< probabilistic: hoeffdingLambda(confidence)
  int ensembleSize = 32;  ///< ensemble: number of randomized executions
  EnsembleOrder ensembleOrder = EnsembleOrder::PerProduct;  ///< ensemble: how orders are drawn
  std::uint64_t seed = 0x5eed;  ///< ensemble: base seed (member i uses a seed derived from it)
  std::string startNode;        ///< interval: start the bounds at this node
  /// Interval: the caller's kept device-resident evaluator of this very program (from
  /// ResidentEvaluators, core/program/resident_evaluators.h: plans kept across steps); null with a
  /// backend that has a resident device: one evaluator made for this replay.
  ResidentEvaluator* resident = nullptr;
  const std::atomic<bool>* cancel = nullptr;
};

/// The envelope of one evaluation.
struct Envelope {
  double lo = 0, hi = 0;
  double point = 0;  ///< binary64 point loss (NaN when the method does not compute it)
  double bound = 0;  ///< first-order: Σ|g|·r; probabilistic: probabilisticBound (≤ Σ|g|·r)
  double pointBound = 0;           ///< first-order bound of the binary64 point value's own rounding
  std::vector<NodeBudget> nodes;   ///< first-order terms per node (first-order, probabilistic)
  std::vector<std::string> notes;  ///< user-facing notes (a device-resident replay's fallbacks)
};

/// Returns the envelope of `program`'s "loss" on `inputs`; throws EvaluationError (unsupported
/// op, failing op) or Cancelled. The interval method runs device-resident
/// (core/program/resident_replay.h) through options.resident, or when backend.residentDevice()
/// gives a device, with a CPU backend for the nodes that stay on the host: the same bits, its
/// out-of-memory fallbacks and non-finite rerun in Envelope::notes.
Envelope replayEnvelope(const Program& program, const TensorMap& inputs, Backend& backend,
                        const ReplayOptions& options);

/// Returns the seed of the ensemble method's execution `member` (0-based) from the base seed:
/// the envelope is [min, max] of the loss over evaluations in EvalDomain::Random with these seeds
/// (and EvalOptions::orderPerProduct as ReplayOptions::ensembleOrder says).
std::uint64_t ensembleMemberSeed(std::uint64_t base, int member);

/// Returns the probabilistic half-width λ·sqrt(Σ(g·c)²), never more than the first-order bound
/// Σ|g|·r (a linearized worst case bounds every execution; elements whose roundings are one add
/// linearly in Σ(g·c)², which with λ > 1 can pass it); NaN when either is NaN.
double probabilisticBound(double lambda, double sumSquares, double firstOrderBound);

/// Returns the first-order (method FirstOrder) or probabilistic (Probabilistic, radius
/// probabilisticBound) envelope of an evaluateFirstOrder() result, with its pointBound added.
Envelope firstOrderEnvelope(FirstOrderResult fo, EnvelopeMethod method, double lambda);

/// Returns `inputs` (another run's checkpoint) shaped for `program`: same names and shapes
/// required; floating values whose dtype differs from the program's input dtype are rounded to
/// nearest into that format, as the candidate would store them; integer and bool inputs are
/// relabelled (their values must be exact). Appends a sentence per rounded input kind to `note`.
/// Throws InputMismatch.
TensorMap adaptInputs(const Program& program, const TensorMap& inputs, std::string* note);

/// Returns the loss output value (element 0 of the 0-d "loss" tensor) as an interval.
Interval lossValue(const EvalResult& result);

}  // namespace lossbound
