#include "core/analysis/run_file_replay.h"

#include <QCryptographicHash>

#include <filesystem>

namespace lossbound {

RunFileReplay::RunFileReplay(RunFile file) : mFile(std::move(file)) {}

std::unique_ptr<RunFileReplay> RunFileReplay::open(const std::string& path) {
  return std::make_unique<RunFileReplay>(RunFile::open(path));
}

std::string RunFileReplay::name() const {
  std::lock_guard lock(mMutex);
  if (!mFile.attributes().runName.empty()) return mFile.attributes().runName;
  return std::filesystem::path(mFile.path()).filename().string();
}

std::vector<std::int64_t> RunFileReplay::checkpointSteps() const {
  std::lock_guard lock(mMutex);
  return mFile.checkpointSteps();
}

std::optional<double> RunFileReplay::loggedLoss(std::int64_t step) const {
  std::lock_guard lock(mMutex);
  return mFile.lossAt(step);
}

std::shared_ptr<const Program> RunFileReplay::programAt(std::int64_t step) const {
  std::lock_guard lock(mMutex);
  const RunProgram& p = mFile.checkpointProgram(step);
  auto& slot = mPrograms[p.id];
  if (!slot) slot = std::make_shared<const Program>(p.program);
  return slot;
}

TensorMap RunFileReplay::inputsAt(std::int64_t step) const {
  std::lock_guard lock(mMutex);
  return mFile.loadCheckpoint(step);
}

PrecisionModel RunFileReplay::recordedPrecision() const {
  std::lock_guard lock(mMutex);
  PrecisionModel pm;
  const RunAttributes& a = mFile.attributes();
  // torch uses TF32 for fp32 matmuls only on CUDA, and only below "highest".
  pm.tf32Matmul = a.device.rfind("cuda", 0) == 0 &&
                  (a.float32MatmulPrecision == "high" || a.float32MatmulPrecision == "medium");
  return pm;
}

std::string RunFileReplay::logDigest() const {
  std::lock_guard lock(mMutex);
  const RunLog& log = mFile.log();
  QCryptographicHash h(QCryptographicHash::Sha256);
  h.addData(QByteArrayView(reinterpret_cast<const char*>(log.steps.data()),
                           static_cast<qsizetype>(log.steps.size() * sizeof(std::int64_t))));
  h.addData(QByteArrayView(reinterpret_cast<const char*>(log.loss.data()),
                           static_cast<qsizetype>(log.loss.size() * sizeof(double))));
  return h.result().toHex().toStdString();
}

std::string RunFileReplay::filePath() const {
  std::lock_guard lock(mMutex);
  return mFile.path();
}

}  // namespace lossbound
