#include "widgets/loss_plot.h"

#include "core/analysis/qt_text.h"
#include "widgets/palette.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QSlider>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace lossbound::widgets {

namespace {

constexpr double kSnapPixels = 6;

QSharedPointer<QCPGraphDataContainer> makeContainer(const std::vector<std::int64_t>& keys,
                                                    const std::vector<double>& values) {
  QVector<QCPGraphData> data(qsizetype(keys.size()));
  for (std::size_t i = 0; i < keys.size(); ++i)
    data[qsizetype(i)] = QCPGraphData(double(keys[i]), values[i]);
  auto container = QSharedPointer<QCPGraphDataContainer>::create();
  container->set(data, true);
  return container;
}

QColor faint(QColor c) {
  c.setAlpha(70);
  return c;
}

QString fmt(double v) { return std::isnan(v) ? QStringLiteral("—") : qNumber(v, 10); }

}  // namespace

LossPlot::LossPlot(QWidget* parent) : PlotPanel(parent) {
  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(4, 2, 4, 0);
  mXOnlyBox = new QCheckBox(tr("Zoom x only"), this);
  mXOnlyBox->setToolTip(tr("Zoom and pan only along the step axis"));
  mLogYBox = new QCheckBox(tr("Log y"), this);
  mLogYBox->setToolTip(tr("Logarithmic loss axis (Ctrl+L)"));
  mSmoothSlider = new QSlider(Qt::Horizontal, this);
  mSmoothSlider->setRange(0, 99);
  mSmoothSlider->setMaximumWidth(160);
  mSmoothSpin = new QDoubleSpinBox(this);
  mSmoothSpin->setRange(0, 0.99);
  mSmoothSpin->setSingleStep(0.01);
  mSmoothSpin->setDecimals(2);
  const QString smoothTip =
      tr("Display-only EMA smoothing of the curves; the analysis always "
         "uses the logged losses");
  mSmoothSlider->setToolTip(smoothTip);
  mSmoothSpin->setToolTip(smoothTip);
  auto* reset = new QToolButton(this);
  reset->setText(tr("Reset view"));
  reset->setToolTip(tr("Fit all steps and losses (Ctrl+0)"));
  bar->addWidget(mXOnlyBox);
  bar->addWidget(mLogYBox);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Smoothing"), this));
  bar->addWidget(mSmoothSlider);
  bar->addWidget(mSmoothSpin);
  bar->addStretch(1);
  bar->addWidget(reset);
  mLayout->insertLayout(0, bar);

  connect(mXOnlyBox, &QCheckBox::toggled, this, &LossPlot::setXOnly);
  connect(mLogYBox, &QCheckBox::toggled, this, &LossPlot::setLogY);
  connect(mSmoothSlider, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });
  connect(mSmoothSpin, qOverload<double>(&QDoubleSpinBox::valueChanged), this,
          &LossPlot::setSmoothing);
  connect(reset, &QToolButton::clicked, this, &LossPlot::resetView);

  mPlot->yAxis->setLabel(tr("loss"));
  mPlot->legend->setVisible(true);
  mPlot->legend->setBrush(QColor(255, 255, 255, 210));
  mPlot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);

  // Drawing order = creation order: band below the curves, markers on top.
  mBandLo = mPlot->addGraph();
  mBandHi = mPlot->addGraph();
  QColor fill = kBandColor;
  fill.setAlpha(110);
  for (QCPGraph* g : {mBandLo, mBandHi}) {
    g->setPen(QPen(kBandColor.darker(110), 1));
    g->setAdaptiveSampling(false);
  }
  mBandHi->setBrush(fill);
  mBandHi->setChannelFillGraph(mBandLo);
  mBandHi->setName(tr("envelope"));
  mBandLo->removeFromLegend();

  mRawReference = mPlot->addGraph();
  mRawCandidate = mPlot->addGraph();
  mRawReference->setPen(QPen(faint(kReferenceColor), 1));
  mRawCandidate->setPen(QPen(faint(kCandidateColor), 1));
  mRawReference->removeFromLegend();
  mRawCandidate->removeFromLegend();
  mRawReference->setVisible(false);
  mRawCandidate->setVisible(false);

  // The reference is drawn last: it is the curve judged against the envelope.
  mCandidate = mPlot->addGraph();
  mReference = mPlot->addGraph();
  mReference->setPen(QPen(kReferenceColor, 1.5));
  mCandidate->setPen(QPen(kCandidateColor, 1.5));

  mCheckpoints = mPlot->addGraph();
  mCheckpoints->setLineStyle(QCPGraph::lsNone);
  mCheckpoints->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, kCheckpointColor, Qt::white, 5));
  mCheckpoints->setName(tr("checkpoints"));

  mOutside = mPlot->addGraph();
  mOutside->setLineStyle(QCPGraph::lsNone);
  mOutside->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCross, QPen(kExitColor, 2), Qt::NoBrush, 9));
  mOutside->setName(tr("outside envelope"));
  mOutside->setAdaptiveSampling(false);

  mPlot->setMouseTracking(true);
  connect(mPlot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    if (e->buttons() != Qt::NoButton || mSession.reference.steps.empty()) return;
    if (!mPlot->axisRect()->rect().contains(e->pos())) {
      QToolTip::hideText();
      return;
    }
    QToolTip::showText(e->globalPosition().toPoint(),
                       toolTipAt(mPlot->xAxis->pixelToCoord(e->pos().x())), mPlot);
  });
  connect(mPlot->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { updateYTicker(); });
  setSession({});
}

