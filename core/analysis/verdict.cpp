#include "core/analysis/verdict.h"

#include "core/interval/interval.h"
#include "core/interval/number_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

namespace lossbound {

double hoeffdingLambda(double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0))
    throw std::invalid_argument(
        "confidence: expected a probability strictly between 0 and 1, "
        "found " +
        std::to_string(confidence));
  // δ = 1 − confidence is exact for confidence >= 0.5 (Sterbenz); below, it rounds by <= 1 ulp.
  const double delta = 1.0 - confidence;
  return std::sqrt(2.0 * std::log(2.0 / delta));
}

bool insideEnvelope(double value, double lo, double hi) { return lo <= value && value <= hi; }

double envelopeMargin(double value, double lo, double hi) {
  if (std::isnan(value) || std::isnan(lo) || std::isnan(hi)) return std::nan("");
  if (std::isinf(lo) || std::isinf(hi)) {
    if (insideEnvelope(value, lo, hi)) return 0.0;
    return value > hi ? kInf : -kInf;
  }
  // Halves first: lo + hi could overflow, lo/2 and hi/2 cannot.
  const double centre = lo / 2 + hi / 2;
  const double halfWidth = hi / 2 - lo / 2;
  if (halfWidth <= 0) {
    if (value == centre) return 0.0;
    return value > centre ? kInf : -kInf;
  }
  return (value - centre) / halfWidth;
}

bool isRigorous(EnvelopeMethod method, const std::string& startNode) {
  return method == EnvelopeMethod::Interval && startNode.empty();
}

StepVerdict decideVerdict(bool bounded, bool selfCheckPassed, bool inside, bool rigorous) {
  if (!bounded) return StepVerdict::NotBounded;
  if (!selfCheckPassed) return StepVerdict::Untrustworthy;
  if (inside) return StepVerdict::Rounding;
  return rigorous ? StepVerdict::BugCertain : StepVerdict::BugLikely;
}

namespace {

void appendNote(std::string& note, const std::string& sentence) {
  if (!note.empty()) note += " ";
  note += sentence;
}

std::string envelopeText(double lo, double hi) {
  // Appended, not "[" + numberText(...): GCC 12 at -O3 reports a false -Wrestrict on
  // operator+(const char*, std::string&&) (GCC bug 105651).
  std::string s = "[";
  s += numberText(lo, 9);
  s += ", ";
  s += numberText(hi, 9);
  return s + "]";
}

}  // namespace

void classifyStep(StepResult& r, bool rigorous) {
  const bool bounded = !std::isnan(r.lo) && !std::isnan(r.hi);
  r.inside = bounded && insideEnvelope(r.referenceLoss, r.lo, r.hi);
  r.margin = envelopeMargin(r.referenceLoss, r.lo, r.hi);
  // Inside an envelope with an infinite endpoint proves nothing: an op's bound overflowed or an
  // input was not finite. The step is not bounded (first in the precedence of decideVerdict); an
  // exit beyond a finite endpoint still stands.
  const bool provesNothing = r.inside && (std::isinf(r.lo) || std::isinf(r.hi));
  // Likewise a self-check envelope with an infinite (or NaN) endpoint holds every loss, so it
  // confirms nothing about the recording or the precision model: that is not a pass. The step is
  // then untrustworthy like a failed self-check (never rounding, never a bug): the envelope on the
  // reference's state may be finite, but nothing says that the candidate's program and precision
  // model reproduce the candidate's own run. ("Not bounded" stays the verdict for an envelope on
  // the reference's state that could not be computed or proves nothing.)
  const bool selfBounded = std::isfinite(r.selfLo) && std::isfinite(r.selfHi);
  r.selfCheckPassed = selfBounded && insideEnvelope(r.candidateLoss, r.selfLo, r.selfHi);
  r.verdict = decideVerdict(bounded && !provesNothing, r.selfCheckPassed, r.inside, rigorous);
  if (provesNothing)
    appendNote(r.note, "The envelope is unbounded (" + envelopeText(r.lo, r.hi) +
                           "): a bound overflowed on the way to the loss, or an input is not "
                           "finite, so rounding cannot be confirmed; try another method or start "
                           "the interval at a later node.");
  if (r.verdict != StepVerdict::Untrustworthy) return;
  if (!selfBounded)
    appendNote(r.note,
               "Self-check proves nothing: the envelope of the candidate program on its "
               "own checkpoint is unbounded (" +
                   envelopeText(r.selfLo, r.selfHi) +
                   "; a bound overflowed, or the checkpoint holds a value that is not "
                   "finite), so it cannot confirm the candidate's own loss " +
                   numberText(r.candidateLoss, 9) + " and this step's envelope cannot be trusted.");
  else
    appendNote(r.note, "Self-check failed: the candidate's own loss " +
                           numberText(r.candidateLoss, 9) + " is outside its envelope " +
                           envelopeText(r.selfLo, r.selfHi) +
                           " on its own checkpoint, so the recording or the precision model is "
                           "wrong (dropout, a wrong dtype, an untraced side effect, or ties in "
                           "topk, sort or argmax that the recording broke otherwise than "
                           "PyTorch's CPU kernels: a GPU recording) and this envelope cannot be "
                           "trusted.");
}

