#pragma once
// Softmax test rows shared by the host test of the row body (test_kernel_bodies.cpp) and the
// device test (test_cuda_backend.cpp): logits of every kind the CPU rule distinguishes (points,
// narrow and wide intervals, shared offsets, entries whose exponential underflows, causal and
// random masks, all-masked rows, unbounded entries), and the host evaluation of the body.

#include "core/kernels/softmax_row.h"
#include "tests/gpu/host_interval_matmul.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace lossbound::kernels::test {

/// Number of row kinds randomSoftmaxRows cycles through.
inline constexpr int kSoftmaxRowKinds = 10;

/// Returns rows×cols logits (row-major); row r has kind r % kSoftmaxRowKinds: 0 points in
/// [−8, 8], 1 narrow intervals (relative 2^-40..2^-10), 2 wide intervals (width up to 20),
/// 3 a causal mask (exact −inf after position r), 4 about half the entries masked, 5 all masked,
/// 6 one entry unbounded above, 7 offset 1e4 with spread 400 (exp underflows in fp32 and fp64),
/// 8 tiny logits (subnormal to 2^-20, noShift rows), 9 offset −50 points with a few masks.
inline HostIntervals randomSoftmaxRows(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols) {
  std::uniform_real_distribution<double> sym(-1.0, 1.0), unit(0.0, 1.0);
  const double inf = HUGE_VAL;
  HostIntervals x;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      double lo = 0.0, hi = 0.0;
      switch (r % kSoftmaxRowKinds) {
        case 0:
          lo = hi = 8.0 * sym(rng);
          break;
        case 1:
          lo = 8.0 * sym(rng);
          hi = lo + std::fabs(lo) * std::ldexp(unit(rng), -10 - static_cast<int>(rng() % 31));
          break;
        case 2:
          lo = 30.0 * sym(rng);
          hi = lo + 20.0 * unit(rng);
          break;
        case 3:
          lo = hi = j > r % cols ? -inf : 4.0 * sym(rng);
          break;
        case 4:
          lo = hi = rng() % 2 ? -inf : 4.0 * sym(rng);
          break;
        case 5:
          lo = hi = -inf;
          break;
        case 6:
          lo = 2.0 * sym(rng);
          hi = j == cols / 2 ? inf : lo + 1e-3;
          break;
        case 7:
          lo = 1e4 + 200.0 * sym(rng);
          hi = lo + (rng() % 2 ? 0.0 : 1e-2);
          break;
        case 8:
          lo = std::ldexp(sym(rng), -20 - static_cast<int>(rng() % 1060));
          hi = lo;
          break;
        default:
          lo = hi = rng() % 8 == 0 ? -inf : -50.0 + 3.0 * sym(rng);
          break;
      }
      x.lo.push_back(lo);
      x.hi.push_back(hi);
    }
  return x;
}

/// Runs softmaxRow on every row of x (rows×cols, row-major) on the host.
inline HostIntervals hostSoftmaxRows(const SoftmaxModel& m, bool log, const HostIntervals& x,
                                     std::int64_t rows, std::int64_t cols) {
  HostIntervals y{std::vector<double>(x.lo.size()), std::vector<double>(x.lo.size())};
  std::vector<double> scratch(static_cast<std::size_t>(softmaxRowScratch(cols)));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto o = static_cast<std::size_t>(r * cols);
    softmaxRow(x.lo.data() + o, x.hi.data() + o, cols, m, log, y.lo.data() + o, y.hi.data() + o,
               scratch.data());
  }
  return y;
}

}  // namespace lossbound::kernels::test
