#pragma once
// The host composition of CudaBackend::intervalMatmul: the same kernel bodies (midRad,
// magnitudeUp, matmulFinish) around three round-to-nearest GEMMs supplied by the caller (a CPU
// Backend, or a naive loop). Used by the host test (enclosure of randomized candidates) and by the
// device test (the CPU side of the GPU/CPU comparison).

#include "core/kernels/kernel_bodies.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace lossbound::kernels::test {

/// C[m×n] = A[m×k]·B[k×n] row-major, round-to-nearest, any order.
using Gemm = std::function<void(const double*, const double*, double*, std::int64_t, std::int64_t,
                                std::int64_t)>;

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

/// Encloses every product the candidate can compute (see core/kernels/kernel_bodies.h).
inline HostIntervals hostIntervalMatmul(const HostIntervals& a, const HostIntervals& b,
                                        std::int64_t m, std::int64_t k, std::int64_t n,
                                        Format input, Format accumulation,
                                        double accumulationRoundoff, Format storage,
                                        const Gemm& gemm) {
  const auto mk = static_cast<std::size_t>(m * k), kn = static_cast<std::size_t>(k * n),
             mn = static_cast<std::size_t>(m * n);
  bool finite = true, points = true;
  auto split = [&](const HostIntervals& x, std::size_t count, std::vector<double>& mid,
                   std::vector<double>& absMid, std::vector<double>& mag) {
    mid.resize(count);
    absMid.resize(count);
    mag.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      double c = 0.0, r = 0.0;
      if (!midRad(x.lo[i], x.hi[i], input, &c, &r)) finite = false;
      if (r != 0.0) points = false;
      mid[i] = c;
      absMid[i] = c < 0.0 ? -c : c;
      mag[i] = magnitudeUp(c, r);
    }
  };
  std::vector<double> midA, absA, magA, midB, absB, magB;
  split(a, mk, midA, absA, magA);
  split(b, kn, midB, absB, magB);
  HostIntervals c{std::vector<double>(mn), std::vector<double>(mn)};
  if (!finite) {
    std::fill(c.lo.begin(), c.lo.end(), -__builtin_huge_val());
    std::fill(c.hi.begin(), c.hi.end(), __builtin_huge_val());
    return c;
  }
  std::vector<double> g1(mn), g2(mn), g4(mn);
  gemm(midA.data(), midB.data(), g1.data(), m, k, n);
  gemm(absA.data(), absB.data(), g2.data(), m, k, n);
  gemm(magA.data(), magB.data(), g4.data(), m, k, n);
  const MatmulBound bound =
      makeMatmulBound(static_cast<double>(k), accumulation, accumulationRoundoff, points);
  for (std::size_t i = 0; i < mn; ++i) {
    const Interval v = matmulFinish(g1[i], g2[i], g4[i], bound, storage);
    c.lo[i] = v.lo;
    c.hi[i] = v.hi;
  }
  return c;
}

}  // namespace lossbound::kernels::test
