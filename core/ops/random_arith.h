#pragma once
// Arithmetic of the random domain: one operation, a sum and a dot product executed in a modelled
// format with every rounding to nearest, sums and dot products in a random order and bracketing
// (sequential, pairwise, random tree, split-K blocks; FMA chains or rounded products).
//
// This executor is the yardstick of issue 14 (the spread of the loss over randomized executions):
// its draws and results for a seed are frozen (tests/core/ops/test_op_support.cpp,
// randomExecutorStreamIsFrozen). Make it faster, never different.

#include "core/interval/precision.h"
#include "core/ops/formats.h"

#include <cfloat>
#include <cmath>
#include <random>
#include <span>
#include <vector>

namespace lossbound::ops {

/// Returns RN_f(a + b) (correctly rounded: binary64 then f is innocuous, 53 ≥ 2p + 2, Figueroa
/// 1995). Inline, as mulIn and fmaIn: the executor's every operation (a call each was a fifth of
/// a randomized execution of the scale ladder's s0).
inline double addIn(double a, double b, Format f) { return roundNearest(a + b, f); }
/// Returns RN_f(a · b) (correctly rounded as addIn).
inline double mulIn(double a, double b, Format f) { return roundNearest(a * b, f); }
/// Returns RN_f(a·b + c) with a single rounding (exact FMA; fp32 via fmaf, fp64 via fma).
inline double fmaIn(double a, double b, double c, Format f) {
  if (f == Format::Fp64) return std::fma(a, b, c);
  if (f == Format::Fp32) {
    const auto isF = [](double x) {
      return std::fabs(x) <= static_cast<double>(FLT_MAX) &&
             static_cast<double>(static_cast<float>(x)) == x;
    };
    if (isF(a) && isF(b) && isF(c))
      return static_cast<double>(
          std::fmaf(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
  }
  // Inputs outside f, or bf16/fp16 accumulation: a faithful result (double rounding).
  return roundNearest(std::fma(a, b, c), f);
}
/// Sums `terms` in format f: random permutation, then at random either sequential (left to right),
/// a random binary tree, or random-size blocks summed sequentially and then combined; every
/// addition rounded to nearest in f. Reorders `terms` in place.
double randomSum(std::span<double> terms, Format f, std::mt19937_64& rng);
/// Returns the dot product Σ a_i·b_i in accumulation format f in a random order and bracketing:
/// with FMA (sequential chains) or with products rounded to f and then randomSum. `scratch` is
/// reused storage.
double randomDot(std::span<const double> a, std::span<const double> b, Format f,
                 std::mt19937_64& rng, std::vector<double>& scratch);

}  // namespace lossbound::ops
