#pragma once
// The workbench: loss plot over margin plot (x axes synchronised), step table, verdict panel and
// step inspector in splitters. It owns the session on display (loss logs, checkpoints, the
// current report and every result seen per step and method) and keeps all parts consistent as
// results arrive one step at a time. Knows nothing of files or threads: the app feeds it.

#include "core/analysis/analysis_types.h"
#include "widgets/session_data.h"

#include <QList>
#include <QWidget>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

class QSplitter;

namespace lossbound::widgets {

class LossPlot;
class DifferencePlot;
class MarginPlot;
class PlotPanel;
class StepInspector;
class StepTableView;
class VerdictPanel;

/// The composed analysis view of one run pair.
class WorkbenchView : public QWidget {
  Q_OBJECT

 public:
  /// Returns the tensors of the reference checkpoint at a step (may throw nothing; empty is ok).
  using TensorProvider = std::function<std::vector<TensorSummary>(std::int64_t step)>;

  /// Creates an empty workbench.
  explicit WorkbenchView(QWidget* parent = nullptr);
  ~WorkbenchView() override;

  /// Shows a run pair and its analysis so far (empty or partial); forgets all earlier results.
  void setSession(const SessionData& session, const AnalysisReport& report = {});
  /// Replaces the analysis shown (keeps the runs and the results of other methods).
  void setReport(const AnalysisReport& report);
  /// Starts an analysis with `settings` for `pendingSteps` steps. With the same result settings
  /// as the report shown (sameResultSettings), its results stay and the new ones are merged in;
  /// otherwise the report restarts empty and the verdict panel says the earlier results were
  /// replaced. Earlier results remain in the inspector. Results arrive with updateStep().
  void beginAnalysis(const AnalysisSettings& settings, int pendingSteps);
  /// Adds or replaces the result of one step as the analysis finishes it; redraws everything.
  void updateStep(const StepResult& result);
  /// Marks the analysis finished (pending count 0). A final `report` (the job's steps only) is
  /// merged into the results shown when its settings match theirs, else replaces them; the first
  /// exit is recomputed over the merged steps.
  void finishAnalysis(const std::optional<AnalysisReport>& report = std::nullopt);
  /// Sets where the inspector gets a checkpoint's tensors from.
  void setTensorProvider(TensorProvider provider);

  /// Returns the loss logs and checkpoints shown.
  const SessionData& session() const { return mSession; }
  /// Returns the current report (steps in increasing order, firstExit up to date).
  const AnalysisReport& report() const { return mReport; }
  /// Returns the steps selected in the table, increasing.
  std::vector<std::int64_t> selectedSteps() const;
  /// Shows `step` in the inspector and selects it in the table.
  void inspectStep(std::int64_t step);
  /// Returns the step shown in the inspector, if any.
  std::optional<std::int64_t> inspectedStep() const { return mInspected; }

  /// Returns the loss plot.
  LossPlot* lossPlot() const { return mLossPlot; }
  /// Returns the margin plot.
  MarginPlot* marginPlot() const { return mMarginPlot; }
  /// Returns the difference plot.
  DifferencePlot* differencePlot() const { return mDifferencePlot; }
  /// Returns the step table.
  StepTableView* stepTable() const { return mTable; }
  /// Returns the verdict panel.
  VerdictPanel* verdictPanel() const { return mVerdict; }
  /// Returns the step inspector.
  StepInspector* inspector() const { return mInspector; }
  /// Returns the plots to export, top to bottom.
  QList<PlotPanel*> plots() const;

  /// Returns the splitter sizes, for QSettings.
  QByteArray saveState() const;
  /// Restores splitter sizes saved by saveState(); returns false for unusable data.
  bool restoreState(const QByteArray& state);

 signals:
  /// Emitted when the table selection changes.
  void selectedStepsChanged(const QList<qint64>& steps);
  /// Emitted when a step is shown in the inspector.
  void stepInspected(qint64 step);

 private:
  void refreshResults();
  void refreshInspector();

  SessionData mSession;
  AnalysisReport mReport;
  int mPending = 0;
  std::set<std::int64_t> mJobSteps;  // steps the running analysis has delivered
  QString mNotice;                   // shown in the verdict panel: merged or replaced results
  std::map<std::int64_t, std::map<EnvelopeMethod, StepResult>> mAllResults;
  std::optional<std::int64_t> mInspected;
  TensorProvider mTensors;

  LossPlot* mLossPlot = nullptr;
  MarginPlot* mMarginPlot = nullptr;
  DifferencePlot* mDifferencePlot = nullptr;
  StepTableView* mTable = nullptr;
  VerdictPanel* mVerdict = nullptr;
  StepInspector* mInspector = nullptr;
  QList<QSplitter*> mSplitters;
};

}  // namespace lossbound::widgets
