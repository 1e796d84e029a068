#include "widgets/step_inspector.h"

#include "core/analysis/qt_text.h"
#include "widgets/margin_plot.h"
#include "widgets/palette.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

namespace {

/// "aten.mm.default" → "mm"; other names unchanged.
QString shortOp(const std::string& op) {
  QString s = QString::fromStdString(op);
  if (s.startsWith(QStringLiteral("aten."))) s = s.mid(5);
  if (s.endsWith(QStringLiteral(".default"))) s.chop(8);
  return s;
}

QTableWidgetItem* numberItem(double v, int digits = 10) {
  auto* item = new QTableWidgetItem;
  item->setData(Qt::DisplayRole,
                std::isnan(v) ? QVariant(QStringLiteral("—")) : QVariant(qNumber(v, digits)));
  item->setData(Qt::UserRole, v);
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

QTableWidget* makeTable(QWidget* parent, const QStringList& headers, const char* name) {
  auto* t = new QTableWidget(0, int(headers.size()), parent);
  t->setObjectName(QString::fromLatin1(name));
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->setVisible(false);
  t->horizontalHeader()->setStretchLastSection(true);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setWordWrap(false);
  return t;
}

}  // namespace

StepInspector::StepInspector(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  mTitle = new QLabel(this);
  QFont bold = mTitle->font();
  bold.setBold(true);
  mTitle->setFont(bold);
  layout->addWidget(mTitle);

  auto* split = new QSplitter(Qt::Vertical, this);
  mBudget = new QCustomPlot(split);
  mBudget->setMinimumHeight(190);
  mBudget->xAxis->setLabel(tr("share of the rounding bound (%)"));
  mBudget->xAxis->setRange(0, 100);
  mBudget->yAxis->setRangeReversed(true);  // largest share on top
  mBudget->yAxis->grid()->setVisible(false);
  QFont small = mBudget->yAxis->tickLabelFont();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  mBudget->yAxis->setTickLabelFont(small);
  mMethods =
      makeTable(split, {tr("method"), tr("lo"), tr("hi"), tr("width"), tr("margin"), tr("verdict")},
                "methods");
  mOutputs = new QCustomPlot(split);
  mOutputs->setObjectName(QStringLiteral("outputs"));
  mOutputs->setMinimumHeight(150);
  mOutputs->xAxis->setLabel(tr("output margin (log): > 1 = disjoint envelopes"));
  mOutputs->yAxis->setRangeReversed(true);  // rank 1 on top
  mOutputs->yAxis->grid()->setVisible(false);
  mOutputs->yAxis->setTickLabelFont(small);
  mOutputs->xAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());
  mBaselines = makeTable(split,
                         {tr("baseline on the loss"), tr("says"), tr("measured"), tr("threshold"),
                          tr("envelope says")},
                         "baselines");
  mTensors = makeTable(split, {tr("tensor"), tr("shape"), tr("dtype"), tr("L2 norm")}, "tensors");
  mTensors->setSortingEnabled(true);
  split->addWidget(mBudget);
  split->addWidget(mOutputs);
  split->addWidget(mMethods);
  split->addWidget(mBaselines);
  split->addWidget(mTensors);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 1);
  split->setStretchFactor(3, 1);
  split->setStretchFactor(4, 2);
  layout->addWidget(split, 1);
  clear();
}

void StepInspector::clear() {
  mTitle->setText(tr("Step inspector — click a step in the plot or the table"));
  setStep(0, {}, {});
  mTitle->setText(tr("Step inspector — click a step in the plot or the table"));
}

