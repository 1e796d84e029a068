// bench-replay: the cost of one step replay by each envelope method, against the binary64 point
// replay and against PyTorch executing the same step (CPU, fp32 and fp64), measured in one run.
//
//   bench-replay [SAMPLE_DIR] [STEP] [REPEATS]     (default samples/gradaccum-hf-bug, 0, 5)
//
// Everything runs on one thread (Lossbound: a single-threaded CPU backend; PyTorch:
// torch.set_num_threads(1)) so the ratios compare arithmetic, not parallel scaling. The forward
// pass of the loss only (the backward nodes of the recorded program are pruned on both sides).
// The PyTorch column re-executes the recorded aten graph node by node with
// samples/pytorch/lossbound_replay.py (torch.ops.aten calls from Python, no autograd): the same
// ops on the same tensors, with Python's per-node dispatch cost included, which it reports
// separately as the time of an empty per-node loop.
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/analysis/verdict.h"
#include "core/backend.h"
#include "core/host_kernel_backend.h"

#include <QCoreApplication>
#include <QProcess>
#include <QStringList>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace lossbound;

namespace {

/// Returns the median wall time in seconds of `repeats` calls of f (after one warm-up call).
double medianSeconds(int repeats, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Runs f and adds its wall time to `total`; returns what f returns.
template <typename F>
auto timed(double& total, F&& f) {
  struct Add {
    double& total;
    std::chrono::steady_clock::time_point t0;
    ~Add() {
      total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  } add{total, std::chrono::steady_clock::now()};
  return f();
}

/// Forwards to an inner backend and adds up the wall time spent in its GEMMs and in its interval
/// kernel hooks: the work the CUDA backend takes off the host.
class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(Backend& inner) : mInner(inner) {}
  std::string name() const override { return mInner.name(); }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    timed(gemmSeconds, [&] { mInner.gemm(a, b, c, m, k, n, absolute); });
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mInner.parallelFor(n, body);
  }
  bool offersIntervalKernels() const override { return mInner.offersIntervalKernels(); }
  bool unary(kernels::UnaryOp op, const kernels::ElementwiseModel& m, kernels::ConstIntervalSpan x,
             kernels::IntervalSpan out, std::int64_t n) override {
    return timed(kernelSeconds, [&] { return mInner.unary(op, m, x, out, n); });
  }
  bool binary(kernels::BinaryOp op, const kernels::ElementwiseModel& m,
              kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y, std::int64_t yCount,
              kernels::IntervalSpan out, std::int64_t n) override {
    return timed(kernelSeconds, [&] { return mInner.binary(op, m, x, y, yCount, out, n); });
  }
  bool rowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
              std::int64_t cols, const kernels::SumModel& m) override {
    return timed(kernelSeconds, [&] { return mInner.rowSum(x, out, rows, cols, m); });
  }
  bool softmaxRows(const kernels::SoftmaxModel& m, bool log, kernels::ConstIntervalSpan x,
                   kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols) override {
    return timed(kernelSeconds, [&] { return mInner.softmaxRows(m, log, x, out, rows, cols); });
  }
  bool layerNormRows(const kernels::LayerNormModel& m, kernels::ConstIntervalSpan x,
                     kernels::ConstIntervalSpan w, kernels::ConstIntervalSpan b,
                     kernels::IntervalSpan out, kernels::IntervalSpan mean,
                     kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) override {
    return timed(kernelSeconds,
                 [&] { return mInner.layerNormRows(m, x, w, b, out, mean, rstd, rows, cols); });
  }

  double gemmSeconds = 0, kernelSeconds = 0;

 private:
  Backend& mInner;
};

const char* kTorchScript = R"PY(
import sys, time, json
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from lossbound_replay import RunFile, run_program
ref, cand, step, repeats = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
with RunFile(cand) as c, RunFile(ref) as r:
    prog = c.program_at(step)
    inputs = r.inputs_at(step)
# Prune to the nodes the loss depends on, as the C++ evaluator does.
loss_ref = next(o["ref"] for o in prog["outputs"] if o["name"] == "loss")
need, stack = set(), [loss_ref["ref"]]
deps = {n["name"]: n for n in prog["nodes"]}
def refs(v, out):
    if isinstance(v, dict) and "ref" in v: out.append(v["ref"])
    elif isinstance(v, list):
        for x in v: refs(x, out)
    elif isinstance(v, dict):
        for x in v.values(): refs(x, out)
while stack:
    n = stack.pop()
    if n in need or n not in deps: continue
    need.add(n)
    out = []
    refs(deps[n]["args"], out); refs(deps[n]["kwargs"], out)
    stack.extend(out)
prog = dict(prog, nodes=[n for n in prog["nodes"] if n["name"] in need],
            outputs=[o for o in prog["outputs"] if o["name"] == "loss"])
def timeit(f):
    f()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]
