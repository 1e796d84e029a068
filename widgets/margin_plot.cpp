#include "widgets/margin_plot.h"

#include "core/analysis/qt_text.h"
#include "widgets/palette.h"

#include <QToolTip>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

namespace {

constexpr double kSnapPixels = 6;

/// Returns a tick label: "0", "2", "-10", "100", "1e3", "-1e6".
QString tickLabel(double m) {
  if (m == 0) return QStringLiteral("0");
  const double a = std::abs(m);
  const QString sign = m < 0 ? QStringLiteral("-") : QString();
  if (a >= 1000) return sign + QStringLiteral("1e%1").arg(int(std::lround(std::log10(a))));
  return sign + qNumber(a, 3);
}

}  // namespace

double MarginPlot::signedLog(double m) {
  if (std::isnan(m)) return m;
  return std::copysign(std::log10(1 + std::abs(m)), m);
}

double MarginPlot::signedLogInverse(double t) {
  if (std::isnan(t)) return t;
  return std::copysign(std::pow(10.0, std::abs(t)) - 1, t);
}

MarginPlot::MarginPlot(QWidget* parent) : PlotPanel(parent) {
  mPlot->yAxis->setLabel(tr("margin (log)"));
  mPlot->axisRect()->setRangeZoom(Qt::Horizontal);
  mPlot->axisRect()->setRangeDrag(Qt::Horizontal);
  mPlot->yAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());

  mBand = new QCPItemRect(mPlot);
  mBand->setLayer(QStringLiteral("background"));
  for (QCPItemPosition* p : {mBand->topLeft, mBand->bottomRight}) {
    p->setTypeX(QCPItemPosition::ptAxisRectRatio);
    p->setTypeY(QCPItemPosition::ptPlotCoords);
  }
  mBand->topLeft->setCoords(0, signedLog(1));
  mBand->bottomRight->setCoords(1, signedLog(-1));
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

  mPlot->setMouseTracking(true);
  connect(mPlot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    if (e->buttons() != Qt::NoButton || mResults.empty()) return;
    const QString tip = mPlot->axisRect()->rect().contains(e->pos())
                            ? toolTipAt(mPlot->xAxis->pixelToCoord(e->pos().x()))
                            : QString();
    if (tip.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(e->globalPosition().toPoint(), tip, mPlot);
  });
  connect(mPlot->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { updateTicks(); });
  setResults({}, std::nullopt);
}

MarginPlot::~MarginPlot() = default;

void MarginPlot::setResults(const std::vector<StepResult>& steps,
                            std::optional<std::int64_t> firstExit) {
  mResults.clear();
  for (const StepResult& r : steps)
    if (r.verdict != StepVerdict::NotBounded && std::isfinite(r.margin)) mResults.push_back(r);
  std::sort(mResults.begin(), mResults.end(),
            [](const StepResult& a, const StepResult& b) { return a.step < b.step; });
  QVector<QCPGraphData> all, in, out;
  mSteps.clear();
  // The band (|m| <= 1) and a little room (|m| <= 2) are always in view.
  double tLo = signedLog(-2), tHi = signedLog(2);
  for (const StepResult& r : mResults) {
    const double t = signedLog(r.margin);
    const QCPGraphData d(double(r.step), t);
    all.push_back(d);
    (std::abs(r.margin) <= 1 && r.inside ? in : out).push_back(d);
    mSteps.push_back(r.step);
    tLo = std::min(tLo, t);
    tHi = std::max(tHi, t);
  }
  mTrend->data()->set(all, true);
  mInside->data()->set(in, true);
  mOutside->data()->set(out, true);
  const double pad = 0.06 * (tHi - tLo);
  mPlot->yAxis->setRange(tLo - pad, tHi + pad);
  updateTicks();
  setFirstExitMarker(firstExit, false);
  queueReplot();
}

void MarginPlot::updateTicks() {
  const QCPRange range = mPlot->yAxis->range();
  const double maxAbs =
      std::max(std::abs(signedLogInverse(range.lower)), std::abs(signedLogInverse(range.upper)));
  // Decades 1, 10, 100, ... up to the range; at most about five labels per side.
  std::vector<double> magnitudes;
  const int decades = maxAbs >= 10 ? int(std::floor(std::log10(maxAbs))) : 0;
  const int every = std::max(1, (decades + 4) / 5);
  for (int k = 0; k <= decades; k += every) magnitudes.push_back(std::pow(10.0, k));
  if (maxAbs < 10) magnitudes.insert(magnitudes.end(), {2.0, 5.0});
  // With decades on the axis, 0 and ±1 are too close to label all three: the dashed zero line
  // marks 0, the labels go to the band's edges ±1.
  std::vector<double> ticks;
  if (maxAbs < 10) ticks.push_back(0);
  for (double m : magnitudes) ticks.push_back(m), ticks.push_back(-m);
  std::sort(ticks.begin(), ticks.end());
  mTickMargins.clear();
  QMap<double, QString> labels;
  for (double m : ticks) {
    const double t = signedLog(m);
    if (!range.contains(t)) continue;
    mTickMargins.push_back(m);
    labels.insert(t, tickLabel(m));
  }
  mPlot->yAxis->ticker().staticCast<QCPAxisTickerText>()->setTicks(labels);
}

int MarginPlot::insideCount() const { return mInside->data()->size(); }
int MarginPlot::outsideCount() const { return mOutside->data()->size(); }

std::pair<double, double> MarginPlot::visibleMarginRange() const {
  const QCPRange r = mPlot->yAxis->range();
  return {signedLogInverse(r.lower), signedLogInverse(r.upper)};
}

std::vector<double> MarginPlot::tickMargins() const { return mTickMargins; }

QString MarginPlot::toolTipAt(double x) const {
  const auto step = stepNearPixel(mPlot->xAxis->coordToPixel(x));
  if (!step) return {};
  const auto it = std::lower_bound(mResults.begin(), mResults.end(), *step,
                                   [](const StepResult& r, std::int64_t s) { return r.step < s; });
  if (it == mResults.end() || it->step != *step) return {};
  QStringList lines;
  lines << tr("step %1").arg(it->step);
  lines << tr("margin: %1 half-widths").arg(it->margin, 0, 'g', 4);
  lines << (it->inside ? tr("inside the envelope (|margin| ≤ 1)")
                       : tr("outside the envelope (|margin| > 1)"));
  lines << tr("verdict: %1").arg(qs(verdictName(it->verdict)));
  return lines.join(QLatin1Char('\n'));
}

std::optional<std::int64_t> MarginPlot::stepNearPixel(double pixelX) const {
  const double x = mPlot->xAxis->pixelToCoord(pixelX);
  const auto it = std::lower_bound(mSteps.begin(), mSteps.end(), x,
                                   [](std::int64_t s, double v) { return double(s) < v; });
  std::optional<std::int64_t> best;
  double bestDist = kSnapPixels;
  for (auto c : {it, it == mSteps.begin() ? it : it - 1}) {
    if (c == mSteps.end()) continue;
    const double d = std::abs(mPlot->xAxis->coordToPixel(double(*c)) - pixelX);
    if (d <= bestDist) bestDist = d, best = *c;
  }
  return best;
}

}  // namespace lossbound::widgets
