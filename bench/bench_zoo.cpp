// bench-zoo: soundness and tightness of every envelope method at one step of a recorded pair
// (the model zoo of tests/zoo/zoo.py; bench/zoo_soundness.sh runs it on every architecture).
//
//   bench-zoo REFERENCE.h5 CANDIDATE.h5 [STEP] [EXECUTIONS]     (default step 0, 1000)
//
// Replays the candidate's program on the reference's checkpoint at STEP, as `lossbound-cli
// analyze` does (the candidate's recorded precision, the reference inputs adapted to the
// program), computes the interval (from the inputs), first-order and probabilistic (confidence
// 1 - 1e-6) envelopes, then EXECUTIONS randomized executions of the same program on the same
// inputs (random reduction orders, blockings, FMA, libm ulps; over all cores) and counts, for
// every envelope, the executions whose loss falls outside it. Prints one line per method
// (relative half-width, seconds, escapes) and a last line `json: {...}` with the same numbers.
// The interval and first-order envelopes must have no escape; the probabilistic one carries no
// guarantee and its escapes are reported, not judged.
#include "core/analysis/run_file_replay.h"
#include "core/analysis/step_replay.h"
#include "core/analysis/verdict.h"
#include "core/backend.h"
#include "core/parallel/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

using namespace lossbound;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Method {
  const char* name;
  EnvelopeMethod method;
  Envelope env;
  double seconds = 0;
  std::atomic<int> escapes{0};
};

std::string num(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Relative half-width of [lo, hi] around its centre (inf when unbounded).
double relativeHalfWidth(double lo, double hi) {
  const double centre = (lo + hi) / 2;
  if (!std::isfinite(lo) || !std::isfinite(hi) || centre == 0)
    return std::numeric_limits<double>::infinity();
  return (hi - lo) / 2 / std::abs(centre);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: bench-zoo REFERENCE.h5 CANDIDATE.h5 [STEP] [EXECUTIONS]\n");
    return 2;
  }
  const std::int64_t step = argc > 3 ? std::atoll(argv[3]) : 0;
  const int executions = argc > 4 ? std::atoi(argv[4]) : 1000;
  try {
    const auto reference = RunFileReplay::open(argv[1]);
    const auto candidate = RunFileReplay::open(argv[2]);
    const auto program = candidate->programAt(step);
    std::string note;
    const TensorMap inputs = adaptInputs(*program, reference->inputsAt(step), &note);
    const PrecisionModel precision = candidate->recordedPrecision();
    const std::optional<double> refLoss = reference->loggedLoss(step);

    Method methods[] = {{"interval", EnvelopeMethod::Interval, {}},
                        {"first-order", EnvelopeMethod::FirstOrder, {}},
                        {"probabilistic", EnvelopeMethod::Probabilistic, {}}};
    {
      // One thread, as PyTorch's step in zoo.py (torch.set_num_threads(1)) that the times are
      // compared with.
      auto backend = createCpuBackend(1);
      for (Method& m : methods) {
        ReplayOptions o;
        o.method = m.method;
        o.precision = precision;
        o.lambda = hoeffdingLambda(1 - 1e-6);
        const auto t0 = Clock::now();
        m.env = replayEnvelope(*program, inputs, *backend, o);
        m.seconds = secondsSince(t0);
      }
    }

    // The randomized executions, spread over the pool's threads (one single-threaded backend each).
    const int threads = ThreadPool::global().size();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    std::mutex mutex;
    const auto t0 = Clock::now();
    ThreadPool::global().parallelFor(
        threads,
        [&](std::int64_t tBegin, std::int64_t tEnd) {
          for (std::int64_t t = tBegin; t < tEnd; ++t) {
            auto backend = createCpuBackend(1);
            EvalOptions o;
            o.domain = EvalDomain::Random;
            o.precision = precision;
            for (int i = static_cast<int>(t); i < executions; i += threads) {
              o.seed = 0x200a + static_cast<std::uint64_t>(i) * 7919u;
              const Interval v = lossValue(evaluate(*program, inputs, *backend, o));
              for (Method& m : methods)
                if (!(m.env.lo <= v.lo && v.hi <= m.env.hi)) ++m.escapes;
              std::lock_guard lock(mutex);
              lo = std::min(lo, v.lo);
              hi = std::max(hi, v.hi);
            }
          }
        },
        1, threads);
    const double ensembleSeconds = secondsSince(t0);

    std::printf("%s vs %s, step %lld%s%s\n", argv[1], argv[2], static_cast<long long>(step),
                note.empty() ? "" : ": ", note.c_str());
    std::printf("reference loss %.17g\n", refLoss.value_or(std::nan("")));
    std::string json = "{\"step\": " + std::to_string(step) +
                       ", \"reference_loss\": " + num(refLoss.value_or(std::nan(""))) +
                       ", \"executions\": " + std::to_string(executions);
    for (const Method& m : methods) {
      const double rel = relativeHalfWidth(m.env.lo, m.env.hi);
      std::printf(
          "%-13s [%.17g, %.17g] relative half-width %.3g, %.2f s, %d of %d executions "
          "outside\n",
          m.name, m.env.lo, m.env.hi, rel, m.seconds, m.escapes.load(), executions);
      const std::string key = m.method == EnvelopeMethod::FirstOrder ? "first_order" : m.name;
      json += ", \"" + key + "\": {\"lo\": " + num(m.env.lo) + ", \"hi\": " + num(m.env.hi) +
              ", \"rel_half_width\": " + num(rel) + ", \"seconds\": " + num(m.seconds) +
              ", \"escapes\": " + std::to_string(m.escapes.load()) + "}";
    }
    const double rel = relativeHalfWidth(lo, hi);
    std::printf(
        "ensemble      [%.17g, %.17g] relative half-spread %.3g, %d executions in %.2f s "
        "(%.3f s each, %d threads)\n",
        lo, hi, rel, executions, ensembleSeconds,
        ensembleSeconds * threads / std::max(1, executions), threads);
    json += ", \"ensemble\": {\"lo\": " + num(lo) + ", \"hi\": " + num(hi) +
            ", \"rel_half_width\": " + num(rel) + ", \"seconds\": " + num(ensembleSeconds) +
            ", \"threads\": " + std::to_string(threads) + "}}";
    std::printf("json: %s\n", json.c_str());
    return methods[0].escapes.load() == 0 && methods[1].escapes.load() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench-zoo: %s\n", e.what());
    return 2;
  }
}
