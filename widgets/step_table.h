#pragma once
// The step table: one row per checkpointed or analysed step (step, reference loss, candidate
// loss, lo, hi, margin, verdict). Rows without a result yet show the logged losses and fill in as
// results arrive. The view sorts through a QSortFilterProxyModel (by raw numbers, not text),
// selects rows (click, shift-click ranges, ctrl-click) and copies the selection as TSV.

#include "core/analysis/analysis_types.h"
#include "widgets/session_data.h"

#include <QAbstractTableModel>
#include <QList>
#include <QTableView>

#include <cstdint>
#include <optional>
#include <vector>

class QSortFilterProxyModel;

namespace lossbound::widgets {

/// The rows of the step table, in increasing step order.
class StepTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  /// The columns, in display order.
  enum Column {
    StepColumn,
    ReferenceColumn,
    CandidateColumn,
    LoColumn,
    HiColumn,
    MarginColumn,
    VerdictColumn,
    ColumnCount
  };
  /// Role of the raw value a column sorts by (qint64, double, verdict severity; invalid if none).
  static constexpr int kSortRole = Qt::UserRole + 1;
  /// Role of the text copied and exported (full precision numbers).
  static constexpr int kCopyRole = Qt::UserRole + 2;

  /// Creates an empty model.
  explicit StepTableModel(QObject* parent = nullptr);

  /// Replaces all rows: one per checkpointed step, with the logged losses and no results.
  void setSession(const SessionData& session);
  /// Sets the results (rows are added for analysed steps that have no checkpoint row).
  void setResults(const std::vector<StepResult>& results);
  /// Adds or replaces the result of one step (adds its row if needed).
  void updateResult(const StepResult& result);

  /// Returns the step shown in source row `row`.
  std::int64_t stepAt(int row) const;
  /// Returns the source row of `step`, or -1.
  int rowOfStep(std::int64_t step) const;
  /// Returns the result shown in source row `row`, or null when the step is not analysed.
  const StepResult* resultAt(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::int64_t step = 0;
    double referenceLoss = 0;
    double candidateLoss = 0;
    std::optional<StepResult> result;
  };
  int insertRow(std::int64_t step);  // returns the row of step, inserting it if missing

  std::vector<Row> mRows;
  LossSeries mReference, mCandidate;
};

/// A sortable, copyable, multi-selection view of a StepTableModel (which it owns).
class StepTableView : public QTableView {
  Q_OBJECT

 public:
  /// Creates the view with its own model and sort proxy.
  explicit StepTableView(QWidget* parent = nullptr);

  /// Returns the model that holds the rows.
  StepTableModel* stepModel() const { return mModel; }
  /// Returns the selected steps, increasing.
  std::vector<std::int64_t> selectedSteps() const;
  /// Selects exactly the rows of `steps` (steps without a row are ignored); scrolls to the first.
  void selectSteps(const std::vector<std::int64_t>& steps);
  /// Returns the selected rows in view order as TSV: a header line, then one line per row.
  QString selectionAsTsv() const;
  /// Copies selectionAsTsv() to the clipboard.
  void copySelection() const;

 signals:
  /// Emitted when the set of selected steps changes.
  void selectedStepsChanged(const QList<qint64>& steps);
  /// Emitted when the current (focused) row changes to a step.
  void currentStepChanged(qint64 step);

 protected:
  void keyPressEvent(QKeyEvent* event) override;

 private:
  StepTableModel* mModel = nullptr;
  QSortFilterProxyModel* mProxy = nullptr;
};

}  // namespace lossbound::widgets
