// bench-scale-ladder: the figures of issue 14 for each rung of the scale ladder, side by side in
// one run: tightness of every envelope method against the observed spread of randomized
// executions, escapes, classification of a fixed and a buggy pair, replay time against PyTorch
// and peak memory.
//
//   bench-scale-ladder [--executions N] [--smallest] [--first-step-only] DIR...
//
// Each DIR is one rung recorded by bench/scale_ladder_record.py (bench/scale_ladder.sh runs both):
// reference.h5, candidate-fixed.h5, candidate-buggy.h5 and torch.json (PyTorch's timings and
// peak memory on the same step). At the first and the last checkpointed step it replays the
// fixed candidate's program on the reference's state:
// - the yardstick: the half-spread (max − min)/2 of the loss over N randomized executions
//   (EvalDomain::Random, the executor of the engine as it was when issue 14 was opened; seeds
//   1000·step + 7919·i), on the thread pool with one thread per execution;
// - the envelope of each method (interval from the inputs, first-order, probabilistic at
//   confidence 1 − 1e-6), its ratio half-width / half-spread, and how many executions fall
//   outside it (none may for interval and first-order; the probabilistic rate is printed next to
//   the 1e-6 it claims);
// - classification: the reference's logged loss must lie inside the fixed candidate's envelope
//   and outside the buggy candidate's (self-checks are not replayed here);
// - time: a first-order replay of the loss (point pass, adjoint pass, local errors) on 1 thread
//   and on the whole pool, against PyTorch eager running the forward and backward pass of the
//   same step in float64 on as many threads; one randomized execution against PyTorch's float32
//   step on 1 thread, once with the yardstick's executor and once with one order per GEMM call
//   (the baselines' execution, EvalOptions::orderPerProduct) (on 1 thread the tables compare
//   CPU time of the thread, which a machine shared with other work inflates less than wall time;
//   both are printed);
// - as many executions with one order per GEMM call, the order one call of a real kernel has:
//   their spread and escapes are printed next to the yardstick's (not in its ratios), and none
//   may escape the interval or first-order envelope;
// - memory: the process's peak resident set (getrusage ru_maxrss) after the first-order replays
//   of a rung's first step, against the peak of a fresh Python process running PyTorch's float64
//   step (both include their runtime: Qt/HDF5 here, the Python interpreter and torch there).
//   ru_maxrss never decreases, so a rung's figure also covers the rungs before it: pass the rungs
//   smallest first.
// --smallest (CI's smoke test): the first DIR only, its first step only, 4 executions unless
// --executions says otherwise, no replay on all threads; exit 1 when an execution escapes the
// interval or first-order envelope or the default (first-order) method calls the fixed pair a bug.
// Without it the exit code is 1 on escapes only.
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/analysis/verdict.h"
#include "core/backend.h"
#include "core/parallel/thread_pool.h"

#include <QCoreApplication>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <sys/resource.h>
#include <time.h>
#include <tuple>
#include <utility>
#include <vector>

using namespace lossbound;

