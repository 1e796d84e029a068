#include "app/cli_report.h"

#include "core/analysis/overall_verdict.h"
#include "core/analysis/qt_text.h"
#include "core/analysis/report_csv.h"
#include "core/analysis/report_json.h"
#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"

#include <QJsonDocument>
#include <QSaveFile>

#include <algorithm>
#include <cmath>

namespace lossbound::app {

namespace {

PngExporter& pngExporter() {
  static PngExporter exporter;
  return exporter;
}

/// Writes `data` to `path` through a temporary file renamed over it (QSaveFile).
bool writeAtomically(const QString& path, const QByteArray& data, QString* error) {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(data) != data.size() || !f.commit()) {
    *error = QStringLiteral("cannot write '%1': %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

QString marginText(const StepResult& r) {
  if (std::isnan(r.margin)) return QStringLiteral("-");
  if (std::isinf(r.margin)) return r.margin > 0 ? QStringLiteral("+inf") : QStringLiteral("-inf");
  return QString::asprintf("%+.3g", r.margin);
}

// With --outputs all: per step, how many outputs have disjoint envelopes and the top ones.
void printOutputSummary(const AnalysisReport& report, QTextStream& out) {
  if (report.settings.outputs != OutputScope::All) return;
  int flaggedSteps = 0;
  double seconds = 0;
  for (const StepResult& r : report.steps) {
    seconds += r.outputSeconds;
    if (r.outputs.empty()) continue;
    int disjoint = 0;
    for (const OutputComparison& c : r.outputs) disjoint += c.disjoint;
    flaggedSteps += disjoint > 0;
    out << QString::asprintf("outputs at step %lld: %d of %d disjoint", (long long)r.step, disjoint,
                             int(r.outputs.size()));
    for (std::size_t k = 0; k < r.outputs.size() && k < 3; ++k)
      out << (k ? ", " : "; worst: ") << qs(r.outputs[k].name) << " "
          << QString::asprintf("%.3g", r.outputs[k].worstMargin);
    out << "\n";
  }
  out << "outputs: " << flaggedSteps << " of " << report.steps.size()
      << " step(s) with an output whose envelopes are disjoint ("
      << QString::asprintf("%.1f", seconds) << " s on outputs)\n";
}

}  // namespace

void setPngExporter(PngExporter exporter) { pngExporter() = std::move(exporter); }

bool havePngExporter() { return static_cast<bool>(pngExporter()); }

void printReportSummary(const AnalysisReport& report, const QString& refPath,
                        const QString& candPath, QTextStream& out) {
  const AnalysisSettings& s = report.settings;
  out << "Lossbound analysis\n"
      << "  reference: " << qs(report.referenceName) << " (" << refPath << ")\n"
      << "  candidate: " << qs(report.candidateName) << " (" << candPath << ")\n"
      << "  method:    " << qs(methodName(s.method));
  if (s.method == EnvelopeMethod::Probabilistic)
    out << " (confidence " << qNumber(s.confidence, 12) << ", lambda "
        << QString::number(hoeffdingLambda(s.confidence), 'f', 3) << ")";
  if (s.method == EnvelopeMethod::Ensemble)
    out << " (" << s.ensembleSize << " executions, "
        << (s.ensembleOrder == EnsembleOrder::PerProduct ? "one summation order per matrix product"
                                                         : "one summation order per element")
        << ")";
  if (!s.startNode.empty()) out << " (intervals start at node " << qs(s.startNode) << ")";
  out << " - " << qs(settingsGuarantee(s)) << "\n"
      << "  precision: "
      << (s.precision ? qs(formatName(*s.precision)) : QStringLiteral("as recorded"))
      << "\n  backend:   " << qs(report.backendDescription) << "\n";
  if (!report.cacheFile.empty()) out << "  cache:     " << qs(report.cacheFile) << "\n";
  if (!report.note.empty()) out << "  note:      " << qs(report.note) << "\n";
  out << "\n";
  out << QString::asprintf("%8s  %-22s  %-22s  %-22s  %-22s  %9s  %-5s  %s\n", "step",
                           "reference loss", "candidate loss", "envelope lo", "envelope hi",
                           "margin", "self", "verdict");
  int cached = 0;
  for (const StepResult& r : report.steps) {
    cached += r.fromCache;
    out << QString::asprintf("%8lld  %-22s  %-22s  %-22s  %-22s  %9s  %-5s  %s\n",
                             static_cast<long long>(r.step), qPrintable(qNumber(r.referenceLoss)),
                             qPrintable(qNumber(r.candidateLoss)), qPrintable(qNumber(r.lo)),
                             qPrintable(qNumber(r.hi)), qPrintable(marginText(r)),
                             r.verdict == StepVerdict::NotBounded ? "-"
                             : r.selfCheckPassed                  ? "ok"
                                                                  : "FAIL",
                             std::string(verdictName(r.verdict)).c_str());
  }
  // Notes once per distinct text, with the steps they apply to.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> notes;
  for (const StepResult& r : report.steps) {
    if (r.note.empty()) continue;
    auto it =
        std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == r.note; });
    if (it == notes.end())
      notes.push_back({r.note, {r.step}});
    else
      it->second.push_back(r.step);
  }
  for (const auto& [text, steps] : notes)
    out << "  note (step" << (steps.size() > 1 ? "s " : " ") << steps.front()
        << (steps.size() > 1 ? QStringLiteral("..%1").arg(steps.back()) : QString())
        << "): " << qs(text) << "\n";
  if (cached) out << "  (" << cached << " of " << report.steps.size() << " steps from the cache)\n";
  out << "\n";

