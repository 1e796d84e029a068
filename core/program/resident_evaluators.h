#pragma once
// One step worker's device-resident evaluators (core/program/resident_replay.h): one
// ResidentEvaluator per program, made on first use and kept across replays, so the per-node plans
// (recorded from the rules) and the device copies of rule-made constants are made once per
// program and device, not once per replay. The analysis keeps one of these per step worker next
// to its backend (core/analysis/analyzer.cpp); it must be destroyed before the device.

#include "core/ir/ir.h"
#include "core/program/resident_replay.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace lossbound {

class Backend;
class Device;

/// The kept ResidentEvaluators of one device (see the file comment). Not thread-safe: one worker.
class ResidentEvaluators {
 public:
  /// Binds the device and makes the CPU backend (`hostThreads` threads) that runs the
  /// host-fallback nodes of every evaluator; at most `maxPrograms` evaluators are kept (the least
  /// recently used one goes first).
  ResidentEvaluators(Device& device, int hostThreads, std::size_t maxPrograms = 8);
  ~ResidentEvaluators();
  ResidentEvaluators(const ResidentEvaluators&) = delete;
  ResidentEvaluators& operator=(const ResidentEvaluators&) = delete;

  /// Returns the evaluator of `program` (kept with the program until evicted or destroyed); the
  /// reference stays valid until the next call.
  ResidentEvaluator& of(const std::shared_ptr<const Program>& program);

  /// Returns the device the evaluators run on.
  Device& device() { return mDevice; }
  /// Returns the number of evaluators kept.
  std::size_t size() const { return mEntries.size(); }

 private:
  struct Entry {
    std::shared_ptr<const Program> program;
    std::unique_ptr<ResidentEvaluator> evaluator;
    std::uint64_t lastUse = 0;
  };
  Device& mDevice;
  std::unique_ptr<Backend> mHost;
  std::size_t mMax;
  std::uint64_t mClock = 0;
  std::vector<Entry> mEntries;
};

}  // namespace lossbound
