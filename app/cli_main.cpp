// lossbound-cli: the headless tool. Parses the command line and dispatches to core.
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QTextStream>

#include "app/backend_status.h"
#include "app/cli_info.h"
#include "app/cli_analyze.h"

namespace {

constexpr int kExitBadUsage = 2;

int usage(QTextStream& err) {
  err << "usage: lossbound-cli [--help] [--version] <command> [options]\n"
         "commands:\n"
         "  info FILE...      validate and summarise run files\n"
         "  analyze ...       replay steps and classify the divergence (see analyze --help)\n";
  return kExitBadUsage;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  QCoreApplication::setApplicationName(QStringLiteral("lossbound-cli"));
  QCoreApplication::setApplicationVersion(QStringLiteral(LOSSBOUND_VERSION));
  QTextStream out(stdout), err(stderr);

  const QStringList args = QCoreApplication::arguments();
  if (args.size() < 2) return usage(err);
  const QString first = args.at(1);
  if (first == QLatin1String("--version") || first == QLatin1String("-v")) {
    out << "lossbound-cli " << LOSSBOUND_VERSION << "\n"
        << "backend: " << lossbound::app::backendStatusLine() << "\n";
    return 0;
  }
  if (first == QLatin1String("--help") || first == QLatin1String("-h")) {
    usage(out);
    return 0;
  }
  if (first == QLatin1String("analyze")) return lossbound::app::runAnalyze(args.mid(2), out, err);
  if (first == QLatin1String("info")) return lossbound::app::runInfoCommand(args.mid(2), out, err);
  err << "lossbound-cli: unknown command '" << first << "'\n";
  return usage(err);
}
