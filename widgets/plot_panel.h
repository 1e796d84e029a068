#pragma once
// The common part of the loss plot and the margin plot: one QCustomPlot with fixed left and
// right margins (so that stacked plots line up), an x range that can be synchronised with other
// panels, a first-exit marker, click-to-select a step, and coordinates for tests and exports.
// QCustomPlot is only forward-declared here: it stays inside widgets/.

#include <QWidget>

#include <cstdint>
#include <optional>
#include <utility>

class QCustomPlot;
class QCPItemStraightLine;
class QCPItemText;
class QVBoxLayout;

namespace lossbound::widgets {

/// A widget holding one QCustomPlot whose x axis is the training step.
class PlotPanel : public QWidget {
  Q_OBJECT

 public:
  ~PlotPanel() override;

  /// Sets the visible step range; emits xRangeChanged only when it changes.
  void setXRange(double lower, double upper);
  /// Returns the visible step range (lower, upper).
  std::pair<double, double> xRange() const;
  /// Returns the first-exit marker's step, or nothing when no marker is shown.
  std::optional<double> firstExitX() const;

  /// Returns the data area (axis rect) in this widget's coordinates.
  QRect plotArea() const;
  /// Returns the horizontal pixel, in this widget's coordinates, of step `x`.
  double xToPixel(double x) const;
  /// Returns the vertical pixel, in this widget's coordinates, of value `y` (in the panel's
  /// units: a loss, a margin; a panel with a transformed axis maps it through plotY()).
  double yToPixel(double y) const;

  /// Replots immediately (not queued) and returns the time the replot took in milliseconds.
  double replotNow();
  /// Returns the plot itself, for the exporters in widgets/ (never used outside widgets/).
  QCustomPlot* customPlot() const { return mPlot; }

 signals:
  /// Emitted when the visible step range changes (zoom, pan, reset, setXRange).
  void xRangeChanged(double lower, double upper);
  /// Emitted when the user clicks (without dragging) near a step that has a checkpoint or result.
  void stepClicked(qint64 step);

 protected:
  /// Creates the panel with an empty plot; subclasses add their graphs.
  explicit PlotPanel(QWidget* parent);
  /// Returns the plot coordinate that draws value `y` (identity unless the axis is transformed).
  virtual double plotY(double y) const { return y; }
  /// Returns the step a click at widget-x `pixelX` (plot coordinates) refers to, if any.
  virtual std::optional<std::int64_t> stepNearPixel(double pixelX) const = 0;
  /// Shows a vertical marker at `step` (with a label when `withLabel`), or hides it.
  void setFirstExitMarker(std::optional<std::int64_t> step, bool withLabel);
  /// Queues a replot for the next event-loop iteration (coalesces bursts of updates).
  void queueReplot();

  QVBoxLayout* mLayout = nullptr;
  QCustomPlot* mPlot = nullptr;

 private:
  QCPItemStraightLine* mExitLine = nullptr;
  QCPItemText* mExitLabel = nullptr;
  QPoint mPressPos;
};

/// The fixed left margin, in pixels, shared by all stacked plot panels.
inline constexpr int kPlotLeftMargin = 80;
/// The fixed right margin, in pixels, shared by all stacked plot panels.
inline constexpr int kPlotRightMargin = 20;

}  // namespace lossbound::widgets
