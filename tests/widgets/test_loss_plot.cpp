// Loss plot and margin plot: point counts, the envelope band at analysed steps, the first-exit
// marker, display-only smoothing, log y, x-only zoom, tooltips, and redraw time with 1e6 steps.
#include "tests/widgets/image_checks.h"
#include "tests/widgets/synthetic.h"
#include "widgets/loss_plot.h"
#include "widgets/margin_plot.h"

#include <QCheckBox>
#include <QSignalSpy>
#include <QTest>
#include <QWheelEvent>

#include <algorithm>
#include <numeric>

using namespace lossbound;
using namespace lossbound::widgets;
using namespace lossbound::widgets::test;

class TestLossPlot : public QObject {
  Q_OBJECT

 private:
  static void showPlot(QWidget& w, QSize size = {1000, 560}) {
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
  }

  static QImage grabbed(PlotPanel& p) {
    p.replotNow();
    return p.grab().toImage();
  }

 private slots:
  void pointCountsMatchTheLogs() {
    LossPlot plot;
    const SessionData s = makeSession(5000, 4200, 100);
    plot.setSession(s);
    QCOMPARE(plot.referencePointCount(), 5000);
    QCOMPARE(plot.candidatePointCount(), 4200);
    QCOMPARE(plot.checkpointMarkerCount(), 42);
    QCOMPARE(plot.bandPointCount(), 0);
    QVERIFY(!plot.firstExitX());
    // The view covers every logged step.
    const auto [lo, hi] = plot.xRange();
    QVERIFY(lo <= 0 && hi >= 4999);
  }

  void bandIsDrawnAtAnalysedStepsOnly() {
    LossPlot plot;
    showPlot(plot);
    const SessionData s = makeSession(5000, 5000, 100);
    plot.setSession(s);
    const QImage before = grabbed(plot);
    QCOMPARE(countPixels(before, plot.plotArea(), isBandPixel), 0);

    // Analyse steps 0..2000 only (21 checkpoints); one step not bounded.
    std::vector<std::int64_t> steps;
    for (std::int64_t st = 0; st <= 2000; st += 100) steps.push_back(st);
    AnalysisReport report = makeReport(steps, std::nullopt);
    StepResult unbounded = makeResult(2100, false);
    unbounded.verdict = StepVerdict::NotBounded;
    report.steps.push_back(unbounded);
    plot.setResults(report.steps, report.firstExit);
    QCOMPARE(plot.bandPointCount(), 21);
    QCOMPARE(plot.outsideMarkerCount(), 0);

    const QImage after = grabbed(plot);
    const QRect area = plot.plotArea();
    const int xFirst = int(plot.xToPixel(0)), xLast = int(plot.xToPixel(2000));
    const QRect analysed(QPoint(std::max(area.left(), xFirst), area.top()),
                         QPoint(xLast, area.bottom()));
    const QRect beyond(QPoint(xLast + 4, area.top()), area.bottomRight());
    QVERIFY2(countPixels(after, analysed, isBandPixel) > 200, "band colour missing");
    // The legend (top right) shows a band swatch; exclude its corner from the "beyond" region.
    const QRect beyondBelowLegend(beyond.left(), area.top() + area.height() / 2, beyond.width(),
                                  area.height() / 2);
    QCOMPARE(countPixels(after, beyondBelowLegend, isBandPixel), 0);
  }

  void firstExitMarkerIsAtTheExitStep() {
    LossPlot plot;
    showPlot(plot);
    const SessionData s = makeSession(5000, 5000, 100);
    plot.setSession(s);
    std::vector<std::int64_t> steps(s.checkpointSteps.begin(), s.checkpointSteps.end());
    const AnalysisReport report = makeReport(steps, 3000);
    QCOMPARE(report.firstExit, std::optional<std::int64_t>(3000));
    plot.setResults(report.steps, report.firstExit);
    QCOMPARE(plot.firstExitX(), std::optional<double>(3000.0));
    QCOMPARE(plot.outsideMarkerCount(), 20);

    const QImage image = grabbed(plot);
    const QRect area = plot.plotArea();
    const int x = int(std::lround(plot.xToPixel(3000)));
    QVERIFY2(columnCoverage(image, area, x, isExitPixel) > 0.7, "no marker column at the exit");
    // Well left of the exit there is no red vertical line.
    QVERIFY(columnCoverage(image, area, int(plot.xToPixel(1000)), isExitPixel) < 0.2);
  }

