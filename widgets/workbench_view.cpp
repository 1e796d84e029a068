#include "widgets/workbench_view.h"

#include "core/analysis/verdict.h"
#include "widgets/difference_plot.h"
#include "widgets/loss_plot.h"
#include "widgets/margin_plot.h"
#include "widgets/step_inspector.h"
#include "widgets/step_table.h"
#include "widgets/verdict_panel.h"
#include "widgets/verdict_summary.h"

#include <QDataStream>
#include <QHBoxLayout>
#include <QIODevice>
#include <QScrollArea>
#include <QSplitter>

#include <algorithm>

namespace lossbound::widgets {

WorkbenchView::WorkbenchView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* horizontal = new QSplitter(Qt::Horizontal, this);
  auto* left = new QSplitter(Qt::Vertical, horizontal);
  auto* right = new QSplitter(Qt::Vertical, horizontal);
  mLossPlot = new LossPlot(left);
  mMarginPlot = new MarginPlot(left);
  mDifferencePlot = new DifferencePlot(left);
  mTable = new StepTableView(left);
  auto* verdictScroll = new QScrollArea(right);
  verdictScroll->setWidgetResizable(true);
  verdictScroll->setFrameShape(QFrame::NoFrame);
  mVerdict = new VerdictPanel(verdictScroll);
  verdictScroll->setWidget(mVerdict);
  mInspector = new StepInspector(right);
  left->addWidget(mLossPlot);
  left->addWidget(mMarginPlot);
  left->addWidget(mDifferencePlot);
  left->addWidget(mTable);
  left->setStretchFactor(0, 5);
  left->setStretchFactor(1, 2);
  left->setStretchFactor(2, 2);
  left->setStretchFactor(3, 2);
  left->setSizes({420, 150, 170, 160});
  right->addWidget(verdictScroll);
  right->addWidget(mInspector);
  right->setStretchFactor(0, 1);
  right->setStretchFactor(1, 3);
  right->setSizes({300, 600});
  horizontal->addWidget(left);
  horizontal->addWidget(right);
  horizontal->setStretchFactor(0, 3);
  horizontal->setStretchFactor(1, 1);
  horizontal->setSizes({800, 330});
  layout->addWidget(horizontal);
  mSplitters = {horizontal, left, right};

  // Same x axis: each plot follows the others (setXRange ignores an unchanged range, no loop).
  const QList<PlotPanel*> panels = plots();
  for (PlotPanel* from : panels) {
    for (PlotPanel* to : panels)
      if (to != from) connect(from, &PlotPanel::xRangeChanged, to, &PlotPanel::setXRange);
    connect(from, &PlotPanel::stepClicked, this, [this](qint64 s) { inspectStep(s); });
  }
  connect(mTable, &StepTableView::selectedStepsChanged, this, &WorkbenchView::selectedStepsChanged);
  connect(mTable, &StepTableView::currentStepChanged, this, [this](qint64 step) {
    if (mInspected == step) return;
    mInspected = step;
    refreshInspector();
    emit stepInspected(step);
  });
}

WorkbenchView::~WorkbenchView() = default;

void WorkbenchView::setSession(const SessionData& session, const AnalysisReport& report) {
  mSession = session;
  mAllResults.clear();
  mInspected.reset();
  mPending = 0;
  mJobSteps.clear();
  mNotice.clear();
  mLossPlot->setSession(session);
  mTable->stepModel()->setSession(session);
  mInspector->clear();
  setReport(report);
  const auto [lo, hi] = mLossPlot->xRange();
  mMarginPlot->setXRange(lo, hi);
  mDifferencePlot->setXRange(lo, hi);
}

void WorkbenchView::setReport(const AnalysisReport& report) {
  mReport = report;
  std::sort(mReport.steps.begin(), mReport.steps.end(),
            [](const StepResult& a, const StepResult& b) { return a.step < b.step; });
  for (const StepResult& r : mReport.steps) mAllResults[r.step][r.method] = r;
  if (!mReport.firstExit) mReport.firstExit = firstExit(mReport.steps);
  const auto selection = mTable->selectedSteps();  // a model reset would drop it
  mTable->stepModel()->setResults(mReport.steps);
  mTable->selectSteps(selection);
  refreshResults();
  refreshInspector();
}

