#pragma once
// The loss plot: the reference and candidate loss curves, the checkpointed steps, the envelope
// as a band at the analysed steps, the points outside it and the first exit. Display controls
// (x-only zoom, log y, EMA smoothing, reset) live in a bar above the plot. Smoothing changes only
// what is drawn; results and tooltips always use the logged values.
//
// Fast with 1e6 logged steps: QCustomPlot's adaptive sampling reduces each curve to a few points
// per pixel column (min/max per column) before drawing, so a redraw touches each visible point
// once and draws O(width) segments.

#include "core/analysis/analysis_types.h"
#include "widgets/plot_panel.h"
#include "widgets/session_data.h"

#include <cstdint>
#include <optional>
#include <vector>

class QCheckBox;
class QCPGraph;
class QDoubleSpinBox;
class QSlider;

namespace lossbound::widgets {

/// The loss curves of a run pair with the analysis drawn on top.
class LossPlot : public PlotPanel {
  Q_OBJECT

 public:
  /// Creates an empty plot with its control bar.
  explicit LossPlot(QWidget* parent = nullptr);
  ~LossPlot() override;

  /// Shows the loss logs of both runs and marks the checkpoints; clears results; resets the view.
  void setSession(const SessionData& session);
  /// Draws the envelope band, outside points and first-exit marker of `steps` (any order).
  void setResults(const std::vector<StepResult>& steps, std::optional<std::int64_t> firstExit);

  /// Restricts zoom and pan to the x axis (true) or allows both axes.
  void setXOnly(bool xOnly);
  /// Returns whether zoom and pan are x-only.
  bool xOnly() const;
  /// Switches the y axis between logarithmic and linear, keeping the view fitted.
  void setLogY(bool logY);
  /// Returns whether the y axis is logarithmic.
  bool logY() const;
  /// Sets the display smoothing weight in [0, 0.99] (0: none); the raw curves stay visible faintly.
  void setSmoothing(double weight);
  /// Returns the display smoothing weight.
  double smoothing() const;
  /// Returns the visible loss range (lower, upper).
  std::pair<double, double> yRange() const;
  /// Fits both axes to the data (all steps, all losses and envelopes).
  void resetView();

  /// Returns the tooltip text for the step nearest to `x` (snapping to an analysed step within
  /// a few pixels): step, both losses, envelope and verdict.
  QString toolTipAt(double x) const;

  /// Returns the number of points in the reference curve (the logged steps).
  int referencePointCount() const;
  /// Returns the number of points in the candidate curve.
  int candidatePointCount() const;
  /// Returns the number of checkpoint markers.
  int checkpointMarkerCount() const;
  /// Returns the number of analysed steps drawn in the envelope band.
  int bandPointCount() const;
  /// Returns the number of analysed steps marked as outside the envelope.
  int outsideMarkerCount() const;
  /// Returns the values the reference curve currently draws (smoothed or raw), for tests.
  std::vector<double> displayedReference() const;

 signals:
  /// Emitted when the log-y setting changes.
  void logYChanged(bool logY);
  /// Emitted when the x-only zoom setting changes (from setXOnly or the plot's own checkbox).
  void xOnlyChanged(bool xOnly);

 protected:
  std::optional<std::int64_t> stepNearPixel(double pixelX) const override;

 private:
  void applySmoothing();
  void updateYTicker();
  const StepResult* resultNear(double x, double pixelTolerance) const;

  SessionData mSession;
  std::vector<StepResult> mResults;  // sorted by step
  double mSmoothing = 0;

  QCPGraph* mBandLo = nullptr;
  QCPGraph* mBandHi = nullptr;
  QCPGraph* mRawReference = nullptr;
  QCPGraph* mRawCandidate = nullptr;
  QCPGraph* mReference = nullptr;
  QCPGraph* mCandidate = nullptr;
  QCPGraph* mCheckpoints = nullptr;
  QCPGraph* mOutside = nullptr;

  QCheckBox* mXOnlyBox = nullptr;
  QCheckBox* mLogYBox = nullptr;
  QSlider* mSmoothSlider = nullptr;
  QDoubleSpinBox* mSmoothSpin = nullptr;
};

}  // namespace lossbound::widgets
