// bench-resident: transfers per replay before and after device residency, and the replay times.
//
//   bench-resident [DIR] [STEP] [REPEATS] [--all]
//
// DIR holds reference.h5 and candidate.h5 (a sample, default samples/gradaccum-hf-bug, or a zoo
// recording: reference.h5 and correct.h5 are used when there is no candidate.h5). The candidate's
// program at STEP (default 0) is replayed in the interval domain on the reference's inputs, for
// the loss (or, with --all, every program output: the gradients too).
//
// before  evaluate() with a Backend that takes every interval kernel offer and every GEMM and
//         counts the copies the per-op CUDA backend (gpu/cuda_backend.h) makes for each: operands
//         in, results out (its kernels run on the host here, HostKernelBackend).
// after   ResidentEvaluator on the host device (core/host_device.h): every copy counted by the
//         device. Host-fallback nodes run on the CPU backend; if they ran on the per-op CUDA
//         backend instead, their GEMMs would add the transfers printed as "fallback GEMMs".
// times   the CPU backend's evaluate(), the per-op offload on the host, the resident replay on
//         the host device (first replay: plans recorded; then steady), and, in a CUDA build on a
//         machine with a GPU, the resident replay on the CUDA device and evaluate() on the per-op
//         CUDA backend.
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/backend.h"
#include "core/host_device.h"
#include "core/host_kernel_backend.h"
#include "core/program/resident_replay.h"
#include "gpu/cuda_device.h"

#include <QString>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace lossbound;

namespace {

/// Copies of the per-op CUDA backend: one transfer per array, lo and hi separately.
struct Copies {
  std::int64_t transfers = 0, bytes = 0, gemmTransfers = 0, gemmBytes = 0;
  void add(std::int64_t arrays, std::int64_t doubles) {
    transfers += arrays;
    bytes += arrays * doubles * 8;
  }
};

/// A Backend that forwards to `inner` and counts what the per-op CUDA backend would copy.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : mInner(inner) {}
  std::string name() const override { return "counting " + mInner.name(); }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    copies.gemmTransfers += 3;
    copies.gemmBytes += 8 * (m * k + k * n + m * n);
    mInner.gemm(a, b, c, m, k, n, absolute);
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mInner.parallelFor(n, body);
  }
  int threads() const override { return mInner.threads(); }
  bool offersIntervalKernels() const override { return mInner.offersIntervalKernels(); }
  bool unary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
             kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) override {
    const bool taken = mInner.unary(op, model, x, out, n);
    if (taken) copies.add(4, n);
    return taken;
  }
  bool binary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
              kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y, std::int64_t yCount,
              kernels::IntervalSpan out, std::int64_t n) override {
    const bool taken = mInner.binary(op, model, x, y, yCount, out, n);
    if (taken) {
      copies.add(4, n);
      copies.add(2, yCount);
    }
    return taken;
  }
  bool rowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
              std::int64_t cols, const kernels::SumModel& model) override {
    const bool taken = mInner.rowSum(x, out, rows, cols, model);
    if (taken) {
      copies.add(2, rows * cols);
      copies.add(2, rows);
    }
    return taken;
  }
  bool softmaxRows(const kernels::SoftmaxModel& model, bool log, kernels::ConstIntervalSpan x,
                   kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols) override {
    const bool taken = mInner.softmaxRows(model, log, x, out, rows, cols);
    if (taken) copies.add(4, rows * cols);
    return taken;
  }
  bool layerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                     kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                     kernels::IntervalSpan out, kernels::IntervalSpan mean,
                     kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) override {
    const bool taken = mInner.layerNormRows(model, x, weight, bias, out, mean, rstd, rows, cols);
    if (taken) {
      copies.add(4, rows * cols);
      copies.add(4, rows);
      if (weight.lo) copies.add(2, cols);
      if (bias.lo) copies.add(2, cols);
    }
    return taken;
  }

  Copies copies;

 private:
  Backend& mInner;
};

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double medianSeconds(int repeats, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < std::max(repeats, 1); ++i) t.push_back(seconds(f));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void printResident(const char* label, const ResidentStats& s) {
  std::printf(
      "  %-28s %6lld transfers %9.3f MiB  (inputs %lld, boundary in %lld / out %lld, outputs "
      "%lld, plan constants %lld, control %lld)\n",
      label, static_cast<long long>(s.device.transfers()), mib(s.device.transferBytes()),
      static_cast<long long>(s.inputUploads), static_cast<long long>(s.boundaryUploads),
      static_cast<long long>(s.boundaryDownloads), static_cast<long long>(s.outputDownloads),
      static_cast<long long>(s.constantUploads), static_cast<long long>(s.controlTransfers));
}

}  // namespace

