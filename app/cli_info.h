#pragma once
// `lossbound-cli info FILE...`: validates run files and prints a summary of each.

#include <QStringList>
#include <QTextStream>

namespace lossbound::app {

/// Validates and summarises each file (summary to `out`, problems to `err`); returns 0 when all
/// files are valid run files, 2 when any is not (or no file was given). Never throws.
int runInfoCommand(const QStringList& files, QTextStream& out, QTextStream& err);

/// Runs `lossbound-cli validate FILE...`: validates every file in this process (RunFile::validate:
/// the structure and every checkpoint chunk index) and prints "<file>: valid" or the reader's
/// message; returns 0 when all are valid, 2 otherwise. The GUI runs it as its child process so a
/// file that crashes libhdf5 cannot take the GUI down.
int runValidateCommand(const QStringList& files, QTextStream& out, QTextStream& err);

}  // namespace lossbound::app
