// Exports: PNG decodes at the requested scale and DPI, SVG and PDF are written, the CSV parses
// with its header, the report PDF is one page, and failures return a message without leaving
// files behind.
#include "tests/widgets/synthetic.h"
#include "widgets/export.h"
#include "widgets/loss_plot.h"
#include "widgets/margin_plot.h"

#include <QDir>
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

using namespace lossbound;
using namespace lossbound::widgets;
using namespace lossbound::widgets::test;

namespace {

/// Splits one CSV line, honouring RFC 4180 quotes.
QStringList splitCsvLine(const QString& line) {
  QStringList cells{QString()};
  bool quoted = false;
  for (qsizetype i = 0; i < line.size(); ++i) {
    const QChar c = line[i];
    if (quoted && c == QLatin1Char('"') && i + 1 < line.size() && line[i + 1] == QLatin1Char('"'))
      cells.back() += c, ++i;
    else if (c == QLatin1Char('"'))
      quoted = !quoted;
    else if (c == QLatin1Char(',') && !quoted)
      cells << QString();
    else
      cells.back() += c;
  }
  return cells;
}

}  // namespace

class TestExport : public QObject {
  Q_OBJECT

  QTemporaryDir mDir;
  LossPlot* mLoss = nullptr;
  MarginPlot* mMargin = nullptr;
  QWidget mHost;
  AnalysisReport mReport;

  QList<PlotPanel*> plots() const { return {mLoss, mMargin}; }
  QString path(const QString& name) const { return mDir.filePath(name); }
  QByteArray read(const QString& name) const {
    QFile f(path(name));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }

 private slots:
  void initTestCase() {
    QVERIFY(mDir.isValid());
    mLoss = new LossPlot(&mHost);
    mMargin = new MarginPlot(&mHost);
    mLoss->setGeometry(0, 0, 800, 400);
    mMargin->setGeometry(0, 400, 800, 160);
    mHost.resize(800, 560);
    mHost.show();
    QVERIFY(QTest::qWaitForWindowExposed(&mHost));
    const SessionData s = makeSession(3000, 3000, 100);
    mReport = makeReport(s.checkpointSteps, 2000);
    StepResult unbounded;
    unbounded.step = 2950;
    unbounded.verdict = StepVerdict::NotBounded;
    unbounded.note = "unsupported op aten.foo";
    mReport.steps.push_back(unbounded);
    mLoss->setSession(s);
    mLoss->setResults(mReport.steps, mReport.firstExit);
    mMargin->setResults(mReport.steps, mReport.firstExit);
    mMargin->setXRange(mLoss->xRange().first, mLoss->xRange().second);
  }

  void pngDecodesAtScaleAndDpi() {
    QCOMPARE(exportPlotsPng(plots(), path(QStringLiteral("plot.png")), 2.0, 300), QString());
    QImage image;
    QVERIFY(image.load(path(QStringLiteral("plot.png"))));
    QCOMPARE(image.width(), 1600);
    QVERIFY(image.height() > 2 * 450);  // both plots stacked
    QVERIFY(std::abs(image.dotsPerMeterX() - 300 / 0.0254) < 2);
    // Not blank: the exit marker's red is in there.
    int red = 0;
    for (int y = 0; y < image.height(); y += 2)
      for (int x = 0; x < image.width(); x += 2)
        if (image.pixelColor(x, y).red() > 150 && image.pixelColor(x, y).green() < 100) ++red;
    QVERIFY(red > 100);
  }

  void svgAndPdfAreWritten() {
    QCOMPARE(exportPlotsSvg(plots(), path(QStringLiteral("plot.svg"))), QString());
    const QByteArray svg = read(QStringLiteral("plot.svg"));
    QVERIFY(svg.size() > 1000);
    QVERIFY(svg.contains("<svg"));
    QVERIFY(svg.contains("first exit: step 2000"));
    QCOMPARE(exportPlotsPdf(plots(), path(QStringLiteral("plot.pdf"))), QString());
    const QByteArray pdf = read(QStringLiteral("plot.pdf"));
    QVERIFY(pdf.startsWith("%PDF"));
    QVERIFY(pdf.size() > 1000);
  }

