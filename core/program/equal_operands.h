#pragma once
// Equal operands round alike. The probabilistic method puts the roundings of a node's output
// elements in quadrature (independent, mean-zero: Higham–Mary 2019); but an elementwise op maps
// equal operands to the same result by the same arithmetic, so their rounding errors are one
// error, not several: repeated values (8-bit pixels, a repeated token's row, bf16 activations)
// made λ·sqrt(Σ(g·r)²) escape the executor by 2.7× on 4,096 quotients of 8 values
// (tests/core/program: probabilisticTermCoversRepeatedValues). Here the terms of elements whose
// operands are equal add linearly, and the groups go in quadrature.

#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <span>
#include <vector>

namespace lossbound {

/// Returns one key per element of an output of `shape`: a hash of the values of every tensor
/// operand of the node at that element (broadcast to `shape`), so that elements with equal
/// operands have equal keys (different operands may share a key: that only merges groups, which
/// is conservative). Empty when some tensor operand does not broadcast to `shape` (a reduction, a
/// product of non-square matrices: no element-to-element correspondence), when `shape` has one
/// element, or when no two elements share a key (nothing to group). Shapes can coincide without
/// a correspondence (a square matrix product): its keys then only merge groups, conservatively.
std::vector<std::uint64_t> equalOperandKeys(const OpArgs& args, const Shape& shape);

/// Returns Σ t² (in element order) plus, over the groups of two or more equal keys, the excess
/// (Σ_group |t|)² − Σ_group t² (>= 0): never less than Σ t², bit for bit (Σ t² when keys is
/// empty or has no repeated key).
double groupedSumSquares(std::span<const double> terms, std::span<const std::uint64_t> keys);

}  // namespace lossbound
