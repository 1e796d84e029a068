#pragma once
// Reading run files (docs/run-file-format.md): one HDF5 file per training run, opened read-only
// and never written. open() validates the whole layout — root attributes and format version, the
// loss log, every program (parsed and validated IR), and the metadata of every checkpoint (group
// names, program attribute, dataset shapes, dtypes and compression filters against the program's
// inputs) — without reading tensor data; loadCheckpoint() reads the tensors of one step on demand.
//
// Every failure is a RunFileError whose message names the file and the dataset or attribute path
// and says what was expected and what was found. The HDF5 library's own error printing is turned
// off process-wide; its innermost message is appended where it helps (e.g. "truncated file").
// A RunFile is not thread-safe, but distinct RunFiles may be used from different threads (all HDF5
// calls of this module are serialized).

#include "core/ir/ir.h"
#include "core/ir/program_parser.h"
#include "core/tensor/tensor.h"
#include "core/tensor/tensor_map.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// Thrown for a run file that cannot be read or does not follow the format; the message names
/// the file and the HDF5 path (file() and path() hold them separately).
class RunFileError : public std::runtime_error {
 public:
  /// Builds "<file>: <path>: <message>" (the path part only when `path` is not empty).
  RunFileError(std::string file, std::string path, const std::string& message);
  /// Returns the file the error is about.
  const std::string& file() const { return mFile; }
  /// Returns the HDF5 object path ("/log/loss"), or "" for the file as a whole.
  const std::string& path() const { return mPath; }

 private:
  std::string mFile, mPath;
};

/// The root attributes of a run file (missing optional strings are empty).
struct RunAttributes {
  std::string format;  ///< always "lossbound-run" after a successful open
  std::int64_t formatVersion = 0;
  std::string runName, role, framework, device, created, notes;
  std::string float32MatmulPrecision;  ///< "highest" | "high" | "medium" | ""
};

/// The loss log: strictly increasing steps, finite losses, optional extra metrics of equal length.
struct RunLog {
  std::vector<std::int64_t> steps;
  std::vector<double> loss;
  std::map<std::string, std::vector<double>> metrics;  ///< /log/<metric> other than step and loss
};

/// One stored step program.
struct RunProgram {
  std::string id;            ///< the group name under /programs
  Program program;           ///< parsed and validated
  std::int64_t opCount = 0;  ///< number of nodes
};

/// Which tensors of a checkpoint to load.
enum class CheckpointPart { All, Params, Batch };

/// The format name and the one format version this build reads.
inline constexpr std::string_view kRunFormatName = "lossbound-run";
/// The format version this build reads.
inline constexpr std::int64_t kRunFormatVersion = 1;

/// A validated, read-only run file with lazily loaded checkpoints.
class RunFile {
 public:
  /// Opens and validates `path` read-only; throws RunFileError naming what is wrong and where.
  static RunFile open(const std::string& path);
  /// Validates `path` as open() does, plus every checkpoint tensor's chunk index, in this
  /// process; throws RunFileError. A corrupt file can crash libhdf5 here: processes that must
  /// survive that validate in a child (validateIsolated, or the GUI's `lossbound-cli validate`).
  static void validate(const std::string& path);
  /// Runs validate(path) in a forked child process and waits at most `timeoutSeconds`; throws the
  /// RunFileError validate() would throw, or one saying the HDF5 library crashed or the check did
  /// not finish in time, so a corrupt file cannot crash or hang the caller. Only for processes
  /// that have started no threads yet (the CLI); a no-op where fork() is unavailable.
  static void validateIsolated(const std::string& path, int timeoutSeconds = 120);
  /// Opens and validates an in-memory HDF5 file image (tests, fuzzing); `name` is used in messages.
  static RunFile openImage(const void* data, std::size_t size, const std::string& name);

  RunFile(RunFile&&) noexcept;
  RunFile& operator=(RunFile&&) noexcept;
  ~RunFile();

  /// Returns the path (or image name) given to open().
  const std::string& path() const;
  /// Returns the root attributes.
  const RunAttributes& attributes() const;
  /// Returns the loss log.
  const RunLog& log() const;
  /// Returns the programs, sorted by id.
  const std::vector<RunProgram>& programs() const;
  /// Returns the program with this id, or nullptr.
  const RunProgram* program(std::string_view id) const;
  /// Returns the checkpoint steps in increasing order (no tensor is read).
  std::vector<std::int64_t> checkpointSteps() const;
  /// Returns true when a checkpoint exists at `step`.
  bool hasCheckpoint(std::int64_t step) const;
  /// Returns the program that ran at checkpoint `step`; throws RunFileError if there is none.
  const RunProgram& checkpointProgram(std::int64_t step) const;
  /// Returns the logged loss at `step`, or nothing when the step was not logged.
  std::optional<double> lossAt(std::int64_t step) const;
  /// Returns non-fatal remarks found by open() (extra datasets, checkpoints missing from the log).
  const std::vector<std::string>& warnings() const;

  /// Reads the tensors of checkpoint `step` as program inputs ("param:<name>", "batch:<name>"),
  /// each with its recorded dtype, checked against the program's input specs; throws RunFileError.
  TensorMap loadCheckpoint(std::int64_t step, CheckpointPart part = CheckpointPart::All) const;

 private:
  struct Impl;
  explicit RunFile(std::unique_ptr<Impl> impl);
  // open() without the HDF5 lock (the caller holds it, or is a forked child).
  static std::unique_ptr<Impl> openUnlocked(const std::string& path);
  std::unique_ptr<Impl> mImpl;
};

/// Converts IEEE binary16 bits to a double (exact; subnormals, infinities and NaN included).
double halfBitsToDouble(std::uint16_t bits);
/// Converts bfloat16 bits (the upper half of a binary32) to a double (exact).
double bfloat16BitsToDouble(std::uint16_t bits);

}  // namespace lossbound