fp32 = timeit(lambda: run_program(prog, inputs))
fp64 = timeit(lambda: run_program(prog, inputs, compute_dtype=torch.float64))
loop = timeit(lambda: [dict(n) for n in prog["nodes"]])
print(json.dumps({"fp32": fp32, "fp64": fp64, "nodes": len(prog["nodes"]),
                  "loss32": float(run_program(prog, inputs)["loss"]), "torch": torch.__version__}))
)PY";

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const std::string sampleDir =
      argc > 1 ? argv[1] : std::string(LOSSBOUND_SOURCE_DIR) + "/samples/gradaccum-hf-bug";
  const std::int64_t step = argc > 2 ? std::stoll(argv[2]) : 0;
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 5;
  const std::string refPath = sampleDir + "/reference.h5", candPath = sampleDir + "/candidate.h5";

  auto reference = RunFileReplay::open(refPath);
  auto candidate = RunFileReplay::open(candPath);
  const auto program = candidate->programAt(step);
  const TensorMap inputs = adaptInputs(*program, reference->inputsAt(step), nullptr);
  auto backend = createCpuBackend(1);  // one thread: the ratios compare single-thread work

  std::printf("bench-replay: %s, step %lld, candidate program %zu nodes, median of %d, %s\n",
              sampleDir.c_str(), static_cast<long long>(step), program->nodes.size(), repeats,
              backend->name().c_str());

  EvalOptions pointOpts;
  const double point =
      medianSeconds(repeats, [&] { evaluate(*program, inputs, *backend, pointOpts); });
  struct Row {
    const char* name;
    double seconds;
  };
  std::vector<Row> rows = {{"point replay (binary64)", point}};
  for (EnvelopeMethod m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder,
                           EnvelopeMethod::Probabilistic, EnvelopeMethod::Ensemble}) {
    ReplayOptions o;
    o.method = m;
    o.lambda = hoeffdingLambda(1 - 1e-6);
    o.ensembleSize = 32;
    const double t =
        medianSeconds(m == EnvelopeMethod::Ensemble ? std::max(1, repeats / 5) : repeats,
                      [&] { replayEnvelope(*program, inputs, *backend, o); });
    static std::string names[4];
    names[static_cast<int>(m)] =
        std::string(methodName(m)) +
        (m == EnvelopeMethod::Ensemble ? " (32 executions, an order per product)" : "");
    rows.push_back({names[static_cast<int>(m)].c_str(), t});
  }

  // PyTorch, same step, same graph.
  QProcess py;
  py.start(QStringLiteral("/usr/bin/python3"),
           {QStringLiteral("-c"), QString::fromUtf8(kTorchScript),
            QString::fromStdString(std::string(LOSSBOUND_SOURCE_DIR) + "/samples/pytorch"),
            QString::fromStdString(refPath), QString::fromStdString(candPath),
            QString::number(step), QString::number(std::max(repeats, 5))});
  std::string torchNote;
  double torch32 = -1, torch64 = -1;
  if (!py.waitForFinished(300000) || py.exitStatus() != QProcess::NormalExit ||
      py.exitCode() != 0) {
    torchNote = "PyTorch column skipped: /usr/bin/python3 failed: " +
                QString::fromUtf8(py.readAllStandardError()).trimmed().right(300).toStdString();
  } else {
    const QByteArray out = py.readAllStandardOutput().trimmed();
    const auto field = [&](const char* key) {
      const int i = out.indexOf(QByteArray("\"") + key + "\": ");
      return i < 0 ? -1.0
                   : out.mid(i + static_cast<int>(std::strlen(key)) + 4)
                         .split(',')
                         .first()
                         .toDouble();
    };
    torch32 = field("fp32");
    torch64 = field("fp64");
    torchNote = "PyTorch: " + out.toStdString();
  }
  if (torch32 > 0) rows.push_back({"PyTorch fp32 (recorded graph, node by node)", torch32});
  if (torch64 > 0) rows.push_back({"PyTorch fp64 (recorded graph, node by node)", torch64});

  std::printf("\n%-46s %12s %14s\n", "", "ms", "x point replay");
  for (const Row& r : rows)
    std::printf("%-46s %12.3f %14.2f\n", r.name, r.seconds * 1e3, r.seconds / point);
  std::printf("\n%s\n", torchNote.c_str());

  // Which share of each replay the CUDA backend would take off the host: its GEMMs and its
  // offered interval kernels, timed here on the host (kernel bodies with emulated rounding).
  kernels::HostKernelBackend hostKernels;
  std::printf(
      "\nshare of the replay in work the CUDA backend takes (GEMMs, offered kernels), on "
      "the host:\n");
  for (EnvelopeMethod m : {EnvelopeMethod::Interval, EnvelopeMethod::FirstOrder}) {
    ReplayOptions o;
    o.method = m;
    TimedBackend timed(hostKernels);
    const double total =
        medianSeconds(repeats, [&] { replayEnvelope(*program, inputs, timed, o); });
    const double runs = repeats + 1;  // medianSeconds warms up once
    std::printf("  %-12s GEMMs %5.1f%%, kernels %5.1f%%, host-only rest %5.1f%%\n",
                std::string(methodName(m)).c_str(), 100 * timed.gemmSeconds / runs / total,
                100 * timed.kernelSeconds / runs / total,
                100 * (1 - (timed.gemmSeconds + timed.kernelSeconds) / runs / total));
  }
  const double interval = rows[1].seconds / point, firstOrder = rows[2].seconds / point;
  std::printf(
      "goal (interval and first-order <= 5x point replay): interval %.2fx, first-order "
      "%.2fx: %s\n",
      interval, firstOrder, interval <= 5 && firstOrder <= 5 ? "met" : "NOT met");
  return 0;
}
