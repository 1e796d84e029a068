#include "widgets/about_box.h"

#include <QMessageBox>
#include <QWidget>
#include <qcustomplot.h>

#include <Eigen/Core>
#include <H5public.h>

namespace lossbound::widgets {

QString versionsLine() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return QStringLiteral("Lossbound %1 · Qt %2 · HDF5 %3.%4.%5 · Eigen %6.%7.%8 · QCustomPlot %9")
      .arg(QStringLiteral(LOSSBOUND_VERSION), QString::fromLatin1(qVersion()))
      .arg(maj)
      .arg(min)
      .arg(rel)
      .arg(EIGEN_WORLD_VERSION)
      .arg(EIGEN_MAJOR_VERSION)
      .arg(EIGEN_MINOR_VERSION)
      .arg(QStringLiteral(QCUSTOMPLOT_VERSION_STR));
}

QString aboutText(const QString& backendLine) {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return QStringLiteral(
             "<h3>Lossbound %1</h3>"
             "<p>Tells whether two training runs diverge because of floating-point rounding "
             "(Type-I) or because of an implementation bug (Type-II): it replays the candidate's "
             "training step on the reference's state with bounding arithmetic and checks whether "
             "the reference loss lies inside the envelope.</p>"
             "<p>Compute backend: %2</p>"
             "<p>Qt %3 &middot; HDF5 %4.%5.%6 &middot; Eigen %7.%8.%9</p>")
      .arg(QStringLiteral(LOSSBOUND_VERSION), backendLine.toHtmlEscaped(),
           QString::fromLatin1(qVersion()))
      .arg(maj)
      .arg(min)
      .arg(rel)
      .arg(EIGEN_WORLD_VERSION)
      .arg(EIGEN_MAJOR_VERSION)
      .arg(EIGEN_MINOR_VERSION);
}

void showAboutBox(QWidget* parent, const QString& backendLine) {
  QMessageBox::about(parent, QObject::tr("About Lossbound"), aboutText(backendLine));
}

}  // namespace lossbound::widgets
