#include "app/cli_analyze.h"

#include "app/backend_status.h"
#include "app/cli_report.h"
#include "app/distributed_analysis.h"
#include "app/mpi_world.h"
#include "core/analysis/analyzer.h"
#include "core/analysis/first_exit_watch.h"
#include "core/analysis/overall_verdict.h"
#include "core/analysis/qt_text.h"
#include "core/analysis/run_file_replay.h"
#include "core/analysis/shard.h"
#include "core/analysis/step_selection.h"
#include "core/analysis/verdict.h"
#include "core/interval/format_names.h"
#include "core/runfile/run_file.h"
#include "core/runfile/run_pair.h"

#include <QCommandLineParser>

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>

namespace lossbound::app {

namespace {

// Prints a warning per analysed step whose batches differ between the runs (the replay uses the
// reference's batch) and appends it to that step's note, so the CSV and JSON carry it too.
void addBatchWarnings(const RunFile& reference, const RunFile& candidate, AnalysisReport& report,
                      QTextStream& err) {
  for (StepResult& r : report.steps) {
    std::optional<std::string> warning;
    try {
      warning = compareBatches(reference, candidate, r.step);
    } catch (const std::exception& e) {
      // Appended, not "step " + std::to_string(...): GCC 12 at -O3 reports a false -Wrestrict
      // on operator+(const char*, std::string&&) (GCC bug 105651).
      warning = "step ";
      *warning += std::to_string(r.step) + ": the batches could not be compared: " + e.what();
    }
    if (!warning) continue;
    err << "lossbound-cli analyze: warning: " << qs(*warning) << "\n";
    // Appended piece by piece: a chain of operator+ here draws GCC 12's false -Wrestrict at -O3
    // once inlined into finishReport (bug 105651).
    if (!r.note.empty()) r.note += ' ';
    r.note += "Warning: ";
    r.note += *warning;
    r.note += '.';
  }
  err.flush();
}

/// What `analyze` was asked to do, once the command line is parsed.
struct AnalyzeRequest {
  QString referencePath, candidatePath;
  StepSelection selection;
  AnalysisSettings settings;
  AnalyzerOptions options;
  ReportOutputs outputs;
  std::optional<ShardInfo> shard;  ///< --shard I/N (steps filled in later)
  bool mpi = false;
  bool stopAtFirstExit = false;
};

constexpr const char* kUsage =
    "usage: lossbound-cli analyze --reference R.h5 --candidate C.h5 [--steps all|A:B|N,M] "
    "[--method interval|first-order|probabilistic|ensemble] [--confidence P] "
    "[--ensemble-size N] [--ensemble-order per-product|per-element] [--precision "
    "recorded|fp32|tf32|bf16|fp16] "
    "[--backend auto|cpu|cuda|host-device] [--start-node NAME] [--shard I/N] [--mpi] "
    "[--stop-at-first-exit] [--csv F] [--json F] [--png F] [--outputs loss|all] "
    "[--outputs-csv F] [--no-cache]\n";

/// Parses the arguments into `req`; returns the exit code when the command ends here (usage
/// error: 2 with the message on `err`; --help: 0), nothing when it goes on.
std::optional<int> parseAnalyze(const QStringList& args, AnalyzeRequest& req, QTextStream& out,
                                QTextStream& err) {
  QCommandLineParser p;
  p.setApplicationDescription(QStringLiteral(
      "Replays steps of the candidate's step program on the reference's checkpoints, bounds the "
      "rounding and says whether the reference loss leaves the envelope (a Type-II divergence)."));
  p.addHelpOption();
  const QCommandLineOption ref(QStringLiteral("reference"), QStringLiteral("Reference run file."),
                               QStringLiteral("R.h5"));
  const QCommandLineOption cand(QStringLiteral("candidate"), QStringLiteral("Candidate run file."),
                                QStringLiteral("C.h5"));
  const QCommandLineOption steps(QStringLiteral("steps"),
                                 QStringLiteral("Steps: all, A:B (inclusive) or N,M,... "
                                                "(default all checkpointed steps)."),
                                 QStringLiteral("sel"), QStringLiteral("all"));
  const AnalysisSettings defaults;
  const QCommandLineOption method(
      QStringLiteral("method"),
      QStringLiteral("interval, first-order, probabilistic or ensemble (default %1).")
          .arg(qs(methodName(defaults.method))),
      QStringLiteral("m"), qs(methodName(defaults.method)));
  const QCommandLineOption confidence(
      QStringLiteral("confidence"),
      QStringLiteral("Probabilistic method: confidence 1 - delta (default 1 - 1e-6)."),
      QStringLiteral("P"));
  const QCommandLineOption ensemble(
      QStringLiteral("ensemble-size"),
      QStringLiteral("Ensemble method: executions (default %1).").arg(defaults.ensembleSize),
      QStringLiteral("N"));
  const QCommandLineOption ensembleOrder(
      QStringLiteral("ensemble-order"),
      QStringLiteral("Ensemble method: per-product draws one summation order per matrix product, "
                     "every output a chain in it, as one kernel call sums (default); per-element "
                     "draws an order, bracketing and blocking for every output element (wider "
                     "exploration, up to about 5x slower)."),
      QStringLiteral("o"), qs(ensembleOrderName(defaults.ensembleOrder)));
  const QCommandLineOption precision(QStringLiteral("precision"),
                                     QStringLiteral("recorded, fp32, tf32, bf16 or fp16."),
                                     QStringLiteral("p"), QStringLiteral("recorded"));
  const QCommandLineOption backend(
      QStringLiteral("backend"),
      QStringLiteral("auto, cpu, cuda or host-device (the interval method's device-resident replay "
                     "on the host's counting device: a check, not a speed-up)."),
      QStringLiteral("b"), QStringLiteral("auto"));
  const QCommandLineOption startNode(
      QStringLiteral("start-node"),
      QStringLiteral("Interval method: start the bounds at this trace node (ignores rounding "
                     "upstream of it)."),
      QStringLiteral("NAME"));
  const QCommandLineOption shard(
      QStringLiteral("shard"),
      QStringLiteral("Analyse only the I-th of N balanced slices of the selected steps and write "
                     "a part for `lossbound-cli merge` (e.g. a job array's task I of N)."),
      QStringLiteral("I/N"));
  const QCommandLineOption mpi(
      QStringLiteral("mpi"),
      QStringLiteral("Share the steps among the ranks of an MPI job (run under mpirun or srun); "
                     "rank 0 prints the summary and writes the files."));
  const QCommandLineOption stop(
      QStringLiteral("stop-at-first-exit"),
      QStringLiteral("Stop once the first exit is known and every earlier step is done (the "
                     "later steps stay unanalysed)."));
  const QCommandLineOption csv(QStringLiteral("csv"), QStringLiteral("Write the steps as CSV."),
                               QStringLiteral("F"));
  const QCommandLineOption json(QStringLiteral("json"),
                                QStringLiteral("Write the whole report as JSON."),
                                QStringLiteral("F"));
  const QCommandLineOption png(QStringLiteral("png"), QStringLiteral("Render the plots as PNG."),
                               QStringLiteral("F"));
  const QCommandLineOption outputs(
      QStringLiteral("outputs"),
      QStringLiteral("loss: bound the loss only (default); all: also compare every program "
                     "output of both programs at the reference state (docs/output-envelopes.md)."),
      QStringLiteral("loss|all"), QStringLiteral("loss"));
  const QCommandLineOption outputsCsvOption(
      QStringLiteral("outputs-csv"),
      QStringLiteral("With --outputs all: write one row per step and output as CSV."),
      QStringLiteral("F"));
  const QCommandLineOption noCache(QStringLiteral("no-cache"),
                                   QStringLiteral("Neither read nor write the results cache."));
  p.addOptions({ref, cand, steps, method, confidence, ensemble, ensembleOrder, precision, backend,
                startNode, shard, mpi, stop, csv, json, png, outputs, outputsCsvOption, noCache});

  QStringList argv = args;
  argv.prepend(QStringLiteral("lossbound-cli analyze"));
  if (!p.parse(argv)) {
    err << "lossbound-cli analyze: " << p.errorText() << "\n";
    return kExitBadInput;
  }
  if (p.isSet(QStringLiteral("help"))) {
    out << p.helpText();
    return kExitNoExit;
  }
  auto usage = [&](const QString& msg) {
    err << "lossbound-cli analyze: " << msg << "\n" << kUsage;
    return kExitBadInput;
  };
  if (!p.positionalArguments().isEmpty())
    return usage(QStringLiteral("unexpected argument '%1'").arg(p.positionalArguments().first()));
  if (!p.isSet(ref) || !p.isSet(cand))
    return usage(QStringLiteral("expected --reference and --candidate"));
  req.referencePath = p.value(ref);
  req.candidatePath = p.value(cand);

  AnalysisSettings& settings = req.settings;
  const auto m = parseMethod(p.value(method).toStdString());
  if (!m)
    return usage(QStringLiteral("--method: expected interval, first-order, probabilistic or "
                                "ensemble, found '%1'")
                     .arg(p.value(method)));
  settings.method = *m;
  if (p.isSet(confidence)) {
    bool ok = false;
    settings.confidence = p.value(confidence).toDouble(&ok);
    if (!ok || !(settings.confidence > 0 && settings.confidence < 1))
      return usage(QStringLiteral("--confidence: expected a probability strictly between 0 and 1, "
                                  "found '%1'")
                       .arg(p.value(confidence)));
  }
  if (p.isSet(ensemble)) {
    bool ok = false;
    settings.ensembleSize = p.value(ensemble).toInt(&ok);
    if (!ok || settings.ensembleSize < 1)
      return usage(QStringLiteral("--ensemble-size: expected a positive integer, found '%1'")
                       .arg(p.value(ensemble)));
  }
  if (p.isSet(ensembleOrder)) {
    const auto o = parseEnsembleOrder(p.value(ensembleOrder).toStdString());
    if (!o)
      return usage(QStringLiteral("--ensemble-order: expected per-product or per-element, found "
                                  "'%1'")
                       .arg(p.value(ensembleOrder)));
    settings.ensembleOrder = *o;
  }
  const QString prec = p.value(precision);
  if (prec != QLatin1String("recorded")) {
    const auto f = parseFormat(prec.toStdString());
    if (!f)
      return usage(QStringLiteral("--precision: expected recorded, fp32, tf32, bf16 or fp16, "
                                  "found '%1'")
                       .arg(prec));
    settings.precision = *f;
  }
  if (p.value(outputs) == QLatin1String("all"))
    settings.outputs = OutputScope::All;
  else if (p.value(outputs) != QLatin1String("loss"))
    return usage(
        QStringLiteral("--outputs: expected loss or all, found '%1'").arg(p.value(outputs)));
  if (p.isSet(outputsCsvOption) && settings.outputs != OutputScope::All)
    return usage(QStringLiteral("--outputs-csv: needs --outputs all"));
  settings.backend = p.value(backend).toStdString();
  if (settings.backend != "auto" && settings.backend != "cpu" && settings.backend != "cuda" &&
      settings.backend != "host-device")
    return usage(QStringLiteral("--backend: expected auto, cpu, cuda or host-device, found '%1'")
                     .arg(p.value(backend)));
  if (p.isSet(startNode)) {
    settings.startNode = p.value(startNode).toStdString();
    if (settings.method != EnvelopeMethod::Interval)
      return usage(QStringLiteral("--start-node: only the interval method starts at a node "
                                  "(found --method %1)")
                       .arg(qs(methodName(settings.method))));
  }
  try {
    req.selection = StepSelection::parse(p.value(steps).toStdString());
  } catch (const std::invalid_argument& e) {
    return usage(QString::fromStdString(e.what()));
  }
  try {
    if (p.isSet(shard)) req.shard = parseShard(p.value(shard).toStdString());
  } catch (const std::invalid_argument& e) {
    return usage(QStringLiteral("--%1").arg(QString::fromStdString(e.what())));
  }
  req.mpi = p.isSet(mpi);
  req.stopAtFirstExit = p.isSet(stop);
  if (req.stopAtFirstExit && req.shard)
    return usage(
        QStringLiteral("--stop-at-first-exit: not with --shard (a shard cannot know "
                       "whether the other shards' earlier steps are done; use it "
                       "alone or with --mpi)"));
  req.outputs = {p.value(csv), p.value(json), p.value(png), p.value(outputsCsvOption)};
  if (p.isSet(png) && !havePngExporter())
    return usage(
        QStringLiteral("--png: this build has no plot renderer (expected the widgets "
                       "layer to provide one)"));

  // Backend: CUDA only when asked for or available.
  req.options.useCache = !p.isSet(noCache);
  const BackendChoice backendChoice = chooseBackend(settings.backend);
  if (!backendChoice.ok) {
    err << "lossbound-cli analyze: --backend cuda: " << backendChoice.error << "\n";
    return kExitBadInput;
  }
  req.options.backendFactory = backendChoice.factory;
  req.options.backendDescription = backendChoice.description;
  return std::nullopt;
}

/// The opened pair and the steps to analyse, or why there are none.
struct Setup {
  std::unique_ptr<RunFileReplay> reference, candidate;
  std::vector<std::int64_t> selected;  ///< the whole selection
  std::vector<std::int64_t> steps;     ///< this command's steps (the shard's, with --shard)
  std::string error;                   ///< non-empty: the command cannot go on (exit 2)
};

/// Opens and validates both runs and plans the steps; never throws (errors go to Setup::error).
Setup openAndPlan(const AnalyzeRequest& req) {
  Setup s;
  try {
    // Validate in a child process first: a corrupt file that crashes libhdf5 becomes an error.
    RunFile::validateIsolated(req.referencePath.toStdString());
    RunFile::validateIsolated(req.candidatePath.toStdString());
    s.reference = RunFileReplay::open(req.referencePath.toStdString());
    s.candidate = RunFileReplay::open(req.candidatePath.toStdString());
    // A log-only run is a valid run file (info shows it) but has nothing to replay.
    for (const RunFileReplay* run : {s.reference.get(), s.candidate.get()})
      if (run->file().checkpointSteps().empty())
        throw std::runtime_error(
            run->file().path() +
            ": /checkpoints: expected checkpoints (analyze replays checkpointed steps, so both "
            "runs need them), found none; record some with RunRecorder.checkpoint()");
    s.selected = plannedSteps(*s.reference, *s.candidate, req.selection, req.settings);
    s.steps = req.shard
                  ? shardSteps(s.selected, req.shard->index, req.shard->count, ShardLayout::Blocks)
                  : s.selected;
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  return s;
}

/// Returns the report written by a shard whose slice is empty (more shards than steps).
AnalysisReport emptyShard(const Setup& s, const AnalyzeRequest& req) {
  AnalysisReport report = emptyReport(*s.reference, *s.candidate, req.settings);
  report.backendDescription = req.options.backendDescription;
  return report;
}

/// Stops `cancel` once the first exit is settled, and says so in the report afterwards.
struct EarlyStop {
  FirstExitWatch watch;
  bool stopped = false;

  void finish(AnalysisReport& report, std::size_t selected) {
    if (!stopped || !watch.settled()) return;
    report.cancelled = false;
    if (!report.note.empty()) report.note += ' ';
    report.note += "Stopped at the first exit (step ";
    report.note += std::to_string(*watch.earliestExit()) +
                   ") once every earlier step was done (--stop-at-first-exit): " +
                   std::to_string(report.steps.size()) + " of " + std::to_string(selected) +
                   " selected steps analysed.";
  }
};

/// Prints, writes and returns the exit code of a finished report (rank 0 or a single process).
int finishReport(AnalysisReport& report, const AnalyzeRequest& req, const Setup& s,
                 QTextStream& out, QTextStream& err) {
  addBatchWarnings(s.reference->file(), s.candidate->file(), report, err);
  printReportSummary(report, req.referencePath, req.candidatePath, out);
  out.flush();
  if (!writeReportOutputs(report, req.outputs, QStringLiteral("lossbound-cli analyze"), err))
    return kExitBadInput;
  return reportExitCode(report);
}

int runLocal(const AnalyzeRequest& req, QTextStream& out, QTextStream& err) {
  Setup s = openAndPlan(req);
  if (!s.error.empty()) {
    err << "lossbound-cli analyze: " << qs(s.error) << "\n";
    return kExitBadInput;
  }
  AnalysisReport report;
  if (s.steps.empty()) {
    err << "lossbound-cli analyze: note: shard " << qs(shardName(*req.shard)) << " has no steps ("
        << s.selected.size() << " selected for " << req.shard->count
        << " shards); writing an empty part\n";
    report = emptyShard(s, req);
  } else {
    std::atomic<bool> cancel{false};
    EarlyStop early{FirstExitWatch(s.steps)};
    AnalysisProgress progress;
    if (req.stopAtFirstExit)
      progress = [&](int, int, const StepResult& r) {
        if (early.watch.record(r.step, isExit(r.verdict)) && !early.stopped) {
          early.stopped = true;
          cancel = true;
        }
      };
    try {
      report = Analyzer(req.options)
                   .analyse(*s.reference, *s.candidate, StepSelection::list(s.steps), req.settings,
                            progress, &cancel);
    } catch (const AnalysisError& e) {
      err << "lossbound-cli analyze: " << e.what() << "\n";
      return kExitBadInput;
    }
    early.finish(report, s.steps.size());
  }
  if (req.shard) {
    report.shard = *req.shard;
    report.shard->selectedSteps = s.selected;
  }
  return finishReport(report, req, s, out, err);
}

int runMpi(const AnalyzeRequest& req, MpiWorld& world, QTextStream& out, QTextStream& err) {
  const QString who =
      world.rank() == 0
          ? QString()
          : QStringLiteral("rank %1 (%2): ").arg(world.rank()).arg(qs(world.hostName()));
  Setup s = openAndPlan(req);
  if (!s.error.empty()) err << "lossbound-cli analyze: " << who << qs(s.error) << "\n";
  err.flush();
  if (!world.allTrue(s.error.empty())) return finishDistributed(world, kExitBadInput);
  // Every rank must see the same runs and steps (the same path may name other files on another
  // machine).
  const std::string mine = jobFingerprint(*s.reference, *s.candidate, s.steps);
  const bool same = world.broadcast(mine) == mine;
  if (!same)
    err << "lossbound-cli analyze: " << who
        << "the run files or the steps differ from rank 0's (expected every rank to read the "
           "same files: same loss logs, same checkpointed steps)\n";
  err.flush();
  if (!world.allTrue(same)) return finishDistributed(world, kExitBadInput);

  AnalyzerOptions options = req.options;
  options.writeCache = false;  // rank 0 stores the merged report once
  options.useCache = req.options.useCache;
  const DistributedJob job{*s.reference, *s.candidate, s.steps,
                           req.settings, options,      req.stopAtFirstExit};
  int code = kExitBadInput;
  try {
    std::optional<AnalysisReport> report = runDistributed(world, job, err);
    if (report) {
      if (req.shard) {
        report->shard = *req.shard;
        report->shard->selectedSteps = s.selected;
      }
      code = finishReport(*report, req, s, out, err);
    }
  } catch (const std::exception& e) {
    err << "lossbound-cli analyze: " << who << e.what() << "\n";
  }
  return finishDistributed(world, code);
}

}  // namespace

int runAnalyze(const QStringList& args, QTextStream& out, QTextStream& err, MpiWorld* world) {
  // With MPI only rank 0 speaks for usage errors (every rank parses the same arguments).
  QString discarded;
  QTextStream silent(&discarded);
  const bool rank0 = !world || world->rank() == 0;
  QTextStream& usageErr = rank0 ? err : silent;
  AnalyzeRequest req;
  if (const std::optional<int> code = parseAnalyze(args, req, out, usageErr)) return *code;
  if (req.mpi && !world) {
    err << "lossbound-cli analyze: --mpi: MPI was not started (expected lossbound-cli to be "
           "started by mpirun or srun with --mpi among the analyze options)\n";
    return kExitBadInput;
  }
  if (!req.mpi) return runLocal(req, out, err);
  return runMpi(req, *world, out, err);
}

}  // namespace lossbound::app
