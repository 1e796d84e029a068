#include "core/analysis/first_exit_watch.h"

namespace lossbound {

FirstExitWatch::FirstExitWatch(const std::vector<std::int64_t>& steps)
    : mPending(steps.begin(), steps.end()) {}

bool FirstExitWatch::record(std::int64_t step, bool exit) {
  if (mPending.erase(step) == 0) return settled();
  if (exit && (!mExit || step < *mExit)) mExit = step;
  return settled();
}

bool FirstExitWatch::settled() const {
  return mExit && (mPending.empty() || *mPending.begin() > *mExit);
}

}  // namespace lossbound
