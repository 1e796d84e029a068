#pragma once
// One analysed step as work: its two replays (the envelope of the candidate's program on the
// reference's checkpoint, and the self-check on the candidate's own checkpoint), and the step
// result assembled from them (verdict tiers of ARCHITECTURE §1, the rigorous confirmation of a
// non-rigorous exit, the notes). Used by the Analyzer, which schedules the parts on the pool.

#include "core/analysis/analysis_types.h"
#include "core/analysis/replay_run.h"
#include "core/analysis/step_replay.h"
#include "core/interval/interval.h"
#include "core/ops/precision_model.h"
#include "core/tensor/non_finite.h"

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

namespace lossbound {

class Backend;
class ResidentEvaluators;  // core/program/resident_evaluators.h

/// The two replays of a step.
enum class StepPart { Main, Self };

/// What every replay of one analysis shares.
struct StepJobContext {
  const ReplayRun& reference;
  const ReplayRun& candidate;
  const AnalysisSettings& settings;
  PrecisionModel precision;  ///< the candidate's recorded precision, with the override applied
  double lambda = 0;         ///< probabilistic: hoeffdingLambda(settings.confidence)
  bool rigorous = false;     ///< isRigorous(settings.method, settings.startNode)
  const std::atomic<bool>* cancel = nullptr;
};

/// The outcome of one replay.
struct PartResult {
  bool cancelled = false;
  std::string error;  ///< non-empty: the step cannot be bounded, and why
  Envelope env;
  std::string note;
  std::vector<NonFiniteValues> nonFinite;  ///< checkpoint tensors holding NaN or ±inf
  double seconds = 0;
  bool confirmed = false;  ///< Main only: the rigorous interval was computed because it exited
  Interval rigorous{};
  /// Main only, for the baselines: the candidate program's binary64 loss (NaN when not computed),
  /// one execution in its modelled precision, and the format that loss is stored in.
  double fp64Loss = std::numeric_limits<double>::quiet_NaN();
  double roundedLoss = std::numeric_limits<double>::quiet_NaN();
  Format lossFormat = Format::Fp32;
  std::string baselineError;  ///< why the baselines could not be computed ("" if they were)
  /// Main only, with --outputs all: every output of both programs compared (ranked), a note on
  /// what was not compared, why the comparison failed ("" if it did not), and its time.
  std::vector<OutputComparison> outputs;
  std::string outputNote, outputError;
  double outputSeconds = 0;
};

/// Replays `part` of `step` on `backend`; never throws (errors and cancellation are recorded in
/// the result). With `resident` (the worker's kept evaluators on backend.residentDevice()), the
/// interval replays run device-resident through the evaluator of the step's program.
PartResult runStepPart(const StepJobContext& ctx, std::int64_t step, StepPart part,
                       Backend& backend, ResidentEvaluators* resident = nullptr);

/// Returns the result of `step` from its two finished parts: logged losses, envelope, budget,
/// verdict (with a non-rigorous exit confirmed against the rigorous interval) and notes.
StepResult assembleStep(const StepJobContext& ctx, std::int64_t step, const PartResult& main,
                        const PartResult& self);

/// Returns "unsupported op(s): <op> (node <n> and k more), ..." for the unsupported ops among the
/// nodes the loss depends on, or "" when there are none.
std::string unsupportedLossOps(const Program& program);

}  // namespace lossbound
