#pragma once
// The session controller: everything between the run files and the workbench that is not a
// widget. Opens a run pair (validated by the reader, ordered by the files' role attributes when
// asked) or an analysis report (a merged one from a cluster, say: with the run files it names
// when they are there and unchanged, else alone), turns the logs into SessionData, loads cached
// results, runs the Analyzer on a worker thread with progress, remaining time and cancellation,
// and hands results to the GUI thread as they finish. Keeps MainWindow thin.

#include "core/analysis/analysis_types.h"
#include "widgets/session_data.h"

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QStringList>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

namespace lossbound {
class RunFileReplay;
}

namespace lossbound::app {

/// Owns the open run pair and the background analysis job.
class SessionController : public QObject {
  Q_OBJECT

 public:
  /// Creates a controller with no session.
  explicit SessionController(QObject* parent = nullptr);
  ~SessionController() override;

  /// Opens a pair (cancelling and waiting for a running job first). With `orderByRole`, swaps
  /// the files when their role attributes say candidate/reference. Emits sessionOpened or
  /// openFailed (with the reader's message naming file and dataset); returns success.
  bool openPair(const QString& reference, const QString& candidate, bool orderByRole = false);
  /// Opens the analysis report (JSON) at `path`. When the run files it names exist and still
  /// hold the loss logs it was computed from, they are opened as a pair (logged curves,
  /// recompute); otherwise the report is shown alone (the loss plot shows the analysed steps
  /// only). sessionNotice() says which. Emits sessionOpened with the report, or openFailed
  /// (unreadable or corrupt report); returns success.
  bool openReport(const QString& path);
  /// Returns true when a pair or a report is shown.
  bool hasSession() const { return mReference != nullptr || mReportOnly; }
  /// Returns true when run files are open, so steps can be analysed.
  bool hasRuns() const { return mReference != nullptr; }
  /// Returns what the session shows, when it is not simply a pair: for a report, whether the
  /// curves come from its run files or are its analysed steps only, and why ("" for a pair).
  const QString& sessionNotice() const { return mNotice; }
  /// Returns the open files (reference, candidate); for a report shown alone, the files it
  /// names.
  QStringList paths() const { return {mReferencePath, mCandidatePath}; }
  /// Returns the steps checkpointed in both runs (what can be analysed).
  const std::vector<std::int64_t>& analysableSteps() const { return mSession.checkpointSteps; }
  /// Returns why the pair cannot be analysed ("" when it can).
  const QString& pairingProblem() const { return mPairingProblem; }
  /// Returns remarks about the open pair that do not prevent analysis: the files' own warnings
  /// and the steps whose batches differ between the runs.
  const QStringList& pairingWarnings() const { return mPairingWarnings; }
  /// Returns the node names of the candidate's first program (for the start-node list).
  QStringList nodeNames() const;
  /// Returns the tensors of the reference checkpoint at `step` with their L2 norms (empty when
  /// the step has no checkpoint or cannot be read).
  std::vector<widgets::TensorSummary> tensorsAt(std::int64_t step) const;

  /// Starts analysing `steps` with `settings` on a worker thread; emits analysisStarted, then
  /// stepFinished per step, then analysisFinished or analysisFailed. Returns false (and emits
  /// analysisFailed) when it cannot start (no pair, busy, CUDA asked for but unavailable).
  bool startAnalysis(const std::vector<std::int64_t>& steps, const AnalysisSettings& settings);
  /// Asks the running job to stop after the ops in flight; its finished steps are kept.
  void cancel();
  /// Returns true while a job runs.
  bool busy() const { return mBusy; }
  /// Blocks until the running job (if any) has finished (used on close and before reopening).
  void waitForJob();

 signals:
  /// A pair was opened; `cached` holds results found in the results cache for the remembered
  /// settings (may be empty).
  void sessionOpened(const widgets::SessionData& session, const AnalysisReport& cached);
  /// Opening failed; `message` is the reader's error.
  void openFailed(const QString& message);
  /// A job started with `total` steps.
  void analysisStarted(const AnalysisSettings& settings, int total);
  /// One step finished; `remainingSeconds` < 0 when not yet known.
  void stepFinished(const StepResult& result, int done, int total, double remainingSeconds);
  /// The job ended (completed or cancelled: report.cancelled).
  void analysisFinished(const AnalysisReport& report);
  /// The job could not start or failed.
  void analysisFailed(const QString& message);

 private:
  AnalysisReport loadCached(const AnalysisSettings& settings) const;
  /// Validates and opens a pair (ordered by role when asked: `swapped` says whether the files
  /// changed places); returns "" or the reader's error.
  QString openRuns(const QString& reference, const QString& candidate, bool orderByRole,
                   std::shared_ptr<RunFileReplay>* ref, std::shared_ptr<RunFileReplay>* cand,
                   bool* swapped);
  /// Makes an opened pair the session: logs, checkpoints, pairing problems and warnings.
  void adoptPair(std::shared_ptr<RunFileReplay> ref, std::shared_ptr<RunFileReplay> cand,
                 const QString& refPath, const QString& candPath);

  std::shared_ptr<RunFileReplay> mReference, mCandidate;
  QString mReferencePath, mCandidatePath, mPairingProblem;
  QStringList mPairingWarnings;
  QString mNotice;
  bool mReportOnly = false;  // a report is shown without its run files
  widgets::SessionData mSession;
  std::shared_ptr<std::atomic<bool>> mCancel;
  std::future<void> mJob;  // the running analysis on the thread pool
  QElapsedTimer mJobTimer;
  int mJobId = 0;
  bool mBusy = false;
};

}  // namespace lossbound::app
