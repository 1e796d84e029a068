#pragma once
// The overall reading of an analysis in words: which verdict the run pair gets, where the first
// exit is, why steps could not be bounded, what the method guarantees, whether the self-check
// holds, which settings were used. The verdict itself is core's (summarizeReport,
// core/analysis/overall_verdict.h); this file only puts it into words. Shared by the verdict
// panel, the PDF report and the headless screenshot.

#include "core/analysis/analysis_types.h"
#include "core/analysis/overall_verdict.h"

#include <QColor>
#include <QString>

#include <cstdint>
#include <optional>
#include <vector>

namespace lossbound::widgets {

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
  QString whyText;        ///< why steps could not be bounded ("" when all were), plain words
  std::optional<std::int64_t> firstExit;
};

/// Returns the analysis of `report` in words (the verdict from core's summarizeReport).
VerdictSummary summarize(const AnalysisReport& report);

/// Returns one line naming the settings: method, precision, confidence, ensemble size, start
/// node and backend (only those that apply to the method).
QString settingsSummary(const AnalysisSettings& settings);

/// Returns the colour of an overall verdict's headline.
QColor overallVerdictColor(OverallVerdict verdict);

}  // namespace lossbound::widgets
