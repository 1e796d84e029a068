#pragma once
// `lossbound-cli analyze`: replays steps of a run pair and classifies the divergence (issue 5), in
// one process, as one shard of a job array (--shard I/N, combined later by `lossbound-cli merge`)
// or shared among the ranks of an MPI job (--mpi; rank 0 writes the report).
// Exit codes: 0 the reference never leaves the envelope; 3 a Type-II exit was found; 2 bad usage
// or bad input (unreadable file, mismatched pair, unavailable backend); 4 a step could not be
// bounded (unsupported op, ...) or its envelope is untrustworthy (self-check failed).

#include <QStringList>
#include <QTextStream>

namespace lossbound::app {

class MpiWorld;

/// Runs `analyze` with `args` (the arguments after "analyze"); prints the summary to `out` and
/// errors to `err`; returns the exit code. `world` is the MPI world started for --mpi (null
/// otherwise; --mpi without one is refused with exit code 2).
int runAnalyze(const QStringList& args, QTextStream& out, QTextStream& err,
               MpiWorld* world = nullptr);

}  // namespace lossbound::app
