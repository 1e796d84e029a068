#include "core/analysis/overall_verdict.h"

#include "core/analysis/verdict.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace lossbound {

OverallSummary summarizeReport(const AnalysisReport& report) {
  OverallSummary out;
  std::map<std::string, std::vector<std::int64_t>> reasons;
  for (const StepResult& r : report.steps) {
    ++out.analysed;
    // "Inside" an envelope with an infinite endpoint proves nothing (classifyStep already calls
    // such steps not bounded; a report from elsewhere is held to the same rule).
    const bool infinite = !(std::isfinite(r.lo) && std::isfinite(r.hi));
    if (r.verdict == StepVerdict::Rounding && infinite) {
      ++out.notBounded;
      reasons["the envelope is unbounded, so rounding cannot be confirmed"].push_back(r.step);
      continue;
    }
    // Likewise a self-check envelope with an infinite endpoint is no pass (classifyStep).
    if (r.verdict == StepVerdict::Rounding &&
        !(std::isfinite(r.selfLo) && std::isfinite(r.selfHi))) {
      ++out.untrustworthy;
      continue;
    }
    switch (r.verdict) {
      case StepVerdict::Rounding:
        ++out.inside;
        break;
      case StepVerdict::BugLikely:
      case StepVerdict::BugCertain:
        ++out.outside;
        break;
      case StepVerdict::Untrustworthy:
        ++out.untrustworthy;
        break;
      case StepVerdict::NotBounded:
        ++out.notBounded;
        reasons[r.note.empty() ? std::string("no reason recorded") : r.note].push_back(r.step);
        break;
    }
  }
  for (auto& [reason, steps] : reasons) out.notBoundedReasons.push_back({reason, steps});
  std::stable_sort(out.notBoundedReasons.begin(), out.notBoundedReasons.end(),
                   [](const auto& a, const auto& b) { return a.steps.size() > b.steps.size(); });

  out.firstExit = firstExit(report.steps);
  if (out.firstExit) {
    const auto it = std::find_if(report.steps.begin(), report.steps.end(),
                                 [&](const StepResult& s) { return s.step == *out.firstExit; });
    out.firstExitStep = &*it;
    out.verdict = it->verdict == StepVerdict::BugCertain ? OverallVerdict::BugCertain
                                                         : OverallVerdict::BugLikely;
    out.exitCode = kExitTypeII;
  } else if (out.analysed == 0) {
    out.verdict = OverallVerdict::NotAnalysed;
  } else if (out.untrustworthy > 0) {
    out.verdict = OverallVerdict::Untrustworthy;
    out.exitCode = kExitNotBounded;
  } else if (out.notBounded == out.analysed) {
    out.verdict = OverallVerdict::NotBounded;
    out.exitCode = kExitNotBounded;
  } else if (out.notBounded > 0) {
    out.verdict = OverallVerdict::Inconclusive;
    out.exitCode = kExitNotBounded;
  } else {
    out.verdict = OverallVerdict::Rounding;
  }
  return out;
}

std::string overallVerdictName(OverallVerdict v) {
  switch (v) {
    case OverallVerdict::NotAnalysed:
      return "not analysed";
    case OverallVerdict::Rounding:
      return "rounding";
    case OverallVerdict::BugLikely:
      return "bug (likely)";
    case OverallVerdict::BugCertain:
      return "bug (certain)";
    case OverallVerdict::Untrustworthy:
      return "untrustworthy";
    case OverallVerdict::Inconclusive:
      return "inconclusive";
    case OverallVerdict::NotBounded:
      return "not bounded";
  }
  return "unknown";
}

std::string overallVerdictSentence(const OverallSummary& s, EnvelopeMethod method) {
  const std::string n = std::to_string(s.analysed);
  const std::string m(methodName(method));
  switch (s.verdict) {
    case OverallVerdict::NotAnalysed:
      return "No step analysed.";
    case OverallVerdict::BugLikely:
    case OverallVerdict::BugCertain:
      return "Type-II divergence (implementation bug): " + std::to_string(s.outside) + " of " + n +
             " analysed steps are outside the " + m + " envelope.";
    case OverallVerdict::Untrustworthy:
      return "untrustworthy: the self-check failed at " + std::to_string(s.untrustworthy) + " of " +
             n +
             " steps (the candidate's own loss is not inside a finite envelope on its own "
             "checkpoint: dropout, a wrong dtype, an untraced side effect, a checkpoint value "
             "that is not finite, ties broken otherwise than on the CPU; see the step notes).";
    case OverallVerdict::Inconclusive:
      return "inconclusive: no exit among the " + std::to_string(s.analysed - s.notBounded) +
             " bounded steps, but " + std::to_string(s.notBounded) + " of " + n +
             " steps could not be bounded.";
    case OverallVerdict::NotBounded:
      return "not bounded: no step could be bounded (" + n + " analysed).";
    case OverallVerdict::Rounding:
      return "rounding (Type-I): all " + n + " analysed steps are inside the " + m + " envelope.";
  }
  return {};
}

}  // namespace lossbound