  // The GUI's CSV and `lossbound-cli analyze --csv` share one writer and one column order.
  void csvParsesWithItsHeader() {
    QCOMPARE(exportStepTableCsv(mReport.steps, path(QStringLiteral("steps.csv"))), QString());
    const QStringList lines =
        QString::fromUtf8(read(QStringLiteral("steps.csv"))).trimmed().split(QLatin1Char('\n'));
    QCOMPARE(
        lines.front(),
        QStringLiteral("step,reference_loss,candidate_loss,envelope_lo,envelope_hi,inside,"
                       "verdict,method,margin,self_check,self_lo,self_hi,point_loss,note,allclose,"
                       "allclose_ratio,fp64_rmse,fp64_rmse_error,fp64_rmse_allowance,"
                       "fp64_loss,rounded_loss"));
    QCOMPARE(lines.front(), stepTableCsvHeader());
    QCOMPARE(lines.size(), int(mReport.steps.size()) + 1);
    const QStringList header = lines.front().split(QLatin1Char(','));
    for (int i = 1; i < lines.size(); ++i) {
      const QStringList cells = splitCsvLine(lines[i]);
      QCOMPARE(cells.size(), header.size());
      const StepResult& r = mReport.steps[std::size_t(i - 1)];
      QCOMPARE(cells[0].toLongLong(), qint64(r.step));
      QCOMPARE(cells[1].toDouble(), r.referenceLoss);  // round-trips exactly
      if (r.verdict == StepVerdict::NotBounded) {
        QVERIFY(cells[3].isEmpty() && cells[5].isEmpty() && cells[8].isEmpty());
        QCOMPARE(cells[6], QStringLiteral("not bounded"));
      } else {
        QCOMPARE(cells[3].toDouble(), r.lo);
        QCOMPARE(cells[4].toDouble(), r.hi);
        QCOMPARE(cells[5], r.inside ? QStringLiteral("true") : QStringLiteral("false"));
        QCOMPARE(cells[8].toDouble(), r.margin);
      }
      QCOMPARE(cells[7], QStringLiteral("first-order"));
      QCOMPARE(cells[13], QString::fromStdString(r.note));
    }
  }

  void reportIsOnePagePdf() {
    ReportContext ctx{QStringLiteral("/data/ref.h5"), QStringLiteral("/data/cand.h5"),
                      QStringLiteral("CPU — test")};
    QCOMPARE(exportReportPdf(plots(), mReport, ctx, path(QStringLiteral("report.pdf"))), QString());
    const QByteArray pdf = read(QStringLiteral("report.pdf"));
    QVERIFY(pdf.startsWith("%PDF"));
    QVERIFY(pdf.size() > 5000);  // holds the plot image
    QCOMPARE(pdf.count("/Type /Page\n") + pdf.count("/Type /Page\r") + pdf.count("/Type /Page "),
             1);
  }

  void analysisPngWithoutAWindow() {
    // What lossbound-cli analyze --png uses: no session, no shown widget.
    const QString file = path(QStringLiteral("analysis.png"));
    QCOMPARE(exportAnalysisPng({}, mReport, file, QSize(1000, 600)), QString());
    QImage image;
    QVERIFY(image.load(file));
    QCOMPARE(image.size(), QSize(1000, 600));
    int red = 0;
    for (int y = 0; y < image.height(); ++y)
      for (int x = 0; x < image.width(); ++x)
        if (image.pixelColor(x, y).red() > 150 && image.pixelColor(x, y).green() < 100) ++red;
    QVERIFY(red > 100);  // the first-exit marker and outside points
  }

  void failuresReturnAMessageAndWriteNothing() {
    const QString missingDir = path(QStringLiteral("no/such/dir/plot.png"));
    const QString e1 = exportPlotsPng(plots(), missingDir);
    QVERIFY(!e1.isEmpty());
    QVERIFY2(e1.contains(missingDir), qPrintable(e1));
    QVERIFY(!QFile::exists(missingDir));
    // A regular file used as a directory fails even for root.
    QFile blocker(path(QStringLiteral("blocker")));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.close();
    const QString underFile = path(QStringLiteral("blocker/steps.csv"));
    const QString e2 = exportStepTableCsv(mReport.steps, underFile);
    QVERIFY2(e2.startsWith(QStringLiteral("Could not write")), qPrintable(e2));
    QVERIFY(!exportPlotsSvg(plots(), underFile).isEmpty());
    QVERIFY(!exportPlotsPdf(plots(), underFile).isEmpty());
    QVERIFY(!exportReportPdf(plots(), mReport, {}, underFile).isEmpty());
    QVERIFY(!exportPlotsPng({}, path(QStringLiteral("empty.png"))).isEmpty());
    QVERIFY(!QFile::exists(path(QStringLiteral("empty.png"))));
    QVERIFY(!exportPlotsPng(plots(), QString()).isEmpty());
  }

  void noTemporaryFilesRemain() {
    // Overwrite an existing file: the rename replaces it, no temporary file is left behind.
    QCOMPARE(exportStepTableCsv(mReport.steps, path(QStringLiteral("steps.csv"))), QString());
    const QStringList files = QDir(mDir.path()).entryList(QDir::Files);
    for (const QString& f : files)
      QVERIFY2(!f.contains(QStringLiteral(".tmp")) && !f.startsWith(QLatin1Char('.')),
               qPrintable(files.join(QLatin1Char(' '))));
  }
};

QTEST_MAIN(TestExport)
#include "test_export.moc"
