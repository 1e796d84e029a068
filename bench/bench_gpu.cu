// GPU benchmark: interval matmul (midpoint–radius, three cuBLAS Dgemm + kernels) against plain
// cublasDgemm and cublasSgemm on the same device, measured side by side in one run. Prints
// "no CUDA device: <reason>" and exits 0 where there is no device.
//
// Then the replay time per step: one sample step replayed with the interval and first-order
// methods on the CPU backend and on the CUDA backend, side by side.
//
// Usage: bench-gpu [N ...]   (square sizes; default 256 1024 2048)
//        LOSSBOUND_BENCH_SAMPLE=<sample dir> picks the replayed sample (default gradaccum-hf-bug).

#include "bench/gpu_replay_timing.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.cuh"
#include "gpu/cuda_device.h"
#include "gpu/device_buffer.cuh"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

using lossbound::bestOf;
using lossbound::gpu::DeviceBuffer;

/// Device-only time of one cuBLAS GEMM (operands already resident), best of reps, in seconds.
template <typename T>
double deviceGemmSeconds(cublasHandle_t h, cudaStream_t s, int n, int reps) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  std::vector<T> host(nn, T(1) / T(3));
  DeviceBuffer<T> a(nn), b(nn), c(nn);
  a.copyFromHost(host.data(), nn, s);
  b.copyFromHost(host.data(), nn, s);
  const T one = 1, zero = 0;
  cudaEvent_t start, stop;
  LB_CUDA_CHECK(cudaEventCreate(&start));
  LB_CUDA_CHECK(cudaEventCreate(&stop));
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    LB_CUDA_CHECK(cudaEventRecord(start, s));
    if constexpr (sizeof(T) == 8)
      LB_CUBLAS_CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(),
                                  n, &zero, c.data(), n));
    else
      LB_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(),
                                  n, &zero, c.data(), n));
    LB_CUDA_CHECK(cudaEventRecord(stop, s));
    LB_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    LB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = ms * 1e-3 < best ? ms * 1e-3 : best;
  }
  LB_CUDA_CHECK(cudaEventDestroy(start));
  LB_CUDA_CHECK(cudaEventDestroy(stop));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  QString reason;
  auto backend = lossbound::gpu::createCudaBackend(&reason);
  if (!backend) {
    std::printf("%s\n", reason.toUtf8().constData());
    return 0;
  }
  auto* gpu = dynamic_cast<lossbound::gpu::CudaBackend*>(backend.get());
  std::printf("device: %s\n", gpu->name().c_str());
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {256, 1024, 2048};

  cudaStream_t stream;
  cublasHandle_t handle;
  LB_CUDA_CHECK(cudaStreamCreate(&stream));
  LB_CUBLAS_CHECK(cublasCreate(&handle));
  LB_CUBLAS_CHECK(cublasSetStream(handle, stream));
  LB_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH));

  std::printf("%6s %14s %14s %14s %14s %14s %10s\n", "n", "Sgemm GF/s", "Dgemm GF/s",
              "gemm+xfer GF/s", "ivl+xfer GF/s", "ivl/Dgemm(x)", "ivl/gemm");
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int n : sizes) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::vector<double> lo(nn), hi(nn), clo(nn), chi(nn);
    for (std::size_t i = 0; i < nn; ++i) {
      lo[i] = normal(rng);
      hi[i] = lo[i] + 1e-6 * std::abs(lo[i]);
    }
    const double flop = 2.0 * n * static_cast<double>(n) * n;
    const double s32 = deviceGemmSeconds<float>(handle, stream, n, 5);
    const double s64 = deviceGemmSeconds<double>(handle, stream, n, 5);
    // Host-pointer API (uploads and downloads included) for both, so the ratio is like for like.
    const double sGemm = bestOf(3, [&] { gpu->gemm(lo.data(), hi.data(), clo.data(), n, n, n); });
    const lossbound::gpu::MatmulModel model{lossbound::Format::Fp32, lossbound::Format::Fp32,
                                            0x1p-24, lossbound::Format::Fp32};
    const double sIvl = bestOf(3, [&] {
      gpu->intervalMatmul({lo.data(), hi.data()}, {lo.data(), hi.data()}, {clo.data(), chi.data()},
                          n, n, n, model);
    });
    std::printf("%6d %14.1f %14.1f %14.1f %14.1f %14.2f %10.2f\n", n, flop / s32 * 1e-9,
                flop / s64 * 1e-9, flop / sGemm * 1e-9, flop / sIvl * 1e-9, sIvl / s64,
                sIvl / sGemm);
  }
  lossbound::printReplayTiming(*gpu);
  LB_CUBLAS_CHECK(cublasDestroy(handle));
  LB_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
