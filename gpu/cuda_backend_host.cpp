// The host-side part of CudaBackend: parallelFor runs on the process's thread pool (op rules use
// it for work that has no kernel), compiled by the host compiler so it needs no CUDA headers.
#include "core/parallel/thread_pool.h"
#include "gpu/cuda_backend.h"

namespace lossbound::gpu {

void CudaBackend::parallelFor(std::int64_t n,
                              const std::function<void(std::int64_t, std::int64_t)>& body) {
  ThreadPool::global().parallelFor(n, body);
}

}  // namespace lossbound::gpu
