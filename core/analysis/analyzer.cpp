#include "core/analysis/analyzer.h"

#include "core/analysis/result_cache.h"
#include "core/analysis/step_job.h"
#include "core/analysis/verdict.h"
#include "core/interval/number_text.h"
#include "core/ir/program_parser.h"
#include "core/parallel/thread_pool.h"
#include "core/program/resident_evaluators.h"
#include "core/runfile/run_pair.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

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

/// What analyse() decided before any replay: the steps, the shared replay context.
struct Plan {
  std::vector<std::int64_t> steps;  ///< selected, increasing
  double lambda = 0;
  bool rigorous = false;
};

/// Validates the settings and the pair and resolves the step selection; throws AnalysisError.
Plan makePlan(const ReplayRun& reference, const ReplayRun& candidate,
              const StepSelection& selection, const AnalysisSettings& settings) {
  Plan plan;
  if (settings.method == EnvelopeMethod::Probabilistic) {
    try {
      plan.lambda = hoeffdingLambda(settings.confidence);
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
  try {
    plan.steps = selection.resolve(common);
  } catch (const std::invalid_argument& e) {
    throw AnalysisError(e.what());
  }
  checkPairing(reference, candidate, plan.steps);
  if (!settings.startNode.empty())
    checkStartNode(candidate, plan.steps.front(), settings.startNode);
  plan.rigorous = isRigorous(settings.method, settings.startNode);
  return plan;
}

/// Returns `path` made absolute (so a report can be reopened from elsewhere); "" stays "".
std::string absolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

void appendNote(std::string& note, const std::string& sentence) {
  note += (note.empty() ? "" : " ") + sentence;
}

/// The results cache of one analysis: off (null) when the runs are not files, caching is off or
/// the cache cannot be opened (the report's note then says why).
struct CacheUse {
  std::unique_ptr<ResultCache> cache;
  std::string key;
};

CacheUse openCache(const AnalyzerOptions& options, const ReplayRun& reference,
                   const ReplayRun& candidate, const AnalysisSettings& settings,
                   AnalysisReport& report) {
  CacheUse use;
  if (!options.useCache || reference.filePath().empty() || candidate.filePath().empty()) return use;
  try {
    use.key = analysisKey(settings, runIdentity(reference.filePath(), reference.logDigest()),
                          runIdentity(candidate.filePath(), candidate.logDigest()));
    use.cache = std::make_unique<ResultCache>(options.cachePath.empty()
                                                  ? ResultCache::defaultPath(candidate.filePath())
                                                  : options.cachePath);
    report.cacheFile = use.cache->path();
  } catch (const std::exception& e) {
    use.cache.reset();
    appendNote(report.note, std::string("Results cache off: ") + e.what());
  }
  return use;
}

/// Stores the bounded steps of `computed` under `key`; returns "" or why they were not stored.
std::string storeSteps(ResultCache& cache, const std::string& key,
                       const std::vector<StepResult>& computed) {
  std::vector<StepResult> toStore;
  for (const StepResult& r : computed)
    if (r.verdict != StepVerdict::NotBounded) toStore.push_back(r);
  if (toStore.empty()) return {};
  try {
    cache.store(key, toStore);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

/// Runs both parts of every step of `todo` on `workers` step workers of the thread pool, each
/// with its own backend; `finished(slot, main, self)` is called once per step whose parts both
/// finished uncancelled, serialized, in completion order. Returns the backend's name.
std::string runSteps(
    const StepJobContext& ctx, const std::vector<std::int64_t>& todo,
    const AnalyzerOptions& options, int workers,
    const std::function<void(std::size_t, const PartResult&, const PartResult&)>& finished) {
  struct Slot {
    PartResult parts[2];
    int done = 0;
  };
  std::vector<Slot> slots(todo.size());
  std::mutex mutex;
  std::size_t nextJob = 0;  // job j: step todo[j / 2], part j % 2; guarded by mutex
  std::string backendName;
  const int innerThreads = std::max(1, ThreadPool::global().size() / workers);

  auto workerLoop = [&] {
    std::unique_ptr<Backend> backend;
    std::string backendError = "no compute backend could be created";
    try {
      backend = options.backendFactory ? options.backendFactory(innerThreads)
                                       : createCpuBackend(innerThreads);
    } catch (const std::exception& e) {
      backendError = std::string("no compute backend could be created: ") + e.what();
    }
    // The interval replays keep their per-node plans across this worker's steps (declared after
    // the backend: the evaluators free their device constants before the device goes).
    std::unique_ptr<ResidentEvaluators> resident;
    if (Device* device = backend ? backend->residentDevice() : nullptr)
      resident = std::make_unique<ResidentEvaluators>(*device, innerThreads);
    {
      std::lock_guard lock(mutex);
      if (backend && backendName.empty()) backendName = backend->name();
    }
    for (;;) {
      std::size_t job;
      {
        std::lock_guard lock(mutex);
        if (nextJob >= 2 * todo.size() || (ctx.cancel && ctx.cancel->load())) return;
        job = nextJob++;
      }
      const std::size_t slot = job / 2;
      const StepPart part = job % 2 == 0 ? StepPart::Main : StepPart::Self;
      PartResult pr;
      if (backend)
        pr = runStepPart(ctx, todo[slot], part, *backend, resident.get());
      else
        pr.error = backendError;
      std::lock_guard lock(mutex);
      Slot& s = slots[slot];
      s.parts[job % 2] = std::move(pr);
      if (++s.done == 2 && !s.parts[0].cancelled && !s.parts[1].cancelled)
        finished(slot, s.parts[0], s.parts[1]);
    }
  };
  ThreadPool::global().parallelFor(
      workers,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t w = begin; w < end; ++w) workerLoop();
      },
      1, workers);
  return backendName;
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
    const InputFit fit = inputFit(*ref, *cand);
    if (!fit.errors.empty())
      throw AnalysisError("mismatched pair at step " + std::to_string(step) + ": " +
                          fit.errors.front());
  }
}

std::vector<std::int64_t> commonSteps(const ReplayRun& reference, const ReplayRun& candidate) {
  std::vector<std::int64_t> a = reference.checkpointSteps(), b = candidate.checkpointSteps(), out;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<std::int64_t> plannedSteps(const ReplayRun& reference, const ReplayRun& candidate,
                                       const StepSelection& selection,
                                       const AnalysisSettings& settings) {
  return makePlan(reference, candidate, selection, settings).steps;
}

AnalysisReport emptyReport(const ReplayRun& reference, const ReplayRun& candidate,
                           const AnalysisSettings& settings) {
  AnalysisReport report;
  report.referenceName = reference.name();
  report.candidateName = candidate.name();
  report.settings = settings;
  report.engineRevision = engineRevision();
  report.referenceSource = {absolutePath(reference.filePath()), reference.logDigest()};
  report.candidateSource = {absolutePath(candidate.filePath()), candidate.logDigest()};
  if (!settings.startNode.empty())
    report.note = "Intervals start at node '" + settings.startNode +
                  "': values before it are treated as exact, so rounding upstream of it is "
                  "ignored (the envelope is not rigorous).";
  return report;
}

Analyzer::Analyzer(AnalyzerOptions options) : mOptions(std::move(options)) {}

AnalysisReport Analyzer::analyse(const ReplayRun& reference, const ReplayRun& candidate,
                                 const StepSelection& selection, const AnalysisSettings& settings,
                                 const AnalysisProgress& progress,
                                 const std::atomic<bool>* cancel) const {
  const Plan plan = makePlan(reference, candidate, selection, settings);

  AnalysisReport report = emptyReport(reference, candidate, settings);

  // Steps from the cache first, then the rest computed.
  CacheUse cache = openCache(mOptions, reference, candidate, settings, report);
  std::map<std::int64_t, StepResult> results;
  if (cache.cache) {
    try {
      for (StepResult& r : cache.cache->load(cache.key))
        if (std::binary_search(plan.steps.begin(), plan.steps.end(), r.step))
          results[r.step] = std::move(r);
    } catch (const std::exception& e) {
      cache.cache.reset();
      appendNote(report.note, std::string("Results cache off: ") + e.what());
    }
  }
  const int total = static_cast<int>(plan.steps.size());
  int done = 0;
  for (const auto& [step, r] : results)
    if (progress) progress(++done, total, r);
  std::vector<std::int64_t> todo;
  for (std::int64_t s : plan.steps)
    if (!results.count(s)) todo.push_back(s);

  PrecisionModel precision = candidate.recordedPrecision();
  precision.override = settings.precision;
  const std::atomic<bool> neverCancel{false};
  const StepJobContext ctx{reference,
                           candidate,
                           settings,
                           precision,
                           plan.lambda,
                           plan.rigorous,
                           cancel ? cancel : &neverCancel};
  // Steps in parallel on the CPU (one single-threaded backend per worker when there are enough
  // steps), one worker on a device backend unless told otherwise.
  const int poolSize = ThreadPool::global().size();
  int workers = mOptions.workers > 0 ? mOptions.workers : (mOptions.backendFactory ? 1 : poolSize);
  workers = std::clamp(workers, 1, std::max(1, static_cast<int>(2 * todo.size())));
  workers = std::min(workers, poolSize);

  std::vector<StepResult> computed;
  std::string backendName;
  if (!todo.empty())
    backendName = runSteps(ctx, todo, mOptions, workers,
                           [&](std::size_t slot, const PartResult& m, const PartResult& s) {
                             StepResult r = assembleStep(ctx, todo[slot], m, s);
                             computed.push_back(r);
                             results[r.step] = r;
                             if (progress) progress(++done, total, r);
                           });

  report.cancelled = ctx.cancel->load() && results.size() < plan.steps.size();
  for (auto& [step, r] : results) report.steps.push_back(r);
  report.firstExit = firstExit(report.steps);
  report.backendDescription = backendName;
  if (!backendName.empty() && workers > 1)
    report.backendDescription += ", " + std::to_string(workers) + " workers (steps in parallel)";
  if (!mOptions.backendDescription.empty())
    report.backendDescription +=
        (report.backendDescription.empty() ? "" : "; ") + mOptions.backendDescription;

  if (cache.cache && mOptions.writeCache) {
    const std::string problem = storeSteps(*cache.cache, cache.key, computed);
    if (!problem.empty()) appendNote(report.note, "Results not cached: " + problem);
  }
  return report;
}

std::string storeInCache(const AnalyzerOptions& options, const ReplayRun& reference,
                         const ReplayRun& candidate, const AnalysisReport& report) {
  AnalysisReport scratch;
  CacheUse cache = openCache(options, reference, candidate, report.settings, scratch);
  if (!cache.cache)
    return scratch.note.empty() ? std::string("caching is off or the runs are not files")
                                : scratch.note;
  std::vector<StepResult> computed;
  for (const StepResult& r : report.steps)
    if (!r.fromCache) computed.push_back(r);
  return storeSteps(*cache.cache, cache.key, computed);
}

}  // namespace lossbound
