#pragma once
// The verdict panel: the run pair's overall verdict in one coloured line, the first exit, the
// method and what it guarantees in plain words, the self-check status, the step counts and the
// settings. Reads everything from summarize(AnalysisReport).

#include "core/analysis/analysis_types.h"
#include "widgets/verdict_summary.h"

#include <QWidget>

class QLabel;

namespace lossbound::widgets {

/// Shows an AnalysisReport (possibly partial) in words.
class VerdictPanel : public QWidget {
  Q_OBJECT

 public:
  /// Creates the panel showing "Not analysed yet".
  explicit VerdictPanel(QWidget* parent = nullptr);

  /// Shows `report`; `pending` steps are still being computed (0 when the analysis is complete).
  void setReport(const AnalysisReport& report, int pending = 0);
  /// Shows `notice` (e.g. that earlier results were replaced) under the headline; "" hides it.
  void setNotice(const QString& notice);
  /// Returns the notice shown ("" when none).
  QString notice() const;
  /// Returns the summary currently shown.
  const VerdictSummary& summary() const { return mSummary; }
  /// Returns everything shown, as plain text (one line per field).
  QString plainText() const;

 private:
  VerdictSummary mSummary;
  int mPending = 0;
  QLabel* mHeadline = nullptr;
  QLabel* mNotice = nullptr;
  QLabel* mFirstExit = nullptr;
  QLabel* mCounts = nullptr;
  QLabel* mWhy = nullptr;  // why steps could not be bounded (hidden when all were)
  QLabel* mMethod = nullptr;
  QLabel* mGuarantee = nullptr;
  QLabel* mSelfCheck = nullptr;
  QLabel* mSettings = nullptr;
};

}  // namespace lossbound::widgets
