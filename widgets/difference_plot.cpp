#include "widgets/difference_plot.h"

#include "core/analysis/qt_text.h"
#include "widgets/palette.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QMouseEvent>
#include <QToolTip>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

namespace {

constexpr double kSnapPixels = 6;

QString fmt(double v) { return std::isnan(v) ? QStringLiteral("—") : qNumber(v, 4); }

}  // namespace

double DifferencePlot::replayDifference(const StepResult& r) {
  if (r.verdict == StepVerdict::NotBounded) return std::nan("");
  const double point = std::isfinite(r.pointLoss) ? r.pointLoss
                       : r.baselines.computed     ? r.baselines.fp64
                                                  : std::nan("");
  return point - r.referenceLoss;
}

DifferencePlot::DifferencePlot(QWidget* parent) : PlotPanel(parent) {
  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(4, 2, 4, 0);
  mSymLogBox = new QCheckBox(tr("Sym-log y"), this);
  mSymLogBox->setToolTip(
      tr("Symmetric-logarithmic difference axis: linear within about one band half-width of 0, "
         "logarithmic beyond"));
  mLoggedBox = new QCheckBox(tr("Logged difference"), this);
  mLoggedBox->setToolTip(
      tr("Also draw candidate − reference of the logged losses. Each run logged its loss at its "
         "own state, so this line is not what the verdict tests."));
  bar->addWidget(mSymLogBox);
  bar->addWidget(mLoggedBox);
  bar->addStretch(1);
  mLayout->insertLayout(0, bar);
  connect(mSymLogBox, &QCheckBox::toggled, this, &DifferencePlot::setSymLog);
  connect(mLoggedBox, &QCheckBox::toggled, this, &DifferencePlot::setLoggedDifferenceVisible);

  mPlot->yAxis->setLabel(tr("replay − reference"));
  mPlot->legend->setVisible(true);
  mPlot->legend->setBrush(QColor(255, 255, 255, 210));
  mPlot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  mPlot->axisRect()->setRangeZoom(Qt::Horizontal);
  mPlot->axisRect()->setRangeDrag(Qt::Horizontal);

  mBandLo = mPlot->addGraph();
  mBandHi = mPlot->addGraph();
  QColor fill = kBandColor;
  fill.setAlpha(90);
  for (QCPGraph* g : {mBandLo, mBandHi}) {
    g->setPen(QPen(kBandColor.darker(110), 1));
    g->setAdaptiveSampling(false);
  }
  mBandHi->setBrush(fill);
  mBandHi->setChannelFillGraph(mBandLo);
  mBandHi->setName(tr("envelope − point (band around 0)"));
  mBandLo->removeFromLegend();

  auto* zero = new QCPItemStraightLine(mPlot);
  zero->point1->setTypeX(QCPItemPosition::ptAxisRectRatio);
  zero->point2->setTypeX(QCPItemPosition::ptAxisRectRatio);
  zero->point1->setCoords(0, 0);
  zero->point2->setCoords(1, 0);
  zero->setPen(QPen(QColor(150, 150, 150), 1, Qt::DashLine));

  mLogged = mPlot->addGraph();
  mLogged->setPen(QPen(kCandidateColor, 1, Qt::DashLine));
  mLogged->setName(tr("logged candidate − logged reference (different states)"));
  mLogged->setVisible(false);
  mLogged->removeFromLegend();

  mDiff = mPlot->addGraph();
  mDiff->setPen(QPen(kReferenceColor, 1.5));
  mDiff->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssDisc, kReferenceColor, kReferenceColor, 5));
  mDiff->setName(tr("candidate replay at reference state − reference loss"));
  mOutside = mPlot->addGraph();
  mOutside->setLineStyle(QCPGraph::lsNone);
  mOutside->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, kExitColor, kExitColor, 6));
  mOutside->removeFromLegend();

  mPlot->setMouseTracking(true);
  connect(mPlot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    if (e->buttons() != Qt::NoButton || mRows.empty()) return;
    const QString tip = mPlot->axisRect()->rect().contains(e->pos())
                            ? toolTipAt(mPlot->xAxis->pixelToCoord(e->pos().x()))
                            : QString();
    if (tip.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(e->globalPosition().toPoint(), tip, mPlot);
  });
  setResults({}, std::nullopt);
}

DifferencePlot::~DifferencePlot() = default;

double DifferencePlot::plotY(double y) const {
  if (!mSymLog || std::isnan(y)) return y;
  return std::copysign(std::log10(1 + std::abs(y) / mScale), y);
}

void DifferencePlot::setResults(const std::vector<StepResult>& steps,
                                std::optional<std::int64_t> firstExit) {
  mRows.clear();
  std::vector<double> halfWidths;
  for (const StepResult& r : steps) {
    const double d = replayDifference(r);
    if (!std::isfinite(d)) continue;
    Row row;
    row.step = r.step;
    row.diff = d;
    const double point = d + r.referenceLoss;
    row.bandLo = point - r.hi;
    row.bandHi = point - r.lo;
    row.logged = r.candidateLoss - r.referenceLoss;
    row.inside = r.inside;
    row.verdict = r.verdict;
    mRows.push_back(row);
    const double hw = (r.hi - r.lo) / 2;
    if (std::isfinite(hw) && hw > 0) halfWidths.push_back(hw);
  }
  std::sort(mRows.begin(), mRows.end(), [](const Row& a, const Row& b) { return a.step < b.step; });
  mScale = 1;
  if (!halfWidths.empty()) {
    std::nth_element(halfWidths.begin(), halfWidths.begin() + halfWidths.size() / 2,
                     halfWidths.end());
    mScale = halfWidths[halfWidths.size() / 2];
  }
  mFirstExit = firstExit;
  redraw();
}

