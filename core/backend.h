#pragma once
// The compute backend: the heavy kernels op rules delegate to. The CPU backend (Eigen, both
// cores) is the reference and the test oracle; the CUDA backend (gpu/) must agree with it.
// All matrices are row-major, binary64, contiguous.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lossbound {

/// Heavy kernels shared by the op rules; implementations must be thread-compatible.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Returns e.g. "CPU (Eigen, 2 threads)" or "CUDA (NVIDIA A100)".
  virtual std::string name() const = 0;

  /// C[m×n] = A[m×k] · B[k×n] in binary64 round-to-nearest (any order); with `absolute`,
  /// computes |A|·|B| instead. No rounding mode is assumed inside the library.
  virtual void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                    std::int64_t n, bool absolute = false) = 0;

  /// Runs body(begin, end) over [0, n) in parallel chunks; returns when all are done.
  virtual void parallelFor(std::int64_t n,
                           const std::function<void(std::int64_t, std::int64_t)>& body) = 0;
};

/// Returns the CPU backend (Eigen GEMMs, OpenMP over both cores).
std::unique_ptr<Backend> createCpuBackend();

}  // namespace lossbound
