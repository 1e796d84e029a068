#pragma once
// Merging the parts of a sharded analysis (`lossbound-cli merge`, the rank 0 of `analyze --mpi`)
// into the report a single run would have written: the steps of every part, the first exit over
// all of them, the notes and backends of the parts. A merge refuses parts that do not belong
// together and names the difference: another run pair (names or log digests), other settings
// (a setting that changes results), another engine (Lossbound version or engine revision),
// another sharding (count, layout or selected steps), a shard given twice, a shard missing, or a
// part that does not hold exactly its steps.

#include "core/analysis/analysis_types.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lossbound {

/// Thrown when parts cannot be merged; the message names the part(s) and the difference.
class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One part to merge and where it came from ("shard-1.json", "rank 3"), for messages.
struct ReportPart {
  std::string origin;
  AnalysisReport report;
};

/// Returns the merged report of `parts` (any order): the shard's steps of every part in step
/// order, the first exit over all of them, no shard info; name, settings, sources and engine of
/// the first part; distinct backends, notes and cache files joined. A part marked cancelled may
/// hold fewer than its steps (the merged report is then cancelled too); any other part must hold
/// exactly its steps. Throws MergeError (see the file comment).
AnalysisReport mergeReports(const std::vector<ReportPart>& parts);

/// Returns the first setting that changes results and differs between `a` and `b`, as
/// "method: first-order in A, interval in B" with `aName`/`bName` for A and B; nothing when
/// they agree. The backend and the settings the method ignores (the seed for a non-ensemble
/// method, ...) do not count.
std::optional<std::string> settingsDifference(const AnalysisSettings& a, const AnalysisSettings& b,
                                              const std::string& aName, const std::string& bName);

}  // namespace lossbound
