#pragma once
// The one thread pool of the process: every parallel loop (op rules through Backend::parallelFor,
// the CPU backend's GEMMs, the analyzer's steps) and every background job (the GUI's analysis)
// runs on it. No OpenMP, no ad-hoc std::thread.
//
// Exception rule: an exception thrown by a body or a task never ends the process. parallelFor
// stops handing out chunks after the first exception and rethrows that exception on the calling
// thread once every chunk already started has finished; submit() delivers it through the future.
//
// Nesting: parallelFor may be called from inside a pool task (an analyzer step calls an op rule
// that calls parallelFor). The calling thread always works on its own chunks, so a parallelFor
// finishes even when every worker is busy; idle workers help. Never block a pool task on a
// future of another pool task (that could wait for a task queued behind itself): use parallelFor.

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <type_traits>

namespace lossbound {

/// A fixed set of worker threads with a FIFO task queue.
class ThreadPool {
 public:
  /// Starts `threads` workers (at least 1). A parallelFor runs at most `threads` chunks at once,
  /// one of them on the calling thread.
  explicit ThreadPool(int threads);
  /// Finishes the queued tasks, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Returns the number of workers: the most chunks a parallelFor runs at once.
  int size() const { return mSize; }

  /// Runs body(begin, end) over [0, n) in at most `maxThreads` (≤ size(); 0 = size()) concurrent
  /// chunks of at least `grain` iterations, on the calling thread and idle workers; returns when
  /// all are done. Rethrows the first exception of a body (see the file comment).
  void parallelFor(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body,
                   std::int64_t grain = 1, int maxThreads = 0);

  /// Runs `task` on a worker and returns its future, which carries the result or the exception.
  template <typename F>
  auto submit(F&& task) -> std::future<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    auto packaged = std::make_shared<std::packaged_task<R()>>(std::forward<F>(task));
    std::future<R> future = packaged->get_future();
    enqueue([packaged] { (*packaged)(); });
    return future;
  }

  /// Returns the process-wide pool: std::thread::hardware_concurrency() threads, or
  /// $LOSSBOUND_THREADS when it is a positive integer.
  static ThreadPool& global();

 private:
  struct Impl;
  void enqueue(std::function<void()> task);

  std::unique_ptr<Impl> mImpl;
  int mSize = 1;
};

}  // namespace lossbound
