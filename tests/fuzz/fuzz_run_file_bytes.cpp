// libFuzzer target (not in the smoke run: libhdf5 1.10.8 itself has memory errors on corrupt
// files, e.g. an overlapping memcpy in H5HG_read for a damaged vlen string, found in seconds):
// RunFile::openImage() on arbitrary bytes (an in-memory HDF5 image) must either
// open a valid run file — whose checkpoints then load or throw RunFileError — or throw
// RunFileError. Crashes inside libhdf5 itself are reported by the fuzzer too.
#include "core/runfile/run_file.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const lossbound::RunFile run = lossbound::RunFile::openImage(data, size, "fuzz.h5");
    for (std::int64_t step : run.checkpointSteps()) {
      try {
        (void)run.loadCheckpoint(step);
      } catch (const lossbound::RunFileError&) {
      }
    }
  } catch (const lossbound::RunFileError&) {
  }
  return 0;
}
