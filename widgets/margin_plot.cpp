#include "widgets/margin_plot.h"

#include "widgets/palette.h"

#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

MarginPlot::MarginPlot(QWidget* parent) : PlotPanel(parent) {
  mPlot->yAxis->setLabel(tr("margin (half-widths)"));
  mPlot->axisRect()->setRangeZoom(Qt::Horizontal);
  mPlot->axisRect()->setRangeDrag(Qt::Horizontal);

  mBand = new QCPItemRect(mPlot);
  mBand->setLayer(QStringLiteral("background"));
  for (QCPItemPosition* p : {mBand->topLeft, mBand->bottomRight}) {
    p->setTypeX(QCPItemPosition::ptAxisRectRatio);
    p->setTypeY(QCPItemPosition::ptPlotCoords);
  }
  mBand->topLeft->setCoords(0, 1);
  mBand->bottomRight->setCoords(1, -1);
  QColor fill = kBandColor;
  fill.setAlpha(70);
  mBand->setBrush(fill);
  mBand->setPen(QPen(kBandColor, 1, Qt::DotLine));

  auto* zero = new QCPItemStraightLine(mPlot);
  zero->point1->setTypeX(QCPItemPosition::ptAxisRectRatio);
  zero->point2->setTypeX(QCPItemPosition::ptAxisRectRatio);
  zero->point1->setCoords(0, 0);
  zero->point2->setCoords(1, 0);
  zero->setPen(QPen(QColor(150, 150, 150), 1, Qt::DashLine));

  mTrend = mPlot->addGraph();
  mTrend->setPen(QPen(QColor(170, 170, 170), 1));
  mInside = mPlot->addGraph();
  mInside->setLineStyle(QCPGraph::lsNone);
  mInside->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssDisc, kReferenceColor, kReferenceColor, 5));
  mOutside = mPlot->addGraph();
  mOutside->setLineStyle(QCPGraph::lsNone);
  mOutside->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, kExitColor, kExitColor, 6));
  setResults({}, std::nullopt);
}

MarginPlot::~MarginPlot() = default;

void MarginPlot::setResults(const std::vector<StepResult>& steps,
                            std::optional<std::int64_t> firstExit) {
  std::vector<const StepResult*> sorted;
  for (const StepResult& r : steps)
    if (r.verdict != StepVerdict::NotBounded && std::isfinite(r.margin)) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(),
            [](const StepResult* a, const StepResult* b) { return a->step < b->step; });
  QVector<QCPGraphData> all, in, out;
  mSteps.clear();
  double yLo = -1.5, yHi = 1.5;
  for (const StepResult* r : sorted) {
    const QCPGraphData d(double(r->step), r->margin);
    all.push_back(d);
    (std::abs(r->margin) <= 1 && r->inside ? in : out).push_back(d);
    mSteps.push_back(r->step);
    yLo = std::min(yLo, r->margin * 1.1);
    yHi = std::max(yHi, r->margin * 1.1);
  }
  mTrend->data()->set(all, true);
  mInside->data()->set(in, true);
  mOutside->data()->set(out, true);
  mPlot->yAxis->setRange(yLo, yHi);
  setFirstExitMarker(firstExit, false);
  queueReplot();
}

int MarginPlot::insideCount() const { return mInside->data()->size(); }
int MarginPlot::outsideCount() const { return mOutside->data()->size(); }

std::optional<std::int64_t> MarginPlot::stepNearPixel(double pixelX) const {
  const double x = mPlot->xAxis->pixelToCoord(pixelX);
  const auto it = std::lower_bound(mSteps.begin(), mSteps.end(), x,
                                   [](std::int64_t s, double v) { return double(s) < v; });
  std::optional<std::int64_t> best;
  double bestDist = 6;
  for (auto c : {it, it == mSteps.begin() ? it : it - 1}) {
    if (c == mSteps.end()) continue;
    const double d = std::abs(mPlot->xAxis->coordToPixel(double(*c)) - pixelX);
    if (d <= bestDist) bestDist = d, best = *c;
  }
  return best;
}

}  // namespace lossbound::widgets
