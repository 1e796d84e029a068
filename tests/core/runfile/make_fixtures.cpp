// Writes good.h5, bad.h5 (non-monotonic steps), no-checkpoints.h5, no-programs.h5, batch-differs.h5
// (a candidate for good.h5 whose batch at step 0 differs) and, given the sample
// gradaccum-fixed/candidate.h5, corrupt.h5 (crashes libhdf5 1.10.8) and nan-param.h5 (a NaN at
// blocks.0.fc.bias[5] of checkpoint 0) into DIR (created if needed); used by the `lossbound-cli`
// tests in tests/app.
#include "tests/core/runfile/corrupt_sample.h"
#include "tests/core/runfile/run_file_writer.h"

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s DIR [SAMPLE_CANDIDATE_H5]\n", argv[0]);
    return 2;
  }
  try {
    using namespace lossbound::testing;
    const std::string dir = argv[1];
    std::filesystem::create_directories(dir);
    writeRunFile(dir + "/good.h5", RunFixture{});
    RunFixture bad;
    bad.steps = {0, 2, 1};
    writeRunFile(dir + "/bad.h5", bad);
    RunFixture noCheckpoints;
    noCheckpoints.checkpointSteps.clear();
    writeRunFile(dir + "/no-checkpoints.h5", noCheckpoints);
    RunFixture noPrograms;
    noPrograms.writePrograms = false;
    writeRunFile(dir + "/no-programs.h5", noPrograms);
    // Step 0 only, x[2] = 0.5 instead of 0.25; its logged loss is the true one for its tensors.
    RunFixture batchDiffers;
    batchDiffers.checkpointSteps = {0};
    batchDiffers.tensors = defaultTensors(0);
    batchDiffers.tensors[1].values[2] = 0.5;
    batchDiffers.loss = {2.5, defaultLoss(1), defaultLoss(2)};
    writeRunFile(dir + "/batch-differs.h5", batchDiffers);
    if (argc == 3) {
      writeCrashingCorruptSample(argv[2], dir + "/corrupt.h5");
      // The sample candidate with a NaN in one parameter of checkpoint 0 (issue 16): its
      // self-check envelope is unbounded, which must not pass.
      std::filesystem::copy_file(argv[2], dir + "/nan-param.h5",
                                 std::filesystem::copy_options::overwrite_existing);
      overwriteElement(dir + "/nan-param.h5", "/checkpoints/0/params/blocks.0.fc.bias", 5,
                       std::nan(""));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
