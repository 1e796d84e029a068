#include "app/distributed_analysis.h"

#include "app/mpi_world.h"
#include "core/analysis/first_exit_watch.h"
#include "core/analysis/report_json.h"
#include "core/analysis/report_merge.h"
#include "core/analysis/run_file_replay.h"
#include "core/analysis/shard.h"
#include "core/analysis/verdict.h"
#include "core/parallel/thread_pool.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <sched.h>
#include <set>
#include <stdexcept>
#include <thread>

namespace lossbound::app {

namespace {

// Message tags (see the file comment of the header).
constexpr int kStep = 1;    // rank -> 0: one finished step (compact JSON of the StepResult)
constexpr int kDone = 2;    // rank -> 0: "ok <host>\n<report JSON>" or "failed <host>\n<reason>"
constexpr int kStop = 3;    // 0 -> rank: stop after the ops in flight (--stop-at-first-exit)
constexpr int kFinish = 4;  // 0 -> rank: the exit code; the last message of the job

// How often the main thread looks for messages while the pool analyses.
constexpr auto kPollInterval = std::chrono::milliseconds(2);

QString qs(const std::string& s) { return QString::fromStdString(s); }

std::string compactJson(const QJsonObject& o) {
  return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

QJsonObject parseObject(const std::string& text, const std::string& what) {
  QJsonParseError e{};
  const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(text), &e);
  if (e.error != QJsonParseError::NoError || !doc.isObject())
    throw std::runtime_error(what + ": expected a JSON object, found a parse error (" +
                             e.errorString().toStdString() + ")");
  return doc.object();
}

/// LOSSBOUND_TEST_FAIL_RANK=r[:n]: rank r fails after n (default 0) finished steps. A testing
/// aid: it shows that a failing rank's steps are kept or reported, never lost.
std::optional<int> simulatedFailureAfter(int rank) {
  const char* env = std::getenv("LOSSBOUND_TEST_FAIL_RANK");
  if (!env || !*env) return std::nullopt;
  const std::string v(env);
  const std::size_t colon = v.find(':');
  if (std::atoi(v.substr(0, colon).c_str()) != rank) return std::nullopt;
  return colon == std::string::npos ? 0 : std::max(0, std::atoi(v.c_str() + colon + 1));
}

/// This rank's share of the job, running on the thread pool while the main thread talks to the
/// other ranks: finished steps queue up for the main thread; stop() cancels cooperatively.
class RankAnalysis {
 public:
  RankAnalysis(const DistributedJob& job, int rank, int ranks)
      : mShard{rank + 1, ranks, ShardLayout::Interleaved, job.steps} {
    const std::vector<std::int64_t> mine = shardSteps(mShard);
    const std::optional<int> failAfter = simulatedFailureAfter(rank);
    mFuture = ThreadPool::global().submit([this, &job, mine, failAfter] {
      if (failAfter && *failAfter == 0)
        throw std::runtime_error("simulated failure (LOSSBOUND_TEST_FAIL_RANK)");
      AnalysisReport report = emptyReport(job.reference, job.candidate, job.settings);
      if (!mine.empty()) {
        int finished = 0;
        report = Analyzer(job.options)
                     .analyse(
                         job.reference, job.candidate, StepSelection::list(mine), job.settings,
                         [&](int, int, const StepResult& r) {
                           {
                             std::lock_guard lock(mMutex);
                             mFinished.push_back(r);
                           }
                           if (failAfter && ++finished >= *failAfter)
                             throw std::runtime_error("simulated failure after " +
                                                      std::to_string(finished) +
                                                      " step(s) (LOSSBOUND_TEST_FAIL_RANK)");
                         },
                         &mCancel);
      }
      report.shard = mShard;
      return report;
    });
  }
  ~RankAnalysis() {
    mCancel = true;
    if (mFuture.valid()) mFuture.wait();
  }

