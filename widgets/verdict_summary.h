#pragma once
// The overall reading of an analysis in words: which verdict the run pair gets, where the first
// exit is, what the method guarantees, whether the self-check holds, which settings were used.
// Shared by the verdict panel, the PDF report and the headless screenshot.

#include "core/analysis/analysis_types.h"

#include <QColor>
#include <QString>

#include <cstdint>
#include <optional>
#include <vector>

namespace lossbound::widgets {

/// The verdict for a whole run pair.
enum class OverallVerdict {
  NotAnalysed,    ///< no step has a result yet
  Rounding,       ///< every bounded step is inside: rounding explains the gap (Type-I)
  BugLikely,      ///< the first exit is outside a non-rigorous envelope
  BugCertain,     ///< the first exit is outside the rigorous interval envelope
  Untrustworthy,  ///< no exit, but the self-check failed somewhere: envelopes cannot be trusted
  NotBounded,     ///< no step could be bounded, or every envelope is infinite (inconclusive)
};

/// The analysis in words, ready to show.
struct VerdictSummary {
  OverallVerdict verdict = OverallVerdict::NotAnalysed;
  QString headline;       ///< e.g. "Type-II: implementation bug (certain)"
  QString firstExitText;  ///< e.g. "First exit at step 120 (reference 2.31 outside [..])"
  QString methodText;     ///< e.g. "Method: first-order"
  QString guarantee;      ///< methodGuarantee() of the method, plus the start-node caveat
  QString selfCheckText;  ///< e.g. "Self-check passed at all 12 steps"
  QString settingsText;   ///< one line: precision, confidence, ensemble size, backend, ...
  QString countsText;     ///< e.g. "12 steps analysed: 9 inside, 3 outside"
  std::optional<std::int64_t> firstExit;
};

/// Returns the earliest step whose verdict is a bug (likely or certain), or nothing: core's
/// firstExit() (core/analysis/verdict.h).
std::optional<std::int64_t> firstExitOf(const std::vector<StepResult>& steps);

/// Returns the analysis of `report` in words. Uses report.firstExit when set, else firstExitOf.
VerdictSummary summarize(const AnalysisReport& report);

/// Returns one line naming the settings: method, precision, confidence, ensemble size, start
/// node and backend (only those that apply to the method).
QString settingsSummary(const AnalysisSettings& settings);

/// Returns the colour of an overall verdict's headline.
QColor overallVerdictColor(OverallVerdict verdict);

}  // namespace lossbound::widgets
