#include "widgets/verdict_summary.h"

#include "core/analysis/qt_text.h"
#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"
#include "widgets/palette.h"

#include <QColor>
#include <QObject>
#include <QStringList>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

namespace {}  // namespace

QString settingsSummary(const AnalysisSettings& s) {
  QStringList parts;
  parts << QObject::tr("method %1").arg(qs(methodName(s.method)));
  parts << QObject::tr("precision %1")
               .arg(s.precision ? qs(formatName(*s.precision)) : QObject::tr("as recorded"));
  if (s.method == EnvelopeMethod::Probabilistic)
    parts << QObject::tr("confidence %1").arg(qNumber(s.confidence, 12));
  if (s.method == EnvelopeMethod::Ensemble)
    parts << QObject::tr("ensemble of %1 (%2), seed %3")
                 .arg(s.ensembleSize)
                 .arg(s.ensembleOrder == EnsembleOrder::PerProduct
                          ? QObject::tr("an order per matrix product")
                          : QObject::tr("an order per element"))
                 .arg(s.seed);
  if (s.method == EnvelopeMethod::Interval)
    parts << (s.startNode.empty() ? QObject::tr("from the inputs")
                                  : QObject::tr("from node %1").arg(qs(s.startNode)));
  parts << QObject::tr("backend %1").arg(qs(s.backend));
  return parts.join(QStringLiteral(", "));
}

namespace {

// Returns the first line of a step note, shortened for the panel.
QString shortReason(const std::string& note) {
  QString t = qs(note);
  const qsizetype cut = t.indexOf(QLatin1Char('\n'));
  if (cut >= 0) t = t.left(cut);
  if (t.size() > 240) t = t.left(237) + QStringLiteral("...");
  return t;
}

QString stepList(const std::vector<std::int64_t>& steps) {
  if (steps.size() == 1) return QObject::tr("step %1").arg(steps.front());
  return QObject::tr("%1 steps (%2 to %3)").arg(steps.size()).arg(steps.front()).arg(steps.back());
}

}  // namespace

VerdictSummary summarize(const AnalysisReport& report) {
  VerdictSummary out;
  const OverallSummary overall = summarizeReport(report);
  out.verdict = overall.verdict;
  out.firstExit = overall.firstExit;
  out.methodText = QObject::tr("Method: %1").arg(qs(methodName(report.settings.method)));
  out.guarantee = qs(settingsGuarantee(report.settings));
  out.settingsText = settingsSummary(report.settings);

  if (overall.verdict == OverallVerdict::NotAnalysed) {
    out.headline = QObject::tr("Not analysed yet");
    out.firstExitText = QObject::tr("No step analysed");
    out.selfCheckText = QObject::tr("Self-check: not run");
    out.countsText = QObject::tr("0 steps analysed");
    return out;
  }
  out.countsText = QObject::tr("%1 steps analysed: %2 inside, %3 outside")
                       .arg(overall.analysed)
                       .arg(overall.inside)
                       .arg(overall.outside);
  if (overall.untrustworthy)
    out.countsText += QObject::tr(", %1 untrustworthy").arg(overall.untrustworthy);
  if (overall.notBounded) out.countsText += QObject::tr(", %1 not bounded").arg(overall.notBounded);

  QStringList why;
  for (const NotBoundedReason& r : overall.notBoundedReasons)
    why << QObject::tr("Not bounded at %1: %2").arg(stepList(r.steps), shortReason(r.reason));
  out.whyText = why.join(QLatin1Char('\n'));

  const int checked = overall.analysed - overall.notBounded;
  out.selfCheckText =
      overall.untrustworthy == 0
          ? QObject::tr("Self-check passed at all %1 bounded steps").arg(checked)
          : QObject::tr(
                "Self-check FAILED at %1 of %2 steps: the candidate's own loss is not inside its "
                "envelope, so the recording or the precision model is wrong (dropout, dtype, an "
                "untraced side effect, ties broken otherwise than on the CPU)")
                .arg(overall.untrustworthy)
                .arg(checked);

  if (const StepResult* it = overall.firstExitStep) {
    out.headline = overall.verdict == OverallVerdict::BugCertain
                       ? QObject::tr("Type-II: implementation bug (certain)")
                       : QObject::tr("Type-II: implementation bug (likely, %1 envelope)")
                             .arg(qs(methodName(it->method)));
    out.firstExitText =
        QObject::tr(
            "First exit at step %1: reference loss %2 outside [%3, %4] "
            "(margin %5)")
            .arg(it->step)
            .arg(qNumber(it->referenceLoss, 10), qNumber(it->lo, 10), qNumber(it->hi, 10))
            .arg(it->margin, 0, 'g', 4);
    return out;
  }
  out.firstExitText = QObject::tr(
      "No exit: the reference loss is inside the envelope at every "
      "bounded step");
  switch (overall.verdict) {
    case OverallVerdict::Untrustworthy:
      out.headline = QObject::tr("Envelope not trustworthy (self-check failed)");
      break;
    case OverallVerdict::NotBounded:
      out.headline = QObject::tr("Could not bound any step");
      out.firstExitText = QObject::tr("No step could be bounded");
      break;
    case OverallVerdict::Inconclusive:
      out.headline = QObject::tr("Inconclusive: %1 of %2 steps could not be bounded")
                         .arg(overall.notBounded)
                         .arg(overall.analysed);
      break;
    default:
      out.headline = QObject::tr("Type-I: rounding explains the gap");
      break;
  }
  return out;
}

QColor overallVerdictColor(OverallVerdict verdict) {
  switch (verdict) {
    case OverallVerdict::NotAnalysed:
      return QColor(90, 90, 90);
    case OverallVerdict::Rounding:
      return verdictColor(StepVerdict::Rounding);
    case OverallVerdict::BugLikely:
      return verdictColor(StepVerdict::BugLikely);
    case OverallVerdict::BugCertain:
      return verdictColor(StepVerdict::BugCertain);
    case OverallVerdict::Untrustworthy:
      return verdictColor(StepVerdict::Untrustworthy);
    case OverallVerdict::Inconclusive:
    case OverallVerdict::NotBounded:
      return verdictColor(StepVerdict::NotBounded);
  }
  return Qt::black;
}

}  // namespace lossbound::widgets