  void noMarkerWithoutExit() {
    LossPlot plot;
    showPlot(plot);
    const SessionData s = makeSession(5000, 5000, 100);
    plot.setSession(s);
    const AnalysisReport report = makeReport(s.checkpointSteps, std::nullopt);
    plot.setResults(report.steps, report.firstExit);
    QVERIFY(!plot.firstExitX());
    const QImage image = grabbed(plot);
    const QRect area = plot.plotArea();
    for (int x = area.left() + 2; x < area.right() - 2; x += 3)
      QVERIFY2(columnCoverage(image, area, x, isExitPixel) < 0.3,
               qPrintable(QStringLiteral("red column at x=%1").arg(x)));
  }

  void smoothingIsDisplayOnly() {
    LossPlot plot;
    const SessionData s = makeSession(2000, 2000, 100);
    plot.setSession(s);
    const AnalysisReport report = makeReport(s.checkpointSteps, 1000);
    plot.setResults(report.steps, report.firstExit);
    QCOMPARE(plot.displayedReference(), s.reference.loss);
    plot.setSmoothing(0.9);
    QCOMPARE(plot.smoothing(), 0.9);
    const auto shown = plot.displayedReference();
    QCOMPARE(shown.size(), s.reference.loss.size());
    QCOMPARE(shown, emaSmooth(s.reference.loss, 0.9));
    QVERIFY(shown[500] != s.reference.loss[500]);
    // The results and the tooltip keep the logged values.
    QCOMPARE(plot.bandPointCount(), 20);
    QVERIFY(plot.toolTipAt(500).contains(QString::number(s.reference.loss[500], 'g', 10)));
    plot.setSmoothing(0);
    QCOMPARE(plot.displayedReference(), s.reference.loss);
    // Clamped to [0, 0.99].
    plot.setSmoothing(5);
    QCOMPARE(plot.smoothing(), 0.99);
  }

  void emaMatchesTensorBoard() {
    // Debiased EMA: first value unchanged, then weighted towards the history.
    const std::vector<double> v{1, 2, 3, std::nan(""), 4};
    const auto s = emaSmooth(v, 0.5);
    QCOMPARE(s[0], 1.0);
    QCOMPARE(s[1], (0.25 * 1 + 0.5 * 2) / 0.75);
    QVERIFY(std::isnan(s[3]));
    QCOMPARE(emaSmooth(v, 0).size(), v.size());
  }

  void tooltipNamesStepLossesEnvelopeVerdict() {
    LossPlot plot;
    showPlot(plot);
    const SessionData s = makeSession(5000, 5000, 100);
    plot.setSession(s);
    const AnalysisReport report = makeReport(s.checkpointSteps, 3000);
    plot.setResults(report.steps, report.firstExit);
    const QString tip = plot.toolTipAt(3000.4);
    QVERIFY2(tip.contains(QStringLiteral("step 3000")), qPrintable(tip));
    QVERIFY(tip.contains(QStringLiteral("reference (ref-run)")));
    QVERIFY(tip.contains(QStringLiteral("candidate (cand-run)")));
    QVERIFY(tip.contains(QStringLiteral("envelope (first-order): [")));
    QVERIFY(tip.contains(QStringLiteral("verdict: bug (certain)")));
    const QString plain = plot.toolTipAt(1234);
    QVERIFY2(plain.contains(QStringLiteral("not analysed")) ||
                 plain.contains(QStringLiteral("verdict: rounding")),
             qPrintable(plain));
  }

