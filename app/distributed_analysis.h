#pragma once
// `lossbound-cli analyze --mpi`: one analysis shared among the ranks of an MPI job, on top of the
// plain MpiWorld interface (app/mpi_world.h), so this file needs no MPI headers.
//
// Protocol. Rank r of K analyses the steps at positions r, r+K, r+2K, ... of the selection
// (ShardLayout::Interleaved, so the ranks advance through the run together) with its own thread
// pool, and streams every finished step to rank 0 as it finishes (tag kStep). At the end it sends
// its part, or the reason it failed (kDone). Rank 0 follows every finished step; with
// --stop-at-first-exit it tells the ranks to stop (kStop) once the first exit is settled (every
// earlier step done). Rank 0 merges the parts (core/analysis/report_merge.h, the same merge as
// `lossbound-cli merge`), writes the outputs, and sends every rank the exit code (kFinish), which
// every rank returns. A rank whose analysis fails keeps the steps it streamed; its other steps
// are "not bounded" with the reason, so nothing is lost. A rank that dies (a crash, a kill) ends
// the whole MPI job: MPI itself cannot survive that.

#include "core/analysis/analysis_types.h"
#include "core/analysis/analyzer.h"

#include <QTextStream>

#include <cstdint>
#include <optional>
#include <vector>

namespace lossbound {
class RunFileReplay;
}

namespace lossbound::app {

class MpiWorld;

/// What every rank of an `analyze --mpi` run is given (the same on every rank).
struct DistributedJob {
  const RunFileReplay& reference;
  const RunFileReplay& candidate;
  std::vector<std::int64_t> steps;  ///< every step of the job, increasing
  AnalysisSettings settings;
  AnalyzerOptions options;  ///< ranks only read the results cache; rank 0 writes it once
  bool stopAtFirstExit = false;
};

/// Runs `job` on every rank of `world` (see the file comment). Returns the merged report on rank
/// 0 and nothing on the other ranks. Errors of a rank are in the report, not thrown; `err`
/// receives this rank's warnings.
std::optional<AnalysisReport> runDistributed(MpiWorld& world, const DistributedJob& job,
                                             QTextStream& err);

/// Ends the job: rank 0 sends `code` to every rank; the others wait for it (ignoring a late stop
/// request). Returns the exit code every rank should return.
int finishDistributed(MpiWorld& world, int code);

/// Sets LOSSBOUND_THREADS for this rank when it is not set, before the thread pool starts: the
/// CPUs this process may run on (its affinity mask; mpirun binds ranks to cores by default), at
/// most the machine's CPUs divided by the ranks on this machine, at least 1.
void setThreadsPerRank(const MpiWorld& world);

/// Returns a string that must be equal on every rank for the job to make sense: both runs' log
/// digests and the job's steps.
std::string jobFingerprint(const RunFileReplay& reference, const RunFileReplay& candidate,
                           const std::vector<std::int64_t>& steps);

}  // namespace lossbound::app
