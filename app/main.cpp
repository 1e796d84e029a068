// lossbound: the GUI. Wiring only: application object, settings identity, main window.
#include <QApplication>

#include "app/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Lossbound"));
  QApplication::setApplicationName(QStringLiteral("Lossbound"));
  QApplication::setApplicationVersion(QStringLiteral(LOSSBOUND_VERSION));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/lossbound.svg")));
  lossbound::app::MainWindow window;
  window.show();
  return QApplication::exec();
}
