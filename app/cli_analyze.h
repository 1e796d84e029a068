#pragma once
// `lossbound-cli analyze`: replays steps of a run pair and classifies the divergence (issue 5).
// Exit codes: 0 the reference never leaves the envelope; 3 a Type-II exit was found; 2 bad usage
// or bad input (unreadable file, mismatched pair, unavailable backend); 4 a step could not be
// bounded (unsupported op, ...) or its envelope is untrustworthy (self-check failed).

#include "core/analysis/analysis_types.h"
#include "core/analysis/overall_verdict.h"

#include <QString>
#include <QStringList>
#include <QTextStream>

#include <functional>

namespace lossbound::app {

/// Renders a report to a PNG file; returns false and sets `error` on failure.
using PngExporter =
    std::function<bool(const AnalysisReport& report, const QString& path, QString* error)>;

/// Installs the renderer behind `--png F` (the widgets layer provides it; without one, --png is
/// refused with exit code 2).
void setAnalyzePngExporter(PngExporter exporter);

/// Runs `analyze` with `args` (the arguments after "analyze"); prints the summary to `out` and
/// errors to `err`; returns the exit code.
int runAnalyze(const QStringList& args, QTextStream& out, QTextStream& err);

/// Returns the exit code for a finished report (0, 3 or 4): summarizeReport(report).exitCode.
int analyzeExitCode(const AnalysisReport& report);

}  // namespace lossbound::app