void WorkbenchView::beginAnalysis(const AnalysisSettings& settings, int pendingSteps) {
  // Results computed with the same envelope settings are merged (the recomputed steps replace
  // theirs, the others stay); with other settings they would not be comparable, so they go.
  const std::size_t earlier = mReport.steps.size();
  const bool merge = earlier > 0 && sameResultSettings(mReport.settings, settings);
  AnalysisReport next;
  next.referenceName =
      mReport.referenceName.empty() ? mSession.reference.name.toStdString() : mReport.referenceName;
  next.candidateName =
      mReport.candidateName.empty() ? mSession.candidate.name.toStdString() : mReport.candidateName;
  next.backendDescription = mReport.backendDescription;
  next.settings = settings;
  if (merge) {
    next.steps = mReport.steps;
    mNotice =
        tr("Recomputing %n step(s); results of the other steps with the same settings are "
           "kept and merged.",
           nullptr, pendingSteps);
  } else if (earlier > 0) {
    mNotice = tr("Settings changed (%1 → %2): the %n earlier result(s) were replaced, not merged.",
                 nullptr, int(earlier))
                  .arg(settingsSummary(mReport.settings), settingsSummary(settings));
  } else {
    mNotice.clear();
  }
  next.firstExit = firstExit(next.steps);
  mJobSteps.clear();
  setReport(next);
  mPending = pendingSteps;
  refreshResults();
}

void WorkbenchView::updateStep(const StepResult& result) {
  auto& steps = mReport.steps;
  const auto it = std::lower_bound(steps.begin(), steps.end(), result.step,
                                   [](const StepResult& r, std::int64_t s) { return r.step < s; });
  if (it != steps.end() && it->step == result.step)
    *it = result;
  else
    steps.insert(it, result);
  if (mJobSteps.insert(result.step).second) mPending = std::max(0, mPending - 1);
  mAllResults[result.step][result.method] = result;
  mReport.firstExit = firstExit(steps);
  mTable->stepModel()->updateResult(result);
  refreshResults();
  if (mInspected == result.step) refreshInspector();
}

void WorkbenchView::finishAnalysis(const std::optional<AnalysisReport>& report) {
  mPending = 0;
  mJobSteps.clear();
  if (!report) {
    refreshResults();
    return;
  }
  // The job's report holds its own steps only: merge them into what is shown and recompute the
  // first exit over the merged set (core's rule, as for a whole analysis).
  AnalysisReport merged = *report;
  if (sameResultSettings(mReport.settings, report->settings)) {
    merged.steps = mergeResults(mReport.steps, report->steps);
  } else if (!mReport.steps.empty()) {
    mNotice = tr("Settings changed (%1 → %2): the %n earlier result(s) were replaced, not merged.",
                 nullptr, int(mReport.steps.size()))
                  .arg(settingsSummary(mReport.settings), settingsSummary(report->settings));
  }
  merged.firstExit = firstExit(merged.steps);
  setReport(merged);
}

void WorkbenchView::setTensorProvider(TensorProvider provider) {
  mTensors = std::move(provider);
  refreshInspector();
}

std::vector<std::int64_t> WorkbenchView::selectedSteps() const { return mTable->selectedSteps(); }

void WorkbenchView::inspectStep(std::int64_t step) {
  mTable->selectSteps({step});
  if (mInspected != step) {
    mInspected = step;
    refreshInspector();
    emit stepInspected(qint64(step));
  }
}

QList<PlotPanel*> WorkbenchView::plots() const { return {mLossPlot, mMarginPlot, mDifferencePlot}; }

void WorkbenchView::refreshResults() {
  mLossPlot->setResults(mReport.steps, mReport.firstExit);
  mMarginPlot->setResults(mReport.steps, mReport.firstExit);
  mDifferencePlot->setResults(mReport.steps, mReport.firstExit);
  mVerdict->setReport(mReport, mPending);
  mVerdict->setNotice(mNotice);
}

void WorkbenchView::refreshInspector() {
  if (!mInspected) return;
  std::vector<StepResult> perMethod;
  // The current report's method first, then the other methods computed for this step.
  if (const auto it = mAllResults.find(*mInspected); it != mAllResults.end()) {
    for (const auto& [method, r] : it->second)
      if (method == mReport.settings.method)
        perMethod.insert(perMethod.begin(), r);
      else
        perMethod.push_back(r);
  }
  std::vector<TensorSummary> tensors;
  if (mTensors) tensors = mTensors(*mInspected);
  mInspector->setStep(*mInspected, perMethod, tensors);
}

QByteArray WorkbenchView::saveState() const {
  QByteArray out;
  QDataStream stream(&out, QIODevice::WriteOnly);
  stream << qint32(2);  // 2: the left splitter holds the difference plot too
  for (QSplitter* s : mSplitters) stream << s->saveState();
  return out;
}

bool WorkbenchView::restoreState(const QByteArray& state) {
  QDataStream stream(state);
  qint32 version = 0;
  stream >> version;
  if (version != 2) return false;
  for (QSplitter* s : mSplitters) {
    QByteArray part;
    stream >> part;
    if (stream.status() != QDataStream::Ok || !s->restoreState(part)) return false;
  }
  return true;
}

}  // namespace lossbound::widgets
