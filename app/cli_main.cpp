// lossbound-cli: the headless tool. Parses the command line and dispatches to core. Only
// `analyze --png F` and `merge --png F` need the widgets layer: then, and only then, it runs a
// QApplication (on the offscreen platform when there is no display) and installs the plot
// renderer. `analyze --mpi` starts MPI first (app/mpi_world.h) and ends it last.
#include "app/backend_status.h"
#include "app/cli_analyze.h"
#include "app/cli_info.h"
#include "app/cli_merge.h"
#include "app/cli_ops.h"
#include "app/cli_report.h"
#include "app/distributed_analysis.h"
#include "app/mpi_world.h"
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
         "  analyze ...       replay steps and classify the divergence (see analyze --help)\n"
         "  merge PART...     combine the parts of a sharded analysis (see merge --help)\n";
  return kExitBadUsage;
}

/// Returns true for `lossbound-cli analyze|merge ... --png F` (also `--png=F`).
bool wantsPng(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "analyze") != 0 && std::strcmp(argv[1], "merge") != 0))
    return false;
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
  lossbound::app::setPngExporter(
      [](const lossbound::AnalysisReport& report, const QString& path, QString* error) {
        *error = lossbound::widgets::exportAnalysisPng({}, report, path);
        return error->isEmpty();
      });
  return app;
}

/// Returns true for `lossbound-cli analyze ... --mpi ...`.
bool wantsMpi(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "analyze") != 0) return false;
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--mpi") == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // MPI starts before any thread (Qt's or the pool's) and ends after the command.
  std::unique_ptr<lossbound::app::MpiWorld> world;
  if (wantsMpi(argc, argv)) {
    std::string why;
    world = lossbound::app::startMpi(argc, argv, &why);
    if (!world) {
      fprintf(stderr, "lossbound-cli analyze: --mpi: %s\n", why.c_str());
      return kExitBadUsage;
    }
    lossbound::app::setThreadsPerRank(*world);
  }
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
  if (first == QLatin1String("analyze"))
    return lossbound::app::runAnalyze(args.mid(2), out, err, world.get());
  if (first == QLatin1String("merge")) return lossbound::app::runMerge(args.mid(2), out, err);
  if (first == QLatin1String("info")) return lossbound::app::runInfoCommand(args.mid(2), out, err);
  if (first == QLatin1String("validate"))
    return lossbound::app::runValidateCommand(args.mid(2), out, err);
  if (first == QLatin1String("ops")) return lossbound::app::runOpsCommand(args.mid(2), out, err);
  err << "lossbound-cli: unknown command '" << first << "'\n";
  return usage(err);
}