void StepInspector::setStep(std::int64_t step, const std::vector<StepResult>& perMethod,
                            const std::vector<TensorSummary>& tensors) {
  mTitle->setText(tr("Step %1").arg(step));

  // Budget: the result that carries one (first-order terms are shared by the adjoint methods).
  std::vector<BudgetShare> budget;
  for (const StepResult& r : perMethod)
    if (!r.budget.empty()) {
      budget = r.budget;
      break;
    }
  std::sort(budget.begin(), budget.end(),
            [](const BudgetShare& a, const BudgetShare& b) { return a.share > b.share; });
  if (budget.size() > std::size_t(kTopOps)) budget.resize(std::size_t(kTopOps));
  mBudget->clearPlottables();
  mBudget->clearItems();
  mBudgetLabels.clear();
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  QVector<double> keys, values;
  for (std::size_t i = 0; i < budget.size(); ++i) {
    const BudgetShare& b = budget[i];
    const QString label =
        QStringLiteral("%1 · %2").arg(QString::fromStdString(b.node), shortOp(b.op));
    ticker->addTick(double(i), label);
    mBudgetLabels << QStringLiteral("%1  (%2%)").arg(label).arg(b.share * 100, 0, 'f', 1);
    keys << double(i);
    values << b.share * 100;
  }
  mBudget->yAxis->setTicker(ticker);
  mBudget->yAxis->setRange(-0.6, std::max<double>(double(budget.size()) - 0.4, 0.4));
  if (!budget.empty()) {
    auto* bars = new QCPBars(mBudget->yAxis, mBudget->xAxis);
    bars->setWidth(0.7);
    QColor fill = kBandColor;
    fill.setAlpha(170);
    bars->setBrush(fill);
    bars->setPen(QPen(kBandColor.darker(130)));
    bars->setData(keys, values, true);
    for (std::size_t i = 0; i < budget.size(); ++i) {
      auto* text = new QCPItemText(mBudget);
      text->position->setCoords(values[qsizetype(i)], keys[qsizetype(i)]);
      text->position->setAxes(mBudget->xAxis, mBudget->yAxis);
      text->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
      text->setText(QStringLiteral(" %1%").arg(values[qsizetype(i)], 0, 'f', 1));
      text->setClipToAxisRect(false);
    }
  }
  mBudget->replot(QCustomPlot::rpQueuedReplot);

  mMethods->setRowCount(int(perMethod.size()));
  for (int row = 0; row < int(perMethod.size()); ++row) {
    const StepResult& r = perMethod[std::size_t(row)];
    const bool bounded = r.verdict != StepVerdict::NotBounded;
    const double nan = std::nan("");
    mMethods->setItem(row, 0, new QTableWidgetItem(qs(methodName(r.method))));
    mMethods->setItem(row, 1, numberItem(bounded ? r.lo : nan));
    mMethods->setItem(row, 2, numberItem(bounded ? r.hi : nan));
    mMethods->setItem(row, 3, numberItem(bounded ? r.hi - r.lo : nan, 4));
    mMethods->setItem(row, 4, numberItem(bounded ? r.margin : nan, 4));
    auto* verdict = new QTableWidgetItem(qs(verdictName(r.verdict)));
    verdict->setForeground(verdictColor(r.verdict));
    verdict->setBackground(verdictTint(r.verdict));
    if (!r.note.empty()) verdict->setToolTip(QString::fromStdString(r.note));
    mMethods->setItem(row, 5, verdict);
  }
  mMethods->resizeColumnsToContents();
  showBaselines(perMethod);
  showOutputs(perMethod);

  mTensors->setSortingEnabled(false);
  mTensors->setRowCount(int(tensors.size()));
  for (int row = 0; row < int(tensors.size()); ++row) {
    const TensorSummary& t = tensors[std::size_t(row)];
    mTensors->setItem(row, 0, new QTableWidgetItem(t.name));
    mTensors->setItem(row, 1, new QTableWidgetItem(t.shape));
    mTensors->setItem(row, 2, new QTableWidgetItem(t.dtype));
    auto* norm = new QTableWidgetItem;
    norm->setData(Qt::DisplayRole, t.norm);  // a double, so that sorting is numeric
    norm->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    mTensors->setItem(row, 3, norm);
  }
  mTensors->setSortingEnabled(true);
  mTensors->resizeColumnsToContents();
}

void StepInspector::showBaselines(const std::vector<StepResult>& perMethod) {
  // The baselines do not depend on the method: take the first result that has them.
  const StepResult* r = nullptr;
  for (const StepResult& p : perMethod)
    if (p.baselines.computed) {
      r = &p;
      break;
    }
  mBaselines->setRowCount(r ? 2 : 0);
  if (!r) return;
  const LossBaselines& b = r->baselines;
  const QString envelope = r->inside ? tr("inside (%1)").arg(qs(methodName(r->method)))
                                     : tr("outside (%1)").arg(qs(methodName(r->method)));
  auto says = [](bool pass) {
    auto* item = new QTableWidgetItem(pass ? tr("same") : tr("different"));
    item->setForeground(pass ? verdictColor(StepVerdict::Rounding)
                             : verdictColor(StepVerdict::BugLikely));
    return item;
  };
  mBaselines->setItem(0, 0, new QTableWidgetItem(tr("allclose (rtol 1e-5, atol 1e-8)")));
  mBaselines->setItem(0, 1, says(b.allclosePass));
  mBaselines->setItem(0, 2, numberItem(std::abs(b.fp64 - r->referenceLoss), 4));
  mBaselines->setItem(0, 3, numberItem(1e-8 + 1e-5 * std::abs(r->referenceLoss), 4));
  mBaselines->setItem(0, 4, new QTableWidgetItem(envelope));
  mBaselines->setItem(
      1, 0, new QTableWidgetItem(tr("fp64-RMSE rule (m = %1, tol 1e-4)").arg(b.rmseMultiplier)));
  mBaselines->setItem(1, 1, says(b.rmsePass));
  mBaselines->setItem(1, 2, numberItem(b.rmseError, 4));
  mBaselines->setItem(1, 3, numberItem(b.rmseAllowance, 4));
  mBaselines->setItem(1, 4, new QTableWidgetItem(envelope));
  const QString how =
      tr("allclose: |fp64 replay of the candidate program − reference loss| against 1e-8 + "
         "1e-5·|reference loss|.\nfp64-RMSE rule: |reference loss − fp64 replay| against m·|one "
         "rounded replay − fp64 replay| + 1e-5 (docs/baselines.md).");
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < mBaselines->columnCount(); ++col)
      if (auto* item = mBaselines->item(row, col)) item->setToolTip(how);
  mBaselines->resizeColumnsToContents();
}

