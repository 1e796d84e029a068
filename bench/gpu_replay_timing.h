#pragma once
// The replay-time part of bench-gpu, compiled as C++20 by the host compiler (the core headers
// need C++20; nvcc compiles bench_gpu.cu as C++17).

#include "core/backend.h"

namespace lossbound {

/// Prints the time of replaying step 0 of a sample (LOSSBOUND_BENCH_SAMPLE, default
/// samples/gradaccum-hf-bug) with the interval and first-order methods on the CPU backend and on
/// `gpu`, best of 3, and their ratio.
void printReplayTiming(Backend& gpu);

}  // namespace lossbound
