#pragma once
// The replay-time part of bench-gpu, compiled as C++20 by the host compiler (the core headers
// need C++20; nvcc compiles bench_gpu.cu as C++17), and the timing helper both parts use.

#include "core/backend.h"

#include <chrono>

namespace lossbound {

/// Returns the best of `reps` wall times of f, in seconds.
template <typename F>
double bestOf(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = s < best ? s : best;
  }
  return best;
}

/// Prints the time of replaying step 0 of a sample (LOSSBOUND_BENCH_SAMPLE, default
/// samples/gradaccum-hf-bug) with the interval and first-order methods on the CPU backend and on
/// `gpu`, best of 3, and their ratio.
void printReplayTiming(Backend& gpu);

}  // namespace lossbound