  const OverallSummary overall = summarizeReport(report);
  out << "verdict: " << qs(overallVerdictSentence(overall, s.method)) << "\n";
  if (const StepResult* it = overall.firstExitStep) {
    out << "first exit: step " << it->step << ", " << qs(verdictName(it->verdict))
        << ": reference loss " << qNumber(it->referenceLoss) << " is outside [" << qNumber(it->lo)
        << ", " << qNumber(it->hi) << "] by " << marginText(*it) << " half-widths";
    if (!it->budget.empty()) out << "; rounding budget: " << qs(budgetSummary(it->budget));
    out << "\n";
  } else {
    out << "first exit: none\n";
  }
  printOutputSummary(report, out);
  for (const NotBoundedReason& r : overall.notBoundedReasons)
    out << "not bounded at " << r.steps.size() << " step(s) (first: " << r.steps.front()
        << "): " << qs(r.reason) << "\n";
}

bool writeReportOutputs(const AnalysisReport& report, const ReportOutputs& outputs,
                        const QString& command, QTextStream& err) {
  QString error;
  if (!outputs.csv.isEmpty() &&
      !writeAtomically(outputs.csv, QByteArray::fromStdString(stepsCsv(report.steps)), &error)) {
    err << command << ": --csv: " << error << "\n";
    return false;
  }
  if (!outputs.outputsCsv.isEmpty() &&
      !writeAtomically(outputs.outputsCsv, QByteArray::fromStdString(outputsCsv(report.steps)),
                       &error)) {
    err << command << ": --outputs-csv: " << error << "\n";
    return false;
  }
  if (!outputs.json.isEmpty() &&
      !writeAtomically(outputs.json, QJsonDocument(reportToJson(report)).toJson(), &error)) {
    err << command << ": --json: " << error << "\n";
    return false;
  }
  if (!outputs.png.isEmpty()) {
    if (!pngExporter()) {
      err << command << ": --png: this build has no plot renderer\n";
      return false;
    }
    if (!pngExporter()(report, outputs.png, &error)) {
      err << command << ": --png: " << error << "\n";
      return false;
    }
  }
  return true;
}

int reportExitCode(const AnalysisReport& report) { return summarizeReport(report).exitCode; }

}  // namespace lossbound::app