void DifferencePlot::redraw() {
  QVector<QCPGraphData> lo, hi, logged, diff, out;
  double yLo = 0, yHi = 0;
  auto extend = [&](double t) {
    if (!std::isfinite(t)) return;
    yLo = std::min(yLo, t);
    yHi = std::max(yHi, t);
  };
  for (const Row& r : mRows) {
    const double x = double(r.step);
    // An unbounded band endpoint is clipped to the plot edge by QCustomPlot; keep it finite.
    if (std::isfinite(r.bandLo) && std::isfinite(r.bandHi)) {
      lo.push_back({x, plotY(r.bandLo)});
      hi.push_back({x, plotY(r.bandHi)});
      extend(plotY(r.bandLo));
      extend(plotY(r.bandHi));
    }
    diff.push_back({x, plotY(r.diff)});
    extend(plotY(r.diff));
    if (!r.inside) out.push_back({x, plotY(r.diff)});
    if (std::isfinite(r.logged)) {
      logged.push_back({x, plotY(r.logged)});
      if (mLogged->visible()) extend(plotY(r.logged));
    }
  }
  mBandLo->data()->set(lo, true);
  mBandHi->data()->set(hi, true);
  mLogged->data()->set(logged, true);
  mDiff->data()->set(diff, true);
  mOutside->data()->set(out, true);
  if (yHi <= yLo) yHi = yLo + 1;
  const double pad = 0.08 * (yHi - yLo);
  mPlot->yAxis->setRange(yLo - pad, yHi + pad);
  // On the sym-log axis, label the ticks with differences, not with t.
  if (mSymLog) {
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    const double maxT = std::max(std::abs(yLo), std::abs(yHi));
    for (int k = 0; k <= int(std::ceil(maxT)); ++k) {
      const double v = mScale * (std::pow(10.0, k) - 1);
      if (k == 0) {
        ticker->addTick(0, QStringLiteral("0"));
        continue;
      }
      ticker->addTick(plotY(v), qNumber(v, 2));
      ticker->addTick(plotY(-v), qNumber(-v, 2));
    }
    mPlot->yAxis->setTicker(ticker);
    mPlot->yAxis->setLabel(tr("replay − reference (sym-log)"));
  } else {
    mPlot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    mPlot->yAxis->setLabel(tr("replay − reference"));
  }
  setFirstExitMarker(mFirstExit, false);
  queueReplot();
}

void DifferencePlot::setSymLog(bool on) {
  if (mSymLogBox->isChecked() != on) mSymLogBox->setChecked(on);  // re-enters once
  if (mSymLog == on) return;
  mSymLog = on;
  redraw();
}

bool DifferencePlot::symLog() const { return mSymLog; }

void DifferencePlot::setLoggedDifferenceVisible(bool on) {
  if (mLoggedBox->isChecked() != on) mLoggedBox->setChecked(on);
  if (mLogged->visible() == on) return;
  mLogged->setVisible(on);
  if (on)
    mLogged->addToLegend();
  else
    mLogged->removeFromLegend();
  redraw();
}

bool DifferencePlot::loggedDifferenceVisible() const { return mLogged->visible(); }

int DifferencePlot::pointCount() const { return mDiff->data()->size(); }
int DifferencePlot::outsideCount() const { return mOutside->data()->size(); }
int DifferencePlot::bandPointCount() const { return mBandHi->data()->size(); }

QString DifferencePlot::toolTipAt(double x) const {
  const auto step = stepNearPixel(mPlot->xAxis->coordToPixel(x));
  if (!step) return {};
  const auto it = std::lower_bound(mRows.begin(), mRows.end(), *step,
                                   [](const Row& r, std::int64_t s) { return r.step < s; });
  if (it == mRows.end() || it->step != *step) return {};
  QStringList lines;
  lines << tr("step %1").arg(it->step);
  lines << tr("replay − reference: %1").arg(fmt(it->diff));
  lines << tr("band: [%1, %2]").arg(fmt(it->bandLo), fmt(it->bandHi));
  lines << tr("logged candidate − reference (different states): %1").arg(fmt(it->logged));
  lines << tr("verdict: %1").arg(qs(verdictName(it->verdict)));
  return lines.join(QLatin1Char('\n'));
}

std::optional<std::int64_t> DifferencePlot::stepNearPixel(double pixelX) const {
  const double x = mPlot->xAxis->pixelToCoord(pixelX);
  const auto it = std::lower_bound(mRows.begin(), mRows.end(), x,
                                   [](const Row& r, double v) { return double(r.step) < v; });
  std::optional<std::int64_t> best;
  double bestDist = kSnapPixels;
  for (auto c : {it, it == mRows.begin() ? it : it - 1}) {
    if (c == mRows.end()) continue;
    const double d = std::abs(mPlot->xAxis->coordToPixel(double(c->step)) - pixelX);
    if (d <= bestDist) bestDist = d, best = c->step;
  }
  return best;
}

}  // namespace lossbound::widgets
