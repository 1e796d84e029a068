#pragma once
// Scatters in every domain: a base tensor receives source elements at target positions, either
// overwriting (with duplicate targets any one write may win) or accumulating (the base element
// plus every source element sent to it, summed in any order). Shared by scatter, scatter_add,
// index_add, index_put and masked_scatter.
//
// Contracts: overwrite is exact, and a target written more than once holds the hull of its
// candidate values (PyTorch leaves the winner unspecified); accumulate is the order-free sum of
// the 1 + k terms of a target (k terms when the base element is exactly 0: adding an exact zero
// rounds nothing, in any order), |fl(Σ) − Σ| <= γ_k Σ|terms| (Higham 2002, eq. 4.4) with every
// partial sum rounded to the storage format F (CPU kernels add in scalar_t, CUDA atomics in F):
// a finer accumulator rounded to F once at the end lies inside the same enclosure (it is the
// rounding to F of a value inside the γ_k(u_F) interval). Integer dtypes are exact.

#include "core/ops/op_rule.h"

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace lossbound::ops {

/// One write: output element `target` (offset in the base) receives src element `source`.
struct ScatterWrite {
  std::int64_t target;
  std::int64_t source;
};

/// How the writes to one element combine.
enum class ScatterMode { Overwrite, Accumulate };

/// Returns the exact result in binary64: the last write wins (Overwrite), or the sum in write
/// order (Accumulate).
Tensor scatterPoint(const Tensor& base, const Tensor& src, std::span<const ScatterWrite> writes,
                    ScatterMode mode, DType dtype);
/// Encloses every result: the hull of the candidates of multiply written targets (Overwrite), or
/// the order-free sum of each target's terms in storage format `store` (Accumulate; exact when
/// `integral`).
Tensor scatterInterval(const Tensor& base, const Tensor& src, std::span<const ScatterWrite> writes,
                       ScatterMode mode, DType dtype, Format store, bool integral);
/// Returns scatterInterval(zeros of `shape`, src, writes, Accumulate, dtype, store, integral)
/// computed through the backend's gather and row sums, when every element of the result
/// receives the same number k > 0 of writes (nearest upsampling's backward at an integer scale,
/// a fold of non-overlapping windows): row t is target t's terms in write order, summed as
/// scatterInterval sums them onto a zero base (kernels::sumFinish of the same sequence); nullopt
/// when the counts differ or the backend declines.
std::optional<Tensor> offerScatterSum(Backend& backend, const Shape& shape, const Tensor& src,
                                      std::span<const ScatterWrite> writes, DType dtype,
                                      Format store, bool integral);
/// Executes once: a random winner per multiply written target (Overwrite), or each target's
/// terms summed in a random order in F or in `finer` and rounded to F (Accumulate).
Tensor scatterRandom(const Tensor& base, const Tensor& src, std::span<const ScatterWrite> writes,
                     ScatterMode mode, DType dtype, Format store, Format finer, bool integral,
                     std::mt19937_64& rng);
/// Returns the gradients of (base, src) for the output gradient g: accumulate passes g to the
/// base and g[target] to every source; overwrite zeroes written targets in the base gradient and
/// passes g[target] to the write scatterPoint keeps.
std::pair<Tensor, Tensor> scatterVjp(const Tensor& g, const Shape& baseShape, DType baseDtype,
                                     const Shape& srcShape, DType srcDtype,
                                     std::span<const ScatterWrite> writes, ScatterMode mode);

}  // namespace lossbound::ops
