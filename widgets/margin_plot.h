#pragma once
// The margin plot, drawn below the loss plot on the same step axis: per analysed step, the
// reference loss's distance from the envelope centre in half-widths, with the ±1 band (inside)
// shaded. A 1e-6-relative envelope is invisible at loss scale; here inside is always |m| <= 1.
// The y axis is signed-logarithmic, t(m) = sign(m)·log10(1 + |m|), labelled in margins (0, ±1,
// ±10, ±100, ...): the ±1 band keeps a readable height even when a bug puts margins at ±100 or
// ±1e6, and those outliers stay on the plot. Tooltips show the real margin.

#include "core/analysis/analysis_types.h"
#include "widgets/plot_panel.h"

#include <QString>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

class QCPGraph;
class QCPItemRect;

namespace lossbound::widgets {

/// Margins of the analysed steps on a signed-log axis, points outside the ±1 band coloured.
class MarginPlot : public PlotPanel {
  Q_OBJECT

 public:
  /// Creates an empty margin plot.
  explicit MarginPlot(QWidget* parent = nullptr);
  ~MarginPlot() override;

  /// Returns t(m) = sign(m)·log10(1 + |m|): monotonic, t(0) = 0, t(±1) = ±log10 2, NaN for NaN.
  static double signedLog(double margin);
  /// Returns the margin m with signedLog(m) == t (the inverse of signedLog).
  static double signedLogInverse(double t);

  /// Draws the margins of `steps` (any order; not-bounded and non-finite margins are skipped),
  /// the first-exit line, and fits the y axis to the margins and the ±1 band. Keeps the x range.
  void setResults(const std::vector<StepResult>& steps, std::optional<std::int64_t> firstExit);

  /// Returns the number of drawn points inside the band (|margin| <= 1).
  int insideCount() const;
  /// Returns the number of drawn points outside the band.
  int outsideCount() const;
  /// Returns the visible y range as margins (lower, upper), i.e. through signedLogInverse.
  std::pair<double, double> visibleMarginRange() const;
  /// Returns the labelled margins on the y axis (e.g. -100, -10, -1, 0, 1, 10), increasing.
  std::vector<double> tickMargins() const;
  /// Returns the tooltip for the analysed step nearest to step `x` (within a few pixels): step,
  /// the real margin in half-widths, inside/outside and verdict; "" when none is near.
  QString toolTipAt(double x) const;

 protected:
  double plotY(double y) const override { return signedLog(y); }
  std::optional<std::int64_t> stepNearPixel(double pixelX) const override;

 private:
  void updateTicks();

  std::vector<StepResult> mResults;  // drawn results, sorted by step
  std::vector<std::int64_t> mSteps;  // their steps
  std::vector<double> mTickMargins;
  QCPGraph* mTrend = nullptr;
  QCPGraph* mInside = nullptr;
  QCPGraph* mOutside = nullptr;
  QCPItemRect* mBand = nullptr;
};

}  // namespace lossbound::widgets
