#pragma once
// The one overall reading of an analysis: the verdict for the whole run pair, the counts behind
// it, why steps could not be bounded, and the exit code of `lossbound-cli analyze`. The GUI and
// the CLI only display it (tests/core/analysis/test_analysis_logic.cpp, overallVerdict).
//
// Precedence: an exit (first exit at some step) → bug, certain or likely as that step says;
// else a failed self-check anywhere → untrustworthy; else any step not bounded → inconclusive
// (none bounded at all → not bounded); else rounding.

#include "core/analysis/analysis_types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

/// The verdict for a whole run pair.
enum class OverallVerdict {
  NotAnalysed,    ///< no step has a result
  Rounding,       ///< every analysed step is inside: rounding explains the gap (Type-I)
  BugLikely,      ///< the first exit is outside a non-rigorous envelope only
  BugCertain,     ///< the first exit is outside the rigorous interval envelope
  Untrustworthy,  ///< no exit, but the self-check failed at some step
  Inconclusive,   ///< no exit among the bounded steps, but some steps could not be bounded
  NotBounded,     ///< no step could be bounded
};

/// Exit codes of `lossbound-cli analyze` (README "Exit codes").
inline constexpr int kExitNoExit = 0;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitTypeII = 3;
inline constexpr int kExitNotBounded = 4;

/// One reason steps could not be bounded, with the steps it applies to.
struct NotBoundedReason {
  std::string reason;               ///< the step note, e.g. "unsupported op: aten.baddbmm..."
  std::vector<std::int64_t> steps;  ///< increasing
};

/// The overall reading of a report.
struct OverallSummary {
  OverallVerdict verdict = OverallVerdict::NotAnalysed;
  std::optional<std::int64_t> firstExit;      ///< the earliest exit step
  const StepResult* firstExitStep = nullptr;  ///< its result (points into the report)
  int analysed = 0;                           ///< steps with a result
  int inside = 0;                             ///< rounding verdicts
  int outside = 0;                            ///< bug verdicts (likely or certain)
  int untrustworthy = 0;                      ///< self-check failed
  int notBounded = 0;  ///< could not be bounded (or "inside" an infinite envelope)
  std::vector<NotBoundedReason> notBoundedReasons;  ///< distinct notes, most frequent first
  int exitCode = kExitNoExit;  ///< what `lossbound-cli analyze` returns for this report
};

/// Returns the overall reading of `report` (see the precedence above). The returned
/// firstExitStep points into report.steps.
OverallSummary summarizeReport(const AnalysisReport& report);

/// Returns "rounding", "bug (likely)", "bug (certain)", "untrustworthy", "inconclusive",
/// "not bounded" or "not analysed".
std::string overallVerdictName(OverallVerdict v);

/// Returns one sentence for the verdict, as `lossbound-cli analyze` prints it after "verdict: ",
/// e.g. "Type-II divergence (implementation bug): 48 of 50 analysed steps are outside the
/// first-order envelope." or "rounding (Type-I): all 50 analysed steps are inside ...".
std::string overallVerdictSentence(const OverallSummary& summary, EnvelopeMethod method);

}  // namespace lossbound
