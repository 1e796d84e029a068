#pragma once
// `lossbound-cli info FILE...`: validates run files and prints a summary of each.

#include <QStringList>
#include <QTextStream>

namespace lossbound::app {

/// Validates and summarises each file (summary to `out`, problems to `err`); returns 0 when all
/// files are valid run files, 2 when any is not (or no file was given). Never throws.
int runInfoCommand(const QStringList& files, QTextStream& out, QTextStream& err);

}  // namespace lossbound::app
