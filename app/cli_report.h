#pragma once
// Showing and writing a finished report, the same way for `lossbound-cli analyze` (one process,
// --shard, --mpi on rank 0) and `lossbound-cli merge`: the summary on stdout, --csv, --json and
// --png files, and the exit code of the overall verdict.

#include "core/analysis/analysis_types.h"

#include <QString>
#include <QTextStream>

#include <functional>

namespace lossbound::app {

/// Renders a report to a PNG file; returns false and sets `error` on failure.
using PngExporter =
    std::function<bool(const AnalysisReport& report, const QString& path, QString* error)>;

/// Installs the renderer behind `--png F` (the widgets layer provides it; without one, --png is
/// refused with exit code 2).
void setPngExporter(PngExporter exporter);
/// Returns true when a renderer is installed.
bool havePngExporter();

/// The files a command writes a report to ("" = not asked for).
struct ReportOutputs {
  QString csv, json, png;
  QString outputsCsv;  ///< per step and program output (analyze --outputs all)
};

/// Prints the summary of `report` (settings, one line per step, notes, verdict, first exit, the
/// reasons steps were not bounded) to `out`; the run paths are shown as given.
void printReportSummary(const AnalysisReport& report, const QString& referencePath,
                        const QString& candidatePath, QTextStream& out);

/// Writes the report to the files in `outputs` (each through a temporary file and a rename);
/// on failure prints "<command>: --csv: <why>" to `err` and returns false.
bool writeReportOutputs(const AnalysisReport& report, const ReportOutputs& outputs,
                        const QString& command, QTextStream& err);

/// Returns the exit code for a finished report (0, 3 or 4): summarizeReport(report).exitCode.
int reportExitCode(const AnalysisReport& report);

}  // namespace lossbound::app