  /// Returns the steps finished since the last call.
  std::vector<StepResult> takeFinished() {
    std::lock_guard lock(mMutex);
    return std::exchange(mFinished, {});
  }
  /// Asks the analysis to stop after the ops in flight.
  void stop() { mCancel = true; }
  /// Returns true once the analysis has returned or failed.
  bool done() const {
    return mFuture.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  /// Returns the part (after done()); throws what the analysis threw.
  AnalysisReport result() { return mFuture.get(); }
  /// Returns the shard this rank analyses.
  const ShardInfo& shard() const { return mShard; }

 private:
  ShardInfo mShard;
  std::atomic<bool> mCancel{false};
  std::mutex mMutex;
  std::vector<StepResult> mFinished;
  std::future<AnalysisReport> mFuture;
};

/// The outcome of one rank as rank 0 sees it.
struct RankOutcome {
  std::map<std::int64_t, StepResult> streamed;  ///< finished steps received so far
  bool done = false;
  std::string host;
  std::optional<AnalysisReport> part;  ///< the rank's part, when it finished
  std::string failure;                 ///< why it failed, when it did
};

/// Returns the part of a failed rank: the steps it streamed, and its other steps not bounded.
AnalysisReport failedPart(const DistributedJob& job, const ShardInfo& shard,
                          const RankOutcome& outcome, int rank) {
  AnalysisReport part = emptyReport(job.reference, job.candidate, job.settings);
  part.shard = shard;
  const std::string reason = "Rank " + std::to_string(rank) + " (" + outcome.host +
                             ") failed before finishing this step: " + outcome.failure;
  for (std::int64_t step : shardSteps(shard)) {
    if (auto it = outcome.streamed.find(step); it != outcome.streamed.end()) {
      part.steps.push_back(it->second);
      continue;
    }
    StepResult r;
    r.step = step;
    r.method = job.settings.method;
    r.referenceLoss = job.reference.loggedLoss(step).value_or(std::nan(""));
    r.candidateLoss = job.candidate.loggedLoss(step).value_or(std::nan(""));
    r.pointLoss = std::nan("");
    markNotBounded(r, reason);
    part.steps.push_back(r);
  }
  return part;
}

/// Splits "<word> <host>\n<payload>".
void splitDone(const std::string& data, std::string& status, std::string& host,
               std::string& payload) {
  const std::size_t nl = data.find('\n');
  const std::string head = data.substr(0, nl);
  payload = nl == std::string::npos ? std::string() : data.substr(nl + 1);
  const std::size_t space = head.find(' ');
  status = head.substr(0, space);
  host = space == std::string::npos ? std::string() : head.substr(space + 1);
}

/// Rank r > 0: analyse, stream, send the part; stop when rank 0 says so.
void runWorkerRank(MpiWorld& world, const DistributedJob& job) {
  RankAnalysis mine(job, world.rank(), world.size());
  for (;;) {
    for (const StepResult& r : mine.takeFinished())
      world.send(0, kStep, compactJson(stepToJson(r)));
    if (mine.done()) break;
    while (auto m = world.poll())
      if (m->tag == kStop) mine.stop();
    std::this_thread::sleep_for(kPollInterval);
  }
  for (const StepResult& r : mine.takeFinished()) world.send(0, kStep, compactJson(stepToJson(r)));
  std::string message;
  try {
    message = "ok " + world.hostName() + "\n" + compactJson(reportToJson(mine.result()));
  } catch (const std::exception& e) {
    message = "failed " + world.hostName() + "\n" + e.what();
  }
  world.send(0, kDone, message);
}

/// Rank 0: analyse its own share, follow everyone's steps, stop early when asked, collect the
/// parts. Returns one outcome per rank.
std::vector<RankOutcome> runRootRank(MpiWorld& world, const DistributedJob& job, QTextStream& err,
                                     std::optional<std::int64_t>* stoppedAt) {
  const int ranks = world.size();
  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(ranks));
  FirstExitWatch watch(job.steps);
  bool stopSent = false;
  RankAnalysis mine(job, 0, ranks);
  auto record = [&](int rank, const StepResult& r) {
    outcomes[static_cast<std::size_t>(rank)].streamed[r.step] = r;
    watch.record(r.step, isExit(r.verdict));
  };
  auto allDone = [&] {
    return std::all_of(outcomes.begin(), outcomes.end(),
                       [](const RankOutcome& o) { return o.done; });
  };
  while (!allDone()) {
    for (const StepResult& r : mine.takeFinished()) record(0, r);
    if (!outcomes[0].done && mine.done()) {
      for (const StepResult& r : mine.takeFinished()) record(0, r);
      RankOutcome& o = outcomes[0];
      o.done = true;
      o.host = world.hostName();
      try {
        o.part = mine.result();
      } catch (const std::exception& e) {
        o.failure = e.what();
      }
    }
    while (auto m = world.poll()) {
      if (m->source <= 0 || m->source >= ranks) continue;
      RankOutcome& o = outcomes[static_cast<std::size_t>(m->source)];
      try {
        if (m->tag == kStep) {
          record(m->source, stepFromJson(parseObject(m->data, "a finished step")));
        } else if (m->tag == kDone) {
          std::string status, payload;
          splitDone(m->data, status, o.host, payload);
          o.done = true;
          if (status == "ok")
            o.part = reportFromJson(parseObject(payload, "its part"));
          else
            o.failure = payload.empty() ? std::string("no reason given") : payload;
        }
      } catch (const std::exception& e) {
        o.done = o.done || m->tag == kDone;
        o.failure = std::string("its message could not be read: ") + e.what();
        o.part.reset();
      }
    }
    if (job.stopAtFirstExit && !stopSent && watch.settled()) {
      stopSent = true;
      *stoppedAt = watch.earliestExit();
      for (int r = 1; r < ranks; ++r) world.send(r, kStop, {});
      mine.stop();
    }
    if (!allDone()) std::this_thread::sleep_for(kPollInterval);
  }
  for (int r = 0; r < ranks; ++r) {
    const RankOutcome& o = outcomes[static_cast<std::size_t>(r)];
    if (!o.failure.empty())
      err << "lossbound-cli analyze: rank " << r << " (" << qs(o.host)
          << ") failed: " << qs(o.failure) << "\n";
  }
  err.flush();
  return outcomes;
}

std::size_t cpusAllowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return static_cast<std::size_t>(CPU_COUNT(&set));
}

}  // namespace

