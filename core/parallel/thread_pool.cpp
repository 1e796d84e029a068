#include "core/parallel/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lossbound {

struct ThreadPool::Impl {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> tasks;
  bool stopping = false;
  std::vector<std::thread> workers;

  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || !tasks.empty(); });
        if (tasks.empty()) return;  // stopping, and nothing left to do
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();  // tasks catch their own exceptions (packaged_task, parallelFor chunks)
    }
  }
};

ThreadPool::ThreadPool(int threads) : mImpl(std::make_unique<Impl>()), mSize(std::max(1, threads)) {
  mImpl->workers.reserve(static_cast<std::size_t>(mSize));
  for (int i = 0; i < mSize; ++i)
    mImpl->workers.emplace_back([impl = mImpl.get()] { impl->run(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mImpl->mutex);
    mImpl->stopping = true;
  }
  mImpl->wake.notify_all();
  for (std::thread& t : mImpl->workers) t.join();
}

void ThreadPool::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(mImpl->mutex);
    mImpl->tasks.push_back(std::move(task));
  }
  mImpl->wake.notify_one();
}

namespace {

// The shared state of one parallelFor: chunks are handed out by an atomic counter; helpers that
// start after the loop is over find no chunk and return without touching the body.
struct Loop {
  std::int64_t n = 0, chunks = 0;
  const std::function<void(std::int64_t, std::int64_t)>* body = nullptr;
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable finished;
  std::int64_t done = 0;  // chunks finished or skipped; guarded by mutex
  std::exception_ptr error;

  // Takes and runs chunks until none is left.
  void work() {
    for (;;) {
      const std::int64_t c = next.fetch_add(1);
      if (c >= chunks) return;
      if (!failed.load()) {
        try {
          (*body)(n * c / chunks, n * (c + 1) / chunks);
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!error) error = std::current_exception();
          failed.store(true);
        }
      }
      std::lock_guard lock(mutex);
      if (++done == chunks) finished.notify_all();
    }
  }
};

}  // namespace

void ThreadPool::parallelFor(std::int64_t n,
                             const std::function<void(std::int64_t, std::int64_t)>& body,
                             std::int64_t grain, int maxThreads) {
  if (n <= 0) return;
  const int threads = maxThreads > 0 ? std::min(maxThreads, mSize) : mSize;
  const std::int64_t chunks =
      std::clamp<std::int64_t>(n / std::max<std::int64_t>(grain, 1), 1, threads);
  if (chunks == 1) {
    body(0, n);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->n = n;
  loop->chunks = chunks;
  loop->body = &body;
  // A helper may start after the loop has returned (every chunk taken): it then only sees
  // next >= chunks and never dereferences `body`.
  for (std::int64_t h = 1; h < chunks; ++h) enqueue([loop] { loop->work(); });
  loop->work();
  std::unique_lock lock(loop->mutex);
  loop->finished.wait(lock, [&] { return loop->done == loop->chunks; });
  if (loop->error) std::rethrow_exception(loop->error);
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    if (const char* env = std::getenv("LOSSBOUND_THREADS")) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && v > 0 && v <= 1024) return static_cast<int>(v);
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }());
  return pool;
}

}  // namespace lossbound
