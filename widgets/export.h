#pragma once
// Exports of the workbench: the plots as PNG (scaled, with a DPI tag), SVG and PDF (vector,
// through QCustomPlot::toPainter), the step table as CSV, and a one-page PDF report (plot image,
// verdict, settings, versions). Every export writes a temporary file in the target directory
// (QSaveFile) and renames it over the target only when everything was written; a failure leaves
// the target untouched and returns a message for the user. An empty return value means success.

#include "core/analysis/analysis_types.h"
#include "widgets/session_data.h"

#include <QImage>
#include <QList>
#include <QString>

#include <vector>

namespace lossbound::widgets {

class PlotPanel;

/// What the report page says besides the plots and the analysis.
struct ReportContext {
  QString referencePath;  ///< file of the reference run
  QString candidatePath;  ///< file of the candidate run
  QString backendLine;    ///< e.g. "CPU — no CUDA device: ..."
};

/// Returns the plots stacked vertically (each at its on-screen size), rendered at `scale`.
QImage renderPlots(const QList<PlotPanel*>& plots, double scale = 1.0);

/// Writes the stacked plots as a PNG rendered at `scale` × their on-screen size, tagged with
/// `dpi` (0: 96 × scale). Returns an error message, or an empty string on success.
QString exportPlotsPng(const QList<PlotPanel*>& plots, const QString& path, double scale = 2.0,
                       int dpi = 0);
/// Writes the stacked plots as SVG (vector). Returns an error message or an empty string.
QString exportPlotsSvg(const QList<PlotPanel*>& plots, const QString& path);
/// Writes the stacked plots as a one-page vector PDF the size of the plots. Returns an error
/// message or an empty string.
QString exportPlotsPdf(const QList<PlotPanel*>& plots, const QString& path);

/// Returns the CSV header line of exportStepTableCsv (without newline): stepsCsvHeader().
QString stepTableCsvHeader();
/// Writes the steps with stepsCsv() (core/analysis/report_csv.h), the same columns as
/// `lossbound-cli analyze --csv`: numbers in full precision (%.17g), "inside" as true/false,
/// envelope fields empty for steps that were not bounded. Returns an error message or "".
QString exportStepTableCsv(const std::vector<StepResult>& steps, const QString& path);

/// Writes a one-page A4 PDF: title and runs, the plots as an image, the verdict in words, the
/// settings and the versions. Returns an error message or an empty string.
QString exportReportPdf(const QList<PlotPanel*>& plots, const AnalysisReport& report,
                        const ReportContext& context, const QString& path);

/// Renders the loss plot over the margin plot and the difference plot (sym-log) of `report`
/// offscreen (needs a QApplication) and writes them as a PNG of `size` × `scale`. With an empty
/// `session`, the curves are the losses at the analysed steps. For `lossbound-cli analyze --png`.
/// Returns an error message or "".
QString exportAnalysisPng(const SessionData& session, const AnalysisReport& report,
                          const QString& path, QSize size = {1200, 860}, double scale = 1.0);

}  // namespace lossbound::widgets
