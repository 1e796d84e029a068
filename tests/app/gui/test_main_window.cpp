// The GUI on the real samples: a sample opens with the right point counts; an analysis fills in
// the band and puts the first-exit marker at the bug sample's exit and none for the fixed sample;
// Cancel stops the job and leaves a consistent report; a bad file shows the reader's message.
#include "app/main_window.h"
#include "app/samples.h"
#include "app/session_controller.h"
#include "tests/core/runfile/run_file_writer.h"
#include "widgets/loss_plot.h"
#include "widgets/margin_plot.h"
#include "widgets/step_table.h"
#include "widgets/verdict_panel.h"
#include "widgets/workbench_view.h"

#include <QAction>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace lossbound;
using namespace lossbound::app;

namespace {

QString sample(const char* name, const char* role) {
  return QStringLiteral(LOSSBOUND_SAMPLES_DIR "/%1/%2.h5")
      .arg(QString::fromLatin1(name), QString::fromLatin1(role));
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT

  QTemporaryDir mDir;

  /// Analyses `steps` and waits for the end; returns the final report.
  static AnalysisReport analyse(MainWindow& w, std::vector<std::int64_t> steps) {
    QSignalSpy finished(w.controller(), &SessionController::analysisFinished);
    QSignalSpy failed(w.controller(), &SessionController::analysisFailed);
    AnalysisSettings settings;
    settings.backend = "cpu";
    if (!w.controller()->startAnalysis(steps, settings)) return {};
    if (!finished.wait(600'000)) return {};
    return finished.first().at(0).value<AnalysisReport>();
  }

 private slots:
  void initTestCase() {
    QVERIFY(mDir.isValid());
    qRegisterMetaType<AnalysisReport>();
    qRegisterMetaType<StepResult>();
    QCoreApplication::setOrganizationName(QStringLiteral("LossboundTest"));
    QCoreApplication::setApplicationName(QStringLiteral("test_gui"));
    QSettings::setDefaultFormat(QSettings::IniFormat);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, mDir.path());
    qputenv("LOSSBOUND_CACHE_DIR", mDir.filePath(QStringLiteral("cache")).toUtf8());
  }

  void samplesHaveDescriptions() {
    const auto samples = findSamples(QStringLiteral(LOSSBOUND_SAMPLES_DIR));
    QVERIFY(samples.size() >= 2);
    for (const SampleInfo& s : samples) {
      QVERIFY2(s.description != s.name && !s.description.contains(QLatin1Char('\n')),
               qPrintable(s.name));
      QVERIFY(QFile::exists(s.reference) && QFile::exists(s.candidate));
    }
  }

  void sampleOpensWithItsPointCounts() {
    MainWindow w;
    w.show();
    QVERIFY(
        w.openPair(sample("gradaccum-fixed", "reference"), sample("gradaccum-fixed", "candidate")));
    QVERIFY(w.errorText().isEmpty());
    const auto& session = w.workbench()->session();
    QCOMPARE(w.workbench()->lossPlot()->referencePointCount(), int(session.reference.steps.size()));
    QCOMPARE(w.workbench()->lossPlot()->referencePointCount(), 50);
    QCOMPARE(w.workbench()->lossPlot()->candidatePointCount(), 50);
    QCOMPARE(w.workbench()->lossPlot()->checkpointMarkerCount(), 50);
    QCOMPARE(w.workbench()->stepTable()->stepModel()->rowCount(), 50);
  }

  void zoomXOnlyMenuFollowsThePlot() {
    MainWindow w;
    QAction* menu = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
      if (a->text().remove(QLatin1Char('&')) == QStringLiteral("Zoom x only")) menu = a;
    QVERIFY(menu);
    QVERIFY(!menu->isChecked());
    w.workbench()->lossPlot()->setXOnly(true);  // as the plot's own checkbox does
    QVERIFY(menu->isChecked());
    menu->setChecked(false);
    QVERIFY(!w.workbench()->lossPlot()->xOnly());
  }

  void unsupportedOpIsNamedOnOpening() {
    // A pair whose program has an op without a rule: the banner names it before any analysis.
    testing::RunFixture f;
    f.graph = testing::defaultGraph();
    const std::string from = "aten.sum.default", to = "aten.frobnicate.default";
    f.graph.replace(f.graph.find(from), from.size(), to);
    const QString ref = mDir.filePath(QStringLiteral("unsupported-reference.h5"));
    const QString cand = mDir.filePath(QStringLiteral("unsupported-candidate.h5"));
    testing::writeRunFile(ref.toStdString(), f);
    testing::writeRunFile(cand.toStdString(), f);
    MainWindow w;
    w.show();
    QVERIFY(w.openPair(ref, cand));
    QVERIFY2(w.errorText().contains(QStringLiteral("no step can be bounded")),
             qPrintable(w.errorText()));
    QVERIFY2(w.errorText().contains(QStringLiteral("unsupported op: aten.frobnicate.default "
                                                   "(node sum_1)")),
             qPrintable(w.errorText()));
    // A supported program gets no such warning.
    MainWindow ok;
    ok.show();
    QVERIFY(ok.openPair(sample("gradaccum-fixed", "reference"),
                        sample("gradaccum-fixed", "candidate")));
    QVERIFY2(!ok.errorText().contains(QStringLiteral("no step can be bounded")),
             qPrintable(ok.errorText()));
  }

  void badFileShowsTheReadersMessage() {
    MainWindow w;
    w.show();
    QVERIFY(!w.openPair(QStringLiteral(LOSSBOUND_SAMPLES_DIR "/README.md"),
                        sample("gradaccum-fixed", "candidate")));
    QVERIFY2(w.errorText().contains(QStringLiteral("README.md")), qPrintable(w.errorText()));
    QVERIFY(!w.controller()->hasSession());
  }

  void fixedSampleHasBandAndNoExit() {
    MainWindow w;
    w.show();
    QVERIFY(
        w.openPair(sample("gradaccum-fixed", "reference"), sample("gradaccum-fixed", "candidate")));
    const AnalysisReport report = analyse(w, {0, 1, 2, 3});
    QCOMPARE(report.steps.size(), std::size_t(4));
    QCOMPARE(w.workbench()->lossPlot()->bandPointCount(), 4);
    QVERIFY(!w.workbench()->lossPlot()->firstExitX());
    QVERIFY(!w.workbench()->marginPlot()->firstExitX());
  }

  void bugSampleHasItsFirstExitMarked() {
    MainWindow w;
    w.show();
    QVERIFY(w.openPair(sample("gradaccum-hf-bug", "reference"),
                       sample("gradaccum-hf-bug", "candidate")));
    const AnalysisReport report = analyse(w, {0, 1, 2, 3});
    QCOMPARE(report.steps.size(), std::size_t(4));
    // The CLI tests expect the bug to show at step 0 (tests/app: cli_analyze_hf_bug).
    QCOMPARE(report.firstExit, std::optional<std::int64_t>(0));
    QCOMPARE(w.workbench()->lossPlot()->firstExitX(), std::optional<double>(0));
    QVERIFY(w.workbench()->verdictPanel()->summary().headline.contains(QStringLiteral("Type-II")));
  }

  void cancelStopsTheJobConsistently() {
    MainWindow w;
    w.show();
    QVERIFY(
        w.openPair(sample("gradaccum-fixed", "reference"), sample("gradaccum-fixed", "candidate")));
    QSignalSpy step(w.controller(), &SessionController::stepFinished);
    QSignalSpy finished(w.controller(), &SessionController::analysisFinished);
    AnalysisSettings settings;
    settings.backend = "cpu";
    std::vector<std::int64_t> all = w.controller()->analysableSteps();
    QVERIFY(w.controller()->startAnalysis(all, settings));
    QVERIFY(w.controller()->busy());
    QVERIFY(step.wait(300'000));
    w.controller()->cancel();
    QVERIFY(finished.wait(300'000));
    QVERIFY(!w.controller()->busy());
    const auto report = finished.first().at(0).value<AnalysisReport>();
    QVERIFY(report.cancelled);
    QVERIFY(report.steps.size() < all.size());
    // The view shows exactly the finished steps, nothing pending.
    QCOMPARE(w.workbench()->report().steps.size(), report.steps.size());
    QVERIFY(!w.workbench()->verdictPanel()->plainText().contains(QStringLiteral("more running")));
    // A new job can start afterwards.
    QVERIFY(w.controller()->startAnalysis({0}, settings));
    QVERIFY(finished.wait(300'000));
  }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
