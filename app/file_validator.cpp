#include "app/file_validator.h"

#include "core/runfile/run_file.h"

#include <QCoreApplication>
#include <QEventLoop>
#include <QFileInfo>
#include <QProcess>
#include <QTimer>

namespace lossbound::app {

namespace {

// The CLI beside the application (an installed or built tree), else the build's own.
QString cliPath() {
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/lossbound-cli");
  if (QFileInfo(beside).isExecutable()) return beside;
#ifdef LOSSBOUND_CLI_PATH
  if (QFileInfo(QStringLiteral(LOSSBOUND_CLI_PATH)).isExecutable())
    return QStringLiteral(LOSSBOUND_CLI_PATH);
#endif
  return {};
}

}  // namespace

QString validateRunFiles(const QStringList& files, int timeoutMs) {
  const QString cli = cliPath();
  if (cli.isEmpty()) {
    qWarning(
        "lossbound: lossbound-cli not found beside the application; validating run files "
        "in this process (a file that crashes libhdf5 would end the GUI)");
    try {
      for (const QString& f : files) RunFile::validate(f.toStdString());
    } catch (const std::exception& e) {
      return QString::fromUtf8(e.what());
    }
    return {};
  }
  QProcess process;
  process.setProgram(cli);
  process.setArguments(QStringList{QStringLiteral("validate")} + files);
  QEventLoop loop;
  QTimer timer;
  timer.setSingleShot(true);
  QObject::connect(&timer, &QTimer::timeout, &loop, &QEventLoop::quit);
  QObject::connect(&process, &QProcess::finished, &loop, &QEventLoop::quit);
  QObject::connect(&process, &QProcess::errorOccurred, &loop, [&](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) loop.quit();
  });
  process.start();
  timer.start(timeoutMs);
  if (process.state() != QProcess::NotRunning || process.error() != QProcess::FailedToStart)
    loop.exec(QEventLoop::ExcludeUserInputEvents);
  if (process.error() == QProcess::FailedToStart)
    return QObject::tr("cannot start the validating process %1: %2")
        .arg(cli, process.errorString());
  if (process.state() != QProcess::NotRunning) {
    process.kill();
    process.waitForFinished(5000);
    return QObject::tr(
               "validating %1 did not finish within %2 s (the validating process was "
               "stopped): a file may be corrupt or on a stalled file system")
        .arg(files.join(QStringLiteral(", ")))
        .arg(timeoutMs / 1000);
  }
  if (process.exitStatus() == QProcess::CrashExit)
    return QObject::tr(
               "the HDF5 library crashed reading %1 (in the validating process): a file "
               "is corrupt")
        .arg(files.join(QStringLiteral(", ")));
  if (process.exitCode() != 0) {
    const QString message = QString::fromUtf8(process.readAllStandardError()).trimmed();
    return message.isEmpty()
               ? QObject::tr("validation failed (exit code %1)").arg(process.exitCode())
               : message.section(QLatin1Char('\n'), 0, 0);
  }
  return {};
}

}  // namespace lossbound::app