LossPlot::~LossPlot() = default;

void LossPlot::setSession(const SessionData& session) {
  mSession = session;
  mResults.clear();
  mRawReference->setData(makeContainer(session.reference.steps, session.reference.loss));
  mRawCandidate->setData(makeContainer(session.candidate.steps, session.candidate.loss));
  mReference->setName(tr("reference: %1").arg(session.reference.name));
  mCandidate->setName(tr("candidate: %1").arg(session.candidate.name));
  std::vector<double> checkpointLoss;
  std::vector<std::int64_t> checkpointSteps;
  for (std::int64_t s : session.checkpointSteps) {
    double y = session.reference.lossAt(s);
    if (std::isnan(y)) y = session.candidate.lossAt(s);
    if (std::isnan(y)) continue;
    checkpointSteps.push_back(s);
    checkpointLoss.push_back(y);
  }
  mCheckpoints->setData(makeContainer(checkpointSteps, checkpointLoss));
  applySmoothing();
  setResults({}, std::nullopt);
  resetView();
}

void LossPlot::setResults(const std::vector<StepResult>& steps,
                          std::optional<std::int64_t> firstExit) {
  mResults = steps;
  std::sort(mResults.begin(), mResults.end(),
            [](const StepResult& a, const StepResult& b) { return a.step < b.step; });
  std::vector<std::int64_t> bandSteps, outSteps;
  std::vector<double> lo, hi, outLoss;
  for (const StepResult& r : mResults) {
    if (r.verdict == StepVerdict::NotBounded || !std::isfinite(r.lo) || !std::isfinite(r.hi))
      continue;
    bandSteps.push_back(r.step);
    lo.push_back(r.lo);
    hi.push_back(r.hi);
    if (!r.inside) {
      outSteps.push_back(r.step);
      outLoss.push_back(r.referenceLoss);
    }
  }
  mBandLo->setData(makeContainer(bandSteps, lo));
  mBandHi->setData(makeContainer(bandSteps, hi));
  const EnvelopeMethod method =
      mResults.empty() ? EnvelopeMethod::FirstOrder : mResults.back().method;
  mBandHi->setName(tr("envelope (%1)").arg(qs(methodName(method))));
  if (bandSteps.empty())
    mBandHi->removeFromLegend();
  else
    mBandHi->addToLegend();
  mOutside->setData(makeContainer(outSteps, outLoss));
  if (outSteps.empty())
    mOutside->removeFromLegend();
  else
    mOutside->addToLegend();
  setFirstExitMarker(firstExit, true);
  queueReplot();
}

