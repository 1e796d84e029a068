#include "app/cli_analyze.h"

#include "app/backend_status.h"
#include "core/analysis/analyzer.h"
#include "core/analysis/overall_verdict.h"
#include "core/analysis/qt_text.h"
#include "core/analysis/report_csv.h"
#include "core/analysis/report_json.h"
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_selection.h"
#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"
#include "core/runfile/run_file.h"
#include "core/runfile/run_pair.h"
#include "gpu/cuda_device.h"

#include <QCommandLineParser>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSaveFile>

#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>

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

void printSummary(const AnalysisReport& report, const QString& refPath, const QString& candPath,
                  QTextStream& out) {
  const AnalysisSettings& s = report.settings;
  out << "Lossbound analysis\n"
      << "  reference: " << qs(report.referenceName) << " (" << refPath << ")\n"
      << "  candidate: " << qs(report.candidateName) << " (" << candPath << ")\n"
      << "  method:    " << qs(methodName(s.method));
  if (s.method == EnvelopeMethod::Probabilistic)
    out << " (confidence " << qNumber(s.confidence, 12) << ", lambda "
        << QString::number(hoeffdingLambda(s.confidence), 'f', 3) << ")";
  if (s.method == EnvelopeMethod::Ensemble) out << " (" << s.ensembleSize << " executions)";
  if (!s.startNode.empty()) out << " (intervals start at node " << qs(s.startNode) << ")";
  out << " - " << qs(methodGuarantee(s.method)) << "\n"
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

// Prints a warning per analysed step whose batches differ between the runs (the replay uses the
// reference's batch) and appends it to that step's note, so the CSV and JSON carry it too.
void addBatchWarnings(const RunFile& reference, const RunFile& candidate, AnalysisReport& report,
                      QTextStream& err) {
  for (StepResult& r : report.steps) {
    std::optional<std::string> warning;
    try {
      warning = compareBatches(reference, candidate, r.step);
    } catch (const std::exception& e) {
      // Appended, not "step " + std::to_string(...): GCC 12 at -O3 reports a false -Wrestrict
      // on operator+(const char*, std::string&&) (GCC bug 105651).
      warning = "step ";
      *warning += std::to_string(r.step) + ": the batches could not be compared: " + e.what();
    }
    if (!warning) continue;
    err << "lossbound-cli analyze: warning: " << qs(*warning) << "\n";
    r.note += (r.note.empty() ? "" : " ") + std::string("Warning: ") + *warning + ".";
  }
  err.flush();
}

}  // namespace

void setAnalyzePngExporter(PngExporter exporter) { pngExporter() = std::move(exporter); }

int analyzeExitCode(const AnalysisReport& report) { return summarizeReport(report).exitCode; }