  void logYAndResetView() {
    LossPlot plot;
    showPlot(plot);
    QSignalSpy spy(&plot, &LossPlot::logYChanged);
    plot.setSession(makeSession(3000, 3000, 100));
    plot.setLogY(true);
    QVERIFY(plot.logY());
    QCOMPARE(spy.count(), 1);
    auto [ylo, yhi] = plot.yRange();
    QVERIFY(ylo > 0 && ylo < 1.74 && yhi > 3.0);  // losses span ~1.74 .. 3.0
    plot.setXRange(100, 200);
    plot.resetView();
    const auto [xlo, xhi] = plot.xRange();
    QVERIFY(xlo <= 0 && xhi >= 2999);
    plot.setLogY(false);
    QVERIFY(!plot.logY());
    QCOMPARE(spy.count(), 2);
  }

  void xOnlyZoomKeepsTheLossRange() {
    LossPlot plot;
    showPlot(plot);
    plot.setSession(makeSession(3000, 3000, 100));
    QWidget* canvas = plot.childAt(plot.plotArea().center());
    QVERIFY(canvas);
    auto wheel = [&] {
      const QPointF pos = canvas->mapFrom(&plot, plot.plotArea().center());
      QWheelEvent e(pos, canvas->mapToGlobal(pos), QPoint(), QPoint(0, 240), Qt::NoButton,
                    Qt::NoModifier, Qt::NoScrollPhase, false);
      QCoreApplication::sendEvent(canvas, &e);
    };
    plot.setXOnly(true);
    auto y0 = plot.yRange();
    auto x0 = plot.xRange();
    wheel();
    QCOMPARE(plot.yRange(), y0);
    QVERIFY(plot.xRange().second - plot.xRange().first < x0.second - x0.first);
    plot.setXOnly(false);
    plot.resetView();
    y0 = plot.yRange();
    wheel();
    QVERIFY(plot.yRange().second - plot.yRange().first < y0.second - y0.first);
  }

  void marginPlotColoursOutsidePoints() {
    MarginPlot margins;
    showPlot(margins, {1000, 220});
    const SessionData s = makeSession(5000, 5000, 100);
    const AnalysisReport report = makeReport(s.checkpointSteps, 3000);
    margins.setResults(report.steps, report.firstExit);
    margins.setXRange(0, 5000);
    QCOMPARE(margins.insideCount(), 30);
    QCOMPARE(margins.outsideCount(), 20);
    QCOMPARE(margins.firstExitX(), std::optional<double>(3000.0));
    const QImage image = grabbed(margins);
    const QRect area = margins.plotArea();
    // The ±1 band is shaded across the whole width at y in [-1, 1].
    const int yIn = int(margins.yToPixel(0.5));
    QVERIFY(isBandPixel(image.pixelColor(area.left() + 5, yIn)));
    QVERIFY(isBandPixel(image.pixelColor(area.right() - 5, yIn)));
    // Outside points (margin 3) are red, right of the exit.
    const QRect outsideRow(int(margins.xToPixel(3500)) - 4, int(margins.yToPixel(3)) - 4, 9, 9);
    QVERIFY(countPixels(image, outsideRow, isExitPixel) > 5);
    margins.setResults({}, std::nullopt);
    QCOMPARE(margins.insideCount() + margins.outsideCount(), 0);
    QVERIFY(!margins.firstExitX());
  }

