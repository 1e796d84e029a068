// The Analyzer on small in-memory runs (a linear layer + log_softmax + nll_loss): verdicts from the
// replay, the self-check, unsupported ops, missing log entries, mismatched pairs, dtype rounding
// of the reference's inputs, progress, cancellation, the rigorous confirmation of exits, and the
// interval method device-resident on a backend with a Device (the host device, with a memory cap).
#include "core/analysis/analyzer.h"
#include "core/analysis/step_replay.h"
#include "core/analysis/verdict.h"
#include "core/backend.h"
#include "core/device_backend.h"
#include "core/host_device.h"
#include "core/ir/program_parser.h"
#include "core/program/op_coverage.h"

#include <QTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

using namespace lossbound;

namespace {

/// The IR of loss = nll_loss(log_softmax(x @ w · scale)); `dtype` of the float inputs.
std::string programJson(double scale, const char* dtype = "float32",
                        const char* op = "aten.mul.Tensor") {
  const std::string d = dtype;
  return R"({"format":"lossbound-step-program","ir_version":1,"torch_version":"1.13.0",
    "inputs":[{"name":"param:w","shape":[8,5],"dtype":")" +
         d + R"("},
              {"name":"batch:x","shape":[6,8],"dtype":")" +
         d + R"("},
              {"name":"batch:y","shape":[6],"dtype":"int64"}],
    "nodes":[
      {"name":"mm","op":"aten.mm.default","args":[{"ref":"batch:x"},{"ref":"param:w"}],"kwargs":{},
       "outputs":[{"shape":[6,5],"dtype":")" +
         d + R"("}]},
      {"name":"scaled","op":")" +
         op + R"(","args":[{"ref":"mm"},)" + std::to_string(scale) + R"(],
       "kwargs":{},"outputs":[{"shape":[6,5],"dtype":")" +
         d + R"("}]},
      {"name":"lsm","op":"aten._log_softmax.default","args":[{"ref":"scaled"},1,false],"kwargs":{},
       "outputs":[{"shape":[6,5],"dtype":")" +
         d + R"("}]},
      {"name":"nll","op":"aten.nll_loss_forward.default",
       "args":[{"ref":"lsm"},{"ref":"batch:y"},null,1,-100],"kwargs":{},
       "outputs":[{"shape":[],"dtype":")" +
         d + R"("},{"shape":[],"dtype":")" + d + R"("}]}],
    "outputs":[{"name":"loss","ref":{"ref":"nll","index":0}}]})";
}

/// The IR of programJson's loss with the rows taken in the order of sort(y): the same loss (a
/// mean over rows), but an unstable sort leaves the order of equal labels open, so the interval
/// replay has inexact indices where the point replay has one order.
std::string permutedProgramJson(double scale) {
  return R"({"format":"lossbound-step-program","ir_version":1,"torch_version":"2.15.0",
    "inputs":[{"name":"param:w","shape":[8,5],"dtype":"float32"},
              {"name":"batch:x","shape":[6,8],"dtype":"float32"},
              {"name":"batch:y","shape":[6],"dtype":"int64"}],
    "nodes":[
      {"name":"sort","op":"aten.sort.default","args":[{"ref":"batch:y"}],"kwargs":{},
       "outputs":[{"shape":[6],"dtype":"int64"},{"shape":[6],"dtype":"int64"}]},
      {"name":"xp","op":"aten.index.Tensor","args":[{"ref":"batch:x"},[{"ref":"sort","index":1}]],
       "kwargs":{},"outputs":[{"shape":[6,8],"dtype":"float32"}]},
      {"name":"yp","op":"aten.index.Tensor","args":[{"ref":"batch:y"},[{"ref":"sort","index":1}]],
       "kwargs":{},"outputs":[{"shape":[6],"dtype":"int64"}]},
      {"name":"mm","op":"aten.mm.default","args":[{"ref":"xp"},{"ref":"param:w"}],"kwargs":{},
       "outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"scaled","op":"aten.mul.Tensor","args":[{"ref":"mm"},)" +
         std::to_string(scale) + R"(],"kwargs":{},"outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"lsm","op":"aten._log_softmax.default","args":[{"ref":"scaled"},1,false],"kwargs":{},
       "outputs":[{"shape":[6,5],"dtype":"float32"}]},
      {"name":"nll","op":"aten.nll_loss_forward.default",
       "args":[{"ref":"lsm"},{"ref":"yp"},null,1,-100],"kwargs":{},
       "outputs":[{"shape":[],"dtype":"float32"},{"shape":[],"dtype":"float32"}]}],
    "outputs":[{"name":"loss","ref":{"ref":"nll","index":0}}]})";
}

