#include "core/analysis/step_job.h"

#include "core/analysis/baselines.h"
#include "core/analysis/output_comparison.h"
#include "core/analysis/verdict.h"
#include "core/interval/number_text.h"
#include "core/ir/program_parser.h"
#include "core/program/op_coverage.h"
#include "core/program/resident_evaluators.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <new>

namespace lossbound {

namespace {

using Clock = std::chrono::steady_clock;

std::string fmt(double v) { return numberText(v, 9); }

std::uint64_t splitSeed(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void appendSentence(std::string& note, const std::string& sentence) {
  if (sentence.empty()) return;
  note += (note.empty() ? "" : " ") + sentence;
}

std::uint64_t stepSeed(std::uint64_t seed, std::int64_t step, StepPart part) {
  return seed ^ (static_cast<std::uint64_t>(step) * 0x9e3779b97f4a7c15ull) ^
         (part == StepPart::Self ? 0x5e1full : 0);
}

// The values the baselines need (docs/baselines.md): the candidate program's binary64 loss (the
// first-order centre when there is one, else a point evaluation) and one execution in the
// modelled precision with a random reduction order (drawn once per matrix product: about a quarter
// of the cost of one per output element). A failure leaves the verdict alone.
void replayBaselines(const StepJobContext& ctx, const Program& program, const TensorMap& inputs,
                     Backend& backend, std::uint64_t seed, PartResult& pr) {
  try {
    EvalOptions eval;
    eval.precision = ctx.precision;
    eval.cancel = ctx.cancel;
    if (std::isnan(pr.env.point)) {
      eval.domain = EvalDomain::Point;
      pr.fp64Loss = lossValue(evaluate(program, inputs, backend, eval)).lo;
    } else {
      pr.fp64Loss = pr.env.point;
    }
    eval.domain = EvalDomain::Random;
    eval.seed = splitSeed(seed);
    eval.orderPerProduct = true;  // one execution, not a spread: one order per matrix product
    const EvalResult rounded = evaluate(program, inputs, backend, eval);
    pr.roundedLoss = lossValue(rounded).lo;
    pr.lossFormat = ctx.precision.storageFor(rounded.outputs.at("loss").dtype());
  } catch (const Cancelled&) {
    throw;
  } catch (const std::exception& e) {
    pr.baselineError = e.what();
  }
}

// Every output of both programs at the reference's state (docs/output-envelopes.md). A failure
// is reported in the step's note and leaves the loss verdict alone.
void replayOutputs(const StepJobContext& ctx, std::int64_t step, const Program& candidate,
                   const TensorMap& candidateInputs, Backend& backend, std::uint64_t seed,
                   PartResult& pr) {
  const auto t0 = Clock::now();
  try {
    const auto reference = ctx.reference.programAt(step);
    const TensorMap referenceInputs =
        adaptInputs(*reference, ctx.reference.inputsAt(step), nullptr);
    OutputComparisonOptions o;
    o.method = ctx.settings.method;
    o.candidatePrecision = ctx.precision;
    o.referencePrecision = ctx.reference.recordedPrecision();
    o.referencePrecision.override = ctx.settings.precision;
    o.lambda = ctx.lambda;
    o.ensembleSize = ctx.settings.ensembleSize;
    o.ensembleOrder = ctx.settings.ensembleOrder;
    o.seed = splitSeed(seed ^ 0x07u);
    o.cancel = ctx.cancel;
    pr.outputs = compareOutputs(candidate, candidateInputs, *reference, referenceInputs, backend, o,
                                &pr.outputNote);
  } catch (const Cancelled&) {
    throw;
  } catch (const std::exception& e) {
    pr.outputError = e.what();
  }
  pr.outputSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
}

void fillBaselines(StepResult& r, const PartResult& m) {
  LossBaselines& b = r.baselines;
  if (!m.baselineError.empty() || std::isnan(m.fp64Loss)) {
    if (!m.baselineError.empty())
      appendSentence(r.note, "Baselines not computed: " + m.baselineError);
    return;
  }
  b.computed = true;
  b.fp64 = m.fp64Loss;
  b.rounded = m.roundedLoss;
  const double ref = r.referenceLoss;
  const AllcloseOutcome a = allcloseCheck({&b.fp64, 1}, {&ref, 1});
  b.allclosePass = a.pass;
  b.allcloseRatio = a.worstRatio;
  // The value under test is the reference's logged loss (as for the envelope); fp64 and the
  // rounded execution come from one program, the candidate's, as both come from eager mode in
  // torch._dynamo.utils.same.
  const RmseOutcome q = rmseCheck({&ref, 1}, {&b.rounded, 1}, {&b.fp64, 1}, m.lossFormat);
  b.rmsePass = q.pass;
  b.rmseError = q.error;
  b.rmseAllowance = q.allowance;
  b.rmseMultiplier = q.multiplier;
}

}  // namespace

std::string unsupportedLossOps(const Program& program) {
  std::vector<std::size_t> needed;
  try {
    needed = neededNodes(program, {"loss"});
  } catch (const std::exception& e) {
    return e.what();
  }
  // Distinct ops in program order, each with its first node and how many more use it.
  std::vector<std::pair<std::string, std::string>> first;  // (op, first node)
  std::map<std::string, int> count;
  for (const UnsupportedOp& u : unsupportedOps(program)) {
    const int idx = findNode(program, u.node);
    if (idx < 0 || !std::binary_search(needed.begin(), needed.end(), static_cast<std::size_t>(idx)))
      continue;
    if (count[u.op]++ == 0) first.emplace_back(u.op, u.node);
  }
  std::string out;
  for (const auto& [op, node] : first) {
    out += (out.empty() ? "" : ", ") + op + " (node " + node;
    if (count[op] > 1) out += " and " + std::to_string(count[op] - 1) + " more";
    out += ")";
  }
  if (out.empty()) return out;
  return (first.size() > 1 ? "unsupported ops: " : "unsupported op: ") + out;
}

PartResult runStepPart(const StepJobContext& ctx, std::int64_t step, StepPart part,
                       Backend& backend, ResidentEvaluators* resident) {
  const AnalysisSettings& settings = ctx.settings;
  PartResult pr;
  const auto t0 = Clock::now();
  try {
    const auto program = ctx.candidate.programAt(step);
    if (const std::string u = unsupportedLossOps(*program); !u.empty()) throw EvaluationError(u);
    if (!settings.startNode.empty() && findNode(*program, settings.startNode) < 0)
      throw EvaluationError("start node '" + settings.startNode +
                            "' is not a node of the candidate program at step " +
                            std::to_string(step));
    const ReplayRun& source = part == StepPart::Main ? ctx.reference : ctx.candidate;
    const TensorMap stored = source.inputsAt(step);
    pr.nonFinite = findNonFinite(stored);
    const TensorMap inputs = adaptInputs(*program, stored, &pr.note);
    ReplayOptions ro;
    ro.method = settings.method;
    ro.precision = ctx.precision;
    ro.lambda = ctx.lambda;
    ro.ensembleSize = settings.ensembleSize;
    ro.ensembleOrder = settings.ensembleOrder;
    ro.seed = stepSeed(settings.seed, step, part);
    ro.startNode = settings.startNode;
    ro.cancel = ctx.cancel;
    // One evaluator per worker and program: its per-node plans serve every step of the program.
    if (resident) ro.resident = &resident->of(program);
    pr.env = replayEnvelope(*program, inputs, backend, ro);
    for (const std::string& n : pr.env.notes) appendSentence(pr.note, n);
    if (part == StepPart::Main) replayBaselines(ctx, *program, inputs, backend, ro.seed, pr);
    if (part == StepPart::Main && settings.outputs == OutputScope::All)
      replayOutputs(ctx, step, *program, inputs, backend, ro.seed, pr);
    // A non-rigorous exit: is it also outside the rigorous interval from the inputs?
    const auto refLoss = ctx.reference.loggedLoss(step);
    if (part == StepPart::Main && !ctx.rigorous && refLoss &&
        !insideEnvelope(*refLoss, pr.env.lo, pr.env.hi)) {
      ReplayOptions ri = ro;
      ri.method = EnvelopeMethod::Interval;
      ri.startNode.clear();
      // The confirmation only raises "likely" to "certain": when the interval replay cannot run
      // (an index that depends on rounded values, say), the step keeps its verdict and says why.
      try {
        const Envelope e = replayEnvelope(*program, inputs, backend, ri);
        for (const std::string& n : e.notes) appendSentence(pr.note, "Rigorous confirmation: " + n);
        pr.confirmed = true;
        pr.rigorous = {e.lo, e.hi};
      } catch (const EvaluationError& e) {
        appendSentence(pr.note, std::string("No rigorous confirmation: ") + e.what());
      }
    }
  } catch (const Cancelled&) {
    pr.cancelled = true;
  } catch (const std::bad_alloc&) {
    pr.error = "out of memory while replaying step " + std::to_string(step);
  } catch (const std::exception& e) {
    pr.error = e.what();
  }
  pr.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return pr;
}

StepResult assembleStep(const StepJobContext& ctx, std::int64_t step, const PartResult& m,
                        const PartResult& s) {
  const AnalysisSettings& settings = ctx.settings;
  StepResult r;
  r.step = step;
  r.method = settings.method;
  r.seconds = m.seconds + s.seconds;
  const auto refLoss = ctx.reference.loggedLoss(r.step);
  const auto candLoss = ctx.candidate.loggedLoss(r.step);
  r.referenceLoss = refLoss.value_or(std::nan(""));
  r.candidateLoss = candLoss.value_or(std::nan(""));
  if (!refLoss) {
    markNotBounded(r, "the reference log has no loss at step " + std::to_string(r.step));
  } else if (!candLoss) {
    markNotBounded(r, "the candidate log has no loss at step " + std::to_string(r.step));
  } else if (!m.error.empty()) {
    markNotBounded(r, m.error);
  } else if (!s.error.empty()) {
    markNotBounded(r, "self-check (candidate program on its own checkpoint): " + s.error);
  } else {
    r.lo = m.env.lo;
    r.hi = m.env.hi;
    r.selfLo = s.env.lo;
    r.selfHi = s.env.hi;
    r.pointLoss = m.env.point;
    std::vector<BudgetTerm> terms;
    for (const NodeBudget& n : m.env.nodes) terms.push_back({n.node, n.op, n.bound});
    r.budget = budgetShares(terms);
    classifyStep(r, ctx.rigorous);
    std::string note = m.note;
    for (const std::string& n : s.env.notes) appendSentence(note, "Self-check: " + n);
    appendSentence(note, r.note);
    if (r.verdict == StepVerdict::BugLikely && m.confirmed) {
      if (!insideEnvelope(r.referenceLoss, m.rigorous.lo, m.rigorous.hi)) {
        r.verdict = StepVerdict::BugCertain;
        appendSentence(note, "Also outside the rigorous interval [" + fmt(m.rigorous.lo) + ", " +
                                 fmt(m.rigorous.hi) + "].");
      } else {
        appendSentence(note, "Inside the rigorous interval [" + fmt(m.rigorous.lo) + ", " +
                                 fmt(m.rigorous.hi) + "], so the bug is likely, not certain.");
      }
    }
    if (!settings.startNode.empty())
      appendSentence(note, "Upstream of node '" + settings.startNode + "' rounding is ignored.");
    r.note = note;
    fillBaselines(r, m);
    r.outputs = m.outputs;
    r.outputSeconds = m.outputSeconds;
    appendSentence(r.note, m.outputNote);
    if (!m.outputError.empty())
      appendSentence(r.note, "Per-output comparison failed: " + m.outputError);
  }
  // Name the checkpoint tensors that make an envelope unbounded, whatever the verdict.
  for (const auto& [part, whose] : {std::pair{&m, "reference"}, std::pair{&s, "candidate"}})
    for (const NonFiniteValues& v : part->nonFinite)
      appendSentence(
          r.note, std::string("The ") + whose + "'s checkpoint at step " + std::to_string(r.step) +
                      " holds values that are not finite: " + describeNonFinite(v) + ".");
  return r;
}

}  // namespace lossbound
