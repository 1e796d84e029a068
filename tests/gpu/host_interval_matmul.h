#pragma once
// The host composition of CudaBackend::intervalMatmul: the same kernel bodies (midRad,
// magnitudeUp, matmulFinish) around three round-to-nearest GEMMs supplied by the caller (a CPU
// Backend, or a naive loop). Used by the host test (enclosure of randomized candidates) and by the
// device test (the CPU side of the GPU/CPU comparison).

#include <cstdint>
#include <functional>
#include <vector>

#include "gpu/kernel_bodies.h"

namespace lossbound::gpu::test {

/// C[m×n] = A[m×k]·B[k×n] row-major, round-to-nearest, any order.
using Gemm = std::function<void(const double*, const double*, double*, std::int64_t,
                                std::int64_t, std::int64_t)>;

/// Returns a Gemm that runs the textbook triple loop (one fixed order).
inline Gemm naiveGemm() {
  return [](const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (std::int64_t l = 0; l < k; ++l) s += a[i * k + l] * b[l * n + j];
        c[i * n + j] = s;
      }
  };
}

/// Interval operand/result as separate endpoint arrays (like Tensor and CudaBackend).
struct HostIntervals {
  std::vector<double> lo, hi;
};

/// Encloses every product the candidate can compute (see gpu/kernel_bodies.h).
inline HostIntervals hostIntervalMatmul(const HostIntervals& a, const HostIntervals& b,
                                        std::int64_t m, std::int64_t k, std::int64_t n,
                                        Format input, double accumulationRoundoff,
                                        double accumulationSubnormal, Format storage,
                                        const Gemm& gemm) {
  const auto mk = static_cast<std::size_t>(m * k), kn = static_cast<std::size_t>(k * n),
             mn = static_cast<std::size_t>(m * n);
  std::vector<double> midA(mk), left(2 * mk), magA(mk), midB(kn), right(2 * kn);
  for (std::size_t i = 0; i < mk; ++i) {
    double c = 0.0, r = 0.0;
    midRad(a.lo[i], a.hi[i], input, &c, &r);
    const std::size_t row = i / static_cast<std::size_t>(k), col = i % static_cast<std::size_t>(k);
    midA[i] = c;
    left[row * 2 * static_cast<std::size_t>(k) + col] = c < 0.0 ? -c : c;
    left[row * 2 * static_cast<std::size_t>(k) + static_cast<std::size_t>(k) + col] = r;
    magA[i] = magnitudeUp(c, r);
  }
  for (std::size_t i = 0; i < kn; ++i) {
    double c = 0.0, r = 0.0;
    midRad(b.lo[i], b.hi[i], input, &c, &r);
    midB[i] = c;
    right[i] = r;
    right[kn + i] = magnitudeUp(c, r);
  }
  std::vector<double> centre(mn), spread(mn), magnitude(mn);
  gemm(midA.data(), midB.data(), centre.data(), m, k, n);
  gemm(left.data(), right.data(), spread.data(), m, 2 * k, n);
  gemm(magA.data(), right.data() + kn, magnitude.data(), m, k, n);
  const MatmulBound bound =
      makeMatmulBound(static_cast<double>(k), accumulationRoundoff, accumulationSubnormal);
  HostIntervals c{std::vector<double>(mn), std::vector<double>(mn)};
  for (std::size_t i = 0; i < mn; ++i) {
    const Interval v = matmulFinish(centre[i], spread[i], magnitude[i], bound, storage);
    c.lo[i] = v.lo;
    c.hi[i] = v.hi;
  }
  return c;
}

}  // namespace lossbound::gpu::test
