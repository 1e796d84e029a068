#include "bench/gpu_replay_timing.h"

#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

namespace lossbound {

/// Prints the replay time of step 0 of a sample on the CPU and the CUDA backend, per method.
void printReplayTiming(Backend& gpu) {
  const char* env = std::getenv("LOSSBOUND_BENCH_SAMPLE");
  const std::string dir =
      env ? env : std::string(LOSSBOUND_SOURCE_DIR) + "/samples/gradaccum-hf-bug";
  std::shared_ptr<const Program> program;
  TensorMap inputs;
  try {
    const auto reference = RunFileReplay::open(dir + "/reference.h5");
    const auto candidate = RunFileReplay::open(dir + "/candidate.h5");
    program = candidate->programAt(0);
    inputs = adaptInputs(*program, reference->inputsAt(0), nullptr);
  } catch (const std::exception& e) {
    std::printf(
        "\nreplay time per step: skipped: cannot replay step 0 of the sample %s "
        "(expected reference.h5 and candidate.h5 there): %s\n",
        dir.c_str(), e.what());
    return;
  }
  const auto cpu = createCpuBackend();
  std::printf("\nreplay time per step: %s, step 0, %zu nodes, best of 3\n", dir.c_str(),
              program->nodes.size());
  std::printf("%-14s %12s %12s %10s\n", "method", "CPU ms", "CUDA ms", "CPU/CUDA");
  for (EnvelopeMethod m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder}) {
    ReplayOptions o;
    o.method = m;
    const double c = bestOf(3, [&] { replayEnvelope(*program, inputs, *cpu, o); });
    const double g = bestOf(3, [&] { replayEnvelope(*program, inputs, gpu, o); });
    std::printf("%-14s %12.2f %12.2f %10.2f\n",
                m == EnvelopeMethod::Interval ? "interval" : "first-order", c * 1e3, g * 1e3,
                c / g);
  }
}

}  // namespace lossbound