std::optional<AnalysisReport> runDistributed(MpiWorld& world, const DistributedJob& job,
                                             QTextStream& err) {
  if (world.rank() != 0) {
    runWorkerRank(world, job);
    return std::nullopt;
  }
  std::optional<std::int64_t> stoppedAt;
  const std::vector<RankOutcome> outcomes = runRootRank(world, job, err, &stoppedAt);

  std::vector<ReportPart> parts;
  std::set<std::string> hosts;
  for (int r = 0; r < world.size(); ++r) {
    const RankOutcome& o = outcomes[static_cast<std::size_t>(r)];
    hosts.insert(o.host);
    const ShardInfo shard{r + 1, world.size(), ShardLayout::Interleaved, job.steps};
    parts.push_back({"rank " + std::to_string(r) + " (" + o.host + ")",
                     o.part ? *o.part : failedPart(job, shard, o, r)});
  }
  AnalysisReport merged;
  try {
    merged = mergeReports(parts);
  } catch (const MergeError& e) {
    // Every part comes from this job, so this is a bug, not bad input: keep what is known.
    throw std::runtime_error(std::string("merging the ranks' parts failed: ") + e.what());
  }
  const int threads = ThreadPool::global().size();
  merged.backendDescription +=
      (merged.backendDescription.empty() ? "" : "; ") + std::string("MPI: ") +
      std::to_string(world.size()) + (world.size() == 1 ? " rank" : " ranks") + " on " +
      std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts") + ", " +
      std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " on rank 0";
  if (stoppedAt) {
    merged.cancelled = false;
    merged.note += (merged.note.empty() ? "" : " ") +
                   std::string("Stopped at the first exit (step ") + std::to_string(*stoppedAt) +
                   ") once every earlier step was done (--stop-at-first-exit): " +
                   std::to_string(merged.steps.size()) + " of " + std::to_string(job.steps.size()) +
                   " selected steps analysed.";
  }
  // One writer for the cache: the ranks only read it.
  if (job.options.useCache) {
    const std::string problem = storeInCache(job.options, job.reference, job.candidate, merged);
    if (!problem.empty())
      merged.note +=
          (merged.note.empty() ? "" : " ") + std::string("Results not cached: ") + problem;
  }
  return merged;
}

int finishDistributed(MpiWorld& world, int code) {
  if (world.rank() == 0) {
    for (int r = 1; r < world.size(); ++r) world.send(r, kFinish, std::to_string(code));
    return code;
  }
  for (;;) {
    const MpiMessage m = world.receive(0);
    if (m.tag == kFinish) return std::atoi(m.data.c_str());
  }
}

void setThreadsPerRank(const MpiWorld& world) {
  if (const char* env = std::getenv("LOSSBOUND_THREADS"); env && *env) return;
  const std::size_t machine = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t allowed = cpusAllowed();
  std::size_t threads = machine / static_cast<std::size_t>(std::max(1, world.localSize()));
  if (allowed > 0) threads = std::min(threads, allowed);
  threads = std::max<std::size_t>(1, threads);
  ::setenv("LOSSBOUND_THREADS", std::to_string(threads).c_str(), 1);
}

std::string jobFingerprint(const RunFileReplay& reference, const RunFileReplay& candidate,
                           const std::vector<std::int64_t>& steps) {
  std::string s = reference.logDigest() + "\n" + candidate.logDigest() + "\n";
  for (std::int64_t step : steps) s += std::to_string(step) + ",";
  return s;
}

}  // namespace lossbound::app
