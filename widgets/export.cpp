#include "widgets/export.h"

#include "core/analysis/qt_text.h"
#include "core/analysis/report_csv.h"
#include "widgets/about_box.h"
#include "widgets/difference_plot.h"
#include "widgets/loss_plot.h"
#include "widgets/margin_plot.h"
#include "widgets/plot_panel.h"
#include "widgets/verdict_summary.h"

#include <QBuffer>
#include <QDateTime>
#include <QFileInfo>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextDocument>
#include <QUrl>
#include <qcustomplot.h>

#include <cmath>
#include <functional>

namespace lossbound::widgets {

namespace {

/// The size a plot is rendered at: its on-screen size, or a default before it was laid out.
QSize plotSize(const PlotPanel* p) {
  const QSize s = p->customPlot()->size();
  return s.width() >= 50 && s.height() >= 50 ? s : QSize(900, 420);
}

QSize stackSize(const QList<PlotPanel*>& plots) {
  QSize total(0, 0);
  for (const PlotPanel* p : plots) {
    const QSize s = plotSize(p);
    total.setWidth(std::max(total.width(), s.width()));
    total.rheight() += s.height();
  }
  return total;
}

/// Draws the plots one below the other at painter coordinates (0, 0).
void drawStack(QCPPainter& painter, const QList<PlotPanel*>& plots) {
  const int width = stackSize(plots).width();
  int y = 0;
  for (PlotPanel* p : plots) {
    const QSize s = plotSize(p);
    painter.save();
    painter.translate(0, y);
    p->customPlot()->toPainter(&painter, width, s.height());
    painter.restore();
    y += s.height();
  }
}

/// Writes `path` through a QSaveFile; `write` fills the device and returns an error or "".
QString writeAtomically(const QString& path, const std::function<QString(QIODevice&)>& write) {
  if (path.isEmpty()) return QObject::tr("No file name given.");
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    return QObject::tr("Could not write \"%1\": %2 (directory \"%3\").")
        .arg(path, file.errorString(), QFileInfo(path).absolutePath());
  const QString error = write(file);
  if (!error.isEmpty()) {
    file.cancelWriting();
    return QObject::tr("Could not write \"%1\": %2").arg(path, error);
  }
  if (!file.commit())
    return QObject::tr("Could not write \"%1\": %2").arg(path, file.errorString());
  return {};
}

QString noPlots() { return QObject::tr("there is no plot to export"); }

}  // namespace

QImage renderPlots(const QList<PlotPanel*>& plots, double scale) {
  const QSize size = stackSize(plots);
  if (size.isEmpty() || !(scale > 0)) return {};
  QImage image(QSize(int(std::ceil(size.width() * scale)), int(std::ceil(size.height() * scale))),
               QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::white);
  QCPPainter painter(&image);
  painter.scale(scale, scale);
  drawStack(painter, plots);
  painter.end();
  return image;
}

QString exportPlotsPng(const QList<PlotPanel*>& plots, const QString& path, double scale, int dpi) {
  return writeAtomically(path, [&](QIODevice& device) -> QString {
    if (plots.isEmpty()) return noPlots();
    QImage image = renderPlots(plots, scale);
    if (image.isNull()) return QObject::tr("could not render the plots at scale %1").arg(scale);
    // The DPI is metadata only: render first, then tag (as QCustomPlot's saveRastered does).
    const double dotsPerInch = dpi > 0 ? dpi : 96.0 * scale;
    image.setDotsPerMeterX(int(std::lround(dotsPerInch / 0.0254)));
    image.setDotsPerMeterY(int(std::lround(dotsPerInch / 0.0254)));
    if (!image.save(&device, "PNG")) return QObject::tr("PNG encoding failed");
    return {};
  });
}

QString exportPlotsSvg(const QList<PlotPanel*>& plots, const QString& path) {
  return writeAtomically(path, [&](QIODevice& device) -> QString {
    if (plots.isEmpty()) return noPlots();
    const QSize size = stackSize(plots);
    QSvgGenerator svg;
    svg.setOutputDevice(&device);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    // Same DPI as the screen, so that point-sized fonts keep their on-screen size.
    svg.setResolution(plots.front()->logicalDpiY());
    svg.setTitle(QStringLiteral("Lossbound plot"));
    QCPPainter painter;
    if (!painter.begin(&svg)) return QObject::tr("could not start the SVG painter");
    painter.setMode(QCPPainter::pmVectorized);
    drawStack(painter, plots);
    painter.end();
    return {};
  });
}

QString exportPlotsPdf(const QList<PlotPanel*>& plots, const QString& path) {
  return writeAtomically(path, [&](QIODevice& device) -> QString {
    if (plots.isEmpty()) return noPlots();
    const QSize size = stackSize(plots);
    const int dpi = plots.front()->logicalDpiY();
    QPdfWriter pdf(&device);
    pdf.setCreator(QStringLiteral("Lossbound"));
    pdf.setResolution(dpi);  // one device unit = one screen pixel, fonts keep their size
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
    pdf.setPageSize(QPageSize(QSizeF(size.width() * 72.0 / dpi, size.height() * 72.0 / dpi),
                              QPageSize::Point, QString(), QPageSize::ExactMatch));
    QCPPainter painter;
    if (!painter.begin(&pdf)) return QObject::tr("could not start the PDF painter");
    painter.setMode(QCPPainter::pmVectorized);
    drawStack(painter, plots);
    painter.end();
    return {};
  });
}

QString stepTableCsvHeader() { return QString::fromStdString(stepsCsvHeader()); }

QString exportStepTableCsv(const std::vector<StepResult>& steps, const QString& path) {
  return writeAtomically(path, [&](QIODevice& device) -> QString {
    const QByteArray out = QByteArray::fromStdString(stepsCsv(steps));
    if (device.write(out) != out.size()) return device.errorString();
    return {};
  });
}

QString exportReportPdf(const QList<PlotPanel*>& plots, const AnalysisReport& report,
                        const ReportContext& context, const QString& path) {
  return writeAtomically(path, [&](QIODevice& device) -> QString {
    const VerdictSummary summary = summarize(report);
    QPdfWriter pdf(&device);
    pdf.setCreator(QStringLiteral("Lossbound"));
    pdf.setTitle(QStringLiteral("Lossbound report"));
    pdf.setResolution(96);
    pdf.setPageSize(QPageSize(QPageSize::A4));
    pdf.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout::Millimeter);
    const QRect page = pdf.pageLayout().paintRectPixels(pdf.resolution());

    QTextDocument doc;
    doc.setDocumentMargin(0);
    doc.setTextWidth(page.width());
    QFont font = doc.defaultFont();
    font.setPointSizeF(9.5);
    doc.setDefaultFont(font);
    const QImage plotImage = plots.isEmpty() ? QImage() : renderPlots(plots, 3.0);
    if (!plotImage.isNull())
      doc.addResource(QTextDocument::ImageResource, QUrl(QStringLiteral("lossbound://plot")),
                      plotImage);
    const int imageWidth = page.width();
    const int imageHeight =
        plotImage.isNull() ? 0 : imageWidth * plotImage.height() / plotImage.width();
    auto esc = [](const QString& s) { return s.toHtmlEscaped(); };
    QString html;
    html += QStringLiteral("<h2>Lossbound report</h2>");
    html += QStringLiteral("<p>Reference <b>%1</b> (%2)<br>Candidate <b>%3</b> (%4)<br>%5</p>")
                .arg(esc(qs(report.referenceName)), esc(context.referencePath),
                     esc(qs(report.candidateName)), esc(context.candidatePath),
                     esc(QDateTime::currentDateTime().toString(Qt::ISODate)));
    if (!plotImage.isNull())
      html += QStringLiteral("<p><img src=\"lossbound://plot\" width=\"%1\" height=\"%2\"></p>")
                  .arg(imageWidth)
                  .arg(imageHeight);
    html += QStringLiteral("<h3 style=\"color:%1\">%2</h3>")
                .arg(overallVerdictColor(summary.verdict).name(), esc(summary.headline));
    html +=
        QStringLiteral("<p>%1<br>%2</p>").arg(esc(summary.firstExitText), esc(summary.countsText));
    html +=
        QStringLiteral("<p><b>%1.</b> %2</p>").arg(esc(summary.methodText), esc(summary.guarantee));
    if (!summary.whyText.isEmpty())
      html += QStringLiteral("<p>%1</p>")
                  .arg(esc(summary.whyText).replace(QLatin1Char('\n'), QStringLiteral("<br>")));
    html += QStringLiteral("<p>%1</p>").arg(esc(summary.selfCheckText));
    html += QStringLiteral("<p><b>Settings:</b> %1<br><b>Backend:</b> %2</p>")
                .arg(esc(summary.settingsText),
                     esc(report.backendDescription.empty() ? context.backendLine
                                                           : qs(report.backendDescription)));
    html += QStringLiteral("<p style=\"color:#666\">%1</p>").arg(esc(versionsLine()));
    doc.setHtml(html);

    QPainter painter;
    if (!painter.begin(&pdf)) return QObject::tr("could not start the PDF painter");
    // One page: shrink the content if it would not fit.
    const double height = doc.size().height();
    if (height > page.height()) {
      const double f = page.height() / height;
      painter.scale(f, f);
    }
    doc.drawContents(&painter);
    painter.end();
    return {};
  });
}

