#pragma once
// What the normalization rules share (layer norm, batch norm, group norm): the random execution
// of one row's moments (two-pass, Welford, pairwise trees), the rstd of a given variance, the
// random executions of the per-element affine part y = (x − μ̂)·r·w + b in every form the
// PyTorch kernels use, and argument helpers. The bounds and their sources are in the file
// comments of core/ops/batch_norm_ops.cpp and core/ops/norm_ops.cpp; the interval bodies are LB_HD
// kernels: kernels::rowMoments (core/kernels/layer_norm_row.h) and kernels::affineEnclosure with
// the stored-statistics formats (core/kernels/channel_norm_affine.h).

#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/kernels/channel_norm_affine.h"
#include "core/kernels/layer_norm_row.h"
#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace lossbound::ops::norm {

using kernels::AffineChannel;
using kernels::affineEnclosure;
using kernels::coarser;
using kernels::statRoundoff;

/// One random execution of the moments of a row: two-pass, Welford sequential, or a random
/// pairwise combining tree, every operation rounded to nearest in c; returns {mean, m2} (m2 the
/// sum of squared deviations). When `stat` is coarser than c, the two-pass variant may round the
/// sum or the mean to `stat` before using it, and m2 may be rounded to `stat` (PyTorch's batch
/// norm CPU kernels on some paths); with stat = Fp64 the draws are those of the layer norm rule.
std::pair<double, double> randomMoments(std::vector<double> x, Format c, std::mt19937_64& rng,
                                        Format stat = Format::Fp64);

/// The probabilistic spread of one row's statistics: root-sum-squares of the first-order effects
/// of the individual roundings (each |δ| <= u, independent and mean-zero: Higham & Mary 2019) on
/// the mean, on the sum of squared deviations and on the rstd, the largest over the algorithms
/// randomMoments executes; derivation in core/ops/channel_norm_support.cpp. Infinite when the
/// row gives no bound.
struct MomentSpread {
  double mean = HUGE_VAL, m2 = HUGE_VAL, rstd = HUGE_VAL;
};
/// Returns the MomentSpread of the exact row x[0..n) with the row's enclosures `mo`
/// (kernels::rowMoments: its m2, var and rstd upper ends bound the exact values), computed in c,
/// eps the Python scalar, an rsqrt within `rsqrtUlps` ulps.
MomentSpread momentSpread(const double* x, std::int64_t n, const kernels::RowMoments& mo,
                          double eps, Format c, int rsqrtUlps);

/// Encloses every 1/sqrt(var + eps) the candidate computes from a variance in `var`: two
/// correctly rounded steps in c, or a libm/device rsqrt within modelUlps(Rsqrt, c) ulps (which
/// also covers the binary64 computation PyTorch's CPU kernels do before storing in c), eps read
/// as a Python scalar; the entire line when var + eps may be negative (a NaN).
Interval rsqrtEnclosure(Interval var, double eps, Format c);
/// Returns one random execution of rsqrtEnclosure's computations.
double randomRsqrt(double var, double eps, Format c, std::mt19937_64& rng);

/// The forms of the affine part a random execution may use (one per execution).
enum class AffineForm { CentredThenWeight, WeightFirst, ScaledWeight, CpuLinear, CpuLinearFma };
/// Returns a random AffineForm.
AffineForm randomAffineForm(std::mt19937_64& rng);
/// Computes y = (x − mu)·r·w + b in form f, every operation rounded to nearest in c (w, b may be
/// null for None); alpha/beta of the CPU forms are rounded to `stat` when `storeAlphaBeta`.
double randomAffine(double x, double mu, double r, const double* w, const double* b, AffineForm f,
                    Format c, Format stat, bool storeAlphaBeta);

/// Returns localError for every output from `rule`'s interval rule evaluated on the (exact,
/// point) inputs: the distance from each point output to the ends of its enclosure.
std::vector<Tensor> localErrorFromInterval(const OpRule& rule, const OpArgs& args,
                                           std::span<const Tensor> outputs, OpContext& ctx);

/// Returns the output_mask argument at position i (three bools; missing or None: all true).
std::vector<bool> outputMask(const OpArgs& args, std::size_t i);

/// Returns the dtype of traced output k, or `fallback` when the node has fewer outputs.
DType outDtypeOr(const OpArgs& args, std::size_t k, DType fallback);

}  // namespace lossbound::ops::norm
