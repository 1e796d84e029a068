// The CPU backend: Eigen GEMMs on row-major maps (Eigen parallelizes its GEMM with OpenMP) and an
// OpenMP parallelFor. This is the reference implementation the CUDA backend is tested against.
#include "core/backend.h"

#include <Eigen/Core>

#include <algorithm>
#include <omp.h>
#include <string>
#include <vector>

namespace lossbound {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;

/// Eigen + OpenMP over every available core; round-to-nearest only (no rounding mode is set).
class CpuBackend final : public Backend {
 public:
  CpuBackend() : mThreads(std::max(1, omp_get_max_threads())) {}

  std::string name() const override {
    return "CPU (Eigen, " + std::to_string(mThreads) + " threads)";
  }

  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    Map cm(c, m, n);
    if (m == 0 || n == 0) return;
    if (k == 0) {
      cm.setZero();
      return;
    }
    const ConstMap am(a, m, k), bm(b, k, n);
    // Small products: Eigen's lazy product avoids the blocking overhead of the GEMM kernel.
    const bool small = m * n * k < 32 * 32 * 32;
    if (absolute) {
      if (small)
        cm.noalias() = am.cwiseAbs().lazyProduct(bm.cwiseAbs());
      else {
        const RowMajor aa = am.cwiseAbs(), ba = bm.cwiseAbs();
        cm.noalias() = aa * ba;
      }
    } else {
      if (small)
        cm.noalias() = am.lazyProduct(bm);
      else
        cm.noalias() = am * bm;
    }
  }

  // Below this many iterations the fork/join costs more than it saves (and an OpenMP barrier on
  // a loaded machine can stall for a scheduler time slice).
  static constexpr std::int64_t kMinParallel = 1 << 16;

  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    if (n <= 0) return;
    const std::int64_t chunks = std::min<std::int64_t>(n, mThreads);
    if (chunks <= 1 || n < kMinParallel) {
      body(0, n);
      return;
    }
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(chunks))
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      body(begin, end);
    }
  }

 private:
  int mThreads;
};

}  // namespace

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace lossbound
