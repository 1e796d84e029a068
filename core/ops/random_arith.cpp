// Random-domain arithmetic: rounding to nearest in a format, random summation orders.
#include "core/ops/random_arith.h"

#include "core/ops/formats.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

namespace lossbound::ops {

namespace {
double sequentialSum(std::span<double> t, Format f) {
  double s = t.empty() ? 0.0 : t[0];
  for (std::size_t i = 1; i < t.size(); ++i) s = addIn(s, t[i], f);
  return s;
}
double pairwiseSum(std::span<double> t, Format f) {
  std::size_t n = t.size();
  if (n == 0) return 0.0;
  while (n > 1) {
    const std::size_t half = n / 2;
    for (std::size_t i = 0; i < half; ++i) t[i] = addIn(t[2 * i], t[2 * i + 1], f);
    if (n % 2) t[half] = t[n - 1];
    n = half + n % 2;
  }
  return t[0];
}
double randomTreeSum(std::span<double> t, Format f, std::mt19937_64& rng) {
  std::size_t n = t.size();
  if (n == 0) return 0.0;
  while (n > 1) {
    const std::size_t i = static_cast<std::size_t>(rng() % (n - 1));
    t[i] = addIn(t[i], t[i + 1], f);
    std::move(t.begin() + static_cast<std::ptrdiff_t>(i) + 2,
              t.begin() + static_cast<std::ptrdiff_t>(n),
              t.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    --n;
  }
  return t[0];
}
}  // namespace

double randomSum(std::span<double> terms, Format f, std::mt19937_64& rng) {
  const std::size_t n = terms.size();
  if (n == 0) return 0.0;
  if (n == 1) return roundNearest(terms[0], f);
  std::shuffle(terms.begin(), terms.end(), rng);
  const int mode = static_cast<int>(rng() % 4);
  if (mode == 0) return sequentialSum(terms, f);
  if (mode == 1) return pairwiseSum(terms, f);
  if (mode == 2 && n <= 512) return randomTreeSum(terms, f, rng);
  // Blocked (split-K like): random block size, each block sequential, partials combined.
  const std::size_t b = 1 + static_cast<std::size_t>(rng() % n);
  std::size_t m = 0;
  for (std::size_t start = 0; start < n; start += b) {
    const std::size_t len = std::min(b, n - start);
    terms[m++] = sequentialSum(terms.subspan(start, len), f);
  }
  return (rng() & 1) ? sequentialSum(terms.first(m), f) : pairwiseSum(terms.first(m), f);
}

double randomDot(std::span<const double> a, std::span<const double> b, Format f,
                 std::mt19937_64& rng, std::vector<double>& scratch) {
  const std::size_t n = a.size();
  if (n == 0) return 0.0;
  if (rng() & 1) {
    scratch.resize(n);
    for (std::size_t i = 0; i < n; ++i) scratch[i] = mulIn(a[i], b[i], f);
    return randomSum(scratch, f, rng);
  }
  // FMA chains over random-size blocks of a random permutation, partials summed at random.
  thread_local std::vector<std::size_t> idx;  // reused: one allocation per thread, not per dot
  idx.resize(n);
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::shuffle(idx.begin(), idx.end(), rng);
  const std::size_t blk = (rng() & 1) ? n : 1 + static_cast<std::size_t>(rng() % n);
  scratch.clear();
  for (std::size_t start = 0; start < n; start += blk) {
    const std::size_t end = std::min(n, start + blk);
    double acc = mulIn(a[idx[start]], b[idx[start]], f);
    for (std::size_t i = start + 1; i < end; ++i) acc = fmaIn(a[idx[i]], b[idx[i]], acc, f);
    scratch.push_back(acc);
  }
  return randomSum(scratch, f, rng);
}

}  // namespace lossbound::ops
