#pragma once
// The margin plot, drawn below the loss plot on the same step axis: per analysed step, the
// reference loss's distance from the envelope centre in half-widths, with the ±1 band (inside)
// shaded. A 1e-6-relative envelope is invisible at loss scale; here inside is always |m| <= 1.

#include "core/analysis/analysis_types.h"
#include "widgets/plot_panel.h"

#include <cstdint>
#include <optional>
#include <vector>

class QCPGraph;
class QCPItemRect;

namespace lossbound::widgets {

/// Margins of the analysed steps, points outside the ±1 band coloured.
class MarginPlot : public PlotPanel {
  Q_OBJECT

 public:
  /// Creates an empty margin plot.
  explicit MarginPlot(QWidget* parent = nullptr);
  ~MarginPlot() override;

  /// Draws the margins of `steps` (any order; not-bounded steps are skipped), the first-exit
  /// line, and fits the y axis to the margins and the ±1 band. Keeps the x range.
  void setResults(const std::vector<StepResult>& steps, std::optional<std::int64_t> firstExit);

  /// Returns the number of drawn points inside the band (|margin| <= 1).
  int insideCount() const;
  /// Returns the number of drawn points outside the band.
  int outsideCount() const;

 protected:
  std::optional<std::int64_t> stepNearPixel(double pixelX) const override;

 private:
  std::vector<std::int64_t> mSteps;  // drawn steps, sorted
  QCPGraph* mTrend = nullptr;
  QCPGraph* mInside = nullptr;
  QCPGraph* mOutside = nullptr;
  QCPItemRect* mBand = nullptr;
};

}  // namespace lossbound::widgets
