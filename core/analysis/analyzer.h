#pragma once
// The Analyzer: from two runs to an AnalysisReport (ARCHITECTURE §1). For every selected step t it
// replays the candidate's step program on the reference's checkpoint at t (the envelope) and on
// the candidate's own checkpoint (the self-check), compares with the logged losses and classifies
// the step. Steps run on step workers of the process's thread pool (core/parallel/thread_pool.h),
// each with its own backend and an equal share of the pool as its thread budget, so steps in
// parallel never oversubscribe the cores. Every finished step is passed to the progress callback,
// serialized and in completion order, from whichever pool thread finished it. Cancellation is
// cooperative (checked between ops). Results are reused from and written to the results cache.
// The replay of one step and the assembly of its result live in step_job.h.
//
// Verdict tiers: a step outside a non-rigorous envelope (first-order, probabilistic, ensemble, or
// interval started at a node) is also checked against the rigorous interval envelope started at
// the inputs; outside that too → bug (certain), else bug (likely).

#include "core/analysis/analysis_types.h"
#include "core/analysis/replay_run.h"
#include "core/analysis/step_selection.h"
#include "core/backend.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace lossbound {

/// Thrown for an analysis that cannot start: invalid settings (confidence, ensemble size, unknown
/// start node), a step selection that selects nothing, runs that share no checkpointed step.
/// The message says what was expected and what was found.
class AnalysisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Called after each finished step (computed or from the cache): done of total steps. Calls are
/// serialized but may come from pool threads.
using AnalysisProgress = std::function<void(int done, int total, const StepResult& finished)>;

/// How the Analyzer runs; nothing here changes the results.
struct AnalyzerOptions {
  /// Reuse and store results in the results cache (only for runs read from files).
  bool useCache = true;
  /// Store newly computed results in the cache (false: only read it, as the ranks of an MPI run
  /// do; rank 0 then stores the merged report once with storeInCache()).
  bool writeCache = true;
  /// Cache file; "" = ResultCache::defaultPath(candidate file).
  std::string cachePath;
  /// Makes the backend of a step worker with the given host thread budget; null = the CPU
  /// backend (createCpuBackend(threads)). A factory (e.g. CUDA) gets one worker unless `workers`
  /// says otherwise.
  std::function<std::unique_ptr<Backend>(int threads)> backendFactory;
  /// Added to the backend's name() in the report (e.g. "CPU — no CUDA device: ...").
  std::string backendDescription;
  /// Number of step workers; 0 = one per pool thread (CPU) or 1 (factory).
  int workers = 0;
};

/// Runs analyses; one Analyzer may run several analyses one after another.
class Analyzer {
 public:
  /// Creates an analyzer with the given run options.
  explicit Analyzer(AnalyzerOptions options = {});

  /// Analyses the selected steps of a run pair and returns the report (steps in step order; the
  /// finished ones only, with cancelled set, when `cancel` became true). Steps that cannot be
  /// replayed (unsupported op, missing log entry, checkpoint that does not fit the program) are
  /// "not bounded" with the reason. Throws AnalysisError when the analysis cannot start.
  AnalysisReport analyse(const ReplayRun& reference, const ReplayRun& candidate,
                         const StepSelection& steps, const AnalysisSettings& settings,
                         const AnalysisProgress& progress = {},
                         const std::atomic<bool>* cancel = nullptr) const;

 private:
  AnalyzerOptions mOptions;
};

/// Returns the steps analyse() would analyse for `selection` (increasing), after the same checks:
/// throws AnalysisError as analyse() does when the analysis cannot start.
std::vector<std::int64_t> plannedSteps(const ReplayRun& reference, const ReplayRun& candidate,
                                       const StepSelection& selection,
                                       const AnalysisSettings& settings);

/// Returns a report of the pair without steps: run names and sources (absolute paths, log
/// digests), settings and the note on a start node; what analyse() starts from.
AnalysisReport emptyReport(const ReplayRun& reference, const ReplayRun& candidate,
                           const AnalysisSettings& settings);

/// Checks that the candidate's program at every step can run on the reference's checkpoint by the
/// one pair rule (inputFit, core/runfile/run_pair.h). Throws AnalysisError naming the step, the
/// input, what was expected and what was found.
void checkPairing(const ReplayRun& reference, const ReplayRun& candidate,
                  const std::vector<std::int64_t>& steps);

/// Stores the computed (not from the cache) and bounded steps of `report` in the results cache
/// of the pair, as analyse() does with writeCache set; returns "" or the reason nothing was
/// stored (caching off, runs not from files, the file could not be written).
std::string storeInCache(const AnalyzerOptions& options, const ReplayRun& reference,
                         const ReplayRun& candidate, const AnalysisReport& report);

/// Returns the checkpointed steps the two runs have in common, increasing.
std::vector<std::int64_t> commonSteps(const ReplayRun& reference, const ReplayRun& candidate);

}  // namespace lossbound