void StepInspector::showOutputs(const std::vector<StepResult>& perMethod) {
  // The first result that compared outputs (the current method's comes first).
  const StepResult* r = nullptr;
  for (const StepResult& p : perMethod)
    if (!p.outputs.empty()) {
      r = &p;
      break;
    }
  mOutputs->clearPlottables();
  mOutputs->clearItems();
  mOutputLabels.clear();
  mOutputs->setVisible(r != nullptr);
  if (!r) return;
  std::vector<OutputComparison> outputs = r->outputs;  // ranked: disjoint first, worst margin
  if (outputs.size() > std::size_t(kTopOutputs)) outputs.resize(std::size_t(kTopOutputs));
  // One readable label row per output.
  mOutputs->setMinimumHeight(std::max(150, 13 * int(outputs.size()) + 60));
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  QVector<double> keys, flagged, clear;
  double maxT = MarginPlot::signedLog(2);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const OutputComparison& c = outputs[i];
    const double m = std::isfinite(c.worstMargin) ? c.worstMargin : 1e12;
    const double t = MarginPlot::signedLog(m);
    maxT = std::max(maxT, t);
    QString label = QString::fromStdString(c.name);
    if (label.startsWith(QStringLiteral("grad:"))) label = QStringLiteral("∇ ") + label.mid(5);
    ticker->addTick(double(i), label);
    QString line = QStringLiteral("%1  (margin %2")
                       .arg(QString::fromStdString(c.name))
                       .arg(qNumber(c.worstMargin, 3));
    if (c.elementwise)
      line += tr(", %1 of %2 elements disjoint").arg(c.disjointElements).arg(c.elements);
    mOutputLabels << line + QLatin1Char(')');
    keys << double(i);
    flagged << (c.disjoint ? t : 0.0);
    clear << (c.disjoint ? 0.0 : t);
  }
  mOutputs->yAxis->setTicker(ticker);
  mOutputs->yAxis->setRange(-0.6, std::max<double>(double(outputs.size()) - 0.4, 0.4));
  mOutputs->xAxis->setRange(0, maxT * 1.08);
  auto xTicker = mOutputs->xAxis->ticker().staticCast<QCPAxisTickerText>();
  xTicker->clear();
  for (double m = 1; MarginPlot::signedLog(m) <= maxT * 1.08; m *= 10)
    xTicker->addTick(
        MarginPlot::signedLog(m),
        m >= 1000 ? QStringLiteral("1e%1").arg(int(std::lround(std::log10(m)))) : qNumber(m, 3));
  xTicker->addTick(0, QStringLiteral("0"));
  for (const auto& [values, color] :
       {std::pair{flagged, kExitColor}, std::pair{clear, kBandColor}}) {
    auto* bars = new QCPBars(mOutputs->yAxis, mOutputs->xAxis);
    bars->setWidth(0.7);
    QColor fill = color;
    fill.setAlpha(170);
    bars->setBrush(fill);
    bars->setPen(QPen(color.darker(130)));
    bars->setData(keys, values, true);
  }
  // The threshold: margin 1 (envelopes touch).
  auto* one = new QCPItemStraightLine(mOutputs);
  one->point1->setCoords(MarginPlot::signedLog(1), 0);
  one->point2->setCoords(MarginPlot::signedLog(1), 1);
  one->setPen(QPen(QColor(90, 90, 90), 1, Qt::DashLine));
  mOutputs->setToolTip(mOutputLabels.join(QLatin1Char('\n')));
  mOutputs->replot(QCustomPlot::rpQueuedReplot);
}

int StepInspector::outputBarCount() const { return int(mOutputLabels.size()); }

QStringList StepInspector::outputLabels() const { return mOutputLabels; }

int StepInspector::baselineRowCount() const { return mBaselines->rowCount(); }

QString StepInspector::baselineSays(int row) const {
  const QTableWidgetItem* item = mBaselines->item(row, 1);
  return item ? item->text() : QString();
}

int StepInspector::budgetBarCount() const {
  for (int i = 0; i < mBudget->plottableCount(); ++i)
    if (auto* bars = qobject_cast<QCPBars*>(mBudget->plottable(i))) return bars->data()->size();
  return 0;
}

QStringList StepInspector::budgetLabels() const { return mBudgetLabels; }

int StepInspector::methodRowCount() const { return mMethods->rowCount(); }

int StepInspector::tensorRowCount() const { return mTensors->rowCount(); }

}  // namespace lossbound::widgets
