// One worker's kept ResidentEvaluators (resident_evaluators.h).
#include "core/program/resident_evaluators.h"

#include "core/backend.h"

#include <algorithm>

namespace lossbound {

ResidentEvaluators::ResidentEvaluators(Device& device, int hostThreads, std::size_t maxPrograms)
    : mDevice(device),
      mHost(createCpuBackend(hostThreads)),
      mMax(std::max<std::size_t>(1, maxPrograms)) {}

// The evaluators hold device constants and refer to mHost: they go first.
ResidentEvaluators::~ResidentEvaluators() { mEntries.clear(); }

ResidentEvaluator& ResidentEvaluators::of(const std::shared_ptr<const Program>& program) {
  ++mClock;
  for (Entry& e : mEntries)
    if (e.program == program) {
      e.lastUse = mClock;
      return *e.evaluator;
    }
  if (mEntries.size() >= mMax) {
    // A run holds one program per distinct input shapes: a few. Past the limit, the least
    // recently used evaluator frees its device constants.
    const auto oldest =
        std::min_element(mEntries.begin(), mEntries.end(),
                         [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; });
    mEntries.erase(oldest);
  }
  Entry e;
  e.program = program;
  e.evaluator = std::make_unique<ResidentEvaluator>(*program, mDevice, *mHost);
  e.lastUse = mClock;
  mEntries.push_back(std::move(e));
  return *mEntries.back().evaluator;
}

}  // namespace lossbound
