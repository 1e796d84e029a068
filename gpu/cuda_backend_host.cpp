// The host-side part of CudaBackend: parallelFor runs on CPU threads (op rules use it for work
// that has no kernel), compiled by the host compiler so it needs no CUDA headers.
#include "gpu/cuda_backend.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lossbound::gpu {

void CudaBackend::parallelFor(std::int64_t n,
                              const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  const std::int64_t threads = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(std::thread::hardware_concurrency()), 1, n);
  if (threads == 1) {
    body(0, n);
    return;
  }
  std::exception_ptr first;
  std::mutex firstMutex;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (std::int64_t t = 0; t < threads; ++t) {
    const std::int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back([&, begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        std::lock_guard lock(firstMutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace lossbound::gpu
