#pragma once
// Tensor shapes and the PyTorch broadcasting rules.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lossbound {

/// A tensor shape; {} is a scalar (0-d tensor).
using Shape = std::vector<std::int64_t>;

/// Returns the number of elements (1 for a scalar, 0 if any dimension is 0).
std::int64_t numel(const Shape& s);

/// Returns the row-major (contiguous) strides of a shape.
std::vector<std::int64_t> contiguousStrides(const Shape& s);

/// Returns the broadcast shape of a and b (PyTorch rules), or nothing if they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);

/// Returns e.g. "[4, 12, 16]".
std::string shapeString(const Shape& s);

/// Returns dim normalized to [0, rank) (negative dims count from the end); throws
/// std::out_of_range with a message naming the dim and rank when it is out of range.
int normalizeDim(std::int64_t dim, std::size_t rank);

}  // namespace lossbound
