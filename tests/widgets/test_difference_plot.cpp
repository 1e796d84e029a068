// Difference plot: replay − reference per analysed step with the envelope as a band around 0, the
// outside points, the logged-difference line (off by default), the sym-log axis, the band in the
// grabbed image, and the PNG export of the CLI stacking it under the other plots.
#include "tests/widgets/image_checks.h"
#include "tests/widgets/synthetic.h"
#include "widgets/difference_plot.h"
#include "widgets/export.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace lossbound;
using namespace lossbound::widgets;
using namespace lossbound::widgets::test;

class TestDifferencePlot : public QObject {
  Q_OBJECT

 private:
  // Results at steps 0, 10, ..., 190 centred on the point replay; from `exitFrom` on the reference
  // is 3 half-widths away; step 200 is not bounded.
  static std::vector<StepResult> results(std::int64_t exitFrom) {
    std::vector<StepResult> out;
    for (std::int64_t s = 0; s < 200; s += 10) {
      StepResult r = makeResult(s, s >= exitFrom, 0.01);
      r.pointLoss = (r.lo + r.hi) / 2;
      out.push_back(r);
    }
    StepResult bad = makeResult(200, false);
    bad.verdict = StepVerdict::NotBounded;
    out.push_back(bad);
    return out;
  }

 private slots:
  void differencesAndBands() {
    DifferencePlot plot;
    plot.setResults(results(100), 100);
    QCOMPARE(plot.pointCount(), 20);  // the not-bounded step is skipped
    QCOMPARE(plot.bandPointCount(), 20);
    QCOMPARE(plot.outsideCount(), 10);
    QCOMPARE(plot.firstExitX(), std::optional<double>(100.0));
    QVERIFY(!plot.loggedDifferenceVisible());
    const StepResult r = results(100)[12];
    QVERIFY(std::abs(DifferencePlot::replayDifference(r) - (r.pointLoss - r.referenceLoss)) <
            1e-15);
    // Without a point value the baselines' fp64 replay is used; with neither, nothing.
    StepResult noPoint = r;
    noPoint.pointLoss = std::nan("");
    QVERIFY(std::isnan(DifferencePlot::replayDifference(noPoint)));
    noPoint.baselines.computed = true;
    noPoint.baselines.fp64 = r.referenceLoss + 0.5;
    QCOMPARE(DifferencePlot::replayDifference(noPoint), 0.5);
  }

  void symLogKeepsBandAndOutliers() {
    DifferencePlot plot;
    std::vector<StepResult> rs = results(100);
    rs[15].referenceLoss = rs[15].pointLoss - 500 * 0.01;  // 500 half-widths away
    plot.setResults(rs, 100);
    plot.setXRange(-5, 205);  // the workbench synchronises it with the loss plot
    QCOMPARE(plot.linearScale(), 0.01);
    plot.setSymLog(true);
    QVERIFY(plot.symLog());
    plot.resize(900, 300);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    plot.replotNow();
    // The band (±0.01) is a visible height on the sym-log axis although the outlier is at 5.
    const double bandPixels = std::abs(plot.yToPixel(0.01) - plot.yToPixel(-0.01));
    QVERIFY2(bandPixels > 20, qPrintable(QString::number(bandPixels)));
    const QImage image = plot.grab().toImage();
    const QRect area = plot.plotArea();
    const QRect analysed(QPoint(int(plot.xToPixel(0)), area.top()),
                         QPoint(int(plot.xToPixel(190)), area.bottom()));
    QVERIFY2(countPixels(image, analysed, isBandPixel) > 200, "band colour missing");
    QVERIFY2(countPixels(image, analysed, isExitPixel) > 20, "outside points missing");
    plot.setSymLog(false);
    plot.replotNow();
    const double linearBand = std::abs(plot.yToPixel(0.01) - plot.yToPixel(-0.01));
    QVERIFY(linearBand < bandPixels);
    plot.setLoggedDifferenceVisible(true);
    QVERIFY(plot.loggedDifferenceVisible());
  }

  void toolTipNamesTheDifference() {
    DifferencePlot plot;
    plot.resize(900, 300);
    plot.setResults(results(100), 100);
    plot.setXRange(-5, 205);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    plot.replotNow();
    const QString tip = plot.toolTipAt(120);
    QVERIFY(tip.contains(QStringLiteral("step 120")));
    QVERIFY(tip.contains(QStringLiteral("replay − reference")));
    QVERIFY(tip.contains(QStringLiteral("different states")));
  }

  void analysisPngStacksThreePlots() {
    QTemporaryDir dir;
    AnalysisReport report;
    report.steps = results(100);
    const QString path = dir.filePath(QStringLiteral("a.png"));
    QCOMPARE(exportAnalysisPng({}, report, path, {900, 800}), QString());
    const QImage image(path);
    QCOMPARE(image.size(), QSize(900, 800));
    // The bottom quarter is the difference plot: it holds band pixels.
    QVERIFY(countPixels(image, QRect(0, 600, 900, 200), isBandPixel) > 100);
  }
};

QTEST_MAIN(TestDifferencePlot)
#include "test_difference_plot.moc"
