#include "app/cli_merge.h"

#include "app/cli_report.h"
#include "core/analysis/overall_verdict.h"
#include "core/analysis/report_json.h"
#include "core/analysis/report_merge.h"

#include <QCommandLineParser>

#include <stdexcept>
#include <vector>

namespace lossbound::app {

int runMerge(const QStringList& args, QTextStream& out, QTextStream& err) {
  QCommandLineParser p;
  p.setApplicationDescription(QStringLiteral(
      "Combines the parts of a sharded analysis (analyze --shard I/N --json PART) into one "
      "report: the same verdict, first exit, CSV and plots as one run over all the steps."));
  p.addHelpOption();
  const QCommandLineOption csv(QStringLiteral("csv"), QStringLiteral("Write the steps as CSV."),
                               QStringLiteral("F"));
  const QCommandLineOption json(QStringLiteral("json"),
                                QStringLiteral("Write the merged report as JSON."),
                                QStringLiteral("F"));
  const QCommandLineOption png(QStringLiteral("png"), QStringLiteral("Render the plots as PNG."),
                               QStringLiteral("F"));
  p.addOptions({csv, json, png});
  p.addPositionalArgument(QStringLiteral("parts"),
                          QStringLiteral("The parts: JSON reports of analyze --shard I/N."),
                          QStringLiteral("PART.json..."));
  QStringList argv = args;
  argv.prepend(QStringLiteral("lossbound-cli merge"));
  auto usage = [&](const QString& msg) {
    err << "lossbound-cli merge: " << msg << "\n"
        << "usage: lossbound-cli merge PART.json... [--csv F] [--json F] [--png F]\n";
    return kExitBadInput;
  };
  if (!p.parse(argv)) return usage(p.errorText());
  if (p.isSet(QStringLiteral("help"))) {
    out << p.helpText();
    return kExitNoExit;
  }
  const QStringList files = p.positionalArguments();
  if (files.isEmpty()) return usage(QStringLiteral("expected at least one part"));
  if (p.isSet(png) && !havePngExporter())
    return usage(QStringLiteral("--png: this build has no plot renderer"));

  std::vector<ReportPart> parts;
  AnalysisReport merged;
  try {
    for (const QString& f : files)
      parts.push_back({f.toStdString(), readReportFile(f.toStdString())});
    merged = mergeReports(parts);
  } catch (const std::exception& e) {
    err << "lossbound-cli merge: " << e.what() << "\n";
    return kExitBadInput;
  }
  printReportSummary(merged, QString::fromStdString(merged.referenceSource.path),
                     QString::fromStdString(merged.candidateSource.path), out);
  out.flush();
  if (!writeReportOutputs(merged, {p.value(csv), p.value(json), p.value(png), QString()},
                          QStringLiteral("lossbound-cli merge"), err))
    return kExitBadInput;
  return reportExitCode(merged);
}

}  // namespace lossbound::app
