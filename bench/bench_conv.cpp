// Convolution benchmark: interval vs point time of aten.convolution (and of its local error, vjp
// and convolution_backward) for a resnet-like layer, measured side by side in one run on the CPU
// backend, with the bare binary64 GEMM of the same size as the floor of the lowering.
// Default layer: input 8×64×32×32, weight 64×64×3×3, padding 1, bias, fp32 model.
// Usage: bench-conv [--quick]   (--quick: input 2×32×16×16, weight 32×32×3×3)
#include "core/backend.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace lossbound;

namespace {

IrValue refTo(const std::string& name) {
  IrValue v;
  v.kind = IrValue::Kind::Ref;
  v.ref = ValueRef{name, 0};
  return v;
}
IrValue scalar(IrValue::Kind kind, std::int64_t i, bool b = false) {
  IrValue v;
  v.kind = kind;
  v.intValue = i;
  v.boolValue = b;
  return v;
}
IrValue ints(const std::vector<std::int64_t>& xs) {
  IrValue v;
  v.kind = IrValue::Kind::List;
  for (auto x : xs) v.list.push_back(scalar(IrValue::Kind::Int, x));
  return v;
}
IrValue bools(const std::vector<bool>& xs) {
  IrValue v;
  v.kind = IrValue::Kind::List;
  for (bool x : xs) v.list.push_back(scalar(IrValue::Kind::Bool, 0, x));
  return v;
}

/// fp32 values of a normal distribution; with rel > 0 an interval tensor of relative radius rel.
Tensor randomTensor(const Shape& s, std::mt19937_64& rng, double scale, double rel = 0.0) {
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& x : v) x = static_cast<float>(nd(rng));
  if (rel == 0.0) return Tensor::point(s, DType::Float32, v);
  std::vector<double> lo(v.size()), hi(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double r = std::abs(v[i]) * rel;
    lo[i] = static_cast<float>(v[i] - r);
    hi[i] = static_cast<float>(v[i] + r);
    if (lo[i] > v[i] - r) lo[i] = std::nextafter(static_cast<float>(lo[i]), -1e30f);
    if (hi[i] < v[i] + r) hi[i] = std::nextafter(static_cast<float>(hi[i]), 1e30f);
  }
  return Tensor::interval(s, DType::Float32, lo, hi);
}

