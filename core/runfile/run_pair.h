#pragma once
// Pairing checks for a reference and a candidate run: step replay evaluates the candidate's
// program on the reference's checkpoint, so at every analysed step both programs must take the
// same inputs (names, shapes, dtypes); the two runs should also have seen the same batch there.

#include "core/ir/ir.h"
#include "core/runfile/run_file.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

/// The outcome of checkRunPair().
struct RunPairCheck {
  std::vector<std::int64_t> commonSteps;  ///< checkpoint steps present in both runs, increasing
  std::vector<std::string> errors;        ///< why the pair cannot be replayed (empty when it can)
  std::vector<std::string> warnings;      ///< remarks that do not prevent replay (batches differ)
  /// Returns true when there are common steps and no errors.
  bool ok() const { return errors.empty() && !commonSteps.empty(); }
};

/// Returns one line per difference between the two programs' inputs (missing on either side,
/// other shape or dtype); empty when the candidate program can run on the reference's inputs.
std::vector<std::string> inputDifferences(const Program& reference, const Program& candidate);

/// Lists the common checkpoint steps and compares the programs' inputs at each of them; with
/// `compareBatchData`, also loads and compares the batch tensors at every common step (warnings).
/// Throws RunFileError only when a checkpoint cannot be read.
RunPairCheck checkRunPair(const RunFile& reference, const RunFile& candidate,
                          bool compareBatchData = false);

/// Compares the batch tensors of both runs at `step` (which both must have); returns nothing when
/// they are identical (bit for bit), else a warning naming the first differing tensor and element.
std::optional<std::string> compareBatches(const RunFile& reference, const RunFile& candidate,
                                          std::int64_t step);

}  // namespace lossbound
