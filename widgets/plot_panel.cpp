#include "widgets/plot_panel.h"

#include "widgets/palette.h"

#include <QElapsedTimer>
#include <QMouseEvent>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace lossbound::widgets {

PlotPanel::PlotPanel(QWidget* parent) : QWidget(parent) {
  mLayout = new QVBoxLayout(this);
  mLayout->setContentsMargins(0, 0, 0, 0);
  mLayout->setSpacing(2);
  mPlot = new QCustomPlot(this);
  mLayout->addWidget(mPlot, 1);
  // Fast polylines: one drawPolyline per graph instead of segment-wise drawing (1e6 steps).
  mPlot->setPlottingHints(QCP::phFastPolylines | QCP::phCacheLabels);
  mPlot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  mPlot->axisRect()->setAutoMargins(QCP::msTop | QCP::msBottom);
  mPlot->axisRect()->setMargins(QMargins(kPlotLeftMargin, 0, kPlotRightMargin, 0));
  mPlot->xAxis->setLabel(tr("step"));
  mPlot->xAxis->setNumberFormat(QStringLiteral("f"));
  mPlot->xAxis->setNumberPrecision(0);
  connect(mPlot->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this](const QCPRange& r) { emit xRangeChanged(r.lower, r.upper); });
  connect(mPlot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { mPressPos = e->pos(); });
  connect(mPlot, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
    if ((e->pos() - mPressPos).manhattanLength() > 3 || e->button() != Qt::LeftButton) return;
    if (!mPlot->axisRect()->rect().contains(e->pos())) return;
    if (const auto step = stepNearPixel(e->pos().x())) emit stepClicked(qint64(*step));
  });
}

PlotPanel::~PlotPanel() = default;

void PlotPanel::setXRange(double lower, double upper) {
  const QCPRange current = mPlot->xAxis->range();
  if (current.lower == lower && current.upper == upper) return;
  mPlot->xAxis->setRange(lower, upper);
  queueReplot();
}

std::pair<double, double> PlotPanel::xRange() const {
  return {mPlot->xAxis->range().lower, mPlot->xAxis->range().upper};
}

std::optional<double> PlotPanel::firstExitX() const {
  if (!mExitLine || !mExitLine->visible()) return std::nullopt;
  return mExitLine->point1->key();
}

QRect PlotPanel::plotArea() const {
  const QRect r = mPlot->axisRect()->rect();
  return r.translated(mPlot->mapTo(this, QPoint(0, 0)));
}

double PlotPanel::xToPixel(double x) const {
  return mPlot->xAxis->coordToPixel(x) + mPlot->mapTo(this, QPoint(0, 0)).x();
}

double PlotPanel::yToPixel(double y) const {
  return mPlot->yAxis->coordToPixel(plotY(y)) + mPlot->mapTo(this, QPoint(0, 0)).y();
}

double PlotPanel::replotNow() {
  QElapsedTimer timer;
  timer.start();
  mPlot->replot(QCustomPlot::rpImmediateRefresh);
  return double(timer.nsecsElapsed()) / 1e6;
}

void PlotPanel::queueReplot() { mPlot->replot(QCustomPlot::rpQueuedReplot); }

void PlotPanel::setFirstExitMarker(std::optional<std::int64_t> step, bool withLabel) {
  if (!mExitLine) {
    mExitLine = new QCPItemStraightLine(mPlot);
    mExitLine->setPen(QPen(kExitColor, 2));
    for (QCPItemPosition* p : {mExitLine->point1, mExitLine->point2}) {
      p->setTypeX(QCPItemPosition::ptPlotCoords);
      p->setTypeY(QCPItemPosition::ptAxisRectRatio);
    }
    mExitLabel = new QCPItemText(mPlot);
    mExitLabel->position->setTypeX(QCPItemPosition::ptPlotCoords);
    mExitLabel->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    mExitLabel->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    mExitLabel->setColor(kExitColor);
    mExitLabel->setBrush(QColor(255, 255, 255, 220));
    mExitLabel->setPadding(QMargins(4, 2, 4, 2));
    QFont bold = mExitLabel->font();
    bold.setBold(true);
    mExitLabel->setFont(bold);
  }
  mExitLine->setVisible(step.has_value());
  mExitLabel->setVisible(step.has_value() && withLabel);
  if (step) {
    mExitLine->point1->setCoords(double(*step), 0);
    mExitLine->point2->setCoords(double(*step), 1);
    mExitLabel->position->setCoords(double(*step), 0.02);
    mExitLabel->setText(tr(" first exit: step %1").arg(*step));
  }
}

}  // namespace lossbound::widgets
