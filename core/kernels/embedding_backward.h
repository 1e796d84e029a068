#pragma once
// embedding_dense_backward as an LB_HD body, one column of the weight gradient at a time: the
// interval rule of core/ops/embedding_ops.cpp (whose file comment gives the error model: for
// every weight row k the sum of the gradient rows whose index is k, in any order, enclosed by
// γ_{m−1}(u)·Σ|g| around the exact sum, Higham 2002, eq. 4.4) runs it on the host, and
// Backend::embeddingBackward on a device, so both compute the same bits.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/kernel_types.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate sums the gradient rows: the unit roundoff u of the sums (the larger of the
/// storage's and the accumulation's) and the storage format; the weight rows and padding_idx
/// (-1 for none).
struct EmbeddingBackwardModel {
  double u = 0x1p-53;
  Format storage = Format::Fp64;
  std::int64_t numWeights = 0;
  std::int64_t padding = -1;
};

/// Writes column j of the [numWeights × dim] weight gradient: out[k·dim + j] encloses every
/// sum, in any order, of g[p·dim + j] over the positions p (in order) whose index[p] is k, k not
/// padding_idx (0 for a row no position names), rounded outward to the storage format; the
/// entire line where a partial sum may overflow it. `scratch` holds 2·numWeights doubles.
/// Returns false when an index is not a row (kernels::tableRow): the host rule reports it.
LB_HD inline bool embeddingBackwardColumn(ConstIntervalSpan g, const double* index,
                                          std::int64_t positions, std::int64_t dim, std::int64_t j,
                                          const EmbeddingBackwardModel& m, IntervalSpan out,
                                          double* scratch) {
  double* absSum = scratch;
  double* count = scratch + m.numWeights;
  for (std::int64_t k = 0; k < m.numWeights; ++k) {
    out.lo[k * dim + j] = 0.0;
    out.hi[k * dim + j] = 0.0;
    absSum[k] = 0.0;
    count[k] = 0.0;
  }
  bool ok = true;
  for (std::int64_t p = 0; p < positions; ++p) {
    const std::int64_t k = tableRow(index[p], m.numWeights);
    if (k < 0) {
      ok = false;
      continue;
    }
    if (k == m.padding) continue;
    const double vlo = g.lo[p * dim + j], vhi = g.hi[p * dim + j];
    out.lo[k * dim + j] = add_down(out.lo[k * dim + j], vlo);
    out.hi[k * dim + j] = add_up(out.hi[k * dim + j], vhi);
    absSum[k] = add_up(absSum[k], vhi > -vlo ? vhi : -vlo);
    count[k] += 1.0;
  }
  for (std::int64_t k = 0; k < m.numWeights; ++k) {
    const double err = sumErrorBound(count[k], absSum[k], m.u);
    Interval r{sub_down(out.lo[k * dim + j], err), add_up(out.hi[k * dim + j], err)};
    if (!(add_up(absSum[k], err) < largestFinite(m.storage))) r = entireInterval();
    r = roundOutward(r, m.storage);
    out.lo[k * dim + j] = r.lo;
    out.hi[k * dim + j] = r.hi;
  }
  return ok;
}

}  // namespace lossbound::kernels
