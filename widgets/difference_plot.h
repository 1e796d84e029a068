#pragma once
// The difference plot: per analysed step, the quantity the verdict uses — the candidate program's
// loss replayed in binary64 at the reference's state, minus the reference's logged loss — with the
// envelope drawn as a band around 0. The band is [point − hi, point − lo]: the reference is inside
// the envelope exactly when the difference lies in it (for the first-order and probabilistic
// methods, centred on the point value, that is ±half-width). The logged curves' difference
// (candidate − reference, each at its own state) may be shown as a second, labelled line: it is
// not what the verdict tests, since the two runs' states differ.
//
// The y axis is linear or symmetric-logarithmic, t(y) = sign(y)·log10(1 + |y|/c) with c the median
// band half-width, so the band keeps a readable height while a bug's differences of 100 band
// widths stay on the plot. There is no smoothing: every point is one step's replay.

#include "core/analysis/analysis_types.h"
#include "widgets/plot_panel.h"

#include <QString>

#include <cstdint>
#include <optional>
#include <vector>

class QCheckBox;
class QCPGraph;

namespace lossbound::widgets {

/// Replay-minus-reference differences with the envelope as a band around 0.
class DifferencePlot : public PlotPanel {
  Q_OBJECT

 public:
  /// Creates an empty difference plot with its control bar (sym-log y, logged difference).
  explicit DifferencePlot(QWidget* parent = nullptr);
  ~DifferencePlot() override;

  /// Returns the difference plotted for `r`: its binary64 point replay (pointLoss, else the
  /// baselines' fp64 value) minus referenceLoss; NaN when the step was not bounded or has neither.
  static double replayDifference(const StepResult& r);

  /// Draws the differences and bands of `steps` (any order; steps without a finite difference
  /// are skipped) and the first-exit line; fits the y axis. Keeps the x range.
  void setResults(const std::vector<StepResult>& steps, std::optional<std::int64_t> firstExit);
  /// Switches the y axis between linear and symmetric-logarithmic.
  void setSymLog(bool on);
  /// Returns whether the y axis is symmetric-logarithmic.
  bool symLog() const;
  /// Shows or hides the logged-curve difference line.
  void setLoggedDifferenceVisible(bool on);
  /// Returns whether the logged-curve difference line is shown.
  bool loggedDifferenceVisible() const;

  /// Returns the number of plotted differences.
  int pointCount() const;
  /// Returns the number of plotted differences outside their band.
  int outsideCount() const;
  /// Returns the number of steps with a band drawn.
  int bandPointCount() const;
  /// Returns c, the linear scale of the sym-log axis (the median band half-width; 1 if none).
  double linearScale() const { return mScale; }
  /// Returns the tooltip for the analysed step nearest to step `x`, or "".
  QString toolTipAt(double x) const;

 protected:
  double plotY(double y) const override;
  std::optional<std::int64_t> stepNearPixel(double pixelX) const override;

 private:
  void redraw();

  struct Row {
    std::int64_t step = 0;
    double diff = 0;    // point − reference
    double bandLo = 0;  // point − hi
    double bandHi = 0;  // point − lo
    double logged = 0;  // candidate − reference, logged (different states)
    bool inside = true;
    StepVerdict verdict = StepVerdict::Rounding;
  };
  std::vector<Row> mRows;  // sorted by step
  std::optional<std::int64_t> mFirstExit;
  double mScale = 1;
  bool mSymLog = false;
  QCheckBox* mSymLogBox = nullptr;
  QCheckBox* mLoggedBox = nullptr;
  QCPGraph* mBandLo = nullptr;
  QCPGraph* mBandHi = nullptr;
  QCPGraph* mLogged = nullptr;
  QCPGraph* mDiff = nullptr;
  QCPGraph* mOutside = nullptr;
};

}  // namespace lossbound::widgets