void LossPlot::setXOnly(bool xOnly) {
  const bool changed = xOnly != (mPlot->axisRect()->rangeZoom() == Qt::Horizontal);
  const Qt::Orientations o = xOnly ? Qt::Horizontal : (Qt::Horizontal | Qt::Vertical);
  mPlot->axisRect()->setRangeDrag(o);
  mPlot->axisRect()->setRangeZoom(o);
  {
    const QSignalBlocker block(mXOnlyBox);
    mXOnlyBox->setChecked(xOnly);
  }
  if (changed) emit xOnlyChanged(xOnly);
}

bool LossPlot::xOnly() const { return mXOnlyBox->isChecked(); }

void LossPlot::setLogY(bool logY) {
  const bool changed = logY != this->logY();
  {
    const QSignalBlocker block(mLogYBox);
    mLogYBox->setChecked(logY);
  }
  mPlot->yAxis->setScaleType(logY ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  resetView();
  if (changed) emit logYChanged(logY);
}

bool LossPlot::logY() const { return mPlot->yAxis->scaleType() == QCPAxis::stLogarithmic; }

void LossPlot::setSmoothing(double weight) {
  weight = std::clamp(weight, 0.0, 0.99);
  if (weight == mSmoothing) return;
  mSmoothing = weight;
  {
    const QSignalBlocker b1(mSmoothSlider), b2(mSmoothSpin);
    mSmoothSlider->setValue(int(std::lround(weight * 100)));
    mSmoothSpin->setValue(weight);
  }
  applySmoothing();
  queueReplot();
}

double LossPlot::smoothing() const { return mSmoothing; }

void LossPlot::applySmoothing() {
  const bool smooth = mSmoothing > 0;
  mRawReference->setVisible(smooth);
  mRawCandidate->setVisible(smooth);
  if (!smooth) {
    // Share the raw containers: no copy of 1e6 points.
    mReference->setData(mRawReference->data());
    mCandidate->setData(mRawCandidate->data());
    return;
  }
  const auto& ref = mSession.reference;
  const auto& cand = mSession.candidate;
  mReference->setData(makeContainer(ref.steps, emaSmooth(ref.loss, mSmoothing)));
  mCandidate->setData(makeContainer(cand.steps, emaSmooth(cand.loss, mSmoothing)));
}

std::pair<double, double> LossPlot::yRange() const {
  return {mPlot->yAxis->range().lower, mPlot->yAxis->range().upper};
}

void LossPlot::resetView() {
  double xLo = std::numeric_limits<double>::infinity(), xHi = -xLo;
  double yLo = xLo, yHi = -xLo;
  const bool log = logY();
  auto addY = [&](double y) {
    if (!std::isfinite(y) || (log && y <= 0)) return;
    yLo = std::min(yLo, y);
    yHi = std::max(yHi, y);
  };
  for (const LossSeries* s : {&mSession.reference, &mSession.candidate}) {
    if (s->steps.empty()) continue;
    xLo = std::min(xLo, double(s->steps.front()));
    xHi = std::max(xHi, double(s->steps.back()));
    for (double y : s->loss) addY(y);
  }
  for (const StepResult& r : mResults) {
    if (r.verdict == StepVerdict::NotBounded) continue;
    addY(r.lo);
    addY(r.hi);
  }
  if (!(xLo <= xHi)) xLo = 0, xHi = 1;
  if (xLo == xHi) xLo -= 0.5, xHi += 0.5;
  if (!(yLo <= yHi)) yLo = log ? 0.1 : 0, yHi = 1;
  if (log) {
    const double pad = std::pow(yHi / yLo, 0.05);
    yLo /= pad == 1 ? 1.1 : pad;
    yHi *= pad == 1 ? 1.1 : pad;
  } else {
    const double pad = yHi > yLo ? 0.05 * (yHi - yLo) : std::max(1e-12, std::abs(yHi) * 0.05);
    yLo -= pad;
    yHi += pad;
  }
  const double xPad = 0.01 * (xHi - xLo);
  mPlot->yAxis->setRange(yLo, yHi);
  updateYTicker();
  mPlot->xAxis->setRange(xLo - xPad, xHi + xPad);
  queueReplot();
}

void LossPlot::updateYTicker() {
  // Decade ticks only make sense when the range spans decades; a narrow log range keeps the
  // ordinary ticker (else it would show no labels at all).
  const QCPRange r = mPlot->yAxis->range();
  const bool decades = logY() && r.lower > 0 && r.upper / r.lower > 20;
  const bool isLogTicker = !mPlot->yAxis->ticker().dynamicCast<QCPAxisTickerLog>().isNull();
  if (decades == isLogTicker) return;
  if (decades)
    mPlot->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  else
    mPlot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
}

const StepResult* LossPlot::resultNear(double x, double pixelTolerance) const {
  if (mResults.empty()) return nullptr;
  const auto it =
      std::lower_bound(mResults.begin(), mResults.end(), x,
                       [](const StepResult& r, double v) { return double(r.step) < v; });
  const StepResult* best = nullptr;
  double bestDist = pixelTolerance;
  const double px = mPlot->xAxis->coordToPixel(x);
  for (auto c : {it, it == mResults.begin() ? it : it - 1}) {
    if (c == mResults.end()) continue;
    const double d = std::abs(mPlot->xAxis->coordToPixel(double(c->step)) - px);
    if (d <= bestDist) {
      bestDist = d;
      best = &*c;
    }
  }
  return best;
}

std::optional<std::int64_t> LossPlot::stepNearPixel(double pixelX) const {
  const double x = mPlot->xAxis->pixelToCoord(pixelX);
  if (const StepResult* r = resultNear(x, kSnapPixels)) return r->step;
  const auto& cps = mSession.checkpointSteps;
  const auto it = std::lower_bound(cps.begin(), cps.end(), x,
                                   [](std::int64_t s, double v) { return double(s) < v; });
  for (auto c : {it, it == cps.begin() ? it : it - 1})
    if (c != cps.end() && std::abs(mPlot->xAxis->coordToPixel(double(*c)) - pixelX) <= kSnapPixels)
      return *c;
  return std::nullopt;
}

QString LossPlot::toolTipAt(double x) const {
  const StepResult* r = resultNear(x, kSnapPixels);
  std::int64_t step = 0;
  if (r) {
    step = r->step;
  } else {
    const auto i = mSession.reference.nearestIndex(x);
    const auto j = mSession.candidate.nearestIndex(x);
    if (i < 0 && j < 0) return {};
    step = i >= 0 ? mSession.reference.steps[std::size_t(i)]
                  : mSession.candidate.steps[std::size_t(j)];
  }
  QStringList lines;
  lines << tr("step %1").arg(step);
  lines << tr("reference (%1): %2")
               .arg(mSession.reference.name, fmt(mSession.reference.lossAt(step)));
  lines << tr("candidate (%1): %2")
               .arg(mSession.candidate.name, fmt(mSession.candidate.lossAt(step)));
  if (r) {
    if (r->verdict == StepVerdict::NotBounded) {
      lines << tr("not bounded: %1").arg(QString::fromStdString(r->note));
    } else {
      lines << tr("envelope (%1): [%2, %3]").arg(qs(methodName(r->method)), fmt(r->lo), fmt(r->hi));
      lines << tr("margin: %1 half-widths").arg(r->margin, 0, 'g', 4);
    }
    lines << tr("verdict: %1").arg(qs(verdictName(r->verdict)));
  } else {
    lines << tr("not analysed");
  }
  return lines.join(QLatin1Char('\n'));
}

int LossPlot::referencePointCount() const { return mReference->data()->size(); }
int LossPlot::candidatePointCount() const { return mCandidate->data()->size(); }
int LossPlot::checkpointMarkerCount() const { return mCheckpoints->data()->size(); }
int LossPlot::bandPointCount() const { return mBandHi->data()->size(); }
int LossPlot::outsideMarkerCount() const { return mOutside->data()->size(); }

std::vector<double> LossPlot::displayedReference() const {
  std::vector<double> out;
  out.reserve(std::size_t(mReference->data()->size()));
  for (auto it = mReference->data()->constBegin(); it != mReference->data()->constEnd(); ++it)
    out.push_back(it->value);
  return out;
}

}  // namespace lossbound::widgets