/// A run held in memory: one program, checkpoints and a log.
class MemoryRun final : public ReplayRun {
 public:
  MemoryRun(std::string name, std::shared_ptr<const Program> program)
      : mName(std::move(name)), mProgram(std::move(program)) {}
  std::string name() const override { return mName; }
  std::vector<std::int64_t> checkpointSteps() const override {
    std::vector<std::int64_t> s;
    for (const auto& [k, v] : mInputs) s.push_back(k);
    return s;
  }
  std::optional<double> loggedLoss(std::int64_t step) const override {
    const auto it = mLoss.find(step);
    return it == mLoss.end() ? std::nullopt : std::optional<double>(it->second);
  }
  std::shared_ptr<const Program> programAt(std::int64_t) const override { return mProgram; }
  TensorMap inputsAt(std::int64_t step) const override { return mInputs.at(step); }

  std::map<std::int64_t, TensorMap> mInputs;
  std::map<std::int64_t, double> mLoss;

 private:
  std::string mName;
  std::shared_ptr<const Program> mProgram;
};

std::shared_ptr<const Program> program(double scale, const char* dtype = "float32",
                                       const char* op = "aten.mul.Tensor") {
  return std::make_shared<const Program>(parseProgram(programJson(scale, dtype, op)));
}

/// Checkpoints at steps 0..n-1 with fp32-representable random values; losses from one
/// randomized fp32 execution of the run's own program (a faithful recording).
void fill(MemoryRun& run, int n, DType dtype = DType::Float32, bool fp32Values = true) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  auto backend = createCpuBackend();
  for (int step = 0; step < n; ++step) {
    auto values = [&](std::size_t count) {
      std::vector<double> v(count);
      for (double& x : v) {
        x = normal(rng);
        if (fp32Values) x = static_cast<float>(x);
      }
      return v;
    };
    std::vector<double> y(6);
    for (int i = 0; i < 6; ++i) y[i] = static_cast<double>((step + i) % 5);
    TensorMap in;
    in["param:w"] = Tensor::point({8, 5}, dtype, values(40));
    in["batch:x"] = Tensor::point({6, 8}, dtype, values(48));
    in["batch:y"] = Tensor::point({6}, DType::Int64, y);
    run.mInputs[step] = in;
    EvalOptions o;
    o.domain = EvalDomain::Random;
    o.seed = 100 + step;
    run.mLoss[step] = lossValue(evaluate(*run.programAt(step), in, *backend, o)).lo;
  }
}

AnalyzerOptions opts() {
  AnalyzerOptions o;
  o.useCache = false;
  return o;
}

/// What `--backend host-device` gives every step worker: the CPU backend with the host device
/// (`capBytes` > 0: allocations beyond it fail).
AnalyzerOptions hostDeviceOpts(std::int64_t capBytes) {
  AnalyzerOptions o = opts();
  o.backendFactory = [capBytes](int threads) -> std::unique_ptr<Backend> {
    return std::make_unique<DeviceBackend>(createCpuBackend(threads),
                                           std::make_unique<HostDevice>(capBytes));
  };
  return o;
}

/// A CPU backend with a host device that counts how often it is asked for its device: once per
/// step worker when the worker keeps its evaluators, once per replay when it does not.
class CountingDeviceBackend final : public Backend {
 public:
  explicit CountingDeviceBackend(std::atomic<int>& asks) : mAsks(asks) {}
  std::string name() const override { return "counting host device"; }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    mCpu->gemm(a, b, c, m, k, n, absolute);
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mCpu->parallelFor(n, body);
  }
  Device* residentDevice() override {
    ++mAsks;
    return &mDevice;
  }

 private:
  std::atomic<int>& mAsks;
  std::unique_ptr<Backend> mCpu = createCpuBackend(1);
  HostDevice mDevice;
};

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

}  // namespace

