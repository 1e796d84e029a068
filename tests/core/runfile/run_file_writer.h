#pragma once
// Test support: writes small run files with the HDF5 C API (docs/run-file-format.md), good by
// default; every field of RunFixture can be changed to produce one specific defect.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lossbound::testing {

/// One tensor dataset of a checkpoint.
struct FixtureTensor {
  std::string path;   ///< relative to the checkpoint group, e.g. "params/w"
  std::string dtype;  ///< the dtype attribute ("" = none)
  std::vector<std::uint64_t> shape;
  std::vector<double> values;  ///< converted to the storage type of `storage`
  std::string storage;         ///< "f64" "f32" "f16" "u16" "i64" "i32" "u8" "str"
  bool lzf = false;            ///< compress with (a stand-in for) HDF5 filter 32000
};

/// The contents of a run file; the defaults make a valid file whose loss is sum(w * x).
struct RunFixture {
  std::optional<std::string> format = "lossbound-run";
  std::optional<std::int64_t> formatVersion = 1;
  bool writeLog = true;
  std::vector<std::int64_t> steps{0, 1, 2};
  std::vector<double> loss;  ///< empty = the true loss of the default tensors per step
  bool stepAsFloat = false;  ///< store /log/step as float64 (a wrong dtype)
  std::string graph;         ///< empty = defaultGraph()
  std::int64_t irVersionAttr = 1;
  bool writePrograms = true;                           ///< false = no /programs group
  std::vector<std::int64_t> checkpointSteps{0, 1, 2};  ///< empty = no /checkpoints group
  std::string programAttr;                             ///< empty = the real program id
  std::vector<FixtureTensor> tensors;  ///< empty = defaultTensors(step) per checkpoint
};

/// Returns the IR JSON of loss = sum(param:w * batch:x), w [2,3] float32, x [3] float32.
std::string defaultGraph(const std::string& extraNode = "");
/// Returns the tensors of checkpoint `step` for defaultGraph().
std::vector<FixtureTensor> defaultTensors(std::int64_t step);
/// Returns the binary64 loss sum(w * x) of defaultTensors(step).
double defaultLoss(std::int64_t step);
/// Writes `fixture` to `path` (overwriting); throws std::runtime_error on HDF5 failure.
void writeRunFile(const std::string& path, const RunFixture& fixture);
/// Sets element `index` (flat, row-major) of the float32 or float64 `dataset` of the existing file
/// `path` to `value` (NaN and infinities included); throws std::runtime_error on failure.
void overwriteElement(const std::string& path, const std::string& dataset, std::uint64_t index,
                      double value);

}  // namespace lossbound::testing
