#pragma once
// The matrix-product machinery shared by the rules that lower to GEMMs (matmul_ops.cpp,
// conv_ops.cpp): the candidate's error model of one product, the midpoint–radius interval GEMM on
// Backend::gemm, the randomized GEMM of the random domain, and the first-order local error bound.
//
// Error model of "any reasonable implementation" of C = alpha·(A·B) + beta·bias (m×k times k×n):
// the inputs are rounded to the matmul input format (tf32, or the storage format) with any
// direction (round-to-nearest, or truncation on tensor cores); the k products are accumulated in
// the accumulation format (fp32 for bf16/fp16/tf32, else the storage format) in any order and
// bracketing, with or without FMA, any split-K blocking; the bias is one more term; the result is
// rounded to the storage format. Then |fl(A·B) − Ã·B̃| <= γ_k^acc |Ã|·|B̃| + k·η_acc (Higham 2002,
// eq. 3.5, any order; Jeannerod–Rump 2013: k·u suffices), Ã, B̃ the rounded inputs.

#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/kernels/interval_gemm.h"
#include "core/ops/precision_model.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <random>

namespace lossbound {

class Backend;

namespace ops {

/// How the candidate computes one matrix product.
struct GemmModel {
  Format in;    ///< inputs rounded to this format before the products
  Format acc;   ///< accumulation format
  Format out;   ///< storage format of the result
  double uAcc;  ///< accumulation unit roundoff (2u for truncating accumulation)
};

/// Returns the model of a product whose traced result dtype is the floating dtype `t`.
GemmModel gemmModel(const PrecisionModel& pm, DType t);

/// Returns the number of terms the bound of one result element counts: k products, plus two for
/// a bias (β·bias and its add), plus one for an alpha != 1 scaling.
std::int64_t gemmTerms(std::int64_t k, bool bias, double alpha);

/// Returns the per-product constants of kernels::gemmFinishElement for inner dimension k (the
/// finishing arithmetic of intervalGemm, shared with the Backend hook and the device).
kernels::GemmFinish intervalGemmFinish(std::int64_t k, const GemmModel& gm, bool bias, double alpha,
                                       double beta);

/// Encloses C = alpha·(A·B) + beta·bias for the m×k row-major block of A at aOff and the k×n
/// block of B at bOff (bias: m×n intervals or null) as every value the candidate can produce,
/// rounded outward to the storage format; writes outLo/outHi (m×n). Midpoint–radius on the
/// Backend's round-to-nearest GEMMs (Rump 1999; Revol–Théveny 2013).
void intervalGemm(Backend& be, const Tensor& A, std::int64_t aOff, const Tensor& B,
                  std::int64_t bOff, std::int64_t m, std::int64_t k, std::int64_t n,
                  const GemmModel& gm, const Interval* bias, double alpha, double beta,
                  double* outLo, double* outHi);

/// How randomGemm draws the order of its reductions.
enum class GemmOrder {
  /// Every output element its own random order, bracketing and blocking, FMA or not (randomDot):
  /// the executor the soundness oracles use (and the ensemble method with --ensemble-order
  /// per-element).
  PerElement,
  /// One draw for the whole product: a random permutation of the k terms, and either FMA or
  /// products rounded first; every element a sequential chain in that order (the bias, when it
  /// is a term, first), as a CPU kernel walking k in one order computes. Each element is an
  /// execution PerElement draws too, with no draw per element. One draw per call: per batch
  /// slice of bmm/baddbmm, per sample and group of a convolution. The baselines' execution and
  /// the ensemble method's default. Only for fp32 or fp64
  /// accumulation (every gemmModel); other models keep PerElement.
  PerProduct,
};

/// Computes one candidate execution of C = alpha·(A·B) + beta·bias (bias: m×n values or null):
/// inputs rounded to the input format (RN, or truncation for tf32), each element a dot product in
/// the accumulation format in an order drawn as `order` says (the bias sometimes as one more
/// term of the accumulation), the result rounded to nearest in the storage format.
void randomGemm(const Tensor& A, std::int64_t aOff, const Tensor& B, std::int64_t bOff,
                std::int64_t m, std::int64_t k, std::int64_t n, const GemmModel& gm,
                const double* bias, double alpha, double beta, std::mt19937_64& rng, double* out,
                GemmOrder order = GemmOrder::PerElement);

/// The first-order local error bound of one product: for a result element with magnitude
/// M >= |alpha|·(|A|·|B|)_ij + |beta|·|bias_ij| (|A|·|B| computed in binary64 round-to-nearest by
/// the Backend) and computed value y, |computed − exact| <= rel·M + eta + storage(y); with
/// alpha = 1 and no input rounding, also the signed-sum form u·M(1 + (t − 1)γ_t) +
/// (t − 1)·u·max(Σ⁺, Σ⁻) + eta + storage(y) (gemm.cpp), ~2× smaller when the terms' signs mix.
class GemmLocalBound {
 public:
  /// Prepares the bound for inner dimension k and `terms` summed terms (gemmTerms), a bias
  /// scaled by `beta` (the signed-sum form needs beta = 1: fl(β)·bias rounds twice).
  GemmLocalBound(const GemmModel& gm, std::int64_t k, std::int64_t terms, double beta = 1.0);
  /// Returns the bound for one element of magnitude `magnitude` whose computed value is y.
  double operator()(double magnitude, double y) const;

 private:
  GemmModel mModel;
  double mRel = 0.0;
  double mEta = 0.0;
  bool mSigned = false;   // the signed-sum form applies
  double mLeafRel = 0.0;  // u(1 + (t − 1)γ_t), on Σ|z|
  double mNodes = 0.0;    // (t − 1)·u, on max(Σ⁺, Σ⁻)
  double mG64 = 0.0;      // γ_{k+1}^{64}: the binary64 |A||B| and y
};

/// The probabilistic term of one product element (core/ops/matmul_ops.cpp's file comment): the
/// root-sum-square of the individual roundings' bounds, u·sqrt(terms)·M·(1 + γ_terms), in
/// quadrature with the storage rounding, plus the input rounding (tf32, not mean-zero: linear)
/// and k·η, never above GemmLocalBound. It applies only to round-to-nearest accumulation with
/// alpha = 1 (a scaled product's partial sums are not bounded by |alpha|·|A||B|) and
/// γ_terms < 1; elsewhere applies() is false and the worst case stands.
class GemmSpreadBound {
 public:
  /// Prepares the term for inner dimension k, `terms` summed terms (gemmTerms), the accumulation
  /// truncating or not, and the product's alpha and beta.
  GemmSpreadBound(const GemmModel& gm, std::int64_t k, std::int64_t terms, bool truncating,
                  double alpha = 1.0, double beta = 1.0);
  /// Returns whether the term applies (else the caller keeps the worst case).
  bool applies() const { return mApplies; }
  /// Returns the term for one element of magnitude `magnitude` whose computed value is y (the
  /// worst case where the term does not apply).
  double operator()(double magnitude, double y) const;

 private:
  GemmLocalBound mWorst;
  GemmModel mModel;
  bool mApplies = false;
  double mRss = 0.0;    // u·sqrt(terms)·(1 + γ_terms)
  double mInRel = 0.0;  // input rounding, relative
  double mEta = 0.0;    // k·η_acc
  double mSlack64 = 0.0;
};

}  // namespace ops
}  // namespace lossbound