class TestAnalyzerSynthetic : public QObject {
  Q_OBJECT

 private slots:
  void samePrograms_roundingEverywhere() {
    for (EnvelopeMethod m :
         {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder, EnvelopeMethod::Probabilistic}) {
      MemoryRun ref("ref", program(1.0)), cand("cand", program(1.0));
      fill(ref, 4);
      fill(cand, 4);
      // The candidate's recorded losses come from other random orders than the reference's.
      for (auto& [s, l] : cand.mLoss) {
        EvalOptions o;
        o.domain = EvalDomain::Random;
        o.seed = 999 + s;
        auto b = createCpuBackend();
        l = lossValue(evaluate(*cand.programAt(s), cand.mInputs[s], *b, o)).lo;
      }
      AnalysisSettings s;
      s.method = m;
      int calls = 0;
      const AnalysisReport r = Analyzer(opts()).analyse(
          ref, cand, StepSelection::all(), s, [&](int done, int total, const StepResult&) {
            QCOMPARE(total, 4);
            QCOMPARE(done, ++calls);
          });
      QCOMPARE(calls, 4);
      QCOMPARE(r.steps.size(), std::size_t{4});
      QVERIFY(!r.firstExit);
      for (const StepResult& st : r.steps) {
        QVERIFY2(st.verdict == StepVerdict::Rounding, st.note.c_str());
        QVERIFY(st.lo < st.hi);
        QVERIFY(std::abs(st.margin) <= 1);
        QCOMPARE(st.method, m);
      }
      if (m != EnvelopeMethod::Interval) {
        QVERIFY(!r.steps[0].budget.empty());
        double total = 0;
        for (const BudgetShare& b : r.steps[0].budget) total += b.share;
        QVERIFY(total <= 1 + 1e-12 && total > 0.5);
      }
    }
  }

