// lossbound: the GUI. Wiring only: application object, settings identity, command line, main
// window. `lossbound [--analyze] [--screenshot OUT.png] [REFERENCE.h5 CANDIDATE.h5 | REPORT.json]`.
#include "app/main_window.h"
#include "app/session_controller.h"
#include "core/analysis/analysis_types.h"
#include "widgets/workbench_view.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Lossbound"));
  QApplication::setApplicationName(QStringLiteral("Lossbound"));
  QApplication::setApplicationVersion(QStringLiteral(LOSSBOUND_VERSION));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/lossbound.svg")));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral(
      "Tells whether two training runs diverge because of rounding or because of a bug."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption analyze(QStringLiteral("analyze"),
                                   QStringLiteral("Analyse every common checkpoint on opening."));
  const QCommandLineOption screenshot(
      QStringLiteral("screenshot"),
      QStringLiteral("Render the window to <file> (PNG) when ready, then exit."),
      QStringLiteral("file"));
  const QCommandLineOption outputs(
      QStringLiteral("outputs"),
      QStringLiteral("With --analyze: loss (the remembered default) or all (compare every "
                     "output)."),
      QStringLiteral("loss|all"));
  const QCommandLineOption inspect(
      QStringLiteral("inspect"),
      QStringLiteral("Show this step in the step inspector once analysed (with --screenshot)."),
      QStringLiteral("step"));
  parser.addOption(analyze);
  parser.addOption(screenshot);
  parser.addOption(outputs);
  parser.addOption(inspect);
  parser.addPositionalArgument(QStringLiteral("reference"),
                               QStringLiteral("Reference run file (or an analysis report)."),
                               QStringLiteral("[REFERENCE.h5"));
  parser.addPositionalArgument(QStringLiteral("candidate"), QStringLiteral("Candidate run file."),
                               QStringLiteral("CANDIDATE.h5 | REPORT.json]"));
  parser.process(app);
  const QStringList files = parser.positionalArguments();
  if (files.size() > 2) {
    fprintf(stderr,
            "lossbound: expected two run files (reference and candidate) or one analysis report "
            "(.json), found %d files\n",
            int(files.size()));
    return 2;
  }

  lossbound::app::MainWindow window;
  const bool headless = parser.isSet(screenshot);
  if (headless) window.resize(1400, 900);
  window.show();

  int exitCode = 0;
  bool shooting = false;
  auto shoot = [&] {
    if (shooting) return;
    shooting = true;
    // Let queued replots and layouts run before grabbing.
    QTimer::singleShot(200, &window, [&] {
      const QString path = parser.value(screenshot);
      if (!window.grab().save(path, "PNG")) {
        fprintf(stderr, "lossbound: could not write the screenshot %s\n", qPrintable(path));
        exitCode = 2;
      }
      if (!window.errorText().isEmpty())
        fprintf(stderr, "lossbound: %s\n", qPrintable(window.errorText()));
      QApplication::exit(exitCode);
    });
  };
  bool opened = false;
  if (files.size() == 2) opened = window.openPair(files[0], files[1]);
  if (files.size() == 1) opened = window.openReport(files[0]);
  if (!files.isEmpty() && !opened) exitCode = 2;
  if (opened && parser.isSet(analyze)) {
    auto* controller = window.controller();
    if (headless) {
      QObject::connect(controller, &lossbound::app::SessionController::analysisFinished, &window,
                       [&](const lossbound::AnalysisReport&) {
                         if (parser.isSet(inspect))
                           window.workbench()->inspectStep(parser.value(inspect).toLongLong());
                         shoot();
                       });
      QObject::connect(controller, &lossbound::app::SessionController::analysisFailed, &window,
                       [&](const QString&) {
                         exitCode = 2;
                         shoot();
                       });
    }
    std::optional<lossbound::OutputScope> scope;
    if (parser.isSet(outputs))
      scope = parser.value(outputs) == QLatin1String("all") ? lossbound::OutputScope::All
                                                            : lossbound::OutputScope::Loss;
    if (!window.analyzeAll(scope))
      exitCode = 2;
    else if (headless)
      return QApplication::exec();
  }
  if (headless) shoot();
  return QApplication::exec();
}