/// Returns the best of `reps` wall-clock times of f, in milliseconds.
double bestMs(int reps, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::int64_t N = quick ? 2 : 8, C = quick ? 32 : 64, H = quick ? 16 : 32, K = 3;
  const int reps = quick ? 2 : 3;
  auto backend = createCpuBackend();
  PrecisionModel pm;
  std::mt19937_64 rng(1);
  OpContext ctx{pm, *backend, &rng};

  const Shape xs{N, C, H, H}, ws{C, C, K, K}, ys{N, C, H, H};
  std::vector<Tensor> values = {randomTensor(xs, rng, 1.0),       randomTensor(ws, rng, 0.05),
                                randomTensor({C}, rng, 0.1),      randomTensor(ys, rng, 1.0),
                                randomTensor(xs, rng, 1.0, 1e-3), randomTensor(ws, rng, 0.05, 1e-3),
                                randomTensor({C}, rng, 0.1, 1e-3)};
  const std::vector<std::string> names = {"x", "w", "b", "gy", "xi", "wi", "bi"};
  auto lookup = [&](const ValueRef& r) -> const Tensor& {
    return values[static_cast<std::size_t>(std::find(names.begin(), names.end(), r.name) -
                                           names.begin())];
  };
  const std::vector<IrValue> tail = {ints({1, 1}), ints({1, 1}),
                                     ints({1, 1}), scalar(IrValue::Kind::Bool, 0, false),
                                     ints({0, 0}), scalar(IrValue::Kind::Int, 1)};
  auto node = [&](const std::string& op, std::vector<IrValue> args, int outputs) {
    Node n;
    n.name = "conv";
    n.op = op;
    n.args = std::move(args);
    for (int k = 0; k < outputs; ++k) n.outputs.push_back(TensorSpec{{}, DType::Float32});
    return n;
  };
  std::vector<IrValue> fargs = {refTo("x"), refTo("w"), refTo("b")};
  fargs.insert(fargs.end(), tail.begin(), tail.end());
  std::vector<IrValue> iargs = {refTo("xi"), refTo("wi"), refTo("bi")};
  iargs.insert(iargs.end(), tail.begin(), tail.end());
  std::vector<IrValue> bargs = {refTo("gy"), refTo("x"), refTo("w"), ints({C})};
  bargs.insert(bargs.end(), tail.begin(), tail.end());
  bargs.push_back(bools({true, true, true}));
  const Node fwd = node("aten.convolution.default", fargs, 1);
  const Node fwdI = node("aten.convolution.default", iargs, 1);
  const Node bwd = node("aten.convolution_backward.default", bargs, 3);
  const OpRule& conv = *opRegistry().find(fwd.op);
  const OpRule& convBwd = *opRegistry().find(bwd.op);
  const OpArgs fa(fwd, lookup), ia(fwdI, lookup), ba(bwd, lookup);

  // The floor: one binary64 GEMM of the lowered size per sample (C×9C times 9C×H·W).
  const std::int64_t m = C, k = C * K * K, n = H * H;
  std::vector<double> A(static_cast<std::size_t>(m * k), 0.5),
      B(static_cast<std::size_t>(k * n), 0.25), Cm(static_cast<std::size_t>(m * n));
  const double gemmMs = bestMs(reps, [&] {
    for (std::int64_t s = 0; s < N; ++s) backend->gemm(A.data(), B.data(), Cm.data(), m, k, n);
  });

  std::vector<Tensor> y;
  const double pointMs = bestMs(reps, [&] { y = conv.point(fa, ctx); });
  const double intervalMs = bestMs(reps, [&] { conv.interval(fa, ctx); });
  const double intervalInMs = bestMs(reps, [&] { conv.interval(ia, ctx); });
  const double localMs = bestMs(reps, [&] { conv.localError(fa, y, ctx); });
  const std::vector<Tensor> gy = {values[3]};
  const double vjpMs = bestMs(reps, [&] { conv.vjp(fa, y, gy, ctx); });
  const double bwdPointMs = bestMs(reps, [&] { convBwd.point(ba, ctx); });
  const double bwdIntervalMs = bestMs(reps, [&] { convBwd.interval(ba, ctx); });

  std::printf(
      "convolution %lldx%lldx%lldx%lld, weight %lldx%lldx%lldx%lld, padding 1, bias, fp32 "
      "model, %s (best of %d)\n",
      static_cast<long long>(N), static_cast<long long>(C), static_cast<long long>(H),
      static_cast<long long>(H), static_cast<long long>(C), static_cast<long long>(C),
      static_cast<long long>(K), static_cast<long long>(K), backend->name().c_str(), reps);
  std::printf("  bare binary64 GEMMs of the lowered size  %9.1f ms\n", gemmMs);
  std::printf("  point                                    %9.1f ms  (%.2fx the bare GEMMs)\n",
              pointMs, pointMs / gemmMs);
  std::printf("  interval, point inputs                   %9.1f ms  interval/point %.2f\n",
              intervalMs, intervalMs / pointMs);
  std::printf("  interval, interval inputs                %9.1f ms  interval/point %.2f\n",
              intervalInMs, intervalInMs / pointMs);
  std::printf("  local error                              %9.1f ms  /point %.2f\n", localMs,
              localMs / pointMs);
  std::printf("  vjp                                      %9.1f ms  /point %.2f\n", vjpMs,
              vjpMs / pointMs);
  std::printf("convolution_backward (all three outputs)\n");
  std::printf("  point                                    %9.1f ms\n", bwdPointMs);
  std::printf("  interval, point inputs                   %9.1f ms  interval/point %.2f\n",
              bwdIntervalMs, bwdIntervalMs / bwdPointMs);
  return 0;
}
