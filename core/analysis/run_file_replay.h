#pragma once
// Adapts a RunFile to the ReplayRun interface of the Analyzer. RunFile is not thread-safe, so
// every access goes through one mutex; tensors are copied out (Tensor copies share storage).

#include "core/analysis/replay_run.h"
#include "core/runfile/run_file.h"

#include <memory>
#include <mutex>

namespace lossbound {

/// A ReplayRun reading a RunFile (owned).
class RunFileReplay final : public ReplayRun {
 public:
  /// Takes ownership of an opened run file.
  explicit RunFileReplay(RunFile file);
  /// Opens `path`; throws RunFileError naming what is wrong and where.
  static std::unique_ptr<RunFileReplay> open(const std::string& path);

  /// Returns the run file.
  const RunFile& file() const { return mFile; }

  std::string name() const override;
  std::vector<std::int64_t> checkpointSteps() const override;
  std::optional<double> loggedLoss(std::int64_t step) const override;
  std::shared_ptr<const Program> programAt(std::int64_t step) const override;
  TensorMap inputsAt(std::int64_t step) const override;
  PrecisionModel recordedPrecision() const override;
  std::string logDigest() const override;
  std::string filePath() const override;

 private:
  RunFile mFile;
  mutable std::mutex mMutex;
  mutable std::map<std::string, std::shared_ptr<const Program>> mPrograms;  // by program id
};

}  // namespace lossbound
