#pragma once
// The main window: a thin composition of the widgets in widgets/, the menus and the status bar.

#include <QMainWindow>

namespace lossbound::app {

/// The top-level window of the GUI; owns the menus and places the workbench widgets.
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// Creates the window with its menus, restoring the geometry saved in QSettings.
  explicit MainWindow(QWidget* parent = nullptr);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();

  QString mBackendLine;
};

}  // namespace lossbound::app
