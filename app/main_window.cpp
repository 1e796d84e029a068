#include "app/main_window.h"

#include "app/backend_status.h"
#include "app/samples.h"
#include "app/session_controller.h"
#include "widgets/about_box.h"
#include "widgets/export.h"
#include "widgets/loss_plot.h"
#include "widgets/png_resolution.h"
#include "widgets/recompute_dialog.h"
#include "widgets/workbench_view.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMimeData>
#include <QProgressBar>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace lossbound::app {

namespace {

constexpr int kMaxRecent = 8;
constexpr qsizetype kMaxBannerWarnings = 5;  // more would push the workbench off screen

QString lastFolder() {
  return QSettings().value(QStringLiteral("paths/lastFolder"), QDir::homePath()).toString();
}

void rememberFolder(const QString& file) {
  QSettings().setValue(QStringLiteral("paths/lastFolder"), QFileInfo(file).absolutePath());
}

QString formatSeconds(double s) {
  if (s < 0) return QObject::tr("estimating…");
  if (s < 90) return QObject::tr("%1 s left").arg(qRound(s));
  return QObject::tr("%1 min left").arg(qRound(s / 60));
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      mBackendLine(backendStatusLine()),
      mController(new SessionController(this)) {
  setWindowTitle(tr("Lossbound"));
  setAcceptDrops(true);
  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  mError = new QLabel(central);
  mError->setObjectName(QStringLiteral("errorBanner"));
  mError->setWordWrap(true);
  mError->setTextInteractionFlags(Qt::TextSelectableByMouse);
  mError->setStyleSheet(QStringLiteral(
      "background: #fbe3e3; color: #8a1010; padding: 6px; border-bottom: 1px solid #d9a0a0"));
  mError->hide();
  mStack = new QStackedWidget(central);
  mPlaceholder = new QLabel(
      tr("Open a reference run and a candidate run (File ▸ Open pair, Ctrl+O), drop two run "
         "files here, open an analysis report (File ▸ Open report), or try Help ▸ Samples."),
      mStack);
  mPlaceholder->setAlignment(Qt::AlignCenter);
  mPlaceholder->setWordWrap(true);
  mWorkbench = new widgets::WorkbenchView(mStack);
  mStack->addWidget(mPlaceholder);
  mStack->addWidget(mWorkbench);
  layout->addWidget(mError);
  layout->addWidget(mStack, 1);
  setCentralWidget(central);

  mProgress = new QProgressBar(this);
  mProgress->setMaximumWidth(220);
  mRemaining = new QLabel(this);
  mCancel = new QToolButton(this);
  mCancel->setText(tr("Cancel"));
  connect(mCancel, &QToolButton::clicked, mController, &SessionController::cancel);
  statusBar()->addPermanentWidget(mProgress);
  statusBar()->addPermanentWidget(mRemaining);
  statusBar()->addPermanentWidget(mCancel);
  statusBar()->addPermanentWidget(new QLabel(mBackendLine, this));
  setBusy(false);

  buildMenus();
  mWorkbench->setTensorProvider([this](std::int64_t step) { return mController->tensorsAt(step); });

  connect(mController, &SessionController::openFailed, this, [this](const QString& message) {
    showError(tr("Could not open the run pair: %1").arg(message));
  });
  connect(mController, &SessionController::sessionOpened, this,
          [this](const widgets::SessionData& session, const AnalysisReport& cached) {
            clearError();
            mWorkbench->setSession(session, cached);
            mStack->setCurrentWidget(mWorkbench);
            for (QAction* a : mSessionActions) a->setEnabled(true);
            mRecomputeAction->setEnabled(mController->hasRuns());
            const QStringList paths = mController->paths();
            setWindowTitle(
                tr("Lossbound — %1 vs %2").arg(session.reference.name, session.candidate.name));
            QStringList banner;
            if (!mController->hasRuns()) banner << mController->sessionNotice();
            if (!mController->pairingProblem().isEmpty())
              banner << tr("This pair cannot be analysed: %1").arg(mController->pairingProblem());
            const QStringList& warnings = mController->pairingWarnings();
            for (qsizetype i = 0; i < std::min<qsizetype>(warnings.size(), kMaxBannerWarnings); ++i)
              banner << tr("Warning: %1").arg(warnings[i]);
            if (warnings.size() > kMaxBannerWarnings)
              banner << tr("(%1 more warnings)").arg(warnings.size() - kMaxBannerWarnings);
            if (!banner.isEmpty()) showError(banner.join(QLatin1Char('\n')));
            if (!mController->sessionNotice().isEmpty()) {
              // A report: its steps are what is shown; it is not a recent pair.
              statusBar()->showMessage(mController->sessionNotice(), 15000);
              return;
            }
            statusBar()->showMessage(cached.steps.empty()
                                         ? tr("%1 steps logged, %2 checkpointed in both runs")
                                               .arg(session.reference.steps.size())
                                               .arg(session.checkpointSteps.size())
                                         : tr("%1 cached results loaded").arg(cached.steps.size()),
                                     8000);
            QSettings settings;
            QStringList recent = settings.value(QStringLiteral("recent/sessions")).toStringList();
            const QString entry = paths.join(QLatin1Char('\n'));
            recent.removeAll(entry);
            recent.prepend(entry);
            settings.setValue(QStringLiteral("recent/sessions"), recent.mid(0, kMaxRecent));
            rebuildRecentMenu();
          });
  connect(mController, &SessionController::analysisStarted, this,
          [this](const AnalysisSettings& settings, int total) {
            clearError();
            mWorkbench->beginAnalysis(settings, total);
            mProgress->setRange(0, std::max(total, 1));
            mProgress->setValue(0);
            mRemaining->setText(formatSeconds(-1));
            setBusy(true);
          });
  connect(mController, &SessionController::stepFinished, this,
          [this](const StepResult& r, int done, int total, double remaining) {
            mWorkbench->updateStep(r);
            mProgress->setMaximum(std::max(total, 1));
            mProgress->setValue(done);
            mRemaining->setText(formatSeconds(remaining));
          });
  connect(mController, &SessionController::analysisFinished, this,
          [this](const AnalysisReport& report) {
            mWorkbench->finishAnalysis(report);
            setBusy(false);
            statusBar()->showMessage(
                report.cancelled ? tr("Cancelled: %1 steps finished").arg(report.steps.size())
                                 : tr("Analysis finished: %1 steps").arg(report.steps.size()),
                10000);
            if (!mWorkbench->inspectedStep()) {
              if (report.firstExit)
                mWorkbench->inspectStep(*report.firstExit);
              else if (!report.steps.empty())
                mWorkbench->inspectStep(report.steps.front().step);
            }
          });
  connect(mController, &SessionController::analysisFailed, this, [this](const QString& message) {
    mWorkbench->finishAnalysis();
    setBusy(false);
    showError(tr("Analysis failed: %1").arg(message));
  });

  QSettings settings;
  if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray()))
    resize(1400, 900);
  mWorkbench->restoreState(settings.value(QStringLiteral("window/workbench")).toByteArray());
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open pair…"), this, &MainWindow::openPairDialog);
  open->setShortcut(QKeySequence::Open);
  QAction* openReport = file->addAction(tr("Open re&port…"), this, &MainWindow::openReportDialog);
  openReport->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  mRecentMenu = file->addMenu(tr("Open &recent"));
  rebuildRecentMenu();
  file->addSeparator();
  QAction* exportAction = file->addAction(tr("&Export…"), this, &MainWindow::exportDialog);
  exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* analysis = menuBar()->addMenu(tr("&Analysis"));
  QAction* recompute = analysis->addAction(tr("&Recompute…"), this, &MainWindow::recompute);
  recompute->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* cancel = analysis->addAction(tr("&Cancel"), mController, &SessionController::cancel);
  cancel->setShortcut(QKeySequence(Qt::Key_Escape));

