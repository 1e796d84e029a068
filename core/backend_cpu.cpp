// The CPU backend: Eigen GEMMs on row-major maps and parallel loops on the process's one thread
// pool (core/parallel/thread_pool.h). This is the reference implementation the CUDA backend is
// tested against. A backend has a thread budget: the analyzer gives each of its step workers a
// share of the pool, so steps in parallel never oversubscribe the cores.
#include "core/backend.h"
#include "core/parallel/thread_pool.h"

#include <Eigen/Core>

#include <algorithm>
#include <string>
#include <vector>

namespace lossbound {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;

// One GEMM on one thread: C[m×n] = A[m×k]·B[k×n] (or |A|·|B|), round-to-nearest.
void gemmRows(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
              std::int64_t n, bool absolute) {
  Map cm(c, m, n);
  const ConstMap am(a, m, k), bm(b, k, n);
  // Small products: Eigen's lazy product avoids the blocking overhead of the GEMM kernel.
  const bool small = m * n * k < 32 * 32 * 32;
  if (absolute) {
    if (small) {
      cm.noalias() = am.cwiseAbs().lazyProduct(bm.cwiseAbs());
    } else {
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

/// Eigen GEMMs split by rows over up to `threads` pool threads; round-to-nearest only (no
/// rounding mode is set). With one thread a GEMM is one Eigen product, so its RN result does not
/// depend on the pool; with more, Eigen's blocking of each row block may round differently —
/// every bound built on these GEMMs is sound for any RN evaluation order.
class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads)
      : mThreads(std::clamp(threads > 0 ? threads : ThreadPool::global().size(), 1,
                            ThreadPool::global().size())) {}

  std::string name() const override {
    return "CPU (Eigen, " + std::to_string(mThreads) + (mThreads == 1 ? " thread)" : " threads)");
  }

  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      std::fill(c, c + m * n, 0.0);
      return;
    }
    // Row blocks of at least kMinRows rows and about kMinWork multiply-adds each.
    const std::int64_t rowsPerChunk =
        std::max(kMinRows, kMinWork / std::max<std::int64_t>(1, k * n));
    if (mThreads == 1 || m < 2 * rowsPerChunk) {
      gemmRows(a, b, c, m, k, n, absolute);
      return;
    }
    ThreadPool::global().parallelFor(
        m,
        [&](std::int64_t begin, std::int64_t end) {
          gemmRows(a + begin * k, b, c + begin * n, end - begin, k, n, absolute);
        },
        rowsPerChunk, mThreads);
  }

  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    if (n <= 0) return;
    if (mThreads == 1 || n < kMinParallel) {
      body(0, n);
      return;
    }
    ThreadPool::global().parallelFor(n, body, kMinParallel / 4, mThreads);
  }

  int threads() const override { return mThreads; }

 private:
  // Below this many iterations a parallel loop costs more than it saves.
  static constexpr std::int64_t kMinParallel = 1 << 16;
  static constexpr std::int64_t kMinRows = 16;
  static constexpr std::int64_t kMinWork = 1 << 18;

  int mThreads;
};

}  // namespace

std::unique_ptr<Backend> createCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace lossbound
