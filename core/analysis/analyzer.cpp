#include "core/analysis/analyzer.h"

#include "core/analysis/result_cache.h"
#include "core/analysis/step_replay.h"
#include "core/analysis/verdict.h"
#include "core/interval/number_text.h"
#include "core/ir/program_parser.h"
#include "core/program/op_coverage.h"
#include "core/tensor/non_finite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <omp.h>
#include <thread>

namespace lossbound {

namespace {

/// Throws AnalysisError when `node` is not in the candidate's program at `step`, suggesting the
/// input of the log-softmax (usually the logits) when there is one.
void checkStartNode(const ReplayRun& candidate, std::int64_t step, const std::string& node) {
  std::shared_ptr<const Program> program;
  try {
    program = candidate.programAt(step);
  } catch (const std::exception&) {
    return;  // the replay reports an unreadable program at that step
  }
  if (findNode(*program, node) >= 0) return;
  std::string hint;
  for (const Node& n : program->nodes)
    if (n.op.rfind("aten._log_softmax", 0) == 0 && !n.args.empty() &&
        n.args[0].kind == IrValue::Kind::Ref)
      hint = " (the log-softmax's input, usually the logits, is '" + n.args[0].ref.name + "')";
  throw AnalysisError("start node '" + node + "': the candidate's program at step " +
                      std::to_string(step) + " has no node of that name" + hint);
}

using Clock = std::chrono::steady_clock;

/// The two replays of a step: the envelope (candidate program on the reference's checkpoint) and
/// the self-check (candidate program on its own checkpoint).
enum class Part { Main, Self };

struct PartResult {
  bool finished = false;
  bool cancelled = false;
  std::string error;  // non-empty: the step cannot be bounded
  Envelope env;
  std::string note;
  std::vector<NonFiniteValues> nonFinite;  // checkpoint tensors holding NaN or ±inf
  double seconds = 0;
  bool confirmed = false;  // Main only: the rigorous interval was computed because it exited
  Interval rigorous{};
};

struct Job {
  std::size_t slot;
  Part part;
};

/// Names the unsupported ops among the nodes the loss depends on, or "".
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

std::uint64_t stepSeed(std::uint64_t seed, std::int64_t step, Part part) {
  return seed ^ (static_cast<std::uint64_t>(step) * 0x9e3779b97f4a7c15ull) ^
         (part == Part::Self ? 0x5e1full : 0);
}

}  // namespace

void checkPairing(const ReplayRun& reference, const ReplayRun& candidate,
                  const std::vector<std::int64_t>& steps) {
  const Program* lastRef = nullptr;
  const Program* lastCand = nullptr;
  for (std::int64_t step : steps) {
    std::shared_ptr<const Program> ref, cand;
    try {
      ref = reference.programAt(step);
      cand = candidate.programAt(step);
    } catch (const std::exception& e) {
      throw AnalysisError(e.what());
    }
    if (ref.get() == lastRef && cand.get() == lastCand) continue;  // same pair already checked
    lastRef = ref.get();
    lastCand = cand.get();
    for (const InputSpec& in : cand->inputs) {
      const auto it = std::find_if(ref->inputs.begin(), ref->inputs.end(),
                                   [&](const InputSpec& r) { return r.name == in.name; });
      if (it == ref->inputs.end())
        throw AnalysisError("mismatched pair at step " + std::to_string(step) +
                            ": the candidate program needs input '" + in.name + "' " +
                            shapeString(in.spec.shape) + ", the reference checkpoint has none");
      if (it->spec.shape != in.spec.shape)
        throw AnalysisError("mismatched pair at step " + std::to_string(step) + ": input '" +
                            in.name + "': the candidate program expects shape " +
                            shapeString(in.spec.shape) + ", the reference checkpoint holds " +
                            shapeString(it->spec.shape));
      if (isFloating(in.spec.dtype) != isFloating(it->spec.dtype))
        throw AnalysisError("mismatched pair at step " + std::to_string(step) + ": input '" +
                            in.name + "': the candidate program expects " +
                            std::string(dtypeName(in.spec.dtype)) +
                            ", the reference checkpoint "
                            "holds " +
                            std::string(dtypeName(it->spec.dtype)));
    }
  }
}

std::vector<std::int64_t> commonSteps(const ReplayRun& reference, const ReplayRun& candidate) {
  std::vector<std::int64_t> a = reference.checkpointSteps(), b = candidate.checkpointSteps(), out;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

Analyzer::Analyzer(AnalyzerOptions options) : mOptions(std::move(options)) {}

AnalysisReport Analyzer::analyse(const ReplayRun& reference, const ReplayRun& candidate,
                                 const StepSelection& selection, const AnalysisSettings& settings,
                                 const AnalysisProgress& progress,
                                 const std::atomic<bool>* cancel) const {
  // ---- settings and steps
  double lambda = 0;
  if (settings.method == EnvelopeMethod::Probabilistic) {
    try {
      lambda = hoeffdingLambda(settings.confidence);
    } catch (const std::invalid_argument& e) {
      throw AnalysisError(e.what());
    }
  }
  if (settings.method == EnvelopeMethod::Ensemble && settings.ensembleSize < 1)
    throw AnalysisError("ensemble size: expected at least 1, found " +
                        std::to_string(settings.ensembleSize));
  if (!settings.startNode.empty() && settings.method != EnvelopeMethod::Interval)
    throw AnalysisError("start node: only the interval method starts at a node, found method " +
                        std::string(methodName(settings.method)));
  const std::vector<std::int64_t> common = commonSteps(reference, candidate);
  if (common.empty())
    throw AnalysisError("the runs '" + reference.name() + "' and '" + candidate.name() +
                        "' share no checkpointed step: expected checkpoints at the same steps");
  std::vector<std::int64_t> steps;
  try {
    steps = selection.resolve(common);
  } catch (const std::invalid_argument& e) {
    throw AnalysisError(e.what());
  }

  checkPairing(reference, candidate, steps);
  if (!settings.startNode.empty()) checkStartNode(candidate, steps.front(), settings.startNode);

  AnalysisReport report;
  report.referenceName = reference.name();
  report.candidateName = candidate.name();
  report.settings = settings;
  const bool rigorous = isRigorous(settings.method, settings.startNode);
  if (!settings.startNode.empty())
    report.note = "Intervals start at node '" + settings.startNode +
                  "': values before it are treated as exact, so rounding upstream of it is "
                  "ignored (the envelope is not rigorous).";

  PrecisionModel precision = candidate.recordedPrecision();
  precision.override = settings.precision;

  // ---- the results cache
  std::unique_ptr<ResultCache> cache;
  std::string cacheKey;
  std::map<std::int64_t, StepResult> results;
  if (mOptions.useCache && !reference.filePath().empty() && !candidate.filePath().empty()) {
    try {
      cacheKey = analysisKey(settings, runIdentity(reference.filePath(), reference.logDigest()),
                             runIdentity(candidate.filePath(), candidate.logDigest()));
      cache = std::make_unique<ResultCache>(mOptions.cachePath.empty()
                                                ? ResultCache::defaultPath(candidate.filePath())
                                                : mOptions.cachePath);
      report.cacheFile = cache->path();
      for (StepResult& r : cache->load(cacheKey))
        if (std::binary_search(steps.begin(), steps.end(), r.step)) results[r.step] = std::move(r);
    } catch (const std::exception& e) {
      cache.reset();
      report.note +=
          (report.note.empty() ? "" : " ") + std::string("Results cache off: ") + e.what();
    }
  }
  const int total = static_cast<int>(steps.size());
  int done = 0;
  for (const auto& [step, r] : results)
    if (progress) progress(++done, total, r);

  std::vector<std::int64_t> todo;
  for (std::int64_t s : steps)
    if (!results.count(s)) todo.push_back(s);

  // ---- workers
  std::vector<std::array<PartResult, 2>> parts(todo.size());
  std::deque<Job> queue;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    queue.push_back({i, Part::Main});
    queue.push_back({i, Part::Self});
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::size_t> finishedSlots;
  const std::atomic<bool> neverCancel{false};
  const std::atomic<bool>& cancelled = cancel ? *cancel : neverCancel;

  auto runPart = [&](const Job& job, Backend& backend) {
    PartResult pr;
    const std::int64_t step = todo[job.slot];
    const auto t0 = Clock::now();
    try {
      const auto program = candidate.programAt(step);
      if (const std::string u = unsupportedLossOps(*program); !u.empty()) throw EvaluationError(u);
      if (!settings.startNode.empty() && findNode(*program, settings.startNode) < 0)
        throw EvaluationError("start node '" + settings.startNode +
                              "' is not a node of the candidate program at step " +
                              std::to_string(step));
      const ReplayRun& source = job.part == Part::Main ? reference : candidate;
      const TensorMap stored = source.inputsAt(step);
      pr.nonFinite = findNonFinite(stored);
      const TensorMap inputs = adaptInputs(*program, stored, &pr.note);
      ReplayOptions ro;
      ro.method = settings.method;
      ro.precision = precision;
      ro.lambda = lambda;
      ro.ensembleSize = settings.ensembleSize;
      ro.seed = stepSeed(settings.seed, step, job.part);
      ro.startNode = settings.startNode;
      ro.cancel = &cancelled;
      pr.env = replayEnvelope(*program, inputs, backend, ro);
      // A non-rigorous exit: is it also outside the rigorous interval from the inputs?
      const auto refLoss = reference.loggedLoss(step);
      if (job.part == Part::Main && !rigorous && refLoss &&
          !insideEnvelope(*refLoss, pr.env.lo, pr.env.hi)) {
        ReplayOptions ri = ro;
        ri.method = EnvelopeMethod::Interval;
        ri.startNode.clear();
        const Envelope e = replayEnvelope(*program, inputs, backend, ri);
        pr.confirmed = true;
        pr.rigorous = {e.lo, e.hi};
      }
    } catch (const Cancelled&) {
      pr.cancelled = true;
    } catch (const std::bad_alloc&) {
      pr.error = "out of memory while replaying step " + std::to_string(step);
    } catch (const std::exception& e) {
      pr.error = e.what();
    }
    pr.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    pr.finished = true;
    std::lock_guard lock(mutex);
    parts[job.slot][job.part == Part::Main ? 0 : 1] = std::move(pr);
    if (parts[job.slot][0].finished && parts[job.slot][1].finished)
      finishedSlots.push_back(job.slot);
    changed.notify_all();
  };

  const int hw = std::max(1u, std::thread::hardware_concurrency());
  int workers = mOptions.workers > 0 ? mOptions.workers : (mOptions.backendFactory ? 1 : hw);
  workers = std::max(1, std::min<int>(workers, static_cast<int>(queue.size())));
  std::string backendName;
  int running = 0;
  std::vector<std::thread> threads;
  auto worker = [&] {
    // One single-threaded backend per worker when steps run in parallel: no oversubscription.
    if (workers > 1 && !mOptions.backendFactory) omp_set_num_threads(1);
    std::unique_ptr<Backend> backend;
    std::string backendError = "no compute backend could be created";
    try {
      backend = mOptions.backendFactory ? mOptions.backendFactory() : createCpuBackend();
    } catch (const std::exception& e) {
      backendError = std::string("no compute backend could be created: ") + e.what();
    }
    {
      std::lock_guard lock(mutex);
      if (backend && backendName.empty()) backendName = backend->name();
    }
    for (;;) {
      Job job;
      {
        std::lock_guard lock(mutex);
        if (queue.empty() || cancelled.load()) break;
        job = queue.front();
        queue.pop_front();
      }
      if (!backend) {
        PartResult pr;
        pr.finished = true;
        pr.error = backendError;
        std::lock_guard lock(mutex);
        parts[job.slot][job.part == Part::Main ? 0 : 1] = std::move(pr);
        if (parts[job.slot][0].finished && parts[job.slot][1].finished)
          finishedSlots.push_back(job.slot);
        changed.notify_all();
        continue;
      }
      runPart(job, *backend);
    }
    std::lock_guard lock(mutex);
    --running;
    changed.notify_all();
  };
  if (!queue.empty()) {
    running = workers;
    for (int i = 0; i < workers; ++i) threads.emplace_back(worker);
  }

  std::vector<StepResult> computed;
  auto assemble = [&](std::size_t slot) {
    const PartResult& m = parts[slot][0];
    const PartResult& s = parts[slot][1];
    StepResult r;
    r.step = todo[slot];
    r.method = settings.method;
    r.seconds = m.seconds + s.seconds;
    const auto refLoss = reference.loggedLoss(r.step);
    const auto candLoss = candidate.loggedLoss(r.step);
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
      classifyStep(r, rigorous);
      std::string note = m.note;
      if (!r.note.empty()) note += (note.empty() ? "" : " ") + r.note;
      if (r.verdict == StepVerdict::BugLikely && m.confirmed) {
        if (!insideEnvelope(r.referenceLoss, m.rigorous.lo, m.rigorous.hi)) {
          r.verdict = StepVerdict::BugCertain;
          note += (note.empty() ? "" : " ") + std::string("Also outside the rigorous interval [") +
                  numberText(m.rigorous.lo, 9) + ", " + numberText(m.rigorous.hi, 9) + "].";
        } else {
          note += (note.empty() ? "" : " ") + std::string("Inside the rigorous interval [") +
                  numberText(m.rigorous.lo, 9) + ", " + numberText(m.rigorous.hi, 9) +
                  "], so the bug is likely, not certain.";
        }
      }
      if (!settings.startNode.empty())
        note += (note.empty() ? "" : " ") + std::string("Upstream of node '") + settings.startNode +
                "' rounding is ignored.";
      r.note = note;
    }
    // Name the checkpoint tensors that make an envelope unbounded, whatever the verdict.
    for (const auto& [part, whose] : {std::pair{&m, "reference"}, std::pair{&s, "candidate"}})
      for (const NonFiniteValues& v : part->nonFinite)
        r.note += (r.note.empty() ? "" : " ") + std::string("The ") + whose +
                  "'s checkpoint at step " + std::to_string(r.step) +
                  " holds values that are not finite: " + describeNonFinite(v) + ".";
    computed.push_back(r);
    results[r.step] = r;
    if (progress) progress(++done, total, r);
  };

  {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return !finishedSlots.empty() || running == 0; });
      while (!finishedSlots.empty()) {
        const std::size_t slot = finishedSlots.front();
        finishedSlots.pop_front();
        if (parts[slot][0].cancelled || parts[slot][1].cancelled) continue;
        lock.unlock();
        assemble(slot);
        lock.lock();
      }
      if (running == 0) break;
    }
  }
  for (std::thread& t : threads) t.join();

  report.cancelled = cancelled.load() && results.size() < steps.size();
  for (auto& [step, r] : results) report.steps.push_back(r);
  report.firstExit = firstExit(report.steps);
  report.backendDescription = backendName;
  if (!backendName.empty() && workers > 1)
    report.backendDescription += ", " + std::to_string(workers) + " workers (steps in parallel)";
  if (!mOptions.backendDescription.empty())
    report.backendDescription +=
        (report.backendDescription.empty() ? "" : "; ") + mOptions.backendDescription;

  if (cache) {
    std::vector<StepResult> toStore;
    for (const StepResult& r : computed)
      if (r.verdict != StepVerdict::NotBounded) toStore.push_back(r);
    if (!toStore.empty()) {
      try {
        cache->store(cacheKey, toStore);
      } catch (const std::exception& e) {
        report.note +=
            (report.note.empty() ? "" : " ") + std::string("Results not cached: ") + e.what();
      }
    }
  }
  return report;
}

}  // namespace lossbound