  QMenu* view = menuBar()->addMenu(tr("&View"));
  QAction* reset =
      view->addAction(tr("&Reset view"), mWorkbench->lossPlot(), &widgets::LossPlot::resetView);
  reset->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
  QAction* logY = view->addAction(tr("&Log y"));
  logY->setCheckable(true);
  logY->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  connect(logY, &QAction::toggled, mWorkbench->lossPlot(), &widgets::LossPlot::setLogY);
  connect(mWorkbench->lossPlot(), &widgets::LossPlot::logYChanged, logY, &QAction::setChecked);
  QAction* xOnly = view->addAction(tr("Zoom &x only"));
  xOnly->setCheckable(true);
  xOnly->setChecked(mWorkbench->lossPlot()->xOnly());
  connect(xOnly, &QAction::toggled, mWorkbench->lossPlot(), &widgets::LossPlot::setXOnly);
  connect(mWorkbench->lossPlot(), &widgets::LossPlot::xOnlyChanged, xOnly, &QAction::setChecked);
  mSessionActions = {exportAction};
  mRecomputeAction = recompute;
  for (QAction* a : mSessionActions) a->setEnabled(false);
  mRecomputeAction->setEnabled(false);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QMenu* samples = help->addMenu(tr("&Samples"));
  const auto found = findSamples(samplesDir());
  for (const SampleInfo& s : found) {
    QAction* a = samples->addAction(QStringLiteral("%1 — %2").arg(s.name, s.description), this,
                                    [this, s] { openPair(s.reference, s.candidate); });
    a->setToolTip(s.description);
  }
  if (found.empty())
    samples->addAction(tr("No samples found in %1").arg(samplesDir()))->setEnabled(false);
  help->addSeparator();
  help->addAction(tr("&About Lossbound"), this,
                  [this] { widgets::showAboutBox(this, mBackendLine); });
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::rebuildRecentMenu() {
  mRecentMenu->clear();
  const QStringList recent = QSettings().value(QStringLiteral("recent/sessions")).toStringList();
  for (const QString& entry : recent) {
    const QStringList paths = entry.split(QLatin1Char('\n'));
    if (paths.size() != 2) continue;
    mRecentMenu->addAction(tr("%1  vs  %2").arg(QFileInfo(paths[0]).fileName(), paths[1]), this,
                           [this, paths] { openPair(paths[0], paths[1]); });
  }
  mRecentMenu->setEnabled(!mRecentMenu->isEmpty());
}

bool MainWindow::openPair(const QString& reference, const QString& candidate, bool orderByRole) {
  return mController->openPair(reference, candidate, orderByRole);
}

bool MainWindow::openReport(const QString& path) { return mController->openReport(path); }

bool MainWindow::analyzeAll(std::optional<OutputScope> outputs) {
  AnalysisSettings settings = widgets::rememberedSettings();
  if (outputs) settings.outputs = *outputs;
  return mController->startAnalysis(mController->analysableSteps(), settings);
}

QString MainWindow::errorText() const {
  return mError->isVisible() || !mError->isHidden() ? mError->text() : QString();
}

void MainWindow::showError(const QString& message) {
  mError->setText(message);
  mError->show();
}

void MainWindow::clearError() {
  mError->clear();
  mError->hide();
}

void MainWindow::setBusy(bool busy) {
  mProgress->setVisible(busy);
  mRemaining->setVisible(busy);
  mCancel->setVisible(busy);
}

void MainWindow::openPairDialog() {
  const QString filter = tr("Lossbound run files (*.h5 *.hdf5);;All files (*)");
  QStringList files = QFileDialog::getOpenFileNames(
      this, tr("Open the reference run (or select both runs)"), lastFolder(), filter);
  if (files.isEmpty()) return;
  rememberFolder(files.front());
  if (files.size() == 1) {
    const QString candidate = QFileDialog::getOpenFileName(
        this, tr("Open the candidate run"), QFileInfo(files.front()).absolutePath(), filter);
    if (candidate.isEmpty()) return;
    files << candidate;
    openPair(files[0], files[1]);
  } else if (files.size() == 2) {
    openPair(files[0], files[1], true);
  } else {
    showError(
        tr("Select two run files (a reference and a candidate), found %1.").arg(files.size()));
  }
}

void MainWindow::openReportDialog() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open an analysis report"), lastFolder(),
                                   tr("Lossbound analysis reports (*.json);;All files (*)"));
  if (path.isEmpty()) return;
  rememberFolder(path);
  openReport(path);
}