int runAnalyze(const QStringList& args, QTextStream& out, QTextStream& err) {
  QCommandLineParser p;
  p.setApplicationDescription(QStringLiteral(
      "Replays steps of the candidate's step program on the reference's checkpoints, bounds the "
      "rounding and says whether the reference loss leaves the envelope (a Type-II divergence)."));
  p.addHelpOption();
  const QCommandLineOption ref(QStringLiteral("reference"), QStringLiteral("Reference run file."),
                               QStringLiteral("R.h5"));
  const QCommandLineOption cand(QStringLiteral("candidate"), QStringLiteral("Candidate run file."),
                                QStringLiteral("C.h5"));
  const QCommandLineOption steps(QStringLiteral("steps"),
                                 QStringLiteral("Steps: all, A:B (inclusive) or N,M,... "
                                                "(default all checkpointed steps)."),
                                 QStringLiteral("sel"), QStringLiteral("all"));
  const AnalysisSettings defaults;
  const QCommandLineOption method(
      QStringLiteral("method"),
      QStringLiteral("interval, first-order, probabilistic or ensemble (default %1).")
          .arg(qs(methodName(defaults.method))),
      QStringLiteral("m"), qs(methodName(defaults.method)));
  const QCommandLineOption confidence(
      QStringLiteral("confidence"),
      QStringLiteral("Probabilistic method: confidence 1 - delta (default 1 - 1e-6)."),
      QStringLiteral("P"));
  const QCommandLineOption ensemble(
      QStringLiteral("ensemble-size"),
      QStringLiteral("Ensemble method: executions (default %1).").arg(defaults.ensembleSize),
      QStringLiteral("N"));
  const QCommandLineOption precision(QStringLiteral("precision"),
                                     QStringLiteral("recorded, fp32, tf32, bf16 or fp16."),
                                     QStringLiteral("p"), QStringLiteral("recorded"));
  const QCommandLineOption backend(QStringLiteral("backend"), QStringLiteral("auto, cpu or cuda."),
                                   QStringLiteral("b"), QStringLiteral("auto"));
  const QCommandLineOption startNode(
      QStringLiteral("start-node"),
      QStringLiteral("Interval method: start the bounds at this trace node (ignores rounding "
                     "upstream of it)."),
      QStringLiteral("NAME"));
  const QCommandLineOption csv(QStringLiteral("csv"), QStringLiteral("Write the steps as CSV."),
                               QStringLiteral("F"));
  const QCommandLineOption json(QStringLiteral("json"),
                                QStringLiteral("Write the whole report as JSON."),
                                QStringLiteral("F"));
  const QCommandLineOption png(QStringLiteral("png"), QStringLiteral("Render the plots as PNG."),
                               QStringLiteral("F"));
  const QCommandLineOption outputs(
      QStringLiteral("outputs"),
      QStringLiteral("loss: bound the loss only (default); all: also compare every program "
                     "output of both programs at the reference state (docs/output-envelopes.md)."),
      QStringLiteral("loss|all"), QStringLiteral("loss"));
  const QCommandLineOption outputsCsvOption(
      QStringLiteral("outputs-csv"),
      QStringLiteral("With --outputs all: write one row per step and output as CSV."),
      QStringLiteral("F"));
  const QCommandLineOption noCache(QStringLiteral("no-cache"),
                                   QStringLiteral("Neither read nor write the results cache."));
  p.addOptions({ref, cand, steps, method, confidence, ensemble, precision, backend, startNode, csv,
                json, png, outputs, outputsCsvOption, noCache});

  QStringList argv = args;
  argv.prepend(QStringLiteral("lossbound-cli analyze"));
  if (!p.parse(argv)) {
    err << "lossbound-cli analyze: " << p.errorText() << "\n";
    return kExitBadInput;
  }
  if (p.isSet(QStringLiteral("help"))) {
    out << p.helpText();
    return kExitNoExit;
  }
  auto usage = [&](const QString& msg) {
    err << "lossbound-cli analyze: " << msg << "\n"
        << "usage: lossbound-cli analyze --reference R.h5 --candidate C.h5 [--steps all|A:B|N,M] "
           "[--method interval|first-order|probabilistic|ensemble] [--confidence P] "
           "[--ensemble-size N] [--precision recorded|fp32|tf32|bf16|fp16] "
           "[--backend auto|cpu|cuda] [--start-node NAME] [--csv F] [--json F] [--png F] "
           "[--outputs loss|all] [--outputs-csv F] [--no-cache]\n";
    return kExitBadInput;
  };
  if (!p.positionalArguments().isEmpty())
    return usage(QStringLiteral("unexpected argument '%1'").arg(p.positionalArguments().first()));
  if (!p.isSet(ref) || !p.isSet(cand))
    return usage(QStringLiteral("expected --reference and --candidate"));

  AnalysisSettings settings;
  const auto m = parseMethod(p.value(method).toStdString());
  if (!m)
    return usage(QStringLiteral("--method: expected interval, first-order, probabilistic or "
                                "ensemble, found '%1'")
                     .arg(p.value(method)));
  settings.method = *m;
  if (p.isSet(confidence)) {
    bool ok = false;
    settings.confidence = p.value(confidence).toDouble(&ok);
    if (!ok || !(settings.confidence > 0 && settings.confidence < 1))
      return usage(QStringLiteral("--confidence: expected a probability strictly between 0 and 1, "
                                  "found '%1'")
                       .arg(p.value(confidence)));
  }
  if (p.isSet(ensemble)) {
    bool ok = false;
    settings.ensembleSize = p.value(ensemble).toInt(&ok);
    if (!ok || settings.ensembleSize < 1)
      return usage(QStringLiteral("--ensemble-size: expected a positive integer, found '%1'")
                       .arg(p.value(ensemble)));
  }
  const QString prec = p.value(precision);
  if (prec != QLatin1String("recorded")) {
    const auto f = parseFormat(prec.toStdString());
    if (!f)
      return usage(QStringLiteral("--precision: expected recorded, fp32, tf32, bf16 or fp16, "
                                  "found '%1'")
                       .arg(prec));
    settings.precision = *f;
  }
  if (p.value(outputs) == QLatin1String("all"))
    settings.outputs = OutputScope::All;
  else if (p.value(outputs) != QLatin1String("loss"))
    return usage(
        QStringLiteral("--outputs: expected loss or all, found '%1'").arg(p.value(outputs)));
  if (p.isSet(outputsCsvOption) && settings.outputs != OutputScope::All)
    return usage(QStringLiteral("--outputs-csv: needs --outputs all"));
  settings.backend = p.value(backend).toStdString();
  if (settings.backend != "auto" && settings.backend != "cpu" && settings.backend != "cuda")
    return usage(
        QStringLiteral("--backend: expected auto, cpu or cuda, found '%1'").arg(p.value(backend)));
  if (p.isSet(startNode)) {
    settings.startNode = p.value(startNode).toStdString();
    if (settings.method != EnvelopeMethod::Interval)
      return usage(QStringLiteral("--start-node: only the interval method starts at a node "
                                  "(found --method %1)")
                       .arg(qs(methodName(settings.method))));
  }
  StepSelection selection;
  try {
    selection = StepSelection::parse(p.value(steps).toStdString());
  } catch (const std::invalid_argument& e) {
    return usage(QString::fromStdString(e.what()));
  }
  if (p.isSet(png) && !pngExporter())
    return usage(
        QStringLiteral("--png: this build has no plot renderer (expected the widgets "
                       "layer to provide one)"));

  // Backend: CUDA only when asked for or available.
  AnalyzerOptions options;
  options.useCache = !p.isSet(noCache);
  const BackendChoice backendChoice = chooseBackend(settings.backend);
  if (!backendChoice.ok) {
    err << "lossbound-cli analyze: --backend cuda: " << backendChoice.error << "\n";
    return kExitBadInput;
  }
  options.backendFactory = backendChoice.factory;
  options.backendDescription = backendChoice.description;

  std::unique_ptr<RunFileReplay> reference, candidate;
  try {
    // Validate in a child process first: a corrupt file that crashes libhdf5 becomes an error.
    RunFile::validateIsolated(p.value(ref).toStdString());
    RunFile::validateIsolated(p.value(cand).toStdString());
    reference = RunFileReplay::open(p.value(ref).toStdString());
    candidate = RunFileReplay::open(p.value(cand).toStdString());
  } catch (const std::exception& e) {
    err << "lossbound-cli analyze: " << e.what() << "\n";
    return kExitBadInput;
  }
  // A log-only run is a valid run file (info shows it) but has nothing to replay.
  for (const RunFileReplay* run : {reference.get(), candidate.get()}) {
    if (!run->file().checkpointSteps().empty()) continue;
    err << "lossbound-cli analyze: " << qs(run->file().path())
        << ": /checkpoints: expected checkpoints (analyze replays checkpointed steps, so both runs "
           "need them), found none; record some with RunRecorder.checkpoint()\n";
    return kExitBadInput;
  }

  AnalysisReport report;
  try {
    report = Analyzer(options).analyse(*reference, *candidate, selection, settings);
  } catch (const AnalysisError& e) {
    err << "lossbound-cli analyze: " << e.what() << "\n";
    return kExitBadInput;
  }
  addBatchWarnings(reference->file(), candidate->file(), report, err);
  printSummary(report, p.value(ref), p.value(cand), out);

  QString error;
  if (p.isSet(csv) &&
      !writeAtomically(p.value(csv), QByteArray::fromStdString(stepsCsv(report.steps)), &error)) {
    err << "lossbound-cli analyze: --csv: " << error << "\n";
    return kExitBadInput;
  }
  if (p.isSet(outputsCsvOption) &&
      !writeAtomically(p.value(outputsCsvOption),
                       QByteArray::fromStdString(outputsCsv(report.steps)), &error)) {
    err << "lossbound-cli analyze: --outputs-csv: " << error << "\n";
    return kExitBadInput;
  }
  if (p.isSet(json) &&
      !writeAtomically(p.value(json), QJsonDocument(reportToJson(report)).toJson(), &error)) {
    err << "lossbound-cli analyze: --json: " << error << "\n";
    return kExitBadInput;
  }
  if (p.isSet(png) && !pngExporter()(report, p.value(png), &error)) {
    err << "lossbound-cli analyze: --png: " << error << "\n";
    return kExitBadInput;
  }
  return analyzeExitCode(report);
}

}  // namespace lossbound::app