  void differentFormula_bug() {
    // The candidate scales the logits by 1.01: a formula change far above fp32 rounding.
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.01));
    fill(ref, 3);
    fill(cand, 3);
    for (EnvelopeMethod m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder}) {
      AnalysisSettings s;
      s.method = m;
      const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::parse("1:2"), s);
      QCOMPARE(r.steps.size(), std::size_t{2});
      QCOMPARE(*r.firstExit, std::int64_t{1});
      for (const StepResult& st : r.steps) {
        // Outside the first-order envelope and, confirmed, outside the rigorous interval too.
        QCOMPARE(st.verdict, StepVerdict::BugCertain);
        QVERIFY(std::abs(st.margin) > 1);
        QVERIFY(st.selfCheckPassed);
      }
    }
  }

  void unconfirmableExit_staysLikely() {
    // The rigorous confirmation cannot run (the interval replay meets indices an unstable sort of
    // tied labels leaves open): the first-order exit keeps "bug (likely)" and says why, where it
    // used to lose the whole step.
    const auto refProgram = std::make_shared<const Program>(parseProgram(permutedProgramJson(1.0)));
    const auto candProgram =
        std::make_shared<const Program>(parseProgram(permutedProgramJson(1.01)));
    MemoryRun ref("ref", refProgram), cand("cand", candProgram);
    fill(ref, 2);
    fill(cand, 2);
    AnalysisSettings s;
    s.method = EnvelopeMethod::FirstOrder;
    const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), s);
    QCOMPARE(r.steps.size(), std::size_t{2});
    for (const StepResult& st : r.steps) {
      QCOMPARE(st.verdict, StepVerdict::BugLikely);
      QVERIFY2(st.note.find("No rigorous confirmation") != std::string::npos, st.note.c_str());
      QVERIFY2(st.note.find("order of equal values") != std::string::npos, st.note.c_str());
    }
    // The correct pair is rounding; the interval method itself says why it cannot bound.
    MemoryRun same("same", refProgram);
    fill(same, 2);
    QCOMPARE(Analyzer(opts()).analyse(ref, same, StepSelection::all(), s).steps[0].verdict,
             StepVerdict::Rounding);
    s.method = EnvelopeMethod::Interval;
    const AnalysisReport iv = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), s);
    QCOMPARE(iv.steps[0].verdict, StepVerdict::NotBounded);
    QVERIFY2(iv.steps[0].note.find("node 'xp'") != std::string::npos, iv.steps[0].note.c_str());
  }

  void selfCheckFailure_untrustworthyNotBug() {
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.01));
    fill(ref, 2);
    fill(cand, 2);
    cand.mLoss[0] *= 1.001;  // the candidate's log does not match its own program
    const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), {});
    QCOMPARE(r.steps[0].verdict, StepVerdict::Untrustworthy);
    QVERIFY(!r.steps[0].selfCheckPassed);
    QVERIFY2(r.steps[0].note.find("Self-check failed") != std::string::npos,
             r.steps[0].note.c_str());
    QCOMPARE(r.steps[1].verdict, StepVerdict::BugCertain);
    QCOMPARE(*r.firstExit, std::int64_t{1});
  }

  void missingLogAndUnsupportedOp_notBounded() {
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.0));
    fill(ref, 2);
    fill(cand, 2);
    ref.mLoss.erase(1);
    AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), {});
    QCOMPARE(r.steps[1].verdict, StepVerdict::NotBounded);
    QVERIFY2(r.steps[1].note.find("reference log has no loss at step 1") != std::string::npos,
             r.steps[1].note.c_str());
    QVERIFY(!r.firstExit);
  }

  void unsupportedOp_named() {
    MemoryRun ref("ref", program(1.0));
    fill(ref, 1);
    MemoryRun cand("cand", program(1.0, "float32", "aten.frobnicate.default"));
    cand.mInputs = ref.mInputs;
    cand.mLoss = ref.mLoss;
    const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), {});
    QCOMPARE(r.steps[0].verdict, StepVerdict::NotBounded);
    QVERIFY2(r.steps[0].note.find("aten.frobnicate.default (node scaled)") != std::string::npos,
             r.steps[0].note.c_str());
  }

  void mismatchedPair_refused() {
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.0));
    fill(ref, 1);
    fill(cand, 1);
    auto other = std::make_shared<const Program>([] {
      Program p = parseProgram(programJson(1.0));
      p.inputs[1].spec.shape = {7, 8};
      return p;
    }());
    MemoryRun wrong("wrong", other);
    wrong.mInputs = cand.mInputs;
    wrong.mLoss = cand.mLoss;
    try {
      Analyzer(opts()).analyse(ref, wrong, StepSelection::all(), {});
      QFAIL("mismatched pair accepted");
    } catch (const AnalysisError& e) {
      QVERIFY2(std::string(e.what()).find("batch:x") != std::string::npos, e.what());
      QVERIFY2(std::string(e.what()).find("[7, 8]") != std::string::npos, e.what());
    }
    MemoryRun none("none", program(1.0));
    QVERIFY_THROWS_EXCEPTION(AnalysisError,
                             Analyzer(opts()).analyse(ref, none, StepSelection::all(), {}));
    AnalysisSettings bad;
    bad.method = EnvelopeMethod::Probabilistic;
    bad.confidence = 1.0;
    QVERIFY_THROWS_EXCEPTION(AnalysisError,
                             Analyzer(opts()).analyse(ref, cand, StepSelection::all(), bad));
    AnalysisSettings node;
    node.method = EnvelopeMethod::Interval;
    node.startNode = "no_such_node";
    // An unknown start node is bad usage, refused before any replay, naming the node.
    try {
      Analyzer(opts()).analyse(ref, cand, StepSelection::all(), node);
      QFAIL("unknown start node accepted");
    } catch (const AnalysisError& e) {
      QVERIFY2(std::string(e.what()).find("'no_such_node'") != std::string::npos, e.what());
    }
  }

  void startNode_notRigorous() {
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.01));
    fill(ref, 1);
    fill(cand, 1);
    AnalysisSettings s;
    s.method = EnvelopeMethod::Interval;
    s.startNode = "lsm";
    const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), s);
    QVERIFY(r.note.find("ignored") != std::string::npos);
    QVERIFY2(
        r.steps[0].note.find("Upstream of node 'lsm' rounding is ignored") != std::string::npos,
        r.steps[0].note.c_str());
    // Outside an interval started at a node is confirmed against the one from the inputs.
    QCOMPARE(r.steps[0].verdict, StepVerdict::BugCertain);
  }

  void referenceInputsRounded() {
    // Reference stores fp64 values; the candidate program takes fp32: rounded, and said so.
    MemoryRun ref("ref", program(1.0, "float64")), cand("cand", program(1.0));
    fill(ref, 1, DType::Float64, false);
    fill(cand, 1);
    const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), {});
    QVERIFY2(r.steps[0].note.find("rounded to nearest (float64 to float32)") != std::string::npos,
             r.steps[0].note.c_str());
    std::string note;
    const TensorMap in = adaptInputs(*cand.programAt(0), ref.mInputs[0], &note);
    for (double v : in.at("param:w").values())
      QCOMPARE(v, static_cast<double>(static_cast<float>(v)));
    QCOMPARE(in.at("param:w").dtype(), DType::Float32);
  }

  void deviceResident_sameEnvelopesAndFallbackNotes() {
    // The interval method on a backend with a resident device: the CPU's envelopes and verdicts
    // bit for bit; under a memory cap the nodes that do not fit run on the host and the step's
    // note names the fallback for the main replay, the self-check and the rigorous confirmation
    // of a first-order exit.
    for (const double scale : {1.0, 1.01}) {
      MemoryRun ref("ref", program(1.0)), cand("cand", program(scale));
      fill(ref, 3);
      fill(cand, 3);
      AnalysisSettings s;
      s.method = scale == 1.0 ? EnvelopeMethod::Interval : EnvelopeMethod::FirstOrder;
      const AnalysisReport want = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), s);
      for (const std::int64_t cap : {std::int64_t{0}, std::int64_t{1024}}) {
        const AnalysisReport got =
            Analyzer(hostDeviceOpts(cap)).analyse(ref, cand, StepSelection::all(), s);
        QVERIFY2(got.backendDescription.find("device-resident on host device") != std::string::npos,
                 got.backendDescription.c_str());
        QCOMPARE(got.steps.size(), want.steps.size());
        for (std::size_t k = 0; k < want.steps.size(); ++k) {
          const StepResult &g = got.steps[k], &w = want.steps[k];
          QVERIFY(sameBits(g.lo, w.lo) && sameBits(g.hi, w.hi));
          QVERIFY(sameBits(g.selfLo, w.selfLo) && sameBits(g.selfHi, w.selfHi));
          QCOMPARE(g.verdict, w.verdict);
          if (cap == 0) {
            QCOMPARE(g.note, w.note);
            continue;
          }
          const std::string fallback = "ran on the host for lack of device memory";
          if (s.method == EnvelopeMethod::Interval) {
            QVERIFY2(g.note.find("Device-resident interval replay: ") != std::string::npos &&
                         g.note.find(fallback) != std::string::npos,
                     g.note.c_str());
            QVERIFY2(
                g.note.find("Self-check: Device-resident interval replay: ") != std::string::npos,
                g.note.c_str());
          } else {
            QCOMPARE(g.verdict, StepVerdict::BugCertain);
            QVERIFY2(g.note.find("Rigorous confirmation: Device-resident interval replay: ") !=
                         std::string::npos,
                     g.note.c_str());
          }
        }
      }
    }
  }

  void deviceResident_onePlanSetPerWorker() {
    // Plans are kept across steps: a step worker asks its backend for the device once, not once
    // per replay (6 interval replays here on one worker).
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.0));
    fill(ref, 3);
    fill(cand, 3);
    AnalysisSettings s;
    s.method = EnvelopeMethod::Interval;
    std::atomic<int> asks{0};
    AnalyzerOptions o = opts();
    o.workers = 1;
    o.backendFactory = [&asks](int) -> std::unique_ptr<Backend> {
      return std::make_unique<CountingDeviceBackend>(asks);
    };
    const AnalysisReport got = Analyzer(o).analyse(ref, cand, StepSelection::all(), s);
    const AnalysisReport want = Analyzer(opts()).analyse(ref, cand, StepSelection::all(), s);
    QCOMPARE(got.steps.size(), std::size_t{3});
    for (std::size_t k = 0; k < want.steps.size(); ++k)
      QVERIFY(sameBits(got.steps[k].lo, want.steps[k].lo) &&
              sameBits(got.steps[k].hi, want.steps[k].hi));
    QCOMPARE(asks.load(), 1);
  }

  void ensembleAndCancellation() {
    MemoryRun ref("ref", program(1.0)), cand("cand", program(1.0));
    fill(ref, 6);
    fill(cand, 6);
    AnalysisSettings s;
    s.method = EnvelopeMethod::Ensemble;
    s.ensembleSize = 8;
    const AnalysisReport r = Analyzer(opts()).analyse(ref, cand, StepSelection::list({2, 4}), s);
    QCOMPARE(r.steps.size(), std::size_t{2});
    for (const StepResult& st : r.steps) QVERIFY(st.lo <= st.hi);

    // The summation orders are the setting's: an ensemble of one is the execution with one order
    // per matrix product (the default) or one per element, from the member's seed. The losses of
    // this small program take few values, so executions are compared one by one, not hulls: the
    // check needs some seeds where the two orders give different losses, and then fails if the
    // setting is ignored.
    MemoryRun ref64("ref", program(1.0, "float64")), cand64("cand", program(1.0, "float64"));
    fill(ref64, 6, DType::Float64, false);
    fill(cand64, 6, DType::Float64, false);
    const TensorMap& in = ref64.mInputs.at(2);
    auto backend = createCpuBackend(1);
    int differ = 0;
    for (std::uint64_t base = 0; base < 16; ++base) {
      double loss[2];
      for (EnsembleOrder order : {EnsembleOrder::PerProduct, EnsembleOrder::PerElement}) {
        ReplayOptions ro;
        ro.method = EnvelopeMethod::Ensemble;
        ro.ensembleSize = 1;
        ro.ensembleOrder = order;
        ro.seed = base;
        const Envelope env = replayEnvelope(*cand64.programAt(2), in, *backend, ro);
        EvalOptions eval;
        eval.domain = EvalDomain::Random;
        eval.orderPerProduct = order == EnsembleOrder::PerProduct;
        eval.seed = ensembleMemberSeed(base, 0);
        loss[int(order)] = lossValue(evaluate(*cand64.programAt(2), in, *backend, eval)).lo;
        // Exact: QCOMPARE on doubles forgives a few ulps, the very difference checked here.
        QVERIFY(sameBits(env.lo, loss[int(order)]) && sameBits(env.hi, loss[int(order)]));
      }
      differ += loss[0] != loss[1];
    }
    QVERIFY(differ > 0);
    // And through the analyzer: ensembles of one at six steps, some of them different.
    s.ensembleSize = 1;
    const AnalysisReport pp = Analyzer(opts()).analyse(ref64, cand64, StepSelection::all(), s);
    s.ensembleOrder = EnsembleOrder::PerElement;
    const AnalysisReport pe = Analyzer(opts()).analyse(ref64, cand64, StepSelection::all(), s);
    QCOMPARE(pp.steps.size(), std::size_t{6});
    int stepsDiffer = 0;
    for (std::size_t k = 0; k < pp.steps.size(); ++k)
      stepsDiffer += pp.steps[k].lo != pe.steps[k].lo;
    QVERIFY(stepsDiffer > 0);

    std::atomic<bool> cancel{true};
    const AnalysisReport c =
        Analyzer(opts()).analyse(ref, cand, StepSelection::all(), {}, {}, &cancel);
    QVERIFY(c.cancelled);
    QVERIFY(c.steps.empty());
  }
};

QTEST_GUILESS_MAIN(TestAnalyzerSynthetic)
#include "test_analyzer_synthetic.moc"
