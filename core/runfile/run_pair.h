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

/// How the candidate's program fits the reference's checkpoint.
struct InputFit {
  std::vector<std::string> errors;    ///< why the candidate program cannot run on it
  std::vector<std::string> warnings;  ///< what the replay adapts or ignores
};

/// Returns the one pair rule, shared by the GUI, the CLI and the analyzer: every input of the
/// candidate program must be an input of the reference program with the same shape and kind
/// (floating or not); another dtype of the same kind is adapted (the replay rounds the
/// reference's floating values into the candidate's format, or relabels exact integers) and
/// reported as a warning; inputs only the reference has are not needed and are reported too.
InputFit inputFit(const Program& reference, const Program& candidate);

/// Lists the common checkpoint steps and applies inputFit() to the programs at each of them; with
/// `compareBatchData`, also loads and compares the batch tensors at every common step (warnings).
/// Throws RunFileError only when a checkpoint cannot be read.
RunPairCheck checkRunPair(const RunFile& reference, const RunFile& candidate,
                          bool compareBatchData = false);

/// Compares the batch tensors of both runs at `step` (which both must have); returns nothing when
/// they are identical (bit for bit), else a warning naming the first differing tensor and element.
std::optional<std::string> compareBatches(const RunFile& reference, const RunFile& candidate,
                                          std::int64_t step);

}  // namespace lossbound
