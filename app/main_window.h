#pragma once
// The main window: a thin composition of the workbench (widgets/), the menus, the status bar with
// the backend and the progress of the analysis job, drag and drop of a run pair, and the
// QSettings it remembers (geometry, splitters, last folder, recent sessions). Opening files and
// running analyses is the SessionController's job.

#include "core/analysis/analysis_types.h"

#include <QMainWindow>

#include <cstdint>
#include <optional>
#include <vector>

class QLabel;
class QMenu;
class QProgressBar;
class QStackedWidget;
class QToolButton;

namespace lossbound::widgets {
class WorkbenchView;
}

namespace lossbound::app {

class SessionController;

/// The top-level window of the GUI; owns the menus and places the workbench widgets.
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// Creates the window with its menus, restoring the geometry saved in QSettings.
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  /// Opens a run pair; errors are shown in the window. Returns success.
  bool openPair(const QString& reference, const QString& candidate, bool orderByRole = false);
  /// Opens an analysis report (JSON, e.g. merged from a cluster run); the window says whether
  /// the curves come from its run files or are its analysed steps only. Returns success.
  bool openReport(const QString& path);
  /// Analyses every analysable step with the remembered settings (the output scope replaced by
  /// `outputs` when given); returns false if it could not start (the reason is shown).
  bool analyzeAll(std::optional<OutputScope> outputs = std::nullopt);
  /// Returns the controller (for headless use).
  SessionController* controller() const { return mController; }
  /// Returns the workbench.
  widgets::WorkbenchView* workbench() const { return mWorkbench; }
  /// Returns the error text shown in the window ("" when none).
  QString errorText() const;

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void buildMenus();
  void rebuildRecentMenu();
  void showError(const QString& message);
  void clearError();
  void openPairDialog();
  void openReportDialog();
  void recompute();
  void exportDialog();
  void setBusy(bool busy);

  QString mBackendLine;
  SessionController* mController = nullptr;
  widgets::WorkbenchView* mWorkbench = nullptr;
  QStackedWidget* mStack = nullptr;
  QLabel* mError = nullptr;
  QLabel* mPlaceholder = nullptr;
  QMenu* mRecentMenu = nullptr;
  QProgressBar* mProgress = nullptr;
  QLabel* mRemaining = nullptr;
  QToolButton* mCancel = nullptr;
  QList<QAction*> mSessionActions;      // need a session (pair or report)
  QAction* mRecomputeAction = nullptr;  // needs run files
};

}  // namespace lossbound::app
