#pragma once
// What step replay needs from one run: its name, loss log, checkpointed steps, step programs and
// checkpoint inputs. The Analyzer reads runs only through this interface, so the replay is tested
// on synthetic in-memory runs as well as on run files (RunFileReplay adapts a RunFile).

#include "core/ir/ir.h"
#include "core/ops/precision_model.h"
#include "core/program/evaluator.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

/// One recorded run as the replay sees it; implementations must allow concurrent calls.
class ReplayRun {
 public:
  virtual ~ReplayRun() = default;

  /// Returns a short name for reports (the run name, else the file name).
  virtual std::string name() const = 0;
  /// Returns the steps that have a checkpoint, increasing.
  virtual std::vector<std::int64_t> checkpointSteps() const = 0;
  /// Returns the logged loss at `step`, or nothing when the log has no such step.
  virtual std::optional<double> loggedLoss(std::int64_t step) const = 0;
  /// Returns the step program that ran at `step`; throws std::runtime_error (with the file and
  /// dataset) when it cannot be read.
  virtual std::shared_ptr<const Program> programAt(std::int64_t step) const = 0;
  /// Returns the program inputs at `step` by IR input name ("param:wte", "batch:ids"); throws
  /// std::runtime_error (with the file and dataset) when they cannot be read.
  virtual TensorMap inputsAt(std::int64_t step) const = 0;
  /// Returns the precision model as recorded (e.g. tf32 matmuls on CUDA with
  /// float32_matmul_precision "high").
  virtual PrecisionModel recordedPrecision() const { return {}; }
  /// Returns a digest of the loss log for the results-cache key ("" = none).
  virtual std::string logDigest() const { return {}; }
  /// Returns the file this run was read from ("" for in-memory runs: no caching).
  virtual std::string filePath() const { return {}; }
};

}  // namespace lossbound
