// The composed workbench: a session with a partial report fills in step by step, the first exit
// follows the results, the axes stay synchronised, clicks reach the inspector, and a screenshot
// of the whole view shows band and marker.
#include "tests/widgets/image_checks.h"
#include "tests/widgets/synthetic.h"
#include "widgets/loss_plot.h"
#include "widgets/margin_plot.h"
#include "widgets/step_inspector.h"
#include "widgets/step_table.h"
#include "widgets/verdict_panel.h"
#include "widgets/workbench_view.h"

#include <QSignalSpy>
#include <QTest>

using namespace lossbound;
using namespace lossbound::widgets;
using namespace lossbound::widgets::test;

class TestWorkbench : public QObject {
  Q_OBJECT

 private slots:
  void stepsFillInAndFirstExitFollows() {
    WorkbenchView view;
    const SessionData s = makeSession(4000, 4000, 200);
    view.setSession(s);
    QCOMPARE(view.lossPlot()->referencePointCount(), 4000);
    QCOMPARE(view.stepTable()->stepModel()->rowCount(), 20);
    QCOMPARE(view.verdictPanel()->summary().verdict, OverallVerdict::NotAnalysed);

    AnalysisSettings settings;
    view.beginAnalysis(settings, 3);
    view.updateStep(makeResult(400, false));
    QCOMPARE(view.lossPlot()->bandPointCount(), 1);
    QCOMPARE(view.verdictPanel()->summary().verdict, OverallVerdict::Rounding);
    QVERIFY(view.verdictPanel()->plainText().contains(QStringLiteral("2 more running")));
    view.updateStep(makeResult(3000, true));
    QCOMPARE(view.report().firstExit, std::optional<std::int64_t>(3000));
    QCOMPARE(view.lossPlot()->firstExitX(), std::optional<double>(3000));
    QCOMPARE(view.marginPlot()->firstExitX(), std::optional<double>(3000));
    view.updateStep(makeResult(1000, true));  // an earlier exit arrives later
    QCOMPARE(view.report().firstExit, std::optional<std::int64_t>(1000));
    QCOMPARE(view.lossPlot()->firstExitX(), std::optional<double>(1000));
    QCOMPARE(view.report().steps.size(), std::size_t(3));
    QCOMPARE(view.report().steps.front().step, std::int64_t(400));
    QCOMPARE(view.verdictPanel()->summary().verdict, OverallVerdict::BugCertain);
    QVERIFY(!view.verdictPanel()->plainText().contains(QStringLiteral("more running")));
    const int row = view.stepTable()->stepModel()->rowOfStep(1000);
    QCOMPARE(view.stepTable()->stepModel()->resultAt(row)->verdict, StepVerdict::BugCertain);
    // Replacing a step keeps one result per step.
    view.updateStep(makeResult(1000, false));
    QCOMPARE(view.report().steps.size(), std::size_t(3));
    QCOMPARE(view.report().firstExit, std::optional<std::int64_t>(3000));
  }

  // Recomputing a subset used to swap in an empty report and install only the job's steps.
  void recomputingASubsetMergesWithTheSameSettings() {
    WorkbenchView view;
    view.setSession(makeSession(4000, 4000, 200));
    AnalysisSettings settings;
    settings.backend = "cpu";
    AnalysisReport all = makeReport({0, 1000, 2000, 3000}, 3000);
    all.settings = settings;
    view.beginAnalysis(settings, 4);
    view.finishAnalysis(all);
    QCOMPARE(view.report().steps.size(), std::size_t(4));
    QCOMPARE(view.report().firstExit, std::optional<std::int64_t>(3000));

    // Recompute step 1000 only, now outside: the other steps stay, the first exit moves to 1000.
    AnalysisSettings again = settings;
    again.backend = "auto";  // the backend does not change the envelope
    view.beginAnalysis(again, 1);
    QCOMPARE(view.report().steps.size(), std::size_t(4));
    QVERIFY(view.verdictPanel()->plainText().contains(QStringLiteral("1 more running")));
    const StepResult outside = makeResult(1000, true);
    view.updateStep(outside);
    QVERIFY(!view.verdictPanel()->plainText().contains(QStringLiteral("more running")));
    AnalysisReport job;
    job.settings = again;
    job.steps = {outside};
    job.firstExit = 1000;
    view.finishAnalysis(job);
    QCOMPARE(view.report().steps.size(), std::size_t(4));
    QCOMPARE(view.report().firstExit, std::optional<std::int64_t>(1000));
    QCOMPARE(view.lossPlot()->firstExitX(), std::optional<double>(1000));
    QCOMPARE(view.stepTable()->stepModel()->rowCount(), 20);
    QCOMPARE(view.verdictPanel()->summary().verdict, OverallVerdict::BugCertain);
    QVERIFY(view.verdictPanel()->notice().contains(QStringLiteral("merged")));

    // Recompute step 1000 again, now inside: the first exit goes back to 3000 (not to "none",
    // which the job's own report would say).
    view.beginAnalysis(again, 1);
    job.steps = {makeResult(1000, false)};
    job.firstExit.reset();
    view.updateStep(job.steps.front());
    view.finishAnalysis(job);
    QCOMPARE(view.report().steps.size(), std::size_t(4));
    QCOMPARE(view.report().firstExit, std::optional<std::int64_t>(3000));
    QCOMPARE(view.marginPlot()->firstExitX(), std::optional<double>(3000));
  }