namespace {

constexpr double kConfidence = 1 - 1e-6;

/// Returns the process's peak resident set size in MiB (Linux reports ru_maxrss in KiB).
double peakMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

/// Returns the wall time of f() in seconds.
template <typename F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Returns the calling thread's CPU time in seconds.
double threadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// Returns {wall, CPU time of this thread} of f() in seconds (f runs on this thread only).
template <typename F>
std::pair<double, double> wallAndCpu(F&& f) {
  const double c0 = threadCpuSeconds();
  const double wall = seconds(std::forward<F>(f));
  return {wall, threadCpuSeconds() - c0};
}

/// PyTorch's figures for one rung, from torch.json.
struct TorchFigures {
  long long parameters = 0;
  double fp32t1 = 0, fp64t1 = 0, fp64all = 0, peakMiB = 0, beforeMiB = 0;
  double fp32cpu = 0, fp64cpu = 0;  ///< CPU time of the one thread (0: not measured)
  int cores = 1;
  bool ok = false;
};

TorchFigures readTorch(const std::string& dir) {
  TorchFigures t;
  QFile f(QString::fromStdString(dir + "/torch.json"));
  if (!f.open(QIODevice::ReadOnly)) return t;
  const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
  const QJsonObject s = o.value(QStringLiteral("seconds")).toObject();
  t.parameters = o.value(QStringLiteral("parameters")).toInteger();
  t.cores = o.value(QStringLiteral("cores")).toInt(1);
  t.fp32t1 = s.value(QStringLiteral("fp32_t1")).toDouble();
  t.fp64t1 = s.value(QStringLiteral("fp64_t1")).toDouble();
  t.fp32cpu = s.value(QStringLiteral("fp32_cpu_t1")).toDouble();
  t.fp64cpu = s.value(QStringLiteral("fp64_cpu_t1")).toDouble();
  t.fp64all = s.value(QStringLiteral("fp64_t%1").arg(t.cores)).toDouble(t.fp64t1);
  const QJsonObject p = o.value(QStringLiteral("peak_fp64")).toObject();
  t.peakMiB = p.value(QStringLiteral("peak_kib")).toDouble() / 1024.0;
  t.beforeMiB = p.value(QStringLiteral("before_kib")).toDouble() / 1024.0;
  t.ok = t.fp64t1 > 0;
  return t;
}

/// One envelope and its figures against the executions.
struct MethodRow {
  const char* name;
  double lo, hi;
  int escapes = 0;
};

/// One line of the summary tables.
struct Row {
  std::string rung;
  long long parameters = 0;
  std::int64_t step = 0;
  int executions = 0;
  double spreadRel = 0, ivRatio = 0, foRatio = 0, prRatio = 0;
  int ivEsc = 0, foEsc = 0, prEsc = 0;
  std::string classified;
  double fo1 = 0, foAll = 0, random1 = 0, peak = 0;
  double fo1Cpu = 0, random1Cpu = 0;           ///< CPU time of the one thread
  double perProduct1 = 0, perProduct1Cpu = 0;  ///< the baselines' execution, wall and CPU
  int ppEsc[3] = {0, 0, 0};  ///< their escapes of the interval, first-order, probabilistic
  TorchFigures torch;
};

std::string ratioText(double r) {
  char b[32];
  if (!std::isfinite(r)) return "inf";
  std::snprintf(b, sizeof b, "%.3g", r);
  return b;
}

/// Prints which ops own the first-order bound (Σ|g|·r per op name, the largest shares first) and
/// the probabilistic Σ(g·r)² shares.
void printBudget(const FirstOrderResult& fo) {
  std::map<std::string, std::pair<double, double>> byOp;
  for (const NodeBudget& n : fo.nodes) {
    byOp[n.op].first += n.bound;
    byOp[n.op].second += n.sumSquares;
  }
  std::vector<std::pair<std::string, std::pair<double, double>>> v(byOp.begin(), byOp.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("   budget (first-order share / probabilistic share of Σ(g·r)²):");
  for (std::size_t i = 0; i < std::min<std::size_t>(v.size(), 6); ++i)
    std::printf(" %s %.0f%% / %.0f%%;", v[i].first.c_str(), 100 * v[i].second.first / fo.bound,
                100 * v[i].second.second / fo.sumSquares);
  std::printf("\n");
}

bool inside(double v, double lo, double hi) { return lo <= v && v <= hi; }

/// Runs one step of one rung; appends its row; returns false when a rigorous envelope was escaped
/// or (when `strict`) the default method misclassified a pair.
bool runStep(const std::string& dir, RunFileReplay& ref, RunFileReplay& fixed, RunFileReplay* buggy,
             std::int64_t step, int executions, bool strict, bool firstStep,
             const TorchFigures& torch, std::vector<Row>& rows) {
  const std::string rung = dir.substr(dir.find_last_of('/') + 1);
  const auto program = fixed.programAt(step);
  const TensorMap inputs = adaptInputs(*program, ref.inputsAt(step), nullptr);
  const double refLoss = ref.loggedLoss(step).value_or(std::nan(""));
  const double lambda = hoeffdingLambda(kConfidence);
  auto one = createCpuBackend(1);
  auto all = createCpuBackend(0);
  Row row;
  row.rung = rung;
  row.parameters = torch.parameters;
  row.step = step;
  row.executions = executions;
  row.torch = torch;

  std::printf("\n== %s (%lld parameters), step %lld: fixed candidate on the reference state\n",
              rung.c_str(), torch.parameters, static_cast<long long>(step));
  std::fflush(stdout);

  // First-order replays first, so that ru_maxrss after them is their peak (see the file comment).
  FirstOrderResult fo;
  EvalOptions eval;
  std::tie(row.fo1, row.fo1Cpu) =
      wallAndCpu([&] { fo = evaluateFirstOrder(*program, inputs, *one, eval); });
  if (ThreadPool::global().size() > 1 && !strict)
    row.foAll = seconds([&] { fo = evaluateFirstOrder(*program, inputs, *all, eval); });
  else
    row.foAll = row.fo1;
  row.peak = peakMiB();
  printBudget(fo);
  const Envelope pr = firstOrderEnvelope(fo, EnvelopeMethod::Probabilistic, lambda);
  const Envelope foEnv = firstOrderEnvelope(std::move(fo), EnvelopeMethod::FirstOrder, lambda);
  ReplayOptions ivOpts;
  ivOpts.method = EnvelopeMethod::Interval;
  Envelope iv;
  const double ivSeconds = seconds([&] { iv = replayEnvelope(*program, inputs, *all, ivOpts); });

  // The yardstick: one execution alone on this thread (its time), the rest over the pool.
  std::vector<double> values(static_cast<std::size_t>(executions));
  EvalOptions rnd;
  rnd.domain = EvalDomain::Random;
  const auto seedOf = [&](std::int64_t i) {
    return 1000u * static_cast<std::uint64_t>(step) + 7919u * static_cast<std::uint64_t>(i);
  };
  // `executions` losses into `out`: the first alone on this thread (timed into `one1`), the rest
  // over the pool; returns the seconds of the pool's part.
  const auto execute = [&](const EvalOptions& opts, std::vector<double>& out,
                           std::pair<double, double>& one1) {
    one1 = wallAndCpu([&] {
      EvalOptions o = opts;
      o.seed = seedOf(0);
      out[0] = lossValue(evaluate(*program, inputs, *one, o)).hi;
    });
    return seconds([&] {
      ThreadPool::global().parallelFor(executions - 1, [&](std::int64_t begin, std::int64_t end) {
        auto backend = createCpuBackend(1);
        EvalOptions o = opts;
        for (std::int64_t i = begin; i < end; ++i) {
          o.seed = seedOf(i + 1);
          const Interval v = lossValue(evaluate(*program, inputs, *backend, o));
          // A randomized execution is one realization: lo == hi. Keep the farther end anyway.
          out[static_cast<std::size_t>(i + 1)] =
              std::abs(v.lo - foEnv.point) > std::abs(v.hi - foEnv.point) ? v.lo : v.hi;
        }
      });
    });
  };
  std::pair<double, double> timed;
  const double poolSeconds = execute(rnd, values, timed);
  std::tie(row.random1, row.random1Cpu) = timed;
  // As many executions with one order per GEMM call (EvalOptions::orderPerProduct, the
  // baselines' execution: the order a real kernel's call has, not one per output element). Not
  // the yardstick: timed next to it, and their losses must stay inside the rigorous envelopes.
  std::vector<double> perProduct(values.size());
  EvalOptions rndPP = rnd;
  rndPP.orderPerProduct = true;
  const double ppSeconds = execute(rndPP, perProduct, timed);
  std::tie(row.perProduct1, row.perProduct1Cpu) = timed;
  const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  const double half = (*mx - *mn) / 2, centre = (*mx + *mn) / 2;
  std::vector<MethodRow> methods = {{"interval", iv.lo, iv.hi},
                                    {"first-order", foEnv.lo, foEnv.hi},
                                    {"probabilistic", pr.lo, pr.hi}};
  for (MethodRow& m : methods)
    for (double v : values) m.escapes += !inside(v, m.lo, m.hi);
  const auto ratio = [&](const MethodRow& m) {
    const double h = (m.hi - m.lo) / 2;
    return half > 0 ? h / half : std::numeric_limits<double>::infinity();
  };
  row.spreadRel = half / std::abs(centre);
  row.ivRatio = ratio(methods[0]);
  row.foRatio = ratio(methods[1]);
  row.prRatio = ratio(methods[2]);
  row.ivEsc = methods[0].escapes;
  row.foEsc = methods[1].escapes;
  row.prEsc = methods[2].escapes;

  std::printf(
      "   %d randomized executions: loss in [%.10g, %.10g], half-spread %.3g (%.3g "
      "relative); %.1f s on %d threads\n",
      executions, *mn, *mx, half, row.spreadRel, poolSeconds + row.random1,
      ThreadPool::global().size());
  for (const MethodRow& m : methods) {
    const double h = (m.hi - m.lo) / 2;
    std::printf("   %-13s [%.10g, %.10g] relative half-width %.3g, ratio %s, escapes %d/%d\n",
                m.name, m.lo, m.hi, h / std::abs(centre), ratioText(ratio(m)).c_str(), m.escapes,
                executions);
  }
  std::printf("   probabilistic escape rate %.3g against the claimed %.0e (confidence 1 - 1e-6)\n",
              static_cast<double>(methods[2].escapes) / executions, 1 - kConfidence);
  {
    const auto [pmn, pmx] = std::minmax_element(perProduct.begin(), perProduct.end());
    for (double v : perProduct)
      for (int m = 0; m < 3; ++m) row.ppEsc[m] += !inside(v, methods[m].lo, methods[m].hi);
    std::printf(
        "   %d executions with one order per product (the baselines'): loss in [%.10g, %.10g], "
        "half-spread %.3g (%.3g relative); escapes iv / fo / pr %d / %d / %d; %.1f s on %d "
        "threads\n",
        executions, *pmn, *pmx, (*pmx - *pmn) / 2, (*pmx - *pmn) / 2 / std::abs(centre),
        row.ppEsc[0], row.ppEsc[1], row.ppEsc[2], ppSeconds + row.perProduct1,
        ThreadPool::global().size());
  }

  // Classification: the reference's logged loss against the fixed and the buggy envelope.
  bool ok =
      methods[0].escapes == 0 && methods[1].escapes == 0 && row.ppEsc[0] == 0 && row.ppEsc[1] == 0;
  std::string cls;
  const auto verdictText = [&](bool in) { return in ? "in" : "OUT"; };
  std::printf("   reference loss %.10g: fixed pair interval %s, first-order %s, probabilistic %s",
              refLoss, verdictText(inside(refLoss, iv.lo, iv.hi)),
              verdictText(inside(refLoss, foEnv.lo, foEnv.hi)),
              verdictText(inside(refLoss, pr.lo, pr.hi)));
  const bool fixedOk = inside(refLoss, foEnv.lo, foEnv.hi);
  bool buggyOk = true;
  cls = std::string("fixed ") + (fixedOk ? "ok" : "WRONG") +
        (inside(refLoss, pr.lo, pr.hi) ? "" : " (probabilistic WRONG)");
  if (buggy) {
    const auto bprog = buggy->programAt(step);
    const TensorMap binputs = adaptInputs(*bprog, ref.inputsAt(step), nullptr);
    FirstOrderResult bfo = evaluateFirstOrder(*bprog, binputs, *all, eval);
    const Envelope bpr = firstOrderEnvelope(bfo, EnvelopeMethod::Probabilistic, lambda);
    const Envelope bfoEnv = firstOrderEnvelope(std::move(bfo), EnvelopeMethod::FirstOrder, lambda);
    const Envelope biv = replayEnvelope(*bprog, binputs, *all, ivOpts);
    std::printf("; buggy pair interval %s, first-order %s, probabilistic %s (buggy point %.10g)",
                verdictText(inside(refLoss, biv.lo, biv.hi)),
                verdictText(inside(refLoss, bfoEnv.lo, bfoEnv.hi)),
                verdictText(inside(refLoss, bpr.lo, bpr.hi)), bfoEnv.point);
    buggyOk = !inside(refLoss, bfoEnv.lo, bfoEnv.hi);
    cls += std::string(", buggy ") + (buggyOk ? "caught" : "MISSED") +
           (inside(refLoss, biv.lo, biv.hi) ? "" : " (certain)");
  }
  std::printf("\n");
  row.classified = cls;
  // A missed bug is a tightness goal, not a failure; a fixed pair called a bug by the sound
  // default method is a soundness failure.
  if (strict) ok = ok && fixedOk;

  std::printf(
      "   time: first-order replay %.3f s on 1 thread (CPU %.3f s), %.3f s on %d; interval replay "
      "%.3f s on %d; one randomized execution %.3f s on 1 thread (CPU %.3f s), with one order "
      "per product %.3f s (CPU %.3f s)\n",
      row.fo1, row.fo1Cpu, row.foAll, ThreadPool::global().size(), ivSeconds,
      ThreadPool::global().size(), row.random1, row.random1Cpu, row.perProduct1,
      row.perProduct1Cpu);
  if (torch.ok)
    std::printf(
        "   PyTorch eager (same step, fwd+bwd): fp64 %.3f s on 1 thread (CPU %.3f s), %.3f s on "
        "%d; fp32 %.3f s on 1 thread (CPU %.3f s); fp64 peak %.0f MiB (%.0f MiB before the "
        "step)\n",
        torch.fp64t1, torch.fp64cpu, torch.fp64all, torch.cores, torch.fp32t1, torch.fp32cpu,
        torch.peakMiB, torch.beforeMiB);
  if (firstStep)
    std::printf("   peak resident memory after the first-order replays: %.0f MiB\n", row.peak);
  rows.push_back(row);
  return ok;
}

std::string goal(bool met) { return met ? "" : " ✗"; }

void printTables(const std::vector<Row>& rows) {
  std::printf(
      "\n| rung | parameters | step | executions | half-spread (relative) | interval | "
      "first-order | probabilistic | escapes iv / fo / pr | the same, one order per product | "
      "classification |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf(
        "| %s | %.2fM | %lld | %d | %.2g | %s%s | %s%s | %s%s | %d / %d / %d | %d / %d / %d | %s "
        "|\n",
        r.rung.c_str(), static_cast<double>(r.parameters) / 1e6, static_cast<long long>(r.step),
        r.executions, r.spreadRel, ratioText(r.ivRatio).c_str(),
        goal(std::isfinite(r.ivRatio)).c_str(), ratioText(r.foRatio).c_str(),
        goal(r.foRatio <= 1000).c_str(), ratioText(r.prRatio).c_str(),
        goal(r.prRatio <= 30).c_str(), r.ivEsc, r.foEsc, r.prEsc, r.ppEsc[0], r.ppEsc[1],
        r.ppEsc[2], r.classified.c_str());
  std::printf(
      "\n(ratios: envelope half-width / half-spread of the executions; ✗ = goal missed: "
      "interval finite, first-order <= 1000, probabilistic <= 30)\n");
  std::printf(
      "\n| rung | step | first-order replay, 1 thread, CPU s (× torch fp64) | first-order, "
      "all threads, wall s (× torch fp64) | randomized execution, 1 thread, CPU s (× torch fp32) "
      "| the same, one order per product | peak MiB (× torch fp64 peak) |\n"
      "|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const TorchFigures& t = r.torch;
    // One thread: CPU time against CPU time where torch.json has it (a loaded machine inflates
    // wall time unevenly), else wall against wall; all threads: wall against wall.
    const bool cpu = t.fp64cpu > 0 && t.fp32cpu > 0;
    const double fo1 = cpu ? r.fo1Cpu : r.fo1, rnd = cpu ? r.random1Cpu : r.random1;
    const double x1 = t.ok ? fo1 / (cpu ? t.fp64cpu : t.fp64t1) : 0;
    const double xa = t.ok ? r.foAll / t.fp64all : 0;
    const double xr = t.ok ? rnd / (cpu ? t.fp32cpu : t.fp32t1) : 0;
    const double pp = cpu ? r.perProduct1Cpu : r.perProduct1;
    const double xp = t.ok ? pp / (cpu ? t.fp32cpu : t.fp32t1) : 0;
    const double xm = t.ok ? r.peak / t.peakMiB : 0;
    std::printf(
        "| %s | %lld | %.3f (%.2g×%s)%s | %.3f (%.2g×%s) | %.3f (%.3g×%s)%s | %.3f (%.3g×%s) | "
        "%.0f (%.2g×%s) |\n",
        r.rung.c_str(), static_cast<long long>(r.step), fo1, x1, goal(x1 <= 2).c_str(),
        cpu ? "" : " wall", r.foAll, xa, goal(xa <= 2).c_str(), rnd, xr, goal(xr <= 3).c_str(),
        cpu ? "" : " wall", pp, xp, goal(xp <= 3).c_str(), r.peak, xm, goal(xm <= 4).c_str());
  }
  std::printf(
      "\n(✗ = goal missed: first-order replay <= 2× PyTorch fp64 forward+backward, randomized "
      "execution <= 3× PyTorch fp32, peak <= 4× PyTorch fp64 peak)\n");
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time into a log: the rungs are slow
  int executions = -1;
  bool smallest = false, firstOnly = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--executions" && i + 1 < argc) {
      executions = std::stoi(argv[++i]);
    } else if (a == "--smallest") {
      smallest = true;
    } else if (a == "--first-step-only") {
      firstOnly = true;
    } else if (a == "--help" || a.rfind("--", 0) == 0) {
      std::fprintf(
          a == "--help" ? stdout : stderr,
          "usage: bench-scale-ladder [--executions N] [--smallest] [--first-step-only] DIR...\n"
          "  DIR: a rung recorded by bench/scale_ladder_record.py (smallest first)\n");
      return a == "--help" ? 0 : 2;
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "bench-scale-ladder: expected at least one rung folder (--help)\n");
    return 2;
  }
  if (smallest) {
    dirs.resize(1);
    firstOnly = true;
  }
  if (executions < 0) executions = smallest ? 4 : 1000;
  executions = std::max(executions, 2);
  std::printf(
      "bench-scale-ladder: %zu rung(s), %d randomized executions per step, pool of %d "
      "threads\n",
      dirs.size(), executions, ThreadPool::global().size());
  std::vector<Row> rows;
  bool ok = true;
  for (const std::string& dir : dirs) {
    try {
      auto ref = RunFileReplay::open(dir + "/reference.h5");
      auto fixed = RunFileReplay::open(dir + "/candidate-fixed.h5");
      std::unique_ptr<RunFileReplay> buggy;
      if (QFile::exists(QString::fromStdString(dir + "/candidate-buggy.h5")))
        buggy = RunFileReplay::open(dir + "/candidate-buggy.h5");
      const TorchFigures torch = readTorch(dir);
      if (!torch.ok) std::printf("%s: no torch.json, PyTorch columns left empty\n", dir.c_str());
      const std::vector<std::int64_t> steps = ref->checkpointSteps();
      std::vector<std::int64_t> chosen = {steps.front()};
      if (steps.back() != steps.front() && !firstOnly) chosen.push_back(steps.back());
      for (std::int64_t s : chosen)
        ok = runStep(dir, *ref, *fixed, buggy.get(), s, executions, smallest, s == chosen.front(),
                     torch, rows) &&
             ok;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", dir.c_str(), e.what());
      ok = false;
    }
    std::fflush(stdout);
  }
  printTables(rows);
  std::printf("\n%s\n", ok ? "no escape of the interval or first-order envelope"
                           : "FAILED: an escape, a misclassification (--smallest) or an error");
  return ok ? 0 : 1;
}
