#pragma once
// Plain data the workbench shows: the loss logs of a run pair, the checkpointed steps, and
// summaries of a checkpoint's tensors. The app fills it from run files (or, for a report opened
// without its run files, from the report); tests build it by hand.

#include "core/analysis/analysis_types.h"

#include <QString>

#include <cstdint>
#include <vector>

namespace lossbound::widgets {

/// The loss log of one run. Invariant: `steps` strictly increasing, `loss.size() == steps.size()`.
struct LossSeries {
  QString name;                     ///< the run's name, shown in the legend
  std::vector<std::int64_t> steps;  ///< logged steps, strictly increasing
  std::vector<double> loss;         ///< the loss logged at each step

  /// Returns the loss logged at `step`, or NaN when the run did not log that step.
  double lossAt(std::int64_t step) const;
  /// Returns the index of the logged step nearest to `x`, or -1 for an empty series.
  std::ptrdiff_t nearestIndex(double x) const;
};

/// A run pair as the workbench shows it (without any analysis).
struct SessionData {
  LossSeries reference;                       ///< the run whose state is replayed
  LossSeries candidate;                       ///< the run whose step program is bounded
  std::vector<std::int64_t> checkpointSteps;  ///< steps that can be analysed, increasing
};

/// Returns the session a report alone can show: both runs' losses at the analysed steps only
/// (logged curves need the run files), which are also its checkpointed steps.
SessionData sessionFromReport(const AnalysisReport& report);

/// One tensor of a checkpoint, summarised for the step inspector.
struct TensorSummary {
  QString name;     ///< e.g. "params/lm_head.weight"
  QString shape;    ///< e.g. "[50304, 768]"
  QString dtype;    ///< e.g. "float32"
  double norm = 0;  ///< L2 norm of all elements
};

/// Returns TensorBoard's display smoothing of `values`: a debiased exponential moving average
/// with weight `weight` in [0, 1) (0 returns the values unchanged); non-finite values pass
/// through without entering the average.
std::vector<double> emaSmooth(const std::vector<double>& values, double weight);

}  // namespace lossbound::widgets
