// lossbound-cli: the headless tool. Parses the command line and dispatches to core. Only
// `analyze --png F` needs the widgets layer: then, and only then, it runs a QApplication (on the
// offscreen platform when there is no display) and installs the plot renderer.
#include "app/backend_status.h"
#include "app/cli_analyze.h"
#include "app/cli_info.h"
#include "app/cli_ops.h"
#include "core/analysis/result_cache.h"
#include "widgets/export.h"

#include <QApplication>
#include <QCoreApplication>
#include <QTextStream>

#include <cstring>
#include <memory>

namespace {

constexpr int kExitBadUsage = 2;

int usage(QTextStream& err) {
  err << "usage: lossbound-cli [--help] [--version] <command> [options]\n"
         "commands:\n"
         "  info [--check-values | --value-budget MIB] FILE...\n"
         "                    validate and summarise run files\n"
         "  validate FILE...  validate run files (exit 0 when all are valid, 2 otherwise)\n"
         "  ops [--markdown]  list the supported aten ops\n"
         "  analyze ...       replay steps and classify the divergence (see analyze --help)\n";
  return kExitBadUsage;
}

/// Returns true for `lossbound-cli analyze ... --png F` (also `--png=F`).
bool wantsPng(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "analyze") != 0) return false;
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--png") == 0 || std::strncmp(argv[i], "--png=", 6) == 0) return true;
  return false;
}

/// Creates the application: a QApplication (widgets can render) for --png, else a
/// QCoreApplication. Without a platform chosen and without a display, the QApplication uses the
/// offscreen platform so that the CLI keeps working headless.
std::unique_ptr<QCoreApplication> makeApplication(int& argc, char** argv) {
  if (!wantsPng(argc, argv)) return std::make_unique<QCoreApplication>(argc, argv);
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY") &&
      qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  auto app = std::make_unique<QApplication>(argc, argv);
  lossbound::app::setAnalyzePngExporter(
      [](const lossbound::AnalysisReport& report, const QString& path, QString* error) {
        *error = lossbound::widgets::exportAnalysisPng({}, report, path);
        return error->isEmpty();
      });
  return app;
}

}  // namespace

int main(int argc, char** argv) {
  const std::unique_ptr<QCoreApplication> app = makeApplication(argc, argv);
  QCoreApplication::setApplicationName(QStringLiteral("lossbound-cli"));
  QCoreApplication::setApplicationVersion(QStringLiteral(LOSSBOUND_VERSION));
  QTextStream out(stdout), err(stderr);

  const QStringList args = QCoreApplication::arguments();
  if (args.size() < 2) return usage(err);
  const QString first = args.at(1);
  if (first == QLatin1String("--version") || first == QLatin1String("-v")) {
    out << "lossbound-cli " << LOSSBOUND_VERSION << "\n"
        << "engine revision: " << lossbound::engineRevision() << "\n"
        << "backend: " << lossbound::app::backendStatusLine() << "\n";
    return 0;
  }
  if (first == QLatin1String("--help") || first == QLatin1String("-h")) {
    usage(out);
    return 0;
  }
  if (first == QLatin1String("analyze")) return lossbound::app::runAnalyze(args.mid(2), out, err);
  if (first == QLatin1String("info")) return lossbound::app::runInfoCommand(args.mid(2), out, err);
  if (first == QLatin1String("validate"))
    return lossbound::app::runValidateCommand(args.mid(2), out, err);
  if (first == QLatin1String("ops")) return lossbound::app::runOpsCommand(args.mid(2), out, err);
  err << "lossbound-cli: unknown command '" << first << "'\n";
  return usage(err);
}
