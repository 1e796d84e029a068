#include "widgets/png_resolution.h"

#include <QInputDialog>
#include <QObject>
#include <QStringList>

#include <cmath>

namespace lossbound::widgets {

QList<PngResolution> pngResolutions() {
  return {
      {QObject::tr("1× — 96 dpi (screen size)"), 1.0, 96},
      {QObject::tr("2× — 192 dpi (sharp on high-DPI screens)"), 2.0, 192},
      {QObject::tr("3× — 288 dpi (slides)"), 3.0, 288},
      {QObject::tr("300 dpi (print, 3.125×)"), 300.0 / 96.0, 300},
  };
}

std::optional<PngResolution> askPngResolution(QWidget* parent, double lastScale) {
  const QList<PngResolution> options = pngResolutions();
  QStringList labels;
  int current = 0;
  for (int i = 0; i < options.size(); ++i) {
    labels << options[i].label;
    if (std::abs(options[i].scale - lastScale) < std::abs(options[current].scale - lastScale))
      current = i;
  }
  bool ok = false;
  const QString chosen =
      QInputDialog::getItem(parent, QObject::tr("PNG resolution"),
                            QObject::tr("Render the plots at:"), labels, current, false, &ok);
  if (!ok) return std::nullopt;
  return options.value(int(labels.indexOf(chosen)), options[current]);
}

}  // namespace lossbound::widgets
