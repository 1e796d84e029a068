#pragma once
// The About box: what Lossbound is, its version, and the libraries and backend in use.

#include <QString>

class QWidget;

namespace lossbound::widgets {

/// Shows the modal About box; `backendLine` says which compute backend is active and why.
void showAboutBox(QWidget* parent, const QString& backendLine);

/// Returns one plain line of versions: Lossbound, Qt, HDF5, Eigen, QCustomPlot.
QString versionsLine();

/// Returns the About text as rich text (used by the box and by the report page).
QString aboutText(const QString& backendLine);

}  // namespace lossbound::widgets
