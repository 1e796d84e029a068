// libFuzzer target for the run-file reader's validation: the input chooses the *contents* of a
// well-formed HDF5 file (root attributes, log values and dtypes, program attributes, the graph
// JSON, checkpoint names, tensor dtypes, storage types, shapes and values), written with the HDF5
// C API; RunFile::open() must accept it or throw RunFileError, and loading every checkpoint must
// succeed or throw RunFileError. (Raw HDF5 bytes: fuzz_run_file_bytes.cpp.)
#include "core/runfile/run_file.h"
#include "tests/core/runfile/run_file_writer.h"

#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>
#include <unistd.h>

using namespace lossbound;
using namespace lossbound::testing;

namespace {

std::string pick(FuzzedDataProvider& in, std::initializer_list<const char*> options) {
  if (in.ConsumeBool()) return in.ConsumeRandomLengthString(24);
  const auto i = in.ConsumeIntegralInRange<std::size_t>(0, options.size() - 1);
  return *(options.begin() + i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  RunFixture f;
  if (in.ConsumeProbability<float>() < 0.2f)
    f.format = in.ConsumeBool() ? std::optional<std::string>{} : in.ConsumeRandomLengthString(20);
  if (in.ConsumeProbability<float>() < 0.2f) f.formatVersion = in.ConsumeIntegral<std::int64_t>();
  f.writeLog = in.ConsumeProbability<float>() > 0.05f;
  if (in.ConsumeBool()) {
    f.steps.clear();
    for (int n = in.ConsumeIntegralInRange(0, 5); n > 0; --n)
      f.steps.push_back(in.ConsumeIntegralInRange<std::int64_t>(-3, 6));
  }
  f.stepAsFloat = in.ConsumeProbability<float>() < 0.1f;
  if (in.ConsumeBool())
    for (int n = in.ConsumeIntegralInRange(0, 5); n > 0; --n)
      f.loss.push_back(in.ConsumeFloatingPoint<double>());
  if (in.ConsumeProbability<float>() < 0.1f) f.irVersionAttr = in.ConsumeIntegral<std::int64_t>();
  if (in.ConsumeBool()) {
    f.checkpointSteps.clear();
    for (int n = in.ConsumeIntegralInRange(0, 3); n > 0; --n)
      f.checkpointSteps.push_back(in.ConsumeIntegralInRange<std::int64_t>(-2, 5));
  }
  if (in.ConsumeProbability<float>() < 0.1f) f.programAttr = in.ConsumeRandomLengthString(20);
  if (in.ConsumeBool()) {
    f.tensors = defaultTensors(0);
    for (int n = in.ConsumeIntegralInRange(0, 3); n > 0; --n) {
      FixtureTensor t;
      t.path = in.ConsumeBool() ? pick(in, {"params/w", "batch/x", "params/h", "batch/ids"})
                                : f.tensors[0].path;
      if (t.path.empty() || t.path.find("//") != std::string::npos || t.path.front() == '/')
        t.path = "params/w";
      t.dtype = pick(
          in, {"float32", "float64", "float16", "bfloat16", "int64", "int32", "bool", "uint8", ""});
      t.storage = std::string(
          *(std::initializer_list<const char*>{"f64", "f32", "f16", "u16", "i64", "i32", "u8"}
                .begin() +
            in.ConsumeIntegralInRange<int>(0, 6)));
      std::uint64_t count = 1;
      for (int d = in.ConsumeIntegralInRange(0, 3); d > 0; --d) {
        t.shape.push_back(in.ConsumeIntegralInRange<std::uint64_t>(0, 4));
        count *= t.shape.back();
      }
      for (std::uint64_t i = 0; i < count; ++i)
        t.values.push_back(in.ConsumeIntegralInRange<int>(-4, 4) * 0.5);
      t.lzf = in.ConsumeProbability<float>() < 0.05f;
      f.tensors.push_back(std::move(t));
    }
  }
  f.graph = in.ConsumeBool() ? in.ConsumeRemainingBytesAsString() : std::string();
  static const std::string path = "/tmp/lossbound-fuzz-" + std::to_string(getpid()) + ".h5";
  try {
    writeRunFile(path, f);
  } catch (const std::exception&) {
    return 0;  // a combination the writer cannot express (e.g. the same dataset twice)
  }
  try {
    const RunFile run = RunFile::open(path);
    for (std::int64_t step : run.checkpointSteps()) {
      try {
        (void)run.loadCheckpoint(step);
      } catch (const RunFileError&) {
      }
    }
  } catch (const RunFileError&) {
  }
  return 0;
}
