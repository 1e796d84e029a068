#pragma once
// What the normalization rules share (layer norm, batch norm, group norm): the random execution
// of one row's moments (two-pass, Welford, pairwise trees), the rstd of a given variance, the
// per-element affine part y = (x − μ̂)·r·w + b in every form the PyTorch kernels use, and the
// formats statistics may be stored in. The bounds and their sources are in the file comments of
// core/ops/batch_norm_ops.cpp and core/ops/norm_ops.cpp; the interval row moments are the LB_HD
// body kernels::rowMoments (core/kernels/layer_norm_row.h).

#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/ops/op_rule.h"
#include "core/tensor/tensor.h"

#include <random>
#include <span>
#include <utility>
#include <vector>

namespace lossbound::ops::norm {

/// Returns s when it is coarser than c (larger unit roundoff), else c: the format per-channel
/// statistics are enclosed in when the candidate may store them in s before using them again.
Format coarser(Format c, Format s);
/// Returns the relative error bound of one operation computed in c whose result may then be
/// stored in s: u_c, or 2·u_s when s is coarser (RN_s(RN_c(v)) is a neighbour of v in s).
double statRoundoff(Format c, Format s);

/// One random execution of the moments of a row: two-pass, Welford sequential, or a random
/// pairwise combining tree, every operation rounded to nearest in c; returns {mean, m2} (m2 the
/// sum of squared deviations). When `stat` is coarser than c, the two-pass variant may round the
/// sum or the mean to `stat` before using it, and m2 may be rounded to `stat` (PyTorch's batch
/// norm CPU kernels on some paths); with stat = Fp64 the draws are those of the layer norm rule.
std::pair<double, double> randomMoments(std::vector<double> x, Format c, std::mt19937_64& rng,
                                        Format stat = Format::Fp64);

/// Encloses every 1/sqrt(var + eps) the candidate computes from a variance in `var`: two
/// correctly rounded steps in c, or a libm/device rsqrt within modelUlps(Rsqrt, c) ulps (which
/// also covers the binary64 computation PyTorch's CPU kernels do before storing in c), eps read
/// as a Python scalar; the entire line when var + eps may be negative (a NaN).
Interval rsqrtEnclosure(Interval var, double eps, Format c);
/// Returns one random execution of rsqrtEnclosure's computations.
double randomRsqrt(double var, double eps, Format c, std::mt19937_64& rng);

/// The per-channel operands of the affine part y = (x − μ̂)·r·w + b, as enclosures of the values
/// the candidate uses (mean and rstd possibly stored in a coarser format first).
struct AffineChannel {
  Interval mean;          ///< every μ̂ used (magnitudes only: x − μ̂ is passed per element)
  Interval rstd;          ///< every r used
  Interval weight{1, 1};  ///< w (when hasWeight)
  Interval bias{0, 0};    ///< b (when hasBias)
  bool hasWeight = false;
  bool hasBias = false;
};

/// Encloses y for one element in compute format c, as the hull of the forms PyTorch's kernels
/// use: ((x − μ̂)·r)·w + b (decompositions, layer-norm style), (w·(x − μ̂))·r + b (CUDA batch
/// norm), (x − μ̂)·(r·w) + b, and the CPU form x·α + β with α = fl(r·w), β = fl(b − fl(μ̂·α))
/// (with or without FMA; α and β possibly stored in `stat`). `x` is the input element and
/// `centred` an enclosure of x − μ̂ for every used μ̂ (without the dependency between them).
/// The result is in c, before the storage rounding of the output.
Interval affineEnclosure(Interval x, Interval centred, const AffineChannel& ch, Format c,
                         Format stat);

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
