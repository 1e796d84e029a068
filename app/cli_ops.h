#pragma once
// `lossbound-cli ops [--markdown]`: the ops the engine can bound, from the op registry.

#include <QStringList>
#include <QTextStream>

namespace lossbound::app {

/// Prints the supported ops (one registry name per line, sorted) or, with --markdown, a table of
/// the op families with a one-line description and their ops; returns 0, or 2 on bad usage.
int runOpsCommand(const QStringList& args, QTextStream& out, QTextStream& err);

}  // namespace lossbound::app
