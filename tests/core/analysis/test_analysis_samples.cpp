// The replay on the sample sessions (samples/<name>/{reference,candidate}.h5):
// - classification: gradaccum-fixed and kernel-path never exit and pass the self-check at every
//   analysed step; gradaccum-hf-bug exits at the first analysed step (default method, and every
//   method whose envelope is tight enough — reported per method);
// - soundness: 1,000 randomized executions of the candidate program on the reference state (the
//   ensemble oracle) never leave the interval or the first-order envelope, at a few steps of each
//   sample;
// - tightness: the relative half-width of each method's envelope and its ratio to the observed
//   half-spread of the randomized executions (printed with qInfo; the README quotes them).
#include "core/analysis/analyzer.h"
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/analysis/verdict.h"
#include "core/backend.h"
#include "core/parallel/thread_pool.h"

#include <QFileInfo>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

using namespace lossbound;

namespace {

std::string samplePath(const char* sample, const char* role) {
  return std::string(LOSSBOUND_SOURCE_DIR) + "/samples/" + sample + "/" + role + ".h5";
}

constexpr const char* kSamples[] = {"gradaccum-fixed", "gradaccum-hf-bug", "kernel-path"};
constexpr EnvelopeMethod kMethods[] = {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder,
                                       EnvelopeMethod::Probabilistic, EnvelopeMethod::Ensemble};
/// Randomized executions per step of the soundness oracle (the issue asks for 1,000).
constexpr int kOracleMembers = 1000;

struct Pair {
  std::unique_ptr<RunFileReplay> reference, candidate;
};

Pair openPair(const char* sample) {
  return {RunFileReplay::open(samplePath(sample, "reference")),
          RunFileReplay::open(samplePath(sample, "candidate"))};
}

AnalyzerOptions noCache() {
  AnalyzerOptions o;
  o.useCache = false;
  return o;
}

/// Runs `n` randomized executions of `program` on `inputs` over the thread pool; returns
/// [min, max].
Interval oracleSpread(const Program& program, const TensorMap& inputs, int n, std::uint64_t seed) {
  std::mutex m;
  Interval spread{std::numeric_limits<double>::infinity(),
                  -std::numeric_limits<double>::infinity()};
  ThreadPool::global().parallelFor(n, [&](std::int64_t begin, std::int64_t end) {
    auto backend = createCpuBackend(1);
    EvalOptions o;
    o.domain = EvalDomain::Random;
    for (std::int64_t i = begin; i < end; ++i) {
      o.seed = seed + static_cast<std::uint64_t>(i) * 7919u;
      const Interval v = lossValue(evaluate(program, inputs, *backend, o));
      std::lock_guard lock(m);
      spread.lo = std::min(spread.lo, v.lo);
      spread.hi = std::max(spread.hi, v.hi);
    }
  });
  return spread;
}

}  // namespace