void markNotBounded(StepResult& r, const std::string& reason) {
  const double nan = std::nan("");
  r.lo = r.hi = r.selfLo = r.selfHi = nan;
  r.inside = false;
  r.selfCheckPassed = false;
  r.margin = nan;
  r.verdict = StepVerdict::NotBounded;
  r.note = reason;
}

bool isExit(StepVerdict v) { return v == StepVerdict::BugLikely || v == StepVerdict::BugCertain; }

std::optional<std::int64_t> firstExit(const std::vector<StepResult>& steps) {
  std::optional<std::int64_t> first;
  for (const StepResult& s : steps)
    if (isExit(s.verdict) && (!first || s.step < *first)) first = s.step;
  return first;
}

bool sameResultSettings(const AnalysisSettings& a, const AnalysisSettings& b) {
  if (a.method != b.method || a.precision != b.precision) return false;
  switch (a.method) {
    case EnvelopeMethod::Interval:
      return a.startNode == b.startNode;
    case EnvelopeMethod::Probabilistic:
      return a.confidence == b.confidence;
    case EnvelopeMethod::Ensemble:
      return a.ensembleSize == b.ensembleSize && a.ensembleOrder == b.ensembleOrder &&
             a.seed == b.seed;
    case EnvelopeMethod::FirstOrder:
      return true;
  }
  return true;
}

std::vector<StepResult> mergeResults(std::vector<StepResult> base,
                                     const std::vector<StepResult>& newer) {
  auto byStep = [](const StepResult& x, const StepResult& y) { return x.step < y.step; };
  std::stable_sort(base.begin(), base.end(), byStep);
  for (const StepResult& r : newer) {
    const auto it = std::lower_bound(base.begin(), base.end(), r, byStep);
    if (it != base.end() && it->step == r.step)
      *it = r;
    else
      base.insert(it, r);
  }
  return base;
}

std::vector<BudgetShare> budgetShares(const std::vector<BudgetTerm>& terms, std::size_t top) {
  double total = 0;
  for (const BudgetTerm& t : terms) total += std::abs(t.bound);
  std::vector<std::size_t> order(terms.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::abs(terms[a].bound) > std::abs(terms[b].bound);
  });
  std::vector<BudgetShare> out;
  for (std::size_t i : order) {
    if (out.size() >= top) break;
    const double b = std::abs(terms[i].bound);
    if (!(b > 0)) continue;
    out.push_back({terms[i].node, terms[i].op, b, std::isfinite(total) ? b / total : 0.0});
  }
  return out;
}

std::string budgetSummary(const std::vector<BudgetShare>& shares, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < shares.size() && i < count; ++i) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * shares[i].share);
    if (i) out += ", ";
    out += std::string(pct) + " " + shares[i].node + " (" + shares[i].op + ")";
  }
  return out;
}

}  // namespace lossbound
