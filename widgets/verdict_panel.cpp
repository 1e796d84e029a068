#include "widgets/verdict_panel.h"

#include <QLabel>
#include <QVBoxLayout>

namespace lossbound::widgets {

namespace {

QLabel* makeLabel(QWidget* parent, const char* name) {
  auto* l = new QLabel(parent);
  l->setObjectName(QString::fromLatin1(name));
  l->setWordWrap(true);
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return l;
}

}  // namespace

VerdictPanel::VerdictPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  mHeadline = makeLabel(this, "headline");
  QFont big = mHeadline->font();
  big.setPointSizeF(big.pointSizeF() * 1.35);
  big.setBold(true);
  mHeadline->setFont(big);
  mNotice = makeLabel(this, "notice");
  mNotice->setStyleSheet(QStringLiteral("color: #6a4a00; font-style: italic"));
  mNotice->hide();
  mFirstExit = makeLabel(this, "firstExit");
  mCounts = makeLabel(this, "counts");
  mWhy = makeLabel(this, "why");
  mWhy->setStyleSheet(QStringLiteral("color: #6a4a00"));
  mMethod = makeLabel(this, "method");
  QFont bold = mMethod->font();
  bold.setBold(true);
  mMethod->setFont(bold);
  mGuarantee = makeLabel(this, "guarantee");
  mSelfCheck = makeLabel(this, "selfCheck");
  mSettings = makeLabel(this, "settings");
  mSettings->setStyleSheet(QStringLiteral("color: #555"));
  for (QLabel* l :
       {mHeadline, mNotice, mFirstExit, mCounts, mWhy, mMethod, mGuarantee, mSelfCheck, mSettings})
    layout->addWidget(l);
  layout->addStretch(1);
  setReport({});
}

void VerdictPanel::setReport(const AnalysisReport& report, int pending) {
  mSummary = summarize(report);
  mPending = pending;
  mHeadline->setText(mSummary.headline);
  mHeadline->setStyleSheet(
      QStringLiteral("color: %1").arg(overallVerdictColor(mSummary.verdict).name()));
  mFirstExit->setText(mSummary.firstExitText);
  mCounts->setText(pending > 0 ? tr("%1 — %2 more running").arg(mSummary.countsText).arg(pending)
                               : mSummary.countsText);
  mWhy->setText(mSummary.whyText);
  mWhy->setVisible(!mSummary.whyText.isEmpty());
  mMethod->setText(mSummary.methodText);
  mGuarantee->setText(mSummary.guarantee);
  mSelfCheck->setText(mSummary.selfCheckText);
  const bool selfFailed = mSummary.selfCheckText.contains(QStringLiteral("FAILED"));
  mSelfCheck->setStyleSheet(selfFailed ? QStringLiteral("color: #966400; font-weight: bold")
                                       : QString());
  mSettings->setText(
      tr("Settings: %1").arg(mSummary.settingsText) +
      (report.backendDescription.empty()
           ? QString()
           : tr("\nComputed on: %1").arg(QString::fromStdString(report.backendDescription))));
}

void VerdictPanel::setNotice(const QString& notice) {
  mNotice->setText(notice);
  mNotice->setVisible(!notice.isEmpty());
}

QString VerdictPanel::notice() const { return mNotice->text(); }

QString VerdictPanel::plainText() const {
  QStringList lines;
  for (QLabel* l :
       {mHeadline, mFirstExit, mCounts, mWhy, mMethod, mGuarantee, mSelfCheck, mSettings})
    if (!l->text().isEmpty()) lines << l->text();
  if (!mNotice->text().isEmpty()) lines.insert(1, mNotice->text());
  return lines.join(QLatin1Char('\n'));
}

}  // namespace lossbound::widgets
