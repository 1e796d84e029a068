#pragma once
// Validation of run files in a child process for the GUI: `lossbound-cli validate FILE...` runs
// as a QProcess, so a file that crashes or hangs libhdf5 cannot take the GUI down. The GUI thread
// waits in a local event loop (it keeps painting) for at most a timeout; the files are validated
// once per open, both in one child.

#include <QString>
#include <QStringList>

namespace lossbound::app {

/// Returns "" when every file is valid, else what is wrong: the reader's message (file, dataset,
/// what was expected and found), or that the validating process crashed, timed out or could not
/// start. Without a lossbound-cli beside the application (or the one of the build), validates in
/// this process instead (no isolation) and says so on stderr.
QString validateRunFiles(const QStringList& files, int timeoutMs = 120000);

}  // namespace lossbound::app