int run(int argc, char** argv) {
  std::vector<std::string> args;
  bool all = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--all") == 0)
      all = true;
    else
      args.emplace_back(argv[i]);
  }
  const std::string dir =
      args.size() > 0 ? args[0] : std::string(LOSSBOUND_SOURCE_DIR) + "/samples/gradaccum-hf-bug";
  const std::int64_t step = args.size() > 1 ? std::stoll(args[1]) : 0;
  const int repeats = args.size() > 2 ? std::stoi(args[2]) : 3;
  std::string candidatePath = dir + "/candidate.h5";
  if (!std::filesystem::exists(candidatePath)) candidatePath = dir + "/correct.h5";
  const auto reference = RunFileReplay::open(dir + "/reference.h5");
  const auto candidate = RunFileReplay::open(candidatePath);
  const auto program = candidate->programAt(step);
  const TensorMap inputs = adaptInputs(*program, reference->inputsAt(step), nullptr);
  EvalOptions o;
  o.domain = EvalDomain::Interval;
  o.precision = candidate->recordedPrecision();
  if (all)
    for (const OutputSpec& out : program->outputs) o.outputs.push_back(out.name);

  const auto cpu = createCpuBackend(1);
  std::printf(
      "bench-resident: %s, step %lld, interval domain, outputs: %s; %zu nodes in the "
      "program\n",
      dir.c_str(), static_cast<long long>(step), all ? "all" : "loss", program->nodes.size());

  // Before: the per-op offload.
  kernels::HostKernelBackend hostKernels;
  CountingBackend perOp(hostKernels);
  EvalResult before;
  const double tPerOp = seconds([&] { before = evaluate(*program, inputs, perOp, o); });
  std::printf("before (per-op upload/download, the CUDA backend of gpu/cuda_backend.h):\n");
  std::printf(
      "  kernel offers %lld transfers %9.3f MiB; GEMMs %lld transfers %9.3f MiB; "
      "total %lld transfers %9.3f MiB\n",
      static_cast<long long>(perOp.copies.transfers), mib(perOp.copies.bytes),
      static_cast<long long>(perOp.copies.gemmTransfers), mib(perOp.copies.gemmBytes),
      static_cast<long long>(perOp.copies.transfers + perOp.copies.gemmTransfers),
      mib(perOp.copies.bytes + perOp.copies.gemmBytes));

  // After: resident on the host device.
  HostDevice device;
  CountingBackend fallback(*cpu);
  ResidentEvaluator ev(*program, device, fallback);
  ResidentResult first;
  const double tFirst = seconds([&] { first = ev.evaluate(inputs, o); });
  fallback.copies = {};
  ResidentResult steady;
  const double tSteady = medianSeconds(repeats, [&] { steady = ev.evaluate(inputs, o); });
  const ResidentStats& s = steady.stats;
  std::printf("after (device-resident, host device):\n");
  printResident("first replay (plans made):", first.stats);
  printResident("each later replay:", s);
  std::printf(
      "  fallback GEMMs (if host-fallback nodes used the per-op CUDA backend): %lld "
      "transfers %9.3f MiB per replay\n",
      static_cast<long long>(fallback.copies.gemmTransfers / std::max(repeats, 1)),
      mib(fallback.copies.gemmBytes / std::max(repeats, 1)));
  std::printf(
      "  nodes: %zu run, %zu device launches, %zu views, %zu constant, %zu host-fallback "
      "(%zu operand and %zu result values cross), %zu kept from the first replay (they read no "
      "input), %zu views of host data on the host, %zu on the host after a non-finite operand in "
      "an "
      "earlier replay, %zu met one in this replay (rerun on the host: %s); peak device memory "
      "%.3f MiB; %lld launches, %lld allocations, %lld frees\n",
      steady.result.nodesEvaluated, s.nodesOnDevice, s.nodesAliased, s.nodesConstant, s.nodesOnHost,
      s.hostFallbackOperands, s.hostFallbackResults, s.nodesKept, s.nodesHostViews, s.nodesPinned,
      s.nodesFlagged, s.rerunOnHost ? "yes" : "no", mib(s.device.peakBytes),
      static_cast<long long>(s.device.launches), static_cast<long long>(s.device.allocations),
      static_cast<long long>(s.device.frees));
  std::string hostOps;
  for (const auto& [op, n] : s.hostOps) hostOps += " " + op + "x" + std::to_string(n);
  std::printf("  host-fallback ops:%s\n", hostOps.c_str());
  for (const auto& [op, why] : s.hostReasons) std::printf("    %s: %s\n", op.c_str(), why.c_str());
  for (const std::string& m : s.messages) std::printf("  note: %s\n", m.c_str());
  bool same = true;
  for (const auto& [name, t] : before.outputs) {
    const Tensor& r = steady.result.outputs.at(name);
    same = same && t.numel() == r.numel() &&
           std::memcmp(t.lo().data(), r.lo().data(), t.lo().size() * 8) == 0 &&
           std::memcmp(t.hi().data(), r.hi().data(), t.hi().size() * 8) == 0;
  }
  std::printf("  outputs bit-identical to the per-op replay: %s\n", same ? "yes" : "NO");
  for (const auto& [name, t] : steady.result.outputs)
    if (t.numel() == 1) std::printf("  %s = [%a, %a]\n", name.c_str(), t.lo()[0], t.hi()[0]);
  // FNV-1a of every output's bits: compare before and after a change that must keep them.
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& [name, t] : steady.result.outputs)
    for (const auto span : {t.lo(), t.hi()})
      for (const double v : span) {
        std::uint64_t b = 0;
        std::memcpy(&b, &v, 8);
        for (int k = 0; k < 8; ++k) h = (h ^ ((b >> (8 * k)) & 0xff)) * 1099511628211ull;
      }
  std::printf("  outputs fingerprint %016llx\n", static_cast<unsigned long long>(h));

  const double tCpu = medianSeconds(repeats, [&] { evaluate(*program, inputs, *cpu, o); });
  std::printf(
      "times (median of %d, one host thread): CPU backend %.4f s; per-op offload on the "
      "host %.4f s; resident on the host device: first %.4f s, then %.4f s\n",
      repeats, tCpu, tPerOp, tFirst, tSteady);

  QString reason;
  if (auto gpuDevice = gpu::createCudaDevice(&reason)) {
    auto gpuBackend = gpu::createCudaBackend(&reason);
    ResidentEvaluator gev(*program, *gpuDevice, *cpu);
    gev.evaluate(inputs, o);
    ResidentResult g;
    const double tResident = medianSeconds(repeats, [&] { g = gev.evaluate(inputs, o); });
    printResident("CUDA device, each replay:", g.stats);
    double tPerOpGpu = 0;
    if (gpuBackend)
      tPerOpGpu = medianSeconds(repeats, [&] { evaluate(*program, inputs, *gpuBackend, o); });
    std::printf("GPU times: resident on %s %.4f s; per-op CUDA backend %.4f s\n",
                gpuDevice->name().c_str(), tResident, tPerOpGpu);
  } else {
    std::printf("GPU: %s\n", reason.toStdString().c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a missing or foreign recording: say so, no abort
    std::fprintf(stderr,
                 "bench-resident: %s\nusage: bench-resident [DIR] [STEP] [REPEATS] [--all]"
                 " (DIR holds reference.h5 and candidate.h5 or correct.h5)\n",
                 e.what());
    return 1;
  }
}
