#pragma once
// Order-free rounding-error bounds: of one correctly rounded operation, of a sum and of a dot
// product in any order and bracketing (Higham 2002, ch. 3–4; Jeannerod–Rump 2013), and the
// enclosure of a sum accumulated in one format and stored in another.

#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"

#include <cstdint>
#include <span>

namespace lossbound::ops {

/// Returns γ_n = n·u / (1 − n·u) rounded upward; +inf when n·u ≥ 1 (Higham 2002, Lemma 3.1).
double gammaUp(std::int64_t n, double u);
/// Returns an upper bound of |fl(Σ x_i) − Σ x_i| for n terms summed in any order and bracketing
/// in a format with unit roundoff u, given absSumUp ≥ Σ|x_i|: γ_{n−1}·Σ|x_i| rounded up
/// (Higham 2002, eq. 4.4 for any summation tree; Jeannerod–Rump 2013 show (n−1)u suffices).
/// Additions are exact in the subnormal range, so no underflow term is needed.
double sumErrorBound(std::int64_t n, double absSumUp, double u);
/// Returns an upper bound of sqrt(Σ p²) over the m − 1 partial sums p (internal nodes) of a sum of
/// the given magnitudes |x_i| in any order and bracketing, rounded up: Σ_{k=2..m} P_k² with P_k
/// the sum of the k largest |x_i|. The probabilistic method's root-sum-square of a sum's
/// roundings is u times this (Higham & Mary 2019); sqrt(m − 1)·Σ|x| bounds it too, and is ~√3
/// larger for magnitudes of one size. Why P_k: in any binary tree of m leaves, the internal nodes
/// of at least s leaves are at most m − s + 1 (they form a subtree; each of its ℓ minimal nodes
/// holds at least s leaves and each node with one child in it one more leaf outside), so the j-th
/// largest node holds at most m − j + 1 leaves and its sum at most P_{m−j+1}. Reorders
/// `magnitudes`.
double partialSumsRootSquares(std::span<double> magnitudes);
/// Returns an upper bound of |fl(x·y) − x·y| for a length-n dot product in any order, with or
/// without FMA, where absDotUp ≥ |x|·|y| and eta is the format's smallest subnormal:
/// γ_n·|x|·|y| + n·eta (Higham 2002, eq. 3.5; the n·eta term covers underflow in products).
double dotErrorBound(std::int64_t n, double absDotUp, double u, double eta);
/// Returns the local error of one correctly rounded operation whose exact result is y, stored in
/// f after being computed in c (double rounding when c ≠ f): u_c|y| + u_f|y|(1+u_c) + eta terms.
double roundingError(double y, Format c, Format f);
/// Returns the error of storing the exact value y in f: 0 when y is an f value (rounding a
/// representable value is exact, IEEE 754-2019 §4.3), else roundingError(y, f, f).
double storageRoundingError(double y, Format f);

/// Returns the enclosure of Σ x_i over the given element offsets of t, plus an upper bound of
/// Σ|x_i| (both in directed binary64 arithmetic): {sum, absSumUp}.
struct SumEnclosure {
  Interval sum;
  double absSumUp;
};
/// Accumulates one element into a SumEnclosure (directed rounding).
inline void accumulate(SumEnclosure& s, Interval x) {
  s.sum.lo = add_down(s.sum.lo, x.lo);
  s.sum.hi = add_up(s.sum.hi, x.hi);
  const double m = x.hi > -x.lo ? x.hi : -x.lo;
  s.absSumUp = add_up(s.absSumUp, m);
}
/// Returns the enclosure of what any order of summation of n terms in format with roundoff u,
/// then rounding to storage `store`, can give: (sum ± sumErrorBound) → roundOutward(store);
/// entire line when the partial sums may overflow acc's largest finite value.
Interval roundedSumEnclosure(const SumEnclosure& s, std::int64_t n, Format acc, Format store,
                             bool truncating = false);

}  // namespace lossbound::ops