  void recomputingWithOtherSettingsReplacesAndSaysSo() {
    WorkbenchView view;
    view.setSession(makeSession(4000, 4000, 200));
    AnalysisReport all = makeReport({0, 1000, 2000, 3000}, 3000);
    view.beginAnalysis(all.settings, 4);
    view.finishAnalysis(all);
    QVERIFY(view.verdictPanel()->notice().isEmpty());

    AnalysisSettings interval;
    interval.method = EnvelopeMethod::Interval;
    view.beginAnalysis(interval, 1);
    QCOMPARE(view.report().steps.size(), std::size_t(0));
    const QString notice = view.verdictPanel()->notice();
    QVERIFY2(notice.contains(QStringLiteral("replaced")) && notice.contains(QStringLiteral("4")),
             qPrintable(notice));
    QVERIFY(view.verdictPanel()->plainText().contains(notice));
    AnalysisReport job;
    job.settings = interval;
    job.steps = {makeResult(2000, false, 0.08, EnvelopeMethod::Interval)};
    view.updateStep(job.steps.front());
    view.finishAnalysis(job);
    QCOMPARE(view.report().steps.size(), std::size_t(1));
    QVERIFY(!view.report().firstExit);
    QCOMPARE(view.verdictPanel()->summary().verdict, OverallVerdict::Rounding);
    QVERIFY(view.verdictPanel()->notice().contains(QStringLiteral("replaced")));
    // A new session forgets the notice.
    view.setSession(makeSession(100, 100, 10));
    QVERIFY(view.verdictPanel()->notice().isEmpty());
  }

  void axesAreSynchronised() {
    WorkbenchView view;
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setSession(makeSession(4000, 4000, 200));
    QCOMPARE(view.marginPlot()->xRange(), view.lossPlot()->xRange());
    view.lossPlot()->setXRange(1000, 2000);
    QCOMPARE(view.marginPlot()->xRange(), (std::pair<double, double>(1000, 2000)));
    view.marginPlot()->setXRange(1500, 2500);
    QCOMPARE(view.lossPlot()->xRange(), (std::pair<double, double>(1500, 2500)));
    view.lossPlot()->resetView();
    QCOMPARE(view.marginPlot()->xRange(), view.lossPlot()->xRange());
    // Stacked plots share their left edge, so a step is at the same x in both.
    const QPoint lossOrigin = view.lossPlot()->mapTo(&view, QPoint(0, 0));
    const QPoint marginOrigin = view.marginPlot()->mapTo(&view, QPoint(0, 0));
    view.lossPlot()->replotNow();
    view.marginPlot()->replotNow();
    QCOMPARE(view.lossPlot()->xToPixel(2000) + lossOrigin.x(),
             view.marginPlot()->xToPixel(2000) + marginOrigin.x());
  }

  void inspectingAStepShowsEveryMethodAndTensors() {
    WorkbenchView view;
    const SessionData s = makeSession(4000, 4000, 200);
    int calls = 0;
    view.setSession(s);
    view.setTensorProvider([&](std::int64_t step) {
      ++calls;
      return std::vector<TensorSummary>{{QStringLiteral("params/w"), QStringLiteral("[2]"),
                                         QStringLiteral("float32"), double(step)}};
    });
    view.setReport(makeReport({200, 400}, std::nullopt));
    AnalysisSettings probabilistic;
    probabilistic.method = EnvelopeMethod::Probabilistic;
    view.beginAnalysis(probabilistic, 1);
    view.updateStep(makeResult(400, false, 0.01, EnvelopeMethod::Probabilistic));
    QSignalSpy spy(&view, &WorkbenchView::stepInspected);
    view.inspectStep(400);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(view.inspectedStep(), std::optional<std::int64_t>(400));
    QCOMPARE(view.inspector()->methodRowCount(), 2);  // probabilistic now, first-order before
    QCOMPARE(view.inspector()->tensorRowCount(), 1);
    QCOMPARE(view.inspector()->budgetBarCount(), 3);
    QVERIFY(calls >= 1);
    QCOMPARE(view.selectedSteps(), (std::vector<std::int64_t>{400}));
  }

  void clickOnThePlotInspectsTheStep() {
    WorkbenchView view;
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const SessionData s = makeSession(4000, 4000, 200);
    view.setSession(s, makeReport(s.checkpointSteps, 2400));
    LossPlot* plot = view.lossPlot();
    plot->replotNow();
    QWidget* canvas = plot->childAt(plot->plotArea().center());
    QVERIFY(canvas);
    const QPoint at = canvas->mapFrom(
        plot, QPoint(int(std::lround(plot->xToPixel(1800))), plot->plotArea().center().y()));
    QTest::mousePress(canvas, Qt::LeftButton, Qt::NoModifier, at);
    QTest::mouseRelease(canvas, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(view.inspectedStep(), std::optional<std::int64_t>(1800));
  }

  void screenshotShowsBandAndMarker() {
    WorkbenchView view;
    view.resize(1400, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const SessionData s = makeSession(4000, 4000, 200);
    view.setSession(s, makeReport(s.checkpointSteps, 2400));
    view.inspectStep(2400);
    view.lossPlot()->replotNow();
    view.marginPlot()->replotNow();
    QTest::qWait(50);
    const QImage image = view.grab().toImage();
    if (qEnvironmentVariableIsSet("LOSSBOUND_SCREENSHOT_DIR"))
      image.save(qEnvironmentVariable("LOSSBOUND_SCREENSHOT_DIR") + "/workbench.png");
    LossPlot* plot = view.lossPlot();
    const QPoint origin = plot->mapTo(&view, QPoint(0, 0));
    const QRect area = plot->plotArea().translated(origin);
    QVERIFY(countPixels(image, area, isBandPixel) > 200);
    const int x = int(std::lround(plot->xToPixel(2400))) + origin.x();
    QVERIFY(columnCoverage(image, area, x, isExitPixel) > 0.7);
  }
};

QTEST_MAIN(TestWorkbench)
#include "test_workbench.moc"
