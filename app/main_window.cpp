#include "app/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QLabel>
#include <QMenuBar>
#include <QSettings>
#include <QStatusBar>

#include "app/backend_status.h"
#include "widgets/about_box.h"

namespace lossbound::app {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), mBackendLine(backendStatusLine()) {
  setWindowTitle(tr("Lossbound"));
  auto* placeholder = new QLabel(
      tr("Open a reference run and a candidate run (File ▸ Open pair) to compare them."), this);
  placeholder->setAlignment(Qt::AlignCenter);
  setCentralWidget(placeholder);
  buildMenus();
  statusBar()->showMessage(mBackendLine);
  QSettings settings;
  if (!restoreGeometry(settings.value("window/geometry").toByteArray())) resize(1100, 750);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About Lossbound"), this,
                  [this] { widgets::showAboutBox(this, mBackendLine); });
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  event->accept();
}

}  // namespace lossbound::app
