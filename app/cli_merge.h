#pragma once
// `lossbound-cli merge PART.json... [--csv F] [--json F] [--png F]`: combines the parts written by
// `analyze --shard I/N --json PART` into the report one `analyze` of all the steps would have
// written (same verdict, first exit, CSV and plots), and prints its summary.
// Exit codes: as analyze for the merged report (0 no exit, 3 a Type-II exit, 4 not bounded or
// untrustworthy); 2 bad usage, or a part that is missing, unreadable, corrupt, from another run
// pair, with other settings or another sharding (the message names the part and the difference).

#include <QStringList>
#include <QTextStream>

namespace lossbound::app {

/// Runs `merge` with `args` (the arguments after "merge"); returns the exit code.
int runMerge(const QStringList& args, QTextStream& out, QTextStream& err);

}  // namespace lossbound::app