class TestAnalysisSamples : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    for (const char* s : kSamples)
      for (const char* role : {"reference", "candidate"})
        QVERIFY2(QFileInfo::exists(QString::fromStdString(samplePath(s, role))),
                 (samplePath(s, role) + " is missing (samples/pytorch/make_samples.py)").c_str());
  }

  /// The default method on every checkpointed step of every sample.
  void defaultMethodClassifiesSamples() {
    const AnalysisSettings settings;  // the default method
    for (const char* sample : kSamples) {
      const Pair p = openPair(sample);
      int progressCalls = 0;
      const AnalysisReport r =
          Analyzer(noCache()).analyse(*p.reference, *p.candidate, StepSelection::all(), settings,
                                      [&](int done, int total, const StepResult&) {
                                        ++progressCalls;
                                        QVERIFY(done <= total);
                                      });
      QCOMPARE(progressCalls, static_cast<int>(r.steps.size()));
      QVERIFY(r.steps.size() >= 10);
      for (const StepResult& s : r.steps) {
        const std::string where = std::string(sample) + " step " + std::to_string(s.step) + ": " +
                                  std::string(verdictName(s.verdict)) + " " + s.note;
        QVERIFY2(s.verdict != StepVerdict::NotBounded, where.c_str());
        QVERIFY2(s.selfCheckPassed, where.c_str());
      }
      if (std::string(sample) == "gradaccum-hf-bug") {
        QVERIFY2(r.firstExit.has_value(), "gradaccum-hf-bug: no exit found");
        QCOMPARE(*r.firstExit, r.steps.front().step);
      } else {
        QVERIFY2(!r.firstExit.has_value(), (std::string(sample) + ": exit at step " +
                                            std::to_string(r.firstExit.value_or(-1)))
                                               .c_str());
      }
      int exits = 0;
      for (const StepResult& s : r.steps) exits += isExit(s.verdict);
      qInfo("%s, %s (default): %d of %zu steps exit, first exit %s", sample,
            std::string(methodName(settings.method)).c_str(), exits, r.steps.size(),
            r.firstExit ? std::to_string(*r.firstExit).c_str() : "none");
    }
  }

  /// Every method at a few steps: classification and relative half-width, printed; the rigorous
  /// ones must classify the pure-rounding samples as rounding and pass the self-check.
  void everyMethodOnSamples() {
    for (const char* sample : kSamples) {
      const Pair p = openPair(sample);
      for (EnvelopeMethod m : kMethods) {
        AnalysisSettings s;
        s.method = m;
        const AnalysisReport r = Analyzer(noCache()).analyse(
            *p.reference, *p.candidate, StepSelection::list({0, 1, 25, 49}), s);
        QCOMPARE(r.steps.size(), std::size_t{4});  // the checks below are per step
        int exits = 0, selfFails = 0;
        double relHalf = 0, seconds = 0;
        for (const StepResult& st : r.steps) {
          QVERIFY2(st.verdict != StepVerdict::NotBounded, st.note.c_str());
          exits += isExit(st.verdict);
          selfFails += !st.selfCheckPassed;
          relHalf = std::max(relHalf, (st.hi - st.lo) / 2 / std::abs(st.referenceLoss));
          seconds += st.seconds;
        }
        qInfo(
            "%-17s %-13s exits %d/4 (first %s), self-check failures %d, max relative "
            "half-width %.3g, %.3f s/step",
            sample, std::string(methodName(m)).c_str(), exits,
            r.firstExit ? std::to_string(*r.firstExit).c_str() : "none", selfFails, relHalf,
            seconds / static_cast<double>(r.steps.size()));
        const bool sound = m == EnvelopeMethod::Interval || m == EnvelopeMethod::FirstOrder;
        if (sound) {
          QCOMPARE(selfFails, 0);
          if (std::string(sample) != "gradaccum-hf-bug") QCOMPARE(exits, 0);
        }
      }
    }
  }

  /// The soundness oracle: no randomized execution leaves the interval or first-order envelope.
  void ensembleNeverEscapesRigorousEnvelopes() {
    for (const char* sample : kSamples) {
      const Pair p = openPair(sample);
      for (std::int64_t step : {std::int64_t{0}, std::int64_t{49}}) {
        const auto program = p.candidate->programAt(step);
        const TensorMap inputs = adaptInputs(*program, p.reference->inputsAt(step), nullptr);
        auto backend = createCpuBackend();
        ReplayOptions o;
        o.method = EnvelopeMethod::Interval;
        const Envelope iv = replayEnvelope(*program, inputs, *backend, o);
        o.method = EnvelopeMethod::FirstOrder;
        const Envelope fo = replayEnvelope(*program, inputs, *backend, o);
        o.method = EnvelopeMethod::Probabilistic;
        o.lambda = hoeffdingLambda(1 - 1e-6);
        const Envelope pr = replayEnvelope(*program, inputs, *backend, o);
        const Interval spread = oracleSpread(*program, inputs, kOracleMembers, 1000 + step);
        const double half = std::max((spread.hi - spread.lo) / 2, 1e-300);
        const double centre = (spread.hi + spread.lo) / 2;
        const std::string where = std::string(sample) + " step " + std::to_string(step) +
                                  ": randomized executions in [" + std::to_string(spread.lo) +
                                  ", " + std::to_string(spread.hi) + "]";
        QVERIFY2(iv.lo <= spread.lo && spread.hi <= iv.hi,
                 (where + " escape the interval envelope").c_str());
        QVERIFY2(fo.lo <= spread.lo && spread.hi <= fo.hi,
                 (where + " escape the first-order envelope").c_str());
        // The radius includes the binary64 evaluation's own first-order bound, computed with the
        // same adjoints: per node, the bound of an fp64 run (a model override computes it) where
        // a rule has no closed form for its point() error, and that closed form (positive) where
        // it has one (OpRule::pointError: the softmax rows, gelu, layer norm). So pointBound lies
        // between the fp64 run's bound without those nodes' terms and the whole of it.
        EvalOptions e64;
        e64.precision.override = Format::Fp64;
        const FirstOrderResult b64 = evaluateFirstOrder(*program, inputs, *backend, e64);
        double closedTerms = 0.0;
        for (const NodeBudget& n : b64.nodes)
          if (n.op == "aten._softmax.default" || n.op == "aten._log_softmax.default" ||
              n.op == "aten.gelu.default" || n.op == "aten.native_layer_norm.default")
            closedTerms += n.bound;
        const double rest = b64.bound - closedTerms;
        QVERIFY2(
            closedTerms > 0 && fo.pointBound > rest * (1 + 1e-12) && fo.pointBound < b64.bound,
            (where + ": pointBound " + std::to_string(fo.pointBound) +
             " is not between the fp64 first-order bound without the closed-form nodes' terms " +
             std::to_string(rest) + " and with them " + std::to_string(b64.bound))
                .c_str());
        qInfo(
            "%s: pointBound %.3g: %.3g from the fp64 model's terms of the other nodes, the "
            "softmax rows', gelu's and layer norm's closed forms %.3g in place of %.3g",
            where.c_str(), fo.pointBound, rest, fo.pointBound - rest, closedTerms);
        QVERIFY2(fo.hi - fo.lo >= 2 * (fo.bound + fo.pointBound),
                 (where + ": the first-order radius lacks the binary64 term").c_str());
        for (const auto& [name, env] : {std::pair{"interval", iv}, std::pair{"first-order", fo},
                                        std::pair{"probabilistic", pr}}) {
          const double h = (env.hi - env.lo) / 2;
          qInfo(
              "%-17s step %2lld %-13s relative half-width %.3g, ratio to the observed "
              "half-spread of %d randomized executions %.3g (spread %.3g relative)",
              sample, static_cast<long long>(step), name, h / std::abs(centre), kOracleMembers,
              h / half, half / std::abs(centre));
        }
        qInfo("%-17s step %2lld binary64 first-order bound / fp32 bound = %.3g", sample,
              static_cast<long long>(step), fo.pointBound / fo.bound);
      }
    }
  }

  /// Cancellation stops the analysis early and returns the finished steps only.
  void cancellationStops() {
    const Pair p = openPair("gradaccum-fixed");
    std::atomic<bool> cancel{false};
    int seen = 0;
    const AnalysisReport r = Analyzer(noCache()).analyse(
        *p.reference, *p.candidate, StepSelection::all(), AnalysisSettings{},
        [&](int, int, const StepResult&) {
          if (++seen == 2) cancel = true;
        },
        &cancel);
    QVERIFY(r.cancelled);
    QVERIFY(r.steps.size() >= 2);
    QVERIFY(r.steps.size() < 50);
  }
};

QTEST_GUILESS_MAIN(TestAnalysisSamples)
#include "test_analysis_samples.moc"
