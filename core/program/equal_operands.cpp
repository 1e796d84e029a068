#include "core/program/equal_operands.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace lossbound {

namespace {

/// True when `in` broadcasts to `out` (NumPy rules: trailing dims equal or 1).
bool broadcastsTo(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  for (std::size_t d = 0; d < in.size(); ++d) {
    const std::int64_t a = in[in.size() - 1 - d], b = out[out.size() - 1 - d];
    if (a != b && a != 1) return false;
  }
  return true;
}

/// Mixes v into h (splitmix64's finaliser over h ^ v).
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  std::uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// True when two of `keys` are equal: open addressing on the keys themselves (they are
/// splitmix64 hashes, so their low bits index the table; 0 marks an empty slot, a key 0 is
/// counted apart), O(n) where a sort took O(n log n).
bool anyRepeated(const std::vector<std::uint64_t>& keys) {
  std::size_t capacity = 16;
  while (capacity < 2 * keys.size()) capacity *= 2;
  std::vector<std::uint64_t> table(capacity, 0);
  bool zero = false;
  for (const std::uint64_t k : keys) {
    if (k == 0) {
      if (zero) return true;
      zero = true;
      continue;
    }
    std::size_t i = static_cast<std::size_t>(k) & (capacity - 1);
    for (; table[i] != 0; i = (i + 1) & (capacity - 1))
      if (table[i] == k) return true;
    table[i] = k;
  }
  return false;
}

}  // namespace

std::vector<std::uint64_t> equalOperandKeys(const OpArgs& args, const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  if (n <= 1) return {};
  for (const Tensor* t : args.tensorInputs())
    if (!broadcastsTo(t->shape(), shape)) return {};
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(n), 0);
  std::vector<std::int64_t> index(shape.size());
  for (const Tensor* t : args.tensorInputs()) {
    const auto lo = t->lo(), hi = t->hi();
    if (t->numel() == n) {  // the output's shape itself
      for (std::size_t e = 0; e < keys.size(); ++e) {
        std::uint64_t a = 0, b = 0;
        std::memcpy(&a, &lo[e], sizeof a);
        std::memcpy(&b, &hi[e], sizeof b);
        keys[e] = mix(mix(keys[e], a), b);
      }
      continue;
    }
    // Broadcast: the operand's element of each output element (its strides, 0 on broadcast dims).
    const Shape& s = t->shape();
    std::vector<std::int64_t> stride(shape.size(), 0);
    std::int64_t step = 1;
    for (std::size_t d = 0; d < s.size(); ++d) {
      const std::size_t od = shape.size() - 1 - d, id = s.size() - 1 - d;
      stride[od] = s[id] == 1 ? 0 : step;
      step *= s[id];
    }
    std::fill(index.begin(), index.end(), 0);
    std::int64_t off = 0;
    for (std::size_t e = 0; e < keys.size(); ++e) {
      std::uint64_t a = 0, b = 0;
      std::memcpy(&a, &lo[static_cast<std::size_t>(off)], sizeof a);
      std::memcpy(&b, &hi[static_cast<std::size_t>(off)], sizeof b);
      keys[e] = mix(mix(keys[e], a), b);
      for (std::size_t d = shape.size(); d-- > 0;) {  // next row-major index
        off += stride[d];
        if (++index[d] < shape[d]) break;
        off -= stride[d] * shape[d];
        index[d] = 0;
      }
    }
  }
  if (!anyRepeated(keys)) return {};  // no two elements alike: nothing to group
  return keys;
}

double groupedSumSquares(std::span<const double> terms, std::span<const std::uint64_t> keys) {
  double squares = 0.0;
  for (double t : terms) squares += t * t;
  if (keys.empty()) return squares;
  // The elements with a nonzero term, by (key, position): a deterministic order in each group.
  std::vector<std::pair<std::uint64_t, std::size_t>> byKey;
  byKey.reserve(terms.size());
  for (std::size_t e = 0; e < terms.size(); ++e)
    if (terms[e] != 0.0) byKey.emplace_back(keys[e], e);
  std::sort(byKey.begin(), byKey.end());
  double excess = 0.0;
  for (std::size_t i = 0; i < byKey.size();) {
    double linear = 0.0, own = 0.0;
    std::size_t j = i;
    for (; j < byKey.size() && byKey[j].first == byKey[i].first; ++j) {
      const double t = std::fabs(terms[byKey[j].second]);
      linear += t;
      own += t * t;
    }
    if (j - i > 1) excess += std::fmax(linear * linear - own, 0.0);
    i = j;
  }
  return squares + excess;
}

}  // namespace lossbound
