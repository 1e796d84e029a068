#pragma once
// The recompute dialog: which steps to analyse (all checkpointed, the selected ones, or a step
// range), with which envelope method, precision, confidence, ensemble size, backend and (for
// intervals) start node. Remembers the last choices in QSettings (group "recompute").

#include "core/analysis/analysis_types.h"

#include <QDialog>

#include <cstdint>
#include <vector>

class QButtonGroup;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QRadioButton;
class QSpinBox;

namespace lossbound::widgets {

/// What the user asked to compute.
struct RecomputeRequest {
  std::vector<std::int64_t> steps;  ///< checkpointed steps to analyse, increasing, non-empty
  AnalysisSettings settings;        ///< method, precision, confidence, ensemble, node, backend
};

/// Returns the analysis settings the dialog remembers (QSettings group "recompute", written when
/// it is accepted): a value never written keeps AnalysisSettings' default, the start node is kept
/// for the interval method only. The one reader of those values (the app's first analysis too).
AnalysisSettings rememberedSettings();

/// A modal dialog that returns a RecomputeRequest.
class RecomputeDialog : public QDialog {
  Q_OBJECT

 public:
  /// Which steps the request covers.
  enum class StepChoice { AllCheckpointed, Selected, Range };

  /// Creates the dialog for the given checkpointed steps and current selection; `nodeNames`
  /// fills the start-node list (may be empty). Restores the last choices from QSettings.
  RecomputeDialog(std::vector<std::int64_t> checkpointSteps,
                  std::vector<std::int64_t> selectedSteps, const QStringList& nodeNames = {},
                  QWidget* parent = nullptr);

  /// Returns the request the dialog currently describes (steps may be empty: OK is disabled then).
  RecomputeRequest request() const;
  /// Returns which step choice is active.
  StepChoice stepChoice() const;
  /// Activates a step choice (Selected falls back to all when nothing is selected).
  void setStepChoice(StepChoice choice);
  /// Sets the inclusive step range used by StepChoice::Range.
  void setRange(std::int64_t first, std::int64_t last);
  /// Sets the method shown.
  void setMethod(EnvelopeMethod method);
  /// Writes the current choices to QSettings (done automatically on accept).
  void saveChoices() const;

  void accept() override;

 private:
  void updateState();
  void loadChoices();

  std::vector<std::int64_t> mCheckpoints;
  std::vector<std::int64_t> mSelected;
  QRadioButton* mAll = nullptr;
  QRadioButton* mSelectedButton = nullptr;
  QRadioButton* mRange = nullptr;
  QSpinBox* mFrom = nullptr;
  QSpinBox* mTo = nullptr;
  QLabel* mCount = nullptr;
  QComboBox* mMethod = nullptr;
  QLabel* mGuarantee = nullptr;
  QComboBox* mPrecision = nullptr;
  QDoubleSpinBox* mConfidence = nullptr;
  QSpinBox* mEnsemble = nullptr;
  QComboBox* mEnsembleOrder = nullptr;
  QCheckBox* mAllOutputs = nullptr;
  QComboBox* mBackend = nullptr;
  QComboBox* mStartNode = nullptr;
  QLabel* mStartCaveat = nullptr;
  QPushButton* mOk = nullptr;
};

}  // namespace lossbound::widgets