void MainWindow::recompute() {
  if (!mController->hasRuns()) return;
  widgets::RecomputeDialog dialog(mController->analysableSteps(), mWorkbench->selectedSteps(),
                                  mController->nodeNames(), this);
  if (dialog.exec() != QDialog::Accepted) return;
  const widgets::RecomputeRequest request = dialog.request();
  mController->startAnalysis(request.steps, request.settings);
}

void MainWindow::exportDialog() {
  if (!mController->hasSession()) return;
  const QString png = tr("Plot as PNG (*.png)"), svg = tr("Plot as SVG (*.svg)"),
                pdf = tr("Plot as PDF (*.pdf)"), csv = tr("Step table as CSV (*.csv)"),
                report = tr("One-page report as PDF (*.pdf)");
  QString selected = png;
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export"), lastFolder(),
      QStringList{png, svg, pdf, csv, report}.join(QStringLiteral(";;")), &selected);
  if (path.isEmpty()) return;
  rememberFolder(path);
  const auto plots = mWorkbench->plots();
  QString error;
  if (selected == svg)
    error = widgets::exportPlotsSvg(plots, path);
  else if (selected == pdf)
    error = widgets::exportPlotsPdf(plots, path);
  else if (selected == csv)
    error = widgets::exportStepTableCsv(mWorkbench->report().steps, path);
  else if (selected == report)
    error = widgets::exportReportPdf(
        plots, mWorkbench->report(),
        {mController->paths().value(0), mController->paths().value(1), mBackendLine}, path);
  else if (const auto resolution = widgets::askPngResolution(
               this, QSettings().value(QStringLiteral("export/pngScale"), 2.0).toDouble())) {
    QSettings().setValue(QStringLiteral("export/pngScale"), resolution->scale);
    error = widgets::exportPlotsPng(plots, path, resolution->scale, resolution->dpi);
  } else {
    return;  // cancelled
  }
  if (error.isEmpty())
    statusBar()->showMessage(tr("Exported %1").arg(path), 8000);
  else
    showError(error);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  mController->cancel();
  mController->waitForJob();
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/workbench"), mWorkbench->saveState());
  event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  QStringList files;
  for (const QUrl& url : event->mimeData()->urls())
    if (url.isLocalFile()) files << url.toLocalFile();
  if (files.size() == 1 && files.front().endsWith(QStringLiteral(".json"), Qt::CaseInsensitive)) {
    event->acceptProposedAction();
    openReport(files.front());
    return;
  }
  if (files.size() != 2) {
    showError(tr("Drop two run files at once (a reference and a candidate) or one analysis "
                 "report (.json), found %1.")
                  .arg(files.size()));
    return;
  }
  event->acceptProposedAction();
  openPair(files[0], files[1], true);
}

}  // namespace lossbound::app
