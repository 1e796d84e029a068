#include "widgets/recompute_dialog.h"

#include "core/analysis/qt_text.h"
#include "core/interval/format_names.h"

#include <QButtonGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QRadioButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>

namespace lossbound::widgets {

namespace {

const QString kSettingsGroup = QStringLiteral("recompute");

constexpr EnvelopeMethod kMethods[] = {EnvelopeMethod::FirstOrder, EnvelopeMethod::Probabilistic,
                                       EnvelopeMethod::Interval, EnvelopeMethod::Ensemble};

int clampInt(std::int64_t v) {
  return int(std::clamp<std::int64_t>(v, std::numeric_limits<int>::min(),
                                      std::numeric_limits<int>::max()));
}

}  // namespace

AnalysisSettings rememberedSettings() {
  QSettings settings;
  settings.beginGroup(kSettingsGroup);
  AnalysisSettings s;
  if (const auto m = parseMethod(settings.value(QStringLiteral("method")).toString().toStdString()))
    s.method = *m;
  const QString precision = settings.value(QStringLiteral("precision")).toString();
  if (!precision.isEmpty()) s.precision = parseFormat(precision.toStdString());
  s.confidence = settings.value(QStringLiteral("confidence"), s.confidence).toDouble();
  s.ensembleSize = settings.value(QStringLiteral("ensembleSize"), s.ensembleSize).toInt();
  if (const auto o = parseEnsembleOrder(
          settings.value(QStringLiteral("ensembleOrder")).toString().toStdString()))
    s.ensembleOrder = *o;
  s.backend = settings.value(QStringLiteral("backend"), qs(s.backend)).toString().toStdString();
  if (s.method == EnvelopeMethod::Interval)
    s.startNode = settings.value(QStringLiteral("startNode")).toString().toStdString();
  if (settings.value(QStringLiteral("outputs")).toString() == QLatin1String("all"))
    s.outputs = OutputScope::All;
  return s;
}

RecomputeDialog::RecomputeDialog(std::vector<std::int64_t> checkpointSteps,
                                 std::vector<std::int64_t> selectedSteps,
                                 const QStringList& nodeNames, QWidget* parent)
    : QDialog(parent),
      mCheckpoints(std::move(checkpointSteps)),
      mSelected(std::move(selectedSteps)) {
  setWindowTitle(tr("Recompute envelopes"));
  std::sort(mCheckpoints.begin(), mCheckpoints.end());
  // Only checkpointed steps can be replayed.
  std::erase_if(mSelected, [this](std::int64_t s) {
    return !std::binary_search(mCheckpoints.begin(), mCheckpoints.end(), s);
  });
  auto* layout = new QVBoxLayout(this);

  auto* stepsBox = new QGroupBox(tr("Steps"), this);
  auto* stepsLayout = new QVBoxLayout(stepsBox);
  mAll = new QRadioButton(tr("All checkpointed steps (%1)").arg(mCheckpoints.size()), stepsBox);
  mSelectedButton = new QRadioButton(tr("Selected steps (%1)").arg(mSelected.size()), stepsBox);
  mSelectedButton->setEnabled(!mSelected.empty());
  mRange = new QRadioButton(tr("Range"), stepsBox);
  mAll->setObjectName(QStringLiteral("allSteps"));
  mSelectedButton->setObjectName(QStringLiteral("selectedSteps"));
  mRange->setObjectName(QStringLiteral("rangeSteps"));
  auto* group = new QButtonGroup(this);
  for (QRadioButton* b : {mAll, mSelectedButton, mRange}) group->addButton(b);
  mFrom = new QSpinBox(stepsBox);
  mTo = new QSpinBox(stepsBox);
  mFrom->setObjectName(QStringLiteral("rangeFrom"));
  mTo->setObjectName(QStringLiteral("rangeTo"));
  const int first = mCheckpoints.empty() ? 0 : clampInt(mCheckpoints.front());
  const int last = mCheckpoints.empty() ? 0 : clampInt(mCheckpoints.back());
  for (QSpinBox* s : {mFrom, mTo}) s->setRange(first, last);
  mFrom->setValue(first);
  mTo->setValue(last);
  auto* rangeRow = new QHBoxLayout;
  rangeRow->addWidget(mRange);
  rangeRow->addWidget(mFrom);
  rangeRow->addWidget(new QLabel(tr("to"), stepsBox));
  rangeRow->addWidget(mTo);
  rangeRow->addStretch(1);
  mCount = new QLabel(stepsBox);
  mCount->setObjectName(QStringLiteral("stepCount"));
  stepsLayout->addWidget(mAll);
  stepsLayout->addWidget(mSelectedButton);
  stepsLayout->addLayout(rangeRow);
  stepsLayout->addWidget(mCount);
  layout->addWidget(stepsBox);

  auto* form = new QFormLayout;
  mMethod = new QComboBox(this);
  mMethod->setObjectName(QStringLiteral("method"));
  for (EnvelopeMethod m : kMethods) mMethod->addItem(qs(methodName(m)), int(m));
  mGuarantee = new QLabel(this);
  mGuarantee->setWordWrap(true);
  mGuarantee->setStyleSheet(QStringLiteral("color: #555"));
  mPrecision = new QComboBox(this);
  mPrecision->setObjectName(QStringLiteral("precision"));
  mPrecision->addItem(tr("as recorded"), QString());
  for (Format f : {Format::Fp32, Format::Tf32, Format::Bf16, Format::Fp16})
    mPrecision->addItem(qs(formatName(f)), qs(formatName(f)));
  mConfidence = new QDoubleSpinBox(this);
  mConfidence->setObjectName(QStringLiteral("confidence"));
  mConfidence->setDecimals(9);
  mConfidence->setRange(0.5, 0.999999999);
  mConfidence->setSingleStep(0.001);
  mConfidence->setToolTip(
      tr("1 − δ: the probability that the probabilistic bound holds under "
         "its model (λ = sqrt(2 ln(2/δ)))"));
  mEnsemble = new QSpinBox(this);
  mEnsemble->setObjectName(QStringLiteral("ensembleSize"));
  mEnsemble->setRange(2, 4096);
  mEnsembleOrder = new QComboBox(this);
  mEnsembleOrder->setObjectName(QStringLiteral("ensembleOrder"));
  mEnsembleOrder->addItem(tr("one per matrix product"), int(EnsembleOrder::PerProduct));
  mEnsembleOrder->addItem(tr("one per element (slower)"), int(EnsembleOrder::PerElement));
  mEnsembleOrder->setToolTip(
      tr("How each execution orders a matrix product's sums: one random order for the whole "
         "product, as one kernel call sums, or a random order, bracketing and blocking for every "
         "output element (a wider exploration, up to about 5× slower)"));
  mBackend = new QComboBox(this);
  mBackend->setObjectName(QStringLiteral("backend"));
  mBackend->addItem(tr("auto"), QStringLiteral("auto"));
  mBackend->addItem(tr("CPU"), QStringLiteral("cpu"));
  mBackend->addItem(tr("CUDA"), QStringLiteral("cuda"));
  mStartNode = new QComboBox(this);
  mStartNode->setObjectName(QStringLiteral("startNode"));
  mStartNode->setEditable(true);
  mStartNode->addItem(QString());
  mStartNode->addItems(nodeNames);
  mStartNode->setToolTip(tr("Empty: bounds start at the inputs (rigorous end to end)"));
  mStartCaveat = new QLabel(
      tr("Starting at a node treats every value before it as exact: rounding upstream of the "
         "node is ignored, so the envelope is rigorous only from that node on."),
      this);
  mStartCaveat->setObjectName(QStringLiteral("startNodeCaveat"));
  mStartCaveat->setWordWrap(true);
  mStartCaveat->setStyleSheet(QStringLiteral("color: #966400"));
  form->addRow(tr("Method"), mMethod);
  form->addRow(QString(), mGuarantee);
  form->addRow(tr("Precision"), mPrecision);
  form->addRow(tr("Confidence"), mConfidence);
  form->addRow(tr("Ensemble size"), mEnsemble);
  form->addRow(tr("Summation orders"), mEnsembleOrder);
  form->addRow(tr("Start node"), mStartNode);
  form->addRow(QString(), mStartCaveat);
  form->addRow(tr("Backend"), mBackend);
  mAllOutputs = new QCheckBox(tr("Compare every output (gradients too)"), this);
  mAllOutputs->setObjectName(QStringLiteral("allOutputs"));
  mAllOutputs->setToolTip(
      tr("Also evaluate both programs at the reference's state and compare every output, "
         "gradients included, by the same method (about 4× the time on the samples)"));
  form->addRow(QString(), mAllOutputs);
  layout->addLayout(form);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  mOk = buttons->button(QDialogButtonBox::Ok);
  mOk->setText(tr("Compute"));
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(buttons);

  loadChoices();
  if (!mSelected.empty()) mSelectedButton->setChecked(true);  // a fresh selection wins
  for (QRadioButton* b : {mAll, mSelectedButton, mRange})
    connect(b, &QRadioButton::toggled, this, &RecomputeDialog::updateState);
  connect(mFrom, &QSpinBox::valueChanged, this, &RecomputeDialog::updateState);
  connect(mTo, &QSpinBox::valueChanged, this, &RecomputeDialog::updateState);
  connect(mMethod, &QComboBox::currentIndexChanged, this, &RecomputeDialog::updateState);
  connect(mStartNode, &QComboBox::currentTextChanged, this, &RecomputeDialog::updateState);
  updateState();
}

RecomputeDialog::StepChoice RecomputeDialog::stepChoice() const {
  if (mSelectedButton->isChecked()) return StepChoice::Selected;
  if (mRange->isChecked()) return StepChoice::Range;
  return StepChoice::AllCheckpointed;
}

void RecomputeDialog::setStepChoice(StepChoice choice) {
  if (choice == StepChoice::Selected && mSelected.empty()) choice = StepChoice::AllCheckpointed;
  (choice == StepChoice::Selected ? mSelectedButton
   : choice == StepChoice::Range  ? mRange
                                  : mAll)
      ->setChecked(true);
  updateState();
}

void RecomputeDialog::setRange(std::int64_t first, std::int64_t last) {
  mFrom->setValue(clampInt(first));
  mTo->setValue(clampInt(last));
  updateState();
}

void RecomputeDialog::setMethod(EnvelopeMethod method) {
  mMethod->setCurrentIndex(mMethod->findData(int(method)));
  updateState();
}

RecomputeRequest RecomputeDialog::request() const {
  RecomputeRequest r;
  switch (stepChoice()) {
    case StepChoice::AllCheckpointed:
      r.steps = mCheckpoints;
      break;
    case StepChoice::Selected:
      r.steps = mSelected;
      break;
    case StepChoice::Range:
      for (std::int64_t s : mCheckpoints)
        if (s >= mFrom->value() && s <= mTo->value()) r.steps.push_back(s);
      break;
  }
  AnalysisSettings& s = r.settings;
  s.method = EnvelopeMethod(mMethod->currentData().toInt());
  const QString precision = mPrecision->currentData().toString();
  if (!precision.isEmpty()) s.precision = parseFormat(precision.toStdString());
  s.confidence = mConfidence->value();
  s.ensembleSize = mEnsemble->value();
  s.ensembleOrder = EnsembleOrder(mEnsembleOrder->currentData().toInt());
  s.backend = mBackend->currentData().toString().toStdString();
  if (s.method == EnvelopeMethod::Interval)
    s.startNode = mStartNode->currentText().trimmed().toStdString();
  s.outputs = mAllOutputs->isChecked() ? OutputScope::All : OutputScope::Loss;
  return r;
}

void RecomputeDialog::updateState() {
  const auto method = EnvelopeMethod(mMethod->currentData().toInt());
  mGuarantee->setText(qs(methodGuarantee(method)));
  mConfidence->setEnabled(method == EnvelopeMethod::Probabilistic);
  mEnsemble->setEnabled(method == EnvelopeMethod::Ensemble);
  mEnsembleOrder->setEnabled(method == EnvelopeMethod::Ensemble);
  mStartNode->setEnabled(method == EnvelopeMethod::Interval);
  mStartCaveat->setVisible(method == EnvelopeMethod::Interval &&
                           !mStartNode->currentText().trimmed().isEmpty());
  mFrom->setEnabled(mRange->isChecked());
  mTo->setEnabled(mRange->isChecked());
  const auto n = request().steps.size();
  mCount->setText(n == 0 ? tr("No checkpointed step selected")
                         : tr("%n step(s) to compute", "", int(n)));
  mOk->setEnabled(n > 0);
}

void RecomputeDialog::loadChoices() {
  const AnalysisSettings s = rememberedSettings();
  mMethod->setCurrentIndex(mMethod->findData(int(s.method)));
  const int p = mPrecision->findData(s.precision ? qs(formatName(*s.precision)) : QString());
  mPrecision->setCurrentIndex(std::max(p, 0));
  mConfidence->setValue(s.confidence);
  mEnsemble->setValue(s.ensembleSize);
  mEnsembleOrder->setCurrentIndex(std::max(mEnsembleOrder->findData(int(s.ensembleOrder)), 0));
  mBackend->setCurrentIndex(std::max(mBackend->findData(qs(s.backend)), 0));
  mStartNode->setCurrentText(qs(s.startNode));
  mAllOutputs->setChecked(s.outputs == OutputScope::All);
  QSettings settings;
  settings.beginGroup(kSettingsGroup);
  const QString choice = settings.value(QStringLiteral("steps"), QStringLiteral("all")).toString();
  (choice == QStringLiteral("range") ? mRange : mAll)->setChecked(true);
}

void RecomputeDialog::saveChoices() const {
  QSettings settings;
  settings.beginGroup(kSettingsGroup);
  const RecomputeRequest r = request();
  settings.setValue(QStringLiteral("method"), qs(methodName(r.settings.method)));
  settings.setValue(QStringLiteral("precision"), mPrecision->currentData().toString());
  settings.setValue(QStringLiteral("confidence"), mConfidence->value());
  settings.setValue(QStringLiteral("ensembleSize"), mEnsemble->value());
  settings.setValue(QStringLiteral("ensembleOrder"),
                    qs(ensembleOrderName(r.settings.ensembleOrder)));
  settings.setValue(QStringLiteral("backend"), mBackend->currentData().toString());
  settings.setValue(QStringLiteral("startNode"), mStartNode->currentText().trimmed());
  settings.setValue(QStringLiteral("outputs"),
                    mAllOutputs->isChecked() ? QStringLiteral("all") : QStringLiteral("loss"));
  settings.setValue(QStringLiteral("steps"), stepChoice() == StepChoice::Range
                                                 ? QStringLiteral("range")
                                                 : QStringLiteral("all"));
}

void RecomputeDialog::accept() {
  saveChoices();
  QDialog::accept();
}

}  // namespace lossbound::widgets