  // With a bug, margins of -92..+70 used to squash the ±1 band into a line (linear y axis).
  void marginBandStaysReadableWithOutliers() {
    MarginPlot margins;
    showPlot(margins, {1000, 220});
    std::vector<StepResult> steps;
    const double values[] = {0.2, -0.7, 0.9, -92, 70, 3, -0.1, 12};
    for (int i = 0; i < 8; ++i) {
      StepResult r = makeResult(i * 100, false);
      r.margin = values[i];
      r.inside = std::abs(r.margin) <= 1;
      r.verdict = r.inside ? StepVerdict::Rounding : StepVerdict::BugCertain;
      steps.push_back(r);
    }
    margins.setResults(steps, 300);
    margins.setXRange(-50, 800);
    margins.replotNow();
    QCOMPARE(margins.insideCount(), 4);
    QCOMPARE(margins.outsideCount(), 4);
    // The outliers are in view, and the band keeps a readable share of the plot's height.
    const auto [lo, hi] = margins.visibleMarginRange();
    QVERIFY2(lo <= -92 && hi >= 70, qPrintable(QStringLiteral("%1 %2").arg(lo).arg(hi)));
    const QRect area = margins.plotArea();
    const double band = margins.yToPixel(-1) - margins.yToPixel(1);
    QVERIFY2(band >= 0.12 * area.height(),
             qPrintable(QStringLiteral("band %1 px of %2").arg(band).arg(area.height())));
    // The scale is monotonic: margin 3 above 1, -92 below -1, both inside the plot area.
    QVERIFY(margins.yToPixel(3) < margins.yToPixel(1));
    QVERIFY(margins.yToPixel(-92) > margins.yToPixel(-1));
    QVERIFY(margins.yToPixel(-92) <= area.bottom() && margins.yToPixel(70) >= area.top());
    // Ticks are labelled in margins at decades: ±1, ±10 at least (0 is the dashed line).
    const std::vector<double> ticks = margins.tickMargins();
    for (double m : {-10.0, -1.0, 1.0, 10.0})
      QVERIFY2(std::find(ticks.begin(), ticks.end(), m) != ticks.end(),
               qPrintable(QString::number(m)));
    QVERIFY(std::is_sorted(ticks.begin(), ticks.end()));
    // The tooltip gives the real margin, not the transformed one.
    QVERIFY2(margins.toolTipAt(300).contains(QStringLiteral("-92")),
             qPrintable(margins.toolTipAt(300)));
    QVERIFY(margins.toolTipAt(450).isEmpty());
    // The transform and its inverse agree.
    for (double m : {-1e6, -92.0, -1.0, 0.0, 0.5, 70.0})
      QVERIFY(std::abs(MarginPlot::signedLogInverse(MarginPlot::signedLog(m)) - m) <=
              1e-9 * std::max(1.0, std::abs(m)));
  }

  void xOnlyCheckboxEmitsItsChange() {
    LossPlot plot;
    QSignalSpy spy(&plot, &LossPlot::xOnlyChanged);
    plot.setXOnly(true);
    plot.setXOnly(true);
    QCOMPARE(spy.count(), 1);
    QVERIFY(plot.xOnly());
    auto* box = plot.findChild<QCheckBox*>();
    QVERIFY(box);
    for (QCheckBox* b : plot.findChildren<QCheckBox*>())
      if (b->text().contains(QStringLiteral("x only"))) box = b;
    box->setChecked(false);  // the plot's own checkbox
    QCOMPARE(spy.count(), 2);
    QCOMPARE(spy.last().at(0).toBool(), false);
    QVERIFY(!plot.xOnly());
  }

  void redrawWithOneMillionSteps() {
    LossPlot plot;
    showPlot(plot, {1400, 700});
    const SessionData s = makeSession(1'000'000, 1'000'000, 1000);
    QElapsedTimer load;
    load.start();
    plot.setSession(s);
    const double loadMs = double(load.nsecsElapsed()) / 1e6;
    QCOMPARE(plot.referencePointCount(), 1'000'000);
    plot.setResults(makeReport(s.checkpointSteps, 600'000).steps, 600'000);
    auto median = [&](int n) {
      std::vector<double> t;
      for (int i = 0; i < n; ++i) t.push_back(plot.replotNow());
      std::sort(t.begin(), t.end());
      return t[t.size() / 2];
    };
    plot.replotNow();  // warm-up (label cache)
    const double full = median(7);
    plot.setXRange(400'000, 450'000);
    const double zoomed = median(7);
    plot.resetView();
    QElapsedTimer smoothTimer;
    smoothTimer.start();
    plot.setSmoothing(0.95);
    const double smoothMs = double(smoothTimer.nsecsElapsed()) / 1e6;
    const double smoothed = median(7);
    qInfo(
        "1e6 steps x 2 curves, 1400x700: setSession %.1f ms; replot full view %.1f ms, "
        "zoomed %.1f ms, with smoothing (4 curves) %.1f ms; applying smoothing %.1f ms",
        loadMs, full, zoomed, smoothed, smoothMs);
    // Generous bound: "smooth" means interactive; this catches a lost decimation (seconds).
    QVERIFY2(full < 250 && smoothed < 400, "redraw of 1e6 points is too slow");
  }
};

QTEST_MAIN(TestLossPlot)
#include "test_loss_plot.moc"
