// The thread pool's contract (core/parallel/thread_pool.h): every iteration runs exactly once,
// nested loops finish even when every worker is busy, and an exception in a body or task reaches
// the caller instead of ending the process — also when an op rule's parallel body throws during
// an evaluation.
#include "core/backend.h"
#include "core/parallel/thread_pool.h"
#include "core/program/evaluator.h"

#include <QTest>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace lossbound;

namespace {

/// A CPU backend whose parallel bodies throw in every chunk but the first: the exception is
/// raised on a pool thread inside an op rule (the softmax rule splits its rows with parallelFor).
class ThrowingBackend final : public Backend {
 public:
  std::string name() const override { return "throwing"; }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    mCpu->gemm(a, b, c, m, k, n, absolute);
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    ThreadPool::global().parallelFor(n, [&](std::int64_t begin, std::int64_t end) {
      if (begin > 0) throw std::runtime_error("body failed on purpose");
      body(begin, end);
    });
  }

 private:
  std::unique_ptr<Backend> mCpu = createCpuBackend(1);
};

IrValue ref(const std::string& name) {
  IrValue v;
  v.kind = IrValue::Kind::Ref;
  v.ref.name = name;
  return v;
}

IrValue integer(std::int64_t i) {
  IrValue v;
  v.kind = IrValue::Kind::Int;
  v.intValue = i;
  return v;
}

IrValue boolean(bool b) {
  IrValue v;
  v.kind = IrValue::Kind::Bool;
  v.boolValue = b;
  return v;
}

}  // namespace

class TestThreadPool : public QObject {
  Q_OBJECT

 private slots:
  void everyIterationOnce() {
    ThreadPool pool(3);
    for (std::int64_t n : {1, 2, 7, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallelFor(n, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (const auto& h : hits) QCOMPARE(h.load(), 1);
    }
  }

  void respectsMaxThreads() {
    ThreadPool pool(4);
    std::atomic<int> running{0}, peak{0};
    pool.parallelFor(
        64,
        [&](std::int64_t, std::int64_t) {
          const int now = ++running;
          int p = peak.load();
          while (now > p && !peak.compare_exchange_weak(p, now)) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          --running;
        },
        1, 2);
    QVERIFY(peak.load() >= 1);
    QVERIFY2(peak.load() <= 2, "more chunks ran at once than maxThreads allows");
  }

  void nestedLoopsFinishWhenWorkersAreBusy() {
    ThreadPool pool(2);
    std::atomic<std::int64_t> sum{0};
    // Every worker runs an outer chunk that starts an inner loop: the inner helpers cannot start
    // until a worker is free, so the callers must do the inner work themselves.
    pool.parallelFor(
        2,
        [&](std::int64_t, std::int64_t) {
          pool.parallelFor(1000, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) sum += i;
          });
        },
        1);
    QCOMPARE(sum.load(), std::int64_t{2 * 999 * 1000 / 2});
  }

  void bodyExceptionReachesTheCaller() {
    ThreadPool pool(2);
    std::atomic<int> ran{0};
    bool caught = false;
    try {
      pool.parallelFor(100, [&](std::int64_t b, std::int64_t) {
        ++ran;
        if (b >= 50) throw std::runtime_error("chunk failed");
      });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "chunk failed";
    }
    QVERIFY2(caught, "the body's exception must be rethrown on the calling thread");
    // The pool still works afterwards.
    std::atomic<int> after{0};
    pool.parallelFor(10, [&](std::int64_t b, std::int64_t e) { after += int(e - b); });
    QCOMPARE(after.load(), 10);
  }

  void submitDeliversResultsAndExceptions() {
    ThreadPool pool(2);
    auto ok = pool.submit([] { return 42; });
    auto bad = pool.submit([]() -> int { throw std::logic_error("task failed"); });
    QCOMPARE(ok.get(), 42);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, bad.get());
  }

  void throwingOpBodyEndsTheEvaluationNotTheProcess() {
    // loss = sum(softmax(x, dim=1)) over 4096 rows: the softmax rule splits its rows with
    // Backend::parallelFor, whose bodies throw on pool threads.
    Program p;
    p.inputs.push_back({"batch:x", {{4096, 8}, DType::Float32, false}});
    Node sm;
    sm.name = "sm";
    sm.op = "aten._softmax.default";
    sm.args = {ref("batch:x"), integer(1), boolean(false)};
    sm.outputs = {{{4096, 8}, DType::Float32, false}};
    Node s;
    s.name = "s";
    s.op = "aten.sum.default";
    s.args = {ref("sm")};
    s.outputs = {{{}, DType::Float32, false}};
    p.nodes = {sm, s};
    p.outputs = {{"loss", {"s", 0}}};
    std::vector<double> x(4096 * 8);
    std::iota(x.begin(), x.end(), 0.0);
    for (double& v : x) v = std::fmod(v, 7.0) / 7.0;
    TensorMap inputs{{"batch:x", Tensor::point({4096, 8}, DType::Float32, x)}};
    ThrowingBackend backend;
    EvalOptions o;
    o.domain = EvalDomain::Interval;
    bool named = false;
    try {
      evaluate(p, inputs, backend, o);
    } catch (const EvaluationError& e) {
      named = e.node() == "sm" &&
              std::string(e.what()).find("body failed on purpose") != std::string::npos;
    }
    QVERIFY2(named, "the op body's exception must become an EvaluationError naming the node");
    // The same program on a sound backend evaluates fine afterwards.
    const auto cpu = createCpuBackend();
    const EvalResult r = evaluate(p, inputs, *cpu, o);
    QVERIFY(r.outputs.count("loss") == 1);
  }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
