// Verdict panel (summaries of every verdict tier), step inspector (top ops, per-method
// envelopes, tensors) and recompute dialog (step choices, method fields, QSettings memory).
#include "core/analysis/overall_verdict.h"
#include "core/analysis/verdict.h"
#include "tests/widgets/synthetic.h"
#include "widgets/recompute_dialog.h"
#include "widgets/step_inspector.h"
#include "widgets/verdict_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

using namespace lossbound;
using namespace lossbound::widgets;
using namespace lossbound::widgets::test;

class TestPanels : public QObject {
  Q_OBJECT

  QTemporaryDir mSettingsDir;

 private slots:
  void initTestCase() {
    QVERIFY(mSettingsDir.isValid());
    QCoreApplication::setOrganizationName(QStringLiteral("LossboundTest"));
    QCoreApplication::setApplicationName(QStringLiteral("test_panels"));
    QSettings::setDefaultFormat(QSettings::IniFormat);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, mSettingsDir.path());
  }

  // The GUI and the CLI read one verdict (core's summarizeReport): the panel's tier is core's,
  // and a pair with some steps inside and some not bounded is inconclusive in both (the GUI used
  // to say "rounding" where the CLI said "inconclusive" and exited 4).
  void guiAndCliAgree() {
    AnalysisReport mixed = makeReport({100, 200, 300}, std::nullopt);
    markNotBounded(mixed.steps[1], "unsupported op: aten.frobnicate.default (node f)");
    AnalysisReport allUnbounded = makeReport({100, 200}, std::nullopt);
    for (StepResult& r : allUnbounded.steps) markNotBounded(r, "unsupported op: aten.x (node x)");
    AnalysisReport untrusted = makeReport({100, 200}, std::nullopt);
    untrusted.steps[0].verdict = StepVerdict::Untrustworthy;
    untrusted.steps[0].selfCheckPassed = false;
    const std::vector<std::pair<AnalysisReport, int>> cases{
        {makeReport({100, 200}, std::nullopt), kExitNoExit},
        {makeReport({100, 200, 300}, 200), kExitTypeII},
        {mixed, kExitNotBounded},
        {allUnbounded, kExitNotBounded},
        {untrusted, kExitNotBounded}};
    VerdictPanel panel;
    for (const auto& [report, exitCode] : cases) {
      const OverallSummary core = summarizeReport(report);
      panel.setReport(report);
      QCOMPARE(panel.summary().verdict, core.verdict);
      QCOMPARE(core.exitCode, exitCode);
    }
    panel.setReport(mixed);
    QCOMPARE(panel.summary().verdict, OverallVerdict::Inconclusive);
    QVERIFY(panel.summary().headline.contains(QStringLiteral("Inconclusive")));
    QVERIFY2(panel.summary().whyText.contains(QStringLiteral("aten.frobnicate.default")),
             qPrintable(panel.summary().whyText));
    QVERIFY(overallVerdictSentence(summarizeReport(mixed), EnvelopeMethod::FirstOrder)
                .starts_with("inconclusive"));
  }

  void verdictTiers() {
    VerdictPanel panel;
    QCOMPARE(panel.summary().verdict, OverallVerdict::NotAnalysed);

    AnalysisReport report = makeReport({100, 200, 300, 400}, 300);
    panel.setReport(report);
    QCOMPARE(panel.summary().verdict, OverallVerdict::BugCertain);
    QCOMPARE(panel.summary().firstExit, std::optional<std::int64_t>(300));
    QVERIFY(panel.plainText().contains(QStringLiteral("First exit at step 300")));
    QVERIFY(panel.plainText().contains(
        QString::fromUtf8(methodGuarantee(EnvelopeMethod::FirstOrder).data())));
    QVERIFY(panel.plainText().contains(QStringLiteral("Self-check passed at all 4")));

    report.steps[2].verdict = StepVerdict::BugLikely;
    panel.setReport(report);
    QCOMPARE(panel.summary().verdict, OverallVerdict::BugLikely);
    QVERIFY(panel.summary().headline.contains(QStringLiteral("likely")));

    AnalysisReport clean = makeReport({100, 200}, std::nullopt);
    panel.setReport(clean, 3);
    QCOMPARE(panel.summary().verdict, OverallVerdict::Rounding);
    QVERIFY(panel.plainText().contains(QStringLiteral("3 more running")));

    clean.steps[1].verdict = StepVerdict::Untrustworthy;
    clean.steps[1].selfCheckPassed = false;
    panel.setReport(clean);
    QCOMPARE(panel.summary().verdict, OverallVerdict::Untrustworthy);
    QVERIFY(panel.summary().selfCheckText.contains(QStringLiteral("FAILED")));

    // Infinite envelopes hold everything: inconclusive, not "rounding".
    AnalysisReport unbounded = makeReport({100, 200}, std::nullopt);
    for (StepResult& r : unbounded.steps) r.lo = -INFINITY, r.hi = INFINITY, r.margin = 0;
    panel.setReport(unbounded);
    QCOMPARE(panel.summary().verdict, OverallVerdict::NotBounded);
    QVERIFY(panel.summary().countsText.contains(QStringLiteral("2 not bounded")));
    QVERIFY(panel.summary().whyText.contains(QStringLiteral("envelope is unbounded")));

    AnalysisReport interval = makeReport({100}, std::nullopt);
    interval.settings.method = EnvelopeMethod::Interval;
    interval.settings.startNode = "logits";
    panel.setReport(interval);
    QVERIFY(panel.summary().guarantee.contains(QStringLiteral("rounding before it is ignored")));
    QVERIFY(panel.summary().settingsText.contains(QStringLiteral("from node logits")));
  }

  void inspectorShowsTopOpsMethodsTensors() {
    StepInspector inspector;
    StepResult fo = makeResult(300, true);
    fo.budget.clear();
    for (int i = 0; i < 14; ++i)
      fo.budget.push_back({"node_" + std::to_string(i), "aten.mm.default", 0, (i + 1) / 105.0});
    StepResult prob = makeResult(300, true, 0.01, EnvelopeMethod::Probabilistic);
    prob.budget.clear();
    std::vector<TensorSummary> tensors{
        {QStringLiteral("params/w"), QStringLiteral("[4, 4]"), QStringLiteral("float32"), 2.5},
        {QStringLiteral("batch/ids"), QStringLiteral("[8]"), QStringLiteral("int64"), 12}};
    inspector.setStep(300, {prob, fo}, tensors);
    QCOMPARE(inspector.budgetBarCount(), StepInspector::kTopOps);
    QVERIFY(inspector.budgetLabels().front().startsWith(QStringLiteral("node_13 · mm")));
    QVERIFY(inspector.budgetLabels().front().contains(QStringLiteral("13.3%")));
    QCOMPARE(inspector.methodRowCount(), 2);
    QCOMPARE(inspector.tensorRowCount(), 2);
    QCOMPARE(inspector.baselineRowCount(), 0);  // no result carries baselines
    fo.baselines.computed = true;
    fo.baselines.allclosePass = true;
    fo.baselines.rmsePass = false;
    inspector.setStep(300, {prob, fo}, tensors);
    QCOMPARE(inspector.baselineRowCount(), 2);
    QCOMPARE(inspector.baselineSays(0), QStringLiteral("same"));
    QCOMPARE(inspector.baselineSays(1), QStringLiteral("different"));
    QCOMPARE(inspector.outputBarCount(), 0);
    fo.outputs = {{"grad:w", 40, false, true, -1, 12.5, 1.0, 0.05, 0.03},
                  {"loss", 1, false, false, -1, 0.2, 1e-9, 1e-8, 1e-8}};
    inspector.setStep(300, {prob, fo}, tensors);
    QCOMPARE(inspector.outputBarCount(), 2);
    QVERIFY(inspector.outputLabels().front().startsWith(QStringLiteral("grad:w  (margin 12.5")));
    inspector.clear();
    QCOMPARE(inspector.baselineRowCount(), 0);
    QCOMPARE(inspector.outputBarCount(), 0);
    QCOMPARE(inspector.budgetBarCount(), 0);
    QCOMPARE(inspector.tensorRowCount(), 0);
  }

  void recomputeDialogBuildsRequests() {
    QSettings().remove(QStringLiteral("recompute"));
    // Nothing remembered: the defaults are AnalysisSettings' own (one reader, one set of defaults).
    const AnalysisSettings defaults;
    AnalysisSettings remembered = rememberedSettings();
    QCOMPARE(remembered.method, defaults.method);
    QCOMPARE(remembered.precision, defaults.precision);
    QCOMPARE(remembered.confidence, defaults.confidence);
    QCOMPARE(remembered.ensembleSize, defaults.ensembleSize);
    QCOMPARE(remembered.ensembleOrder, defaults.ensembleOrder);
    QCOMPARE(remembered.backend, defaults.backend);
    QCOMPARE(remembered.startNode, defaults.startNode);
    const std::vector<std::int64_t> cps{0, 100, 200, 300, 400};
    {
      RecomputeDialog dialog(cps, {100, 300, 350});  // 350 has no checkpoint: ignored
      QCOMPARE(dialog.stepChoice(), RecomputeDialog::StepChoice::Selected);
      QCOMPARE(dialog.request().steps, (std::vector<std::int64_t>{100, 300}));
      dialog.setStepChoice(RecomputeDialog::StepChoice::AllCheckpointed);
      QCOMPARE(dialog.request().steps, cps);
      dialog.setStepChoice(RecomputeDialog::StepChoice::Range);
      dialog.setRange(150, 400);
      QCOMPARE(dialog.request().steps, (std::vector<std::int64_t>{200, 300, 400}));
      QCOMPARE(dialog.request().settings.method, EnvelopeMethod::FirstOrder);

      dialog.setMethod(EnvelopeMethod::Interval);
      auto* node = dialog.findChild<QComboBox*>(QStringLiteral("startNode"));
      auto* caveat = dialog.findChild<QLabel*>(QStringLiteral("startNodeCaveat"));
      QVERIFY(node && caveat);
      QVERIFY(caveat->isHidden());
      node->setCurrentText(QStringLiteral("logits"));
      QVERIFY(!caveat->isHidden());
      QVERIFY(caveat->text().contains(QStringLiteral("ignored")));
      auto* precision = dialog.findChild<QComboBox*>(QStringLiteral("precision"));
      precision->setCurrentIndex(precision->findText(QStringLiteral("bf16")));
      auto* backend = dialog.findChild<QComboBox*>(QStringLiteral("backend"));
      backend->setCurrentIndex(backend->findData(QStringLiteral("cpu")));
      auto* order = dialog.findChild<QComboBox*>(QStringLiteral("ensembleOrder"));
      QVERIFY(order && !order->isEnabled());  // the ensemble method's setting
      dialog.setMethod(EnvelopeMethod::Ensemble);
      QVERIFY(order->isEnabled());
      QCOMPARE(dialog.request().settings.ensembleOrder, EnsembleOrder::PerProduct);
      order->setCurrentIndex(order->findData(int(EnsembleOrder::PerElement)));
      QCOMPARE(dialog.request().settings.ensembleOrder, EnsembleOrder::PerElement);
      dialog.setMethod(EnvelopeMethod::Interval);
      const RecomputeRequest r = dialog.request();
      QCOMPARE(r.settings.method, EnvelopeMethod::Interval);
      QCOMPARE(r.settings.startNode, std::string("logits"));
      QCOMPARE(r.settings.precision, std::optional<Format>(Format::Bf16));
      QCOMPARE(r.settings.backend, std::string("cpu"));
      dialog.accept();
      // What the app's first analysis uses is what the dialog remembered.
      remembered = rememberedSettings();
      QVERIFY(sameResultSettings(remembered, r.settings));
      QCOMPARE(remembered.backend, std::string("cpu"));
      QCOMPARE(remembered.ensembleOrder, EnsembleOrder::PerElement);
    }
    {
      // Remembered: method, node, precision, backend, the range choice.
      RecomputeDialog dialog(cps, {});
      const RecomputeRequest r = dialog.request();
      QCOMPARE(r.settings.method, EnvelopeMethod::Interval);
      QCOMPARE(r.settings.startNode, std::string("logits"));
      QCOMPARE(r.settings.precision, std::optional<Format>(Format::Bf16));
      QCOMPARE(r.settings.backend, std::string("cpu"));
      QCOMPARE(r.settings.ensembleOrder, EnsembleOrder::PerElement);
      QCOMPARE(dialog.findChild<QComboBox*>(QStringLiteral("ensembleOrder"))->currentData().toInt(),
               int(EnsembleOrder::PerElement));
      QCOMPARE(dialog.stepChoice(), RecomputeDialog::StepChoice::Range);
      QVERIFY(!dialog.findChild<QWidget*>(QStringLiteral("selectedSteps"))->isEnabled());
    }
  }
};

QTEST_MAIN(TestPanels)
#include "test_panels.moc"
