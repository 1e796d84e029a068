#pragma once
// The adjoint-weighted local error of one normalized row (layer norm's row, batch norm's channel,
// group norm's (sample, group)): the shared statistics weighed by the signed adjoint sums, the
// per-element affine roundings by |g|. Derivation and sources: core/ops/norm_ops.cpp's file
// comment, "Adjoint-weighted local error"; the channel affine form x·α + β in
// core/ops/norm_row_adjoint.cpp.

#include "core/interval/precision.h"
#include "core/kernels/layer_norm_row.h"
#include "core/ops/op_rule.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lossbound::ops::norm {

/// The computations a row's candidate may run, next to the moments' model.
struct NormRowModel {
  kernels::RowMomentsModel moments;  ///< c, eps, rsqrt ulps, stat (must not be coarser than c)
  Format out = Format::Fp64;         ///< storage of y
  Format mean = Format::Fp64;        ///< storage of the mean output
  Format rstd = Format::Fp64;        ///< storage of the rstd output
  /// The CPU affine form: false, layer norm's (x·r + (−r·μ̂))·w + b; true, batch and group
  /// norm's x·α + β with α = fl(r·w), β = fl(b − fl(μ̂·α)) (or an FMA).
  bool channelForm = false;
  /// The probabilistic sum of squares too (false: AdjointLocalError::sumSquares is left 0; for a
  /// caller that reads the bound only, OpContext::boundOnly).
  bool probabilistic = true;
};

/// One row: the exact values x[0..n), the adjoints g of y, the weight and bias of each element
/// (null: None), the point statistics and the adjoints of the mean and rstd outputs.
struct NormRow {
  const double *x = nullptr, *g = nullptr, *w = nullptr, *b = nullptr;
  std::int64_t n = 0;
  double mean = 0.0, rstd = 0.0;    ///< point (binary64) statistics
  double gMean = 0.0, gRstd = 0.0;  ///< adjoints of the stored statistics
};

/// Returns the row's term: bound >= |Σ_j g_j(ŷ_j − y_j) + g_μ(μ̃ − μ) + g_r(r̃ − r)| for every
/// candidate (first order in nothing: rigorous given the moments' enclosures), and sumSquares, its
/// probabilistic counterpart (ops::norm::momentSpread for the shared statistics), sqrt(sumSquares)
/// <= bound; nullopt when the moments have no bound. `scratch` is reused across rows.
std::optional<AdjointLocalError> normRowAdjoint(const NormRow& row, const NormRowModel& m,
                                                std::vector<double>& scratch);

/// Sums normRowAdjoint over `rows` rows: rowAt(r) returns row r's elements (x, g, w, b, n); its
/// point statistics and their adjoints are element r of outputs o[1], o[2] and adjoints g[1],
/// g[2]. nullopt when a row has no term.
template <class RowAt>
std::optional<AdjointLocalError> normRowsAdjoint(std::int64_t rows, const NormRowModel& m,
                                                 std::span<const Tensor> o,
                                                 std::span<const Tensor> g, RowAt rowAt) {
  std::vector<double> scratch;
  AdjointLocalError sum;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    NormRow row = rowAt(r);
    row.mean = o[1].values()[ru];
    row.rstd = o[2].values()[ru];
    row.gMean = g[1].values()[ru];
    row.gRstd = g[2].values()[ru];
    const auto t = normRowAdjoint(row, m, scratch);
    if (!t) return std::nullopt;
    sum.bound = add_up(sum.bound, t->bound);
    sum.sumSquares = add_up(sum.sumSquares, t->sumSquares);
  }
  return sum;
}

}  // namespace lossbound::ops::norm
