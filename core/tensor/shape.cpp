#include "core/tensor/shape.h"

#include <stdexcept>

namespace lossbound {

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::vector<std::int64_t> contiguousStrides(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return std::nullopt;
  }
  return out;
}

std::string shapeString(const Shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

int normalizeDim(std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank == 0 ? 1 : rank);
  if (dim < -r || dim >= r)
    throw std::out_of_range("dimension " + std::to_string(dim) +
                            " is out of range for a tensor of rank " + std::to_string(rank));
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

}  // namespace lossbound
