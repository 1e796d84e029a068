#include "widgets/verdict_summary.h"

#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"
#include "widgets/palette.h"

#include <QColor>
#include <QObject>
#include <QStringList>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

namespace {

QString qs(std::string_view s) { return QString::fromUtf8(s.data(), qsizetype(s.size())); }

QString num(double v) { return QString::number(v, 'g', 10); }

bool isBug(StepVerdict v) { return v == StepVerdict::BugLikely || v == StepVerdict::BugCertain; }

}  // namespace

std::optional<std::int64_t> firstExitOf(const std::vector<StepResult>& steps) {
  return firstExit(steps);
}

QString settingsSummary(const AnalysisSettings& s) {
  QStringList parts;
  parts << QObject::tr("method %1").arg(qs(methodName(s.method)));
  parts << QObject::tr("precision %1")
               .arg(s.precision ? qs(formatName(*s.precision)) : QObject::tr("as recorded"));
  if (s.method == EnvelopeMethod::Probabilistic)
    parts << QObject::tr("confidence %1").arg(QString::number(s.confidence, 'g', 12));
  if (s.method == EnvelopeMethod::Ensemble)
    parts << QObject::tr("ensemble of %1, seed %2").arg(s.ensembleSize).arg(s.seed);
  if (s.method == EnvelopeMethod::Interval)
    parts << (s.startNode.empty() ? QObject::tr("from the inputs")
                                  : QObject::tr("from node %1").arg(qs(s.startNode)));
  parts << QObject::tr("backend %1").arg(qs(s.backend));
  return parts.join(QStringLiteral(", "));
}

VerdictSummary summarize(const AnalysisReport& report) {
  VerdictSummary out;
  const auto& steps = report.steps;
  int inside = 0, outside = 0, selfFailed = 0, notBounded = 0, infinite = 0;
  for (const StepResult& s : steps) {
    if (s.verdict != StepVerdict::NotBounded && !(std::isfinite(s.lo) && std::isfinite(s.hi)))
      ++infinite;
    if (s.verdict == StepVerdict::NotBounded)
      ++notBounded;
    else if (s.verdict == StepVerdict::Untrustworthy)
      ++selfFailed;
    else if (isBug(s.verdict) || !s.inside)
      ++outside;
    else
      ++inside;
    if (s.verdict != StepVerdict::Untrustworthy && s.verdict != StepVerdict::NotBounded &&
        !s.selfCheckPassed)
      ++selfFailed;
  }
  out.methodText = QObject::tr("Method: %1").arg(qs(methodName(report.settings.method)));
  out.guarantee = qs(methodGuarantee(report.settings.method));
  if (report.settings.method == EnvelopeMethod::Interval && !report.settings.startNode.empty())
    out.guarantee += QObject::tr(" Bounds start at node %1: rounding before it is ignored.")
                         .arg(qs(report.settings.startNode));
  out.settingsText = settingsSummary(report.settings);
  out.firstExit = report.firstExit ? report.firstExit : firstExitOf(steps);

  if (steps.empty()) {
    out.verdict = OverallVerdict::NotAnalysed;
    out.headline = QObject::tr("Not analysed yet");
    out.firstExitText = QObject::tr("No step analysed");
    out.selfCheckText = QObject::tr("Self-check: not run");
    out.countsText = QObject::tr("0 steps analysed");
    return out;
  }
  out.countsText = QObject::tr("%1 steps analysed: %2 inside, %3 outside")
                       .arg(steps.size())
                       .arg(inside)
                       .arg(outside);
  if (selfFailed) out.countsText += QObject::tr(", %1 untrustworthy").arg(selfFailed);
  if (notBounded) out.countsText += QObject::tr(", %1 not bounded").arg(notBounded);
  if (infinite)
    out.countsText += QObject::tr(
                          " — the envelope is infinite at %1 step(s): \"inside\" there "
                          "says nothing; try another method or a start node")
                          .arg(infinite);

  const int checked = int(steps.size()) - notBounded;
  out.selfCheckText =
      selfFailed == 0 ? QObject::tr("Self-check passed at all %1 bounded steps").arg(checked)
                      : QObject::tr(
                            "Self-check FAILED at %1 of %2 steps: the candidate's own loss is not "
                            "inside its envelope, so the recording or the precision model is wrong "
                            "(dropout, dtype, an untraced side effect)")
                            .arg(selfFailed)
                            .arg(checked);

  if (out.firstExit) {
    const auto it = std::find_if(steps.begin(), steps.end(),
                                 [&](const StepResult& s) { return s.step == *out.firstExit; });
    const bool certain = it != steps.end() && it->verdict == StepVerdict::BugCertain;
    out.verdict = certain ? OverallVerdict::BugCertain : OverallVerdict::BugLikely;
    out.headline =
        certain ? QObject::tr("Type-II: implementation bug (certain)")
                : QObject::tr("Type-II: implementation bug (likely, %1 envelope)")
                      .arg(qs(methodName(it != steps.end() ? it->method : report.settings.method)));
    out.firstExitText = QObject::tr("First exit at step %1").arg(*out.firstExit);
    if (it != steps.end())
      out.firstExitText += QObject::tr(": reference loss %1 outside [%2, %3] (margin %4)")
                               .arg(num(it->referenceLoss), num(it->lo), num(it->hi))
                               .arg(it->margin, 0, 'g', 4);
    return out;
  }
  out.firstExitText = QObject::tr(
      "No exit: the reference loss is inside the envelope at every "
      "bounded step");
  if (selfFailed > 0) {
    out.verdict = OverallVerdict::Untrustworthy;
    out.headline = QObject::tr("Envelope not trustworthy (self-check failed)");
  } else if (infinite > 0 && infinite == int(steps.size()) - notBounded) {
    out.verdict = OverallVerdict::NotBounded;
    out.headline = QObject::tr("Inconclusive: the envelope is infinite");
  } else if (notBounded == int(steps.size())) {
    out.verdict = OverallVerdict::NotBounded;
    out.headline = QObject::tr("Could not bound any step");
    out.firstExitText = QObject::tr("No step could be bounded");
  } else {
    out.verdict = OverallVerdict::Rounding;
    out.headline = QObject::tr("Type-I: rounding explains the gap");
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
    case OverallVerdict::NotBounded:
      return verdictColor(StepVerdict::NotBounded);
  }
  return Qt::black;
}

}  // namespace lossbound::widgets
