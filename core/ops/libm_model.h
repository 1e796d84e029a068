#pragma once
// The candidate's libm: the published ulp errors of the functions that are not correctly rounded
// (CUDA 13 and glibc 2.36 tables, plus one ulp of margin for bounds), and what follows from them
// in each domain: the widened enclosure, the perturbed random result, the local error.

#include "core/interval/interval.h"
#include "core/interval/precision.h"

#include <random>

namespace lossbound::ops {

/// Functions whose implementations are not correctly rounded.
/// (Composite functions with cancellation, such as gelu through 1 + erf, need their own bound.)
enum class LibmFn { Exp, Expm1, Log, Log1p, Tanh, Erf, Sigmoid, Pow, Rsqrt, Sin, Cos };
/// Returns the published maximum error in ulps of fn in compute format f (fp32: max of CUDA 13
/// Programming Guide single-precision table and glibc 2.36 libm-test-ulps "float"; fp64: same
/// tables, "double"; sigmoid counts its exp, add and divide, relative to the result).
int publishedUlps(LibmFn fn, Format f);
/// Returns the ulps used for bounds: publishedUlps + 1 (the tables are measured, not proven).
int modelUlps(LibmFn fn, Format f);
/// Returns x widened outward by `ulps` ulps of format f in relative terms:
/// [lo − ulps·2u·|lo| − ulps·eta, hi + ...] rounded outward (ulp(y) ≤ 2u|y| + eta for any y).
Interval widenUlps(Interval x, int ulps, Format f);
/// Returns v rounded to nearest in f and then moved by a uniform random number of ulps of f in
/// [−publishedUlps, publishedUlps] (the random-domain libm).
double perturbUlps(double v, int publishedUlpsCount, Format f, std::mt19937_64& rng);
/// Returns the interval enclosure of a libm function value in storage `store` computed in
/// compute format `compute`: widenUlps(exact, modelUlps) → roundOutward(store).
Interval libmEnclosure(Interval exact, LibmFn fn, Format compute, Format store);
/// Returns a random-domain libm value: perturbUlps(exactValue) in compute, then RN in store.
double libmRandom(double exactValue, LibmFn fn, Format compute, Format store, std::mt19937_64& rng);
/// Returns the local error bound of a libm result y in store: modelUlps·(2u_c|y| + eta_c)
/// + u_s·|y| + eta_s (compute error, then storage rounding).
double libmLocalError(double y, LibmFn fn, Format compute, Format store);

}  // namespace lossbound::ops
