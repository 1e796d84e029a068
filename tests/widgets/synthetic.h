#pragma once
// Synthetic run pairs and reports for the widget tests: smooth decaying losses, checkpoints at a
// fixed stride, envelopes wide enough to be seen at loss scale, and an optional first exit.

#include "core/analysis/analysis_types.h"
#include "widgets/session_data.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace lossbound::widgets::test {

/// Returns a decaying loss curve with a small deterministic wiggle.
inline double syntheticLoss(std::int64_t step, double scale = 1.0) {
  return scale *
         (2.0 * std::exp(-double(step) / 3000.0) + 1.0 + 0.02 * std::sin(double(step) * 0.37));
}

/// Returns a session with `referenceSteps` / `candidateSteps` logged steps (0, 1, ...) and a
/// checkpoint every `stride` steps of the shorter run.
inline SessionData makeSession(std::int64_t referenceSteps, std::int64_t candidateSteps,
                               std::int64_t stride) {
  SessionData s;
  s.reference.name = QStringLiteral("ref-run");
  s.candidate.name = QStringLiteral("cand-run");
  for (std::int64_t i = 0; i < referenceSteps; ++i) {
    s.reference.steps.push_back(i);
    s.reference.loss.push_back(syntheticLoss(i));
  }
  for (std::int64_t i = 0; i < candidateSteps; ++i) {
    s.candidate.steps.push_back(i);
    s.candidate.loss.push_back(syntheticLoss(i, 1.0005));
  }
  for (std::int64_t i = 0; i < std::min(referenceSteps, candidateSteps); i += stride)
    s.checkpointSteps.push_back(i);
  return s;
}

/// Returns one result at `step`: envelope centred near the candidate with half-width `half`;
/// the reference is put outside (above hi) when `outside`.
inline StepResult makeResult(std::int64_t step, bool outside, double half = 0.08,
                             EnvelopeMethod method = EnvelopeMethod::FirstOrder) {
  StepResult r;
  r.step = step;
  r.candidateLoss = syntheticLoss(step, 1.0005);
  const double centre = r.candidateLoss;
  r.lo = centre - half;
  r.hi = centre + half;
  r.referenceLoss = outside ? centre + 3 * half : syntheticLoss(step);
  r.margin = (r.referenceLoss - centre) / half;
  r.inside = std::abs(r.margin) <= 1;
  r.verdict = r.inside ? StepVerdict::Rounding : StepVerdict::BugCertain;
  r.method = method;
  r.budget = {{"mm_3", "aten.mm.default", 0.6 * half, 0.6},
              {"softmax_1", "aten._softmax.default", 0.3 * half, 0.3},
              {"sum_2", "aten.sum.dim_IntList", 0.1 * half, 0.1}};
  return r;
}

/// Returns a report over `steps`; every step from `exitFrom` on (if given) is outside.
inline AnalysisReport makeReport(const std::vector<std::int64_t>& steps,
                                 std::optional<std::int64_t> exitFrom) {
  AnalysisReport report;
  report.referenceName = "ref-run";
  report.candidateName = "cand-run";
  for (std::int64_t s : steps) report.steps.push_back(makeResult(s, exitFrom && s >= *exitFrom));
  for (const StepResult& r : report.steps)
    if (!r.inside) {
      report.firstExit = r.step;
      break;
    }
  return report;
}

}  // namespace lossbound::widgets::test
