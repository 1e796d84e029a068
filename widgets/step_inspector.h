#pragma once
// The step inspector: everything about one analysed step. A horizontal bar chart of the ops that
// own the largest shares of the rounding budget (first-order terms |g_k|·r_k, per node), the
// envelope from each method computed for the step, with --outputs all a margin bar per program
// output (gradients first by rank; red where the two programs' envelopes are disjoint), what
// allclose and the fp64-RMSE rule say about the loss next to the envelope verdict, and the
// checkpoint's tensors (name, shape, dtype, L2 norm).

#include "core/analysis/analysis_types.h"
#include "widgets/session_data.h"

#include <QWidget>

#include <cstdint>
#include <vector>

class QCustomPlot;
class QLabel;
class QTableWidget;

namespace lossbound::widgets {

/// Shows the budget, per-method envelopes and tensors of one step.
class StepInspector : public QWidget {
  Q_OBJECT

 public:
  /// The number of ops the bar chart shows at most.
  static constexpr int kTopOps = 10;
  /// The number of outputs the per-output margin chart shows at most.
  static constexpr int kTopOutputs = 24;

  /// Creates an empty inspector ("no step selected").
  explicit StepInspector(QWidget* parent = nullptr);

  /// Shows nothing.
  void clear();
  /// Shows `step`: the budget of the first result that has one, one envelope row per result
  /// (one per method), and `tensors` (may be empty when the checkpoint was not loaded).
  void setStep(std::int64_t step, const std::vector<StepResult>& perMethod,
               const std::vector<TensorSummary>& tensors);

  /// Returns the number of bars drawn (at most kTopOps).
  int budgetBarCount() const;
  /// Returns the bar labels, largest share first ("node · op  (share%)").
  QStringList budgetLabels() const;
  /// Returns the number of rows of the per-method envelope table.
  int methodRowCount() const;
  /// Returns the number of bars of the per-output margin chart (0 without --outputs all results).
  int outputBarCount() const;
  /// Returns the per-output lines, in rank order: "name  (margin m[, k of n elements disjoint])".
  QStringList outputLabels() const;
  /// Returns the number of rows of the baseline table (2 when the step has baselines, else 0).
  int baselineRowCount() const;
  /// Returns what baseline `row` says about the loss: "same" or "different" ("" past the end).
  QString baselineSays(int row) const;
  /// Returns the number of rows of the tensor table.
  int tensorRowCount() const;

 private:
  void showBaselines(const std::vector<StepResult>& perMethod);
  void showOutputs(const std::vector<StepResult>& perMethod);

  QLabel* mTitle = nullptr;
  QCustomPlot* mBudget = nullptr;
  QStringList mBudgetLabels;
  QCustomPlot* mOutputs = nullptr;
  QStringList mOutputLabels;
  QTableWidget* mMethods = nullptr;
  QTableWidget* mBaselines = nullptr;
  QTableWidget* mTensors = nullptr;
};

}  // namespace lossbound::widgets
