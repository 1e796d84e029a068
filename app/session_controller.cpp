#include "app/session_controller.h"

#include "app/backend_status.h"
#include "app/file_validator.h"
#include "core/analysis/analyzer.h"
#include "core/analysis/qt_text.h"
#include "core/analysis/result_cache.h"
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_job.h"
#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"
#include "core/parallel/thread_pool.h"
#include "core/runfile/run_pair.h"
#include "gpu/cuda_device.h"
#include "widgets/recompute_dialog.h"

#include <QFileInfo>
#include <QPointer>

#include <cmath>
#include <exception>

namespace lossbound::app {

namespace {

widgets::LossSeries seriesOf(const RunFileReplay& run) {
  widgets::LossSeries s;
  s.name = qs(run.name());
  s.steps = run.file().log().steps;
  s.loss = run.file().log().loss;
  return s;
}

}  // namespace

SessionController::SessionController(QObject* parent) : QObject(parent) {}

SessionController::~SessionController() {
  cancel();
  waitForJob();
}

bool SessionController::openPair(const QString& reference, const QString& candidate,
                                 bool orderByRole) {
  cancel();
  waitForJob();
  std::shared_ptr<RunFileReplay> ref, cand;
  try {
    if (reference.isEmpty() || candidate.isEmpty())
      throw std::runtime_error("expected two run files (reference and candidate)");
    const std::string refFile = QFileInfo(reference).absoluteFilePath().toStdString();
    const std::string candFile = QFileInfo(candidate).absoluteFilePath().toStdString();
    // Validate in a child process first: a corrupt file that crashes or hangs libhdf5 becomes
    // an error, and the GUI stays responsive meanwhile.
    if (const QString problem = validateRunFiles({qs(refFile), qs(candFile)}); !problem.isEmpty())
      throw std::runtime_error(problem.toStdString());
    ref = RunFileReplay::open(refFile);
    cand = RunFileReplay::open(candFile);
  } catch (const std::exception& e) {
    emit openFailed(qs(e.what()));
    return false;
  }
  QString refPath = reference, candPath = candidate;
  if (orderByRole && ref->file().attributes().role == "candidate" &&
      cand->file().attributes().role != "candidate") {
    std::swap(ref, cand);
    std::swap(refPath, candPath);
  }
  mReference = ref;
  mCandidate = cand;
  mReferencePath = QFileInfo(refPath).absoluteFilePath();
  mCandidatePath = QFileInfo(candPath).absoluteFilePath();
  ++mJobId;  // drops progress of any earlier job still queued

  mSession = {};
  mSession.reference = seriesOf(*mReference);
  mSession.candidate = seriesOf(*mCandidate);
  mPairingProblem.clear();
  mPairingWarnings.clear();
  for (const auto& run : {mReference, mCandidate})
    for (const std::string& w : run->file().warnings())
      mPairingWarnings << QStringLiteral("%1: %2").arg(qs(run->name()), qs(w));
  try {
    // Batch data compared at every common step: differing batches void the comparison there.
    const RunPairCheck check = checkRunPair(mReference->file(), mCandidate->file(), true);
    mSession.checkpointSteps = check.commonSteps;
    for (const std::string& w : check.warnings) mPairingWarnings << qs(w);
    QStringList problems;
    for (const std::string& e : check.errors) problems << qs(e);
    if (check.commonSteps.empty())
      problems << tr("the two runs have no checkpointed step in common");
    mPairingProblem = problems.join(QLatin1Char('\n'));
  } catch (const std::exception& e) {
    mPairingProblem = qs(e.what());
  }
  // Ops without a rule are named at once, before any analysis: every step would be not bounded.
  if (mPairingProblem.isEmpty() && !mSession.checkpointSteps.empty()) {
    const std::int64_t first = mSession.checkpointSteps.front();
    try {
      const std::string unsupported = unsupportedLossOps(*mCandidate->programAt(first));
      if (!unsupported.empty())
        mPairingWarnings.prepend(
            tr("no step can be bounded: the candidate's step program (step %1) cannot be "
               "replayed (%2); `lossbound-cli ops` lists the supported ops")
                .arg(first)
                .arg(qs(unsupported)));
    } catch (const std::exception& e) {
      mPairingWarnings.prepend(tr("the candidate's step program at step %1 cannot be read: %2")
                                   .arg(first)
                                   .arg(qs(e.what())));
    }
  }
  AnalysisReport cached;
  if (mPairingProblem.isEmpty()) cached = loadCached(widgets::rememberedSettings());
  emit sessionOpened(mSession, cached);
  return true;
}

AnalysisReport SessionController::loadCached(const AnalysisSettings& settings) const {
  AnalysisReport report;
  report.referenceName = mReference->name();
  report.candidateName = mCandidate->name();
  report.settings = settings;
  try {
    const std::string key =
        analysisKey(settings, runIdentity(mReference->filePath(), mReference->logDigest()),
                    runIdentity(mCandidate->filePath(), mCandidate->logDigest()));
    ResultCache cache(ResultCache::defaultPath(mCandidate->filePath()));
    report.steps = cache.load(key);
    report.cacheFile = cache.path();
  } catch (const std::exception&) {
    report.steps.clear();  // no cache is not an error
  }
  return report;
}

QStringList SessionController::nodeNames() const {
  QStringList names;
  if (!mCandidate || mSession.checkpointSteps.empty()) return names;
  try {
    const auto program = mCandidate->programAt(mSession.checkpointSteps.front());
    for (const auto& node : program->nodes) names << qs(node.name);
  } catch (const std::exception&) {
  }
  return names;
}

std::vector<widgets::TensorSummary> SessionController::tensorsAt(std::int64_t step) const {
  std::vector<widgets::TensorSummary> out;
  if (!mReference || !mReference->file().hasCheckpoint(step)) return out;
  try {
    for (const auto& [name, tensor] : mReference->inputsAt(step)) {
      double sum = 0;
      for (double v : tensor.values()) sum += v * v;
      out.push_back({qs(name), qs(shapeString(tensor.shape())),
                     qs(std::string(dtypeName(tensor.dtype()))), std::sqrt(sum)});
    }
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

bool SessionController::startAnalysis(const std::vector<std::int64_t>& steps,
                                      const AnalysisSettings& settings) {
  if (!hasSession()) {
    emit analysisFailed(tr("Open a run pair first."));
    return false;
  }
  if (mBusy) {
    emit analysisFailed(tr("An analysis is already running; cancel it first."));
    return false;
  }
  if (!mPairingProblem.isEmpty()) {
    emit analysisFailed(tr("This pair cannot be analysed: %1").arg(mPairingProblem));
    return false;
  }
  AnalyzerOptions options;
  const BackendChoice backendChoice = chooseBackend(settings.backend);
  if (!backendChoice.ok) {
    emit analysisFailed(tr("Backend CUDA: %1").arg(backendChoice.error));
    return false;
  }
  options.backendFactory = backendChoice.factory;
  options.backendDescription = backendChoice.description;

  mCancel = std::make_shared<std::atomic<bool>>(false);
  const int jobId = ++mJobId;
  const int total = int(steps.size());
  mBusy = true;
  mJobTimer.start();
  emit analysisStarted(settings, total);
  auto ref = mReference;
  auto cand = mCandidate;
  auto cancelFlag = mCancel;
  QPointer<SessionController> self(this);
  mJob = ThreadPool::global().submit([=] {
    auto post = [self](auto fn) {
      if (self) QMetaObject::invokeMethod(self, fn, Qt::QueuedConnection);
    };
    try {
      const AnalysisReport report = Analyzer(options).analyse(
          *ref, *cand, StepSelection::list(steps), settings,
          [&](int done, int totalSteps, const StepResult& finished) {
            post([self, jobId, done, totalSteps, finished] {
              if (!self || self->mJobId != jobId) return;
              const double elapsed = double(self->mJobTimer.elapsed()) / 1000.0;
              const double remaining = done > 0 ? elapsed / done * (totalSteps - done) : -1.0;
              emit self->stepFinished(finished, done, totalSteps, remaining);
            });
          },
          cancelFlag.get());
      post([self, jobId, report] {
        if (!self || self->mJobId != jobId) return;
        self->mBusy = false;
        emit self->analysisFinished(report);
      });
    } catch (const std::exception& e) {
      const QString message = qs(e.what());
      post([self, jobId, message] {
        if (!self || self->mJobId != jobId) return;
        self->mBusy = false;
        emit self->analysisFailed(message);
      });
    }
  });
  return true;
}

void SessionController::cancel() {
  if (mCancel) mCancel->store(true);
}

void SessionController::waitForJob() {
  if (mJob.valid()) mJob.wait();
  mBusy = false;
}

}  // namespace lossbound::app
