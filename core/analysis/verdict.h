#pragma once
// The decision rules of an analysis, as pure functions of numbers: the probabilistic λ, the
// margin, whether a step is inside its envelope, the verdict tiers of ARCHITECTURE §1, the first
// exit and the budget attribution. Kept apart from the replay so they are unit-tested on synthetic
// data.

#include "core/analysis/analysis_types.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

/// Returns λ = sqrt(2 ln(2/δ)), δ = 1 − confidence (Hoeffding: a sum of independent mean-zero
/// terms bounded by c_k exceeds λ·sqrt(Σ c_k²) with probability at most δ). Throws
/// std::invalid_argument unless 0 < confidence < 1.
double hoeffdingLambda(double confidence);

/// Returns true when lo <= value <= hi; false for NaN anywhere.
bool insideEnvelope(double value, double lo, double hi);

/// Returns (value − centre) / half-width of [lo, hi]: |margin| <= 1 inside, > 1 outside. A
/// degenerate envelope gives 0 at its point and ±inf elsewhere; an unbounded envelope gives 0 when
/// the value is inside; NaN when any input is NaN.
double envelopeMargin(double value, double lo, double hi);

/// Returns true when the method's envelope is a guarantee under the precision model: the interval
/// method started at the inputs. An interval started at a node ignores rounding upstream of it.
bool isRigorous(EnvelopeMethod method, const std::string& startNode);

/// Returns the verdict tier. Order of precedence: not bounded; self-check failed →
/// untrustworthy (never a bug); inside → rounding; outside a rigorous envelope → bug (certain);
/// outside any other → bug (likely).
StepVerdict decideVerdict(bool bounded, bool selfCheckPassed, bool inside, bool rigorous);

/// Fills `inside`, `margin`, `selfCheckPassed` and `verdict` of r from its lo/hi, selfLo/selfHi,
/// referenceLoss and candidateLoss. `rigorous` says whether [lo, hi] is a guarantee (isRigorous).
/// A reference inside an envelope with an infinite endpoint is not bounded; a self-check envelope
/// with an infinite or NaN endpoint is not a pass (untrustworthy). Appends the reason to r.note.
void classifyStep(StepResult& r, bool rigorous);

/// Marks r as not bounded for `reason` (the envelope becomes NaN, inside false).
void markNotBounded(StepResult& r, const std::string& reason);

/// Returns true for the verdicts that are exits (bug (likely), bug (certain)).
bool isExit(StepVerdict v);

/// Returns the earliest step whose verdict is an exit, or nothing.
std::optional<std::int64_t> firstExit(const std::vector<StepResult>& steps);

/// Returns true when results computed with `a` and with `b` bound the same envelope and may be
/// shown together: same method, precision and (interval) start node; same confidence for the
/// probabilistic method; same size, order draws and seed for the ensemble. The backend does not
/// count.
bool sameResultSettings(const AnalysisSettings& a, const AnalysisSettings& b);

/// Returns `base` with `newer` merged in, in increasing step order: a step of `newer` replaces
/// the result of the same step in `base`; the other steps of `base` stay.
std::vector<StepResult> mergeResults(std::vector<StepResult> base,
                                     const std::vector<StepResult>& newer);

/// One node's part of the first-order bound: Σ over its elements of |g|·r.
struct BudgetTerm {
  std::string node;
  std::string op;
  double bound = 0;
};

/// Returns the `top` largest terms with their share of the total of all terms (not just the
/// top ones), largest first; zero terms are dropped. Ties keep program order.
std::vector<BudgetShare> budgetShares(const std::vector<BudgetTerm>& terms, std::size_t top = 8);

/// Returns "62% mm_7 (aten.mm.default), 20% _softmax (aten._softmax.default)" for the first
/// `count` shares.
std::string budgetSummary(const std::vector<BudgetShare>& shares, std::size_t count = 3);

}  // namespace lossbound
