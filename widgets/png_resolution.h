#pragma once
// The resolution choice of a PNG export: a short list of scales (×1 screen, ×2, ×3, print at
// 300 dpi), each with the DPI tag written into the PNG (96 × scale). Kept apart from the exporters
// so they stay free of dialogs.

#include <QList>
#include <QString>

#include <optional>

class QWidget;

namespace lossbound::widgets {

/// One offered PNG resolution.
struct PngResolution {
  QString label;  ///< e.g. "2× — 192 dpi (sharp on high-DPI screens)"
  double scale = 2.0;
  int dpi = 192;
};

/// Returns the offered resolutions, smallest first.
QList<PngResolution> pngResolutions();

/// Asks for a resolution in a small dialog, preselecting the one whose scale is closest to
/// `lastScale`; returns nothing when the user cancels.
std::optional<PngResolution> askPngResolution(QWidget* parent, double lastScale);

}  // namespace lossbound::widgets
