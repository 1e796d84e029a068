#pragma once
// Knowing the first exit before every step is done: steps may finish in any order (step workers,
// MPI ranks), and the first exit is settled once some step is an exit and every selected step
// before it has finished. `--stop-at-first-exit` stops the analysis at that moment.

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

namespace lossbound {

/// Follows finished steps of one analysis and says when its first exit is settled.
class FirstExitWatch {
 public:
  /// Watches the analysis of `steps` (any order, duplicates ignored).
  explicit FirstExitWatch(const std::vector<std::int64_t>& steps);

  /// Records that `step` finished and whether it is an exit (a bug verdict); returns settled().
  /// A step that is not watched is ignored.
  bool record(std::int64_t step, bool exit);
  /// Returns true once the earliest exit so far has no unfinished step before it.
  bool settled() const;
  /// Returns the earliest exit recorded so far.
  std::optional<std::int64_t> earliestExit() const { return mExit; }
  /// Returns the number of steps not finished yet.
  std::size_t pending() const { return mPending.size(); }

 private:
  std::set<std::int64_t> mPending;
  std::optional<std::int64_t> mExit;
};

}  // namespace lossbound