QString exportAnalysisPng(const SessionData& session, const AnalysisReport& report,
                          const QString& path, QSize size, double scale) {
  const SessionData data = session.reference.steps.empty() && session.candidate.steps.empty()
                               ? sessionFromReport(report)
                               : session;
  const std::optional<std::int64_t> exit = summarizeReport(report).firstExit;
  LossPlot loss;
  MarginPlot margin;
  DifferencePlot difference;
  const int marginHeight = size.height() / 5, differenceHeight = size.height() / 4;
  const int lossHeight = size.height() - marginHeight - differenceHeight;
  loss.resize(size.width(), lossHeight);
  margin.resize(size.width(), marginHeight);
  difference.resize(size.width(), differenceHeight);
  loss.setSession(data);
  loss.setResults(report.steps, exit);
  margin.setResults(report.steps, exit);
  difference.setResults(report.steps, exit);
  difference.setSymLog(true);  // a bug's differences span decades; the band stays readable
  const auto [lo, hi] = loss.xRange();
  margin.setXRange(lo, hi);
  difference.setXRange(lo, hi);
  // Lay the (never shown) widgets out so that their plots take the requested sizes.
  loss.customPlot()->resize(size.width(), lossHeight);
  margin.customPlot()->resize(size.width(), marginHeight);
  difference.customPlot()->resize(size.width(), differenceHeight);
  return exportPlotsPng({&loss, &margin, &difference}, path, scale);
}

}  // namespace lossbound::widgets
