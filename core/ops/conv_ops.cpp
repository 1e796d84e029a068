// Convolutions: convolution (1-D, 2-D, 3-D; stride, padding, dilation, groups, optional bias)
// and convolution_backward (grad_input, grad_weight, grad_bias under output_mask).
//
// Contract, per op:
// - convolution: y = x ⋆ w + b (cross-correlation, aten semantics); transposed=True
//   (ConvTranspose): y = the input gradient of the convolution whose output is x (the full
//   correlation of x with w, output_padding extending y), + b per output channel.
// - convolution_backward: grad_input = the full correlation of grad_output with w, grad_weight =
//   Σ_{n, l} grad_output · im2col(x), grad_bias = Σ_{n, l} grad_output; outputs whose mask entry
//   is false are zeros (the trace holds None there). transposed=True: grad_input = the
//   convolution of grad_output with w, grad_weight with the roles of x and grad_output swapped,
//   grad_bias the channel sums of grad_output (conv_lowering.h's transposedConvGeometry).
//
// Precision model (what "any implementation" means here): a *direct* convolution in any
// summation order: im2col + GEMM, split-K, implicit-GEMM and direct kernels (oneDNN, cuDNN's
// IMPLICIT_GEMM / IMPLICIT_PRECOMP_GEMM / GEMM / DIRECT algorithms), every output element being
// one dot product of length k = C_in/groups · Π kernel (grad_input: C_out/groups · Π kernel;
// grad_weight and grad_bias: N · Π out) whose terms are summed in any order and bracketing in
// the accumulation format (fp32 for bf16/fp16/tf32), with or without FMA, then stored once.
// Inputs are rounded to tf32 first when the precision model says so (PrecisionModel tf32Matmul
// or a tf32 override; note that PyTorch's torch.backends.cudnn.allow_tf32 defaults to True on
// Ampere and later, unlike matmul). The bias is one more term of the sum (counted as addmm's).
// 16-bit tensors: the input and weight gradients (and so transposed convolutions) accumulate in
// the 16-bit storage format, as PyTorch's CPU kernels do. NOT modelled: Winograd and FFT algorithms
// (cuDNN may pick WINOGRAD, WINOGRAD_NONFUSED, FFT, FFT_TILING; oneDNN may pick Winograd), which
// transform the operands and carry other error bounds, and implementations that store partial sums
// in a format narrower than the accumulation format. A candidate that may use them is outside this
// contract.
//
// Bounds: each product is lowered to GEMMs whose operands are gathered from the tensors
// (conv_lowering.h; padding and stride holes are exact zeros) and evaluated with the shared GEMM
// machinery of gemm.h on Backend::gemm (so the CUDA backend's cuBLAS path takes convolutions):
// interval: the midpoint–radius GEMM (Rump 1999) with the order-free dot-product bound
// |fl(Σ a_i b_i) − Σ a_i b_i| <= γ_k Σ|a_i b_i| + k·η (Higham 2002, eq. 3.5; Jeannerod–Rump 2013:
// γ_k may be k·u), the underflow term k·η, and outward storage rounding; random: randomGemm (random
// permutation, bracketing, blocking, FMA or not, tf32 truncation, bias inside or after the
// accumulation); localError: the same bound on |w|·|col| (+|b|) plus storage rounding
// (GemmLocalBound); probabilisticLocalError (convolution): the GEMM's root-sum-square term on the
// same magnitudes (GemmSpreadBound, core/ops/matmul_ops.cpp's file comment); vjp: the exact adjoint
// of the bilinear products (point arithmetic), also for convolution_backward (whose outputs are
// bilinear in grad_output and input/weight). Convolutions are linear in each operand: there are no
// kinks.

#include "core/backend.h"
#include "core/interval/precision.h"
#include "core/kernels/interval_gemm.h"
#include "core/ops/broadcasting.h"
#include "core/ops/conv_lowering.h"
#include "core/ops/families.h"
#include "core/ops/gemm.h"
#include "core/ops/kernel_offload.h"
#include "core/ops/registry.h"

#include <array>
#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

/// The tensors of one convolution node, by ConvSource.
struct ConvTensors {
  const Tensor* input = nullptr;
  const Tensor* weight = nullptr;
  const Tensor* gradOutput = nullptr;
  const Tensor* bias = nullptr;  // forward only
  Tensor one = Tensor::point({1}, DType::Float64, {1.0});

  const Tensor& of(ConvSource s) const {
    switch (s) {
      case ConvSource::Input:
        return *input;
      case ConvSource::Weight:
        return *weight;
      case ConvSource::GradOutput:
        return *gradOutput;
      case ConvSource::One:
        return one;
    }
    return one;
  }
  Tensor gatherA(const GatheredGemm& q, bool keepInterval) const {
    return gatherTensor(of(q.a), q.aIdx, Shape{q.m, q.k}, keepInterval);
  }
  Tensor gatherB(const GatheredGemm& q, bool keepInterval) const {
    return gatherTensor(of(q.b), q.bIdx, Shape{q.k, q.n}, keepInterval);
  }
};

/// Returns the model of product p with result dtype t: sums of grad_output (grad_bias) are
/// reductions, not tensor-core products, so their inputs are not rounded to tf32.
GemmModel productModel(const OpArgs& a, const PrecisionModel& pm, DType t, ConvProduct p) {
  if (!isFloating(t))
    a.fail("integer convolutions are not supported (found dtype " + std::string(dtypeName(t)) +
           ")");
  GemmModel gm = gemmModel(pm, t);
  if (p == ConvProduct::GradBias) gm.in = gm.out;
  // PyTorch's CPU kernels for 16-bit tensors keep the partial sums of the input gradient
  // (col2im) and of the weight gradient in the 16-bit type (measured on 2.15: bf16 transposed
  // convolutions and input gradients escape an fp32 accumulator's bound), so those products
  // accumulate in the storage format when it is coarser.
  if ((p == ConvProduct::GradInput || p == ConvProduct::GradWeight) &&
      unitRoundoff(gm.out) > gm.uAcc) {
    gm.acc = gm.out;
    gm.uAcc = unitRoundoff(gm.out);
  }
  return gm;
}

/// Binary64 point evaluation of product p.
Tensor pointProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts, DType t,
                    Backend& be) {
  const Shape s = convProductShape(g, p);
  std::vector<double> out(static_cast<std::size_t>(numel(s)), 0.0);
  forEachConvGemm(g, p, ts.bias != nullptr, [&](const GatheredGemm& q) {
    const Tensor A = ts.gatherA(q, false), B = ts.gatherB(q, false);
    double* c = out.data() + q.outOff;
    be.gemm(A.values().data(), B.values().data(), c, q.m, q.k, q.n, false);
    if (q.biasRow0 >= 0)
      for (std::int64_t i = 0; i < q.m; ++i)
        for (std::int64_t j = 0; j < q.n; ++j)
          c[i * q.n + j] += ts.bias->values()[static_cast<std::size_t>(q.biasRow0 + i)];
  });
  return Tensor::point(s, t, std::move(out));
}

/// Returns product p computed through the backend's hooks, or nothing when the backend declines:
/// the operands gathered through their index maps (one gather per operand, per product or once
/// when every product reads the same block, as the weight of a forward convolution), the bias
/// rows likewise, then one batched intervalGemm offer. The products of p tile its result in
/// order (conv_lowering.h), so the batch's results are the result; each product is split and
/// finished on its own, so the bits are intervalGemm's below.
std::optional<Tensor> offerProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts,
                                   DType t, const GemmModel& gm, Backend& be) {
  if (!be.offersIntervalKernels()) return std::nullopt;
  const Shape s = convProductShape(g, p);
  std::vector<GatheredGemm> qs;
  forEachConvGemm(g, p, ts.bias != nullptr, [&](const GatheredGemm& q) { qs.push_back(q); });
  if (qs.empty()) return std::nullopt;
  const GatheredGemm& q0 = qs.front();
  const std::int64_t mn = q0.m * q0.n, count = static_cast<std::int64_t>(qs.size());
  bool sameA = true, sameB = true;
  for (std::int64_t i = 0; i < count; ++i) {
    const GatheredGemm& q = qs[static_cast<std::size_t>(i)];
    if (q.m != q0.m || q.k != q0.k || q.n != q0.n || q.outOff != i * mn ||
        (q.biasRow0 >= 0) != (q0.biasRow0 >= 0))
      return std::nullopt;
    sameA = sameA && q.aIdx == q0.aIdx;
    sameB = sameB && q.bIdx == q0.bIdx;
  }
  if (count * mn != numel(s) || mn == 0) return std::nullopt;
  auto gather = [&](ConvSource src, bool same, std::int64_t rows, std::int64_t cols,
                    const std::vector<std::int64_t> GatheredGemm::*idx) {
    std::vector<std::int64_t> all;
    for (const GatheredGemm& q : qs) {
      all.insert(all.end(), (q.*idx).begin(), (q.*idx).end());
      if (same) break;
    }
    const Tensor& x = ts.of(src);
    const std::int64_t slices = same ? 1 : count;
    return offerGather(be, x, all, Shape{slices, rows, cols}, x.dtype(), Interval{0.0, 0.0});
  };
  const auto A = gather(q0.a, sameA, q0.m, q0.k, &GatheredGemm::aIdx);
  const auto B = A ? gather(q0.b, sameB, q0.k, q0.n, &GatheredGemm::bIdx) : std::nullopt;
  if (!B) return std::nullopt;
  std::optional<Tensor> bias;
  if (q0.biasRow0 >= 0) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(count * mn));
    for (std::int64_t i = 0; i < count; ++i)
      for (std::int64_t e = 0; e < mn; ++e)
        rows[static_cast<std::size_t>(i * mn + e)] =
            qs[static_cast<std::size_t>(i)].biasRow0 + e / q0.n;
    bias = offerGather(be, *ts.bias, rows, Shape{count * mn}, ts.bias->dtype(), Interval{0.0, 0.0});
    if (!bias) return std::nullopt;
  }
  std::vector<double> lo(static_cast<std::size_t>(count * mn)), hi(lo.size());
  const kernels::GemmBatch batch{count, sameA ? 0 : q0.m * q0.k, sameB ? 0 : q0.k * q0.n};
  const kernels::GemmFinish fin = intervalGemmFinish(q0.k, gm, bias.has_value(), 1.0, 1.0);
  const kernels::ConstIntervalSpan bs =
      bias ? kernels::ConstIntervalSpan{bias->lo().data(), bias->hi().data()}
           : kernels::ConstIntervalSpan{};
  if (!be.intervalGemm({A->lo().data(), A->hi().data()}, {B->lo().data(), B->hi().data()}, bs, q0.m,
                       q0.k, q0.n, batch, gm.in, fin, {lo.data(), hi.data()}))
    return std::nullopt;
  return Tensor::interval(s, t, std::move(lo), std::move(hi));
}

/// Encloses every result of product p the candidate can produce (gemm.h's interval GEMM).
Tensor intervalProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts, DType t,
                       const GemmModel& gm, Backend& be) {
  if (auto r = offerProduct(g, p, ts, t, gm, be)) return std::move(*r);
  const Shape s = convProductShape(g, p);
  std::vector<double> lo(static_cast<std::size_t>(numel(s))), hi(lo.size());
  std::vector<Interval> bias;
  forEachConvGemm(g, p, ts.bias != nullptr, [&](const GatheredGemm& q) {
    const Tensor A = ts.gatherA(q, true), B = ts.gatherB(q, true);
    if (q.biasRow0 >= 0) {
      bias.resize(static_cast<std::size_t>(q.m * q.n));
      for (std::int64_t i = 0; i < q.m; ++i)
        std::fill_n(bias.begin() + i * q.n, q.n, ts.bias->at(q.biasRow0 + i));
    }
    intervalGemm(be, A, 0, B, 0, q.m, q.k, q.n, gm, q.biasRow0 >= 0 ? bias.data() : nullptr, 1.0,
                 1.0, lo.data() + q.outOff, hi.data() + q.outOff);
  });
  return Tensor::interval(s, t, std::move(lo), std::move(hi));
}

/// One randomized candidate execution of product p (gemm.h's randomGemm).
Tensor randomProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts, DType t,
                     const GemmModel& gm, const OpContext& ctx) {
  const Shape s = convProductShape(g, p);
  std::vector<double> out(static_cast<std::size_t>(numel(s)), 0.0);
  std::vector<double> bias;
  forEachConvGemm(g, p, ts.bias != nullptr, [&](const GatheredGemm& q) {
    const Tensor A = ts.gatherA(q, false), B = ts.gatherB(q, false);
    if (q.biasRow0 >= 0) {
      bias.resize(static_cast<std::size_t>(q.m * q.n));
      for (std::int64_t i = 0; i < q.m; ++i)
        std::fill_n(bias.begin() + i * q.n, q.n,
                    ts.bias->values()[static_cast<std::size_t>(q.biasRow0 + i)]);
    }
    randomGemm(A, 0, B, 0, q.m, q.k, q.n, gm, q.biasRow0 >= 0 ? bias.data() : nullptr, 1.0, 1.0,
               *ctx.rng, out.data() + q.outOff,
               ctx.orderPerProduct ? GemmOrder::PerProduct : GemmOrder::PerElement);
  });
  return Tensor::point(s, t, std::move(out));
}

/// Returns, per element of product p for exact inputs, bound(|A|·|B| + |bias|, computed) with
/// the bound make(k, terms) of each gathered GEMM (GemmLocalBound or GemmSpreadBound).
template <class MakeBound>
Tensor boundProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts,
                    const Tensor& computed, Backend& be, const MakeBound& make) {
  std::vector<double> out(static_cast<std::size_t>(computed.numel()), 0.0), absProd;
  const auto y = computed.values();
  forEachConvGemm(g, p, ts.bias != nullptr, [&](const GatheredGemm& q) {
    const Tensor A = ts.gatherA(q, false), B = ts.gatherB(q, false);
    absProd.resize(static_cast<std::size_t>(q.m * q.n));
    be.gemm(A.values().data(), B.values().data(), absProd.data(), q.m, q.k, q.n, true);
    const auto bound = make(q.k, gemmTerms(q.k, q.biasRow0 >= 0, 1.0));
    for (std::int64_t i = 0; i < q.m; ++i)
      for (std::int64_t j = 0; j < q.n; ++j) {
        double mag = absProd[static_cast<std::size_t>(i * q.n + j)];
        if (q.biasRow0 >= 0)
          mag = add_up(mag, std::fabs(ts.bias->values()[static_cast<std::size_t>(q.biasRow0 + i)]));
        const auto e = static_cast<std::size_t>(q.outOff + i * q.n + j);
        out[e] = bound(mag, y[e]);
      }
  });
  return Tensor::point(computed.shape(), computed.dtype(), std::move(out));
}

/// Bounds |computed − exact| per element of product p for exact inputs (GemmLocalBound on
/// |A|·|B| + |bias|), `computed` being the point result.
Tensor localErrorProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts,
                         const Tensor& computed, const GemmModel& gm, Backend& be) {
  return boundProduct(g, p, ts, computed, be, [&](std::int64_t k, std::int64_t terms) {
    return GemmLocalBound(gm, k, terms);
  });
}

/// Gradients of Σ h·(product p) with respect to its sources (and bias), accumulated into
/// grads[source] (left empty: not wanted) and biasGrad (null: not wanted). For C = A·B (+ bias):
/// dA = H·Bᵀ and dB = Aᵀ·H scattered back through the gather indices, dbias = row sums of H.
void vjpProduct(const ConvGeometry& g, ConvProduct p, const ConvTensors& ts, const Tensor& h,
                std::array<std::vector<double>, 4>& grads, std::vector<double>* biasGrad,
                Backend& be) {
  const auto hv = h.values();
  std::vector<double> at, bt, da, db;
  forEachConvGemm(g, p, ts.bias != nullptr, [&](const GatheredGemm& q) {
    const double* H = hv.data() + q.outOff;
    auto& ga = grads[static_cast<std::size_t>(q.a)];
    auto& gb = grads[static_cast<std::size_t>(q.b)];
    if (!ga.empty()) {
      const Tensor B = ts.gatherB(q, false);
      bt.resize(static_cast<std::size_t>(q.n * q.k));
      for (std::int64_t i = 0; i < q.k; ++i)
        for (std::int64_t j = 0; j < q.n; ++j)
          bt[static_cast<std::size_t>(j * q.k + i)] =
              B.values()[static_cast<std::size_t>(i * q.n + j)];
      da.resize(static_cast<std::size_t>(q.m * q.k));
      be.gemm(H, bt.data(), da.data(), q.m, q.n, q.k, false);
      for (std::size_t e = 0; e < da.size(); ++e)
        if (q.aIdx[e] >= 0) ga[static_cast<std::size_t>(q.aIdx[e])] += da[e];
    }
    if (!gb.empty() && q.b != ConvSource::One) {
      const Tensor A = ts.gatherA(q, false);
      at.resize(static_cast<std::size_t>(q.k * q.m));
      for (std::int64_t i = 0; i < q.m; ++i)
        for (std::int64_t j = 0; j < q.k; ++j)
          at[static_cast<std::size_t>(j * q.m + i)] =
              A.values()[static_cast<std::size_t>(i * q.k + j)];
      db.resize(static_cast<std::size_t>(q.k * q.n));
      be.gemm(at.data(), H, db.data(), q.k, q.m, q.n, false);
      for (std::size_t e = 0; e < db.size(); ++e)
        if (q.bIdx[e] >= 0) gb[static_cast<std::size_t>(q.bIdx[e])] += db[e];
    }
    if (biasGrad && q.biasRow0 >= 0)
      for (std::int64_t i = 0; i < q.m; ++i)
        for (std::int64_t j = 0; j < q.n; ++j)
          (*biasGrad)[static_cast<std::size_t>(q.biasRow0 + i)] += H[i * q.n + j];
  });
}

// ---------------------------------------------------------------------------------------------
// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)

struct ConvForward {
  ConvGeometry g;
  ConvTensors ts;
  ConvProduct product = ConvProduct::Output;   // GradInput for a transposed convolution
  ConvSource inputSource = ConvSource::Input;  // where the op's input sits in ts
  std::int64_t biasChannels = 0;
};

ConvForward forwardArgs(const OpArgs& a) {
  ConvForward f;
  const Tensor& x = a.tensor(0);
  f.ts.weight = &a.tensor(1);
  if (isTransposed(a, 3)) {  // y = the input gradient of the convolution whose output is x
    f.g = transposedConvGeometry(a, x.shape(), f.ts.weight->shape(), 3);
    f.ts.gradOutput = &x;
    f.product = ConvProduct::GradInput;
    f.inputSource = ConvSource::GradOutput;
    f.biasChannels = f.g.inChannels;
  } else {
    f.ts.input = &x;
    f.g = convGeometry(a, x.shape(), f.ts.weight->shape(), 3);
    f.biasChannels = f.g.outChannels;
  }
  if (a.isTensor(2)) {
    f.ts.bias = &a.tensor(2);
    if (f.ts.bias->shape() != Shape{f.biasChannels})
      a.fail("expected a bias of shape [" + std::to_string(f.biasChannels) + "], found " +
             shapeString(f.ts.bias->shape()));
  }
  return f;
}

/// aten.convolution.default (see the file comment for the contract).
class ConvolutionRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    const ConvForward f = forwardArgs(a);
    return {pointProduct(f.g, f.product, f.ts, a.outSpec().dtype, ctx.backend)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const ConvForward f = forwardArgs(a);
    const DType t = a.outSpec().dtype;
    const GemmModel gm = productModel(a, ctx.precision, t, f.product);
    return {intervalProduct(f.g, f.product, f.ts, t, gm, ctx.backend)};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const ConvForward f = forwardArgs(a);
    const DType t = a.outSpec().dtype;
    const GemmModel gm = productModel(a, ctx.precision, t, f.product);
    return {randomProduct(f.g, f.product, f.ts, t, gm, ctx)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> outGrads,
                                         OpContext& ctx) const override {
    const ConvForward f = forwardArgs(a);
    const Tensor& x = a.tensor(0);
    std::array<std::vector<double>, 4> grads;
    grads[static_cast<std::size_t>(f.inputSource)].assign(static_cast<std::size_t>(x.numel()), 0.0);
    grads[static_cast<std::size_t>(ConvSource::Weight)].assign(
        static_cast<std::size_t>(f.ts.weight->numel()), 0.0);
    std::vector<double> biasGrad(static_cast<std::size_t>(f.biasChannels), 0.0);
    vjpProduct(f.g, f.product, f.ts, outGrads[0], grads, &biasGrad, ctx.backend);
    std::vector<std::optional<Tensor>> out;
    out.emplace_back(Tensor::point(x.shape(), x.dtype(),
                                   std::move(grads[static_cast<std::size_t>(f.inputSource)])));
    out.emplace_back(Tensor::point(f.ts.weight->shape(), f.ts.weight->dtype(),
                                   std::move(grads[static_cast<std::size_t>(ConvSource::Weight)])));
    if (f.ts.bias)
      out.emplace_back(Tensor::point(f.ts.bias->shape(), f.ts.bias->dtype(), std::move(biasGrad)));
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outputs,
                                 OpContext& ctx) const override {
    const ConvForward f = forwardArgs(a);
    const GemmModel gm = productModel(a, ctx.precision, a.outSpec().dtype, f.product);
    return {localErrorProduct(f.g, f.product, f.ts, outputs[0], gm, ctx.backend)};
  }

  // The probabilistic term of every output element: the GEMM's (GemmSpreadBound, the
  // root-sum-square of the roundings of one dot product of length k, ~√k·u where the worst case
  // is ~k·u), on the same |w|·|col| (+|b|); truncating accumulation keeps the worst case.
  std::vector<Tensor> probabilisticLocalError(const OpArgs& a, std::span<const Tensor> outputs,
                                              OpContext& ctx) const override {
    if (ctx.precision.truncatingAccumulation) return {};
    const ConvForward f = forwardArgs(a);
    const GemmModel gm = productModel(a, ctx.precision, a.outSpec().dtype, f.product);
    return {boundProduct(
        f.g, f.product, f.ts, outputs[0], ctx.backend,
        [&](std::int64_t k, std::int64_t terms) { return GemmSpreadBound(gm, k, terms, false); })};
  }
};

// ---------------------------------------------------------------------------------------------
// convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
//                      transposed, output_padding, groups, output_mask)

constexpr ConvProduct kBackwardProducts[3] = {ConvProduct::GradInput, ConvProduct::GradWeight,
                                              ConvProduct::GradBias};

/// One output of convolution_backward: a lowered product of a geometry on its tensors, and
/// which op input (0 grad_output, 1 input, 2 weight; −1 none) each ConvSource stands for.
struct ConvPart {
  ConvGeometry g;
  ConvProduct p = ConvProduct::GradInput;
  ConvTensors ts;
  std::array<int, 4> opInput{-1, -1, -1, -1};
};

struct ConvBackward {
  std::array<ConvPart, 3> parts;
  std::array<bool, 3> mask{true, true, true};
  std::array<DType, 3> dtype{};
};

/// The parts of a transposed convolution's backward: with g the convolution whose input is the
/// transposed output (conv_lowering.h), grad_input is g's Output product of grad_output, the
/// weight's gradient g's GradWeight with the roles of input and grad_output swapped, and the
/// bias's the channel sums of grad_output (a 1×1 geometry over the transposed output).
std::array<ConvPart, 3> transposedParts(const OpArgs& a, std::int64_t& biasChannels) {
  const Tensor &gy = a.tensor(0), &x = a.tensor(1), &w = a.tensor(2);
  const ConvGeometry g = transposedConvGeometry(a, x.shape(), w.shape(), 4);
  if (gy.shape() != g.inputShape())
    a.fail("expected grad_output of shape " + shapeString(g.inputShape()) +
           " (the transposed convolution's output), found " + shapeString(gy.shape()));
  ConvTensors ts;
  ts.input = &gy;
  ts.gradOutput = &x;
  ts.weight = &w;
  const auto src = [](ConvSource s) { return static_cast<std::size_t>(s); };
  std::array<ConvPart, 3> parts;
  parts[0] = {g, ConvProduct::Output, ts, {-1, -1, -1, -1}};
  parts[0].opInput[src(ConvSource::Input)] = 0;
  parts[0].opInput[src(ConvSource::Weight)] = 2;
  parts[1] = {g, ConvProduct::GradWeight, ts, {-1, -1, -1, -1}};
  parts[1].opInput[src(ConvSource::Input)] = 0;
  parts[1].opInput[src(ConvSource::GradOutput)] = 1;
  ConvGeometry gb;
  gb.batch = g.batch;
  gb.inChannels = gb.outChannels = g.inChannels;
  gb.inSpatial = gb.outSpatial = g.inSpatial;
  gb.kernel.assign(g.inSpatial.size(), 1);
  gb.stride.assign(g.inSpatial.size(), 1);
  gb.padding.assign(g.inSpatial.size(), 0);
  gb.dilation.assign(g.inSpatial.size(), 1);
  ConvTensors tb;
  tb.gradOutput = &gy;
  parts[2] = {gb, ConvProduct::GradBias, tb, {-1, -1, -1, -1}};
  parts[2].opInput[src(ConvSource::GradOutput)] = 0;
  biasChannels = g.inChannels;
  return parts;
}

ConvBackward backwardArgs(const OpArgs& a) {
  ConvBackward b;
  std::int64_t biasChannels = 0;
  if (isTransposed(a, 4)) {
    b.parts = transposedParts(a, biasChannels);
  } else {
    ConvTensors ts;
    ts.gradOutput = &a.tensor(0);
    ts.input = &a.tensor(1);
    ts.weight = &a.tensor(2);
    const ConvGeometry g = convGeometry(a, ts.input->shape(), ts.weight->shape(), 4);
    if (ts.gradOutput->shape() != g.outputShape())
      a.fail("expected grad_output of shape " + shapeString(g.outputShape()) +
             " (the convolution's output), found " + shapeString(ts.gradOutput->shape()));
    for (std::size_t k = 0; k < 3; ++k) {
      b.parts[k] = {g, kBackwardProducts[k], ts, {-1, -1, -1, -1}};
      b.parts[k].opInput[static_cast<std::size_t>(ConvSource::GradOutput)] = 0;
      b.parts[k].opInput[static_cast<std::size_t>(ConvSource::Input)] = 1;
      b.parts[k].opInput[static_cast<std::size_t>(ConvSource::Weight)] = 2;
    }
    biasChannels = g.outChannels;
  }
  const IrValue& m = a.arg(10);
  if (m.kind == IrValue::Kind::List) {
    if (m.list.size() != 3)
      a.fail("output_mask should list 3 bools, found " + std::to_string(m.list.size()));
    for (std::size_t k = 0; k < 3; ++k) b.mask[k] = m.list[k].boolValue;
  }
  if (b.mask[2] && a.arg(3).kind == IrValue::Kind::List) {
    const std::vector<std::int64_t> bs = a.intListArg(3, "bias_sizes");
    if (bs != std::vector<std::int64_t>{biasChannels})
      a.fail("bias_sizes " + shapeString(bs) + " should be [" + std::to_string(biasChannels) +
             "] (the output channels)");
  }
  const DType fallback[3] = {a.tensor(1).dtype(), a.tensor(2).dtype(), a.tensor(0).dtype()};
  for (std::size_t k = 0; k < 3; ++k) {
    const bool traced = a.node().outputs.size() > k && !a.node().outputs[k].none;
    b.dtype[k] = traced ? a.outSpec(k).dtype : fallback[k];
  }
  return b;
}

/// aten.convolution_backward.default (see the file comment for the contract).
class ConvolutionBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext& ctx) const override {
    const ConvBackward b = backwardArgs(a);
    std::vector<Tensor> out;
    for (std::size_t k = 0; k < 3; ++k) {
      const ConvPart& q = b.parts[k];
      out.push_back(b.mask[k] ? pointProduct(q.g, q.p, q.ts, b.dtype[k], ctx.backend)
                              : zeros(b, k));
    }
    return out;
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const ConvBackward b = backwardArgs(a);
    std::vector<Tensor> out;
    for (std::size_t k = 0; k < 3; ++k) {
      if (!b.mask[k]) {
        out.push_back(zeros(b, k).toInterval());
        continue;
      }
      const ConvPart& q = b.parts[k];
      const GemmModel gm = productModel(a, ctx.precision, b.dtype[k], q.p);
      out.push_back(intervalProduct(q.g, q.p, q.ts, b.dtype[k], gm, ctx.backend));
    }
    return out;
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const ConvBackward b = backwardArgs(a);
    std::vector<Tensor> out;
    for (std::size_t k = 0; k < 3; ++k) {
      if (!b.mask[k]) {
        out.push_back(zeros(b, k));
        continue;
      }
      const ConvPart& q = b.parts[k];
      const GemmModel gm = productModel(a, ctx.precision, b.dtype[k], q.p);
      out.push_back(randomProduct(q.g, q.p, q.ts, b.dtype[k], gm, ctx));
    }
    return out;
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> outGrads,
                                         OpContext& ctx) const override {
    // Every output is bilinear (grad_bias linear) in the sources: the adjoint of each lowered
    // product, summed over the outputs that are computed, into the op inputs they stand for.
    const ConvBackward b = backwardArgs(a);
    std::array<std::vector<double>, 3> op;
    for (std::size_t i = 0; i < 3; ++i)
      op[i].assign(static_cast<std::size_t>(a.tensor(i).numel()), 0.0);
    for (std::size_t k = 0; k < 3 && k < outGrads.size(); ++k) {
      if (!b.mask[k]) continue;
      const ConvPart& q = b.parts[k];
      std::array<std::vector<double>, 4> grads;
      for (std::size_t s = 0; s < 4; ++s)
        if (q.opInput[s] >= 0)
          grads[s].assign(op[static_cast<std::size_t>(q.opInput[s])].size(), 0.0);
      vjpProduct(q.g, q.p, q.ts, outGrads[k], grads, nullptr, ctx.backend);
      for (std::size_t s = 0; s < 4; ++s)
        if (q.opInput[s] >= 0) {
          auto& dst = op[static_cast<std::size_t>(q.opInput[s])];
          for (std::size_t e = 0; e < dst.size(); ++e) dst[e] += grads[s][e];
        }
    }
    std::vector<std::optional<Tensor>> out;
    for (std::size_t i = 0; i < 3; ++i)
      out.emplace_back(Tensor::point(a.tensor(i).shape(), a.tensor(i).dtype(), std::move(op[i])));
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outputs,
                                 OpContext& ctx) const override {
    const ConvBackward b = backwardArgs(a);
    std::vector<Tensor> out;
    for (std::size_t k = 0; k < 3 && k < outputs.size(); ++k) {
      if (!b.mask[k]) {
        out.push_back(Tensor::full(outputs[k].shape(), outputs[k].dtype(), 0.0));
        continue;
      }
      const ConvPart& q = b.parts[k];
      const GemmModel gm = productModel(a, ctx.precision, b.dtype[k], q.p);
      out.push_back(localErrorProduct(q.g, q.p, q.ts, outputs[k], gm, ctx.backend));
    }
    return out;
  }

 private:
  static Tensor zeros(const ConvBackward& b, std::size_t k) {
    return Tensor::full(convProductShape(b.parts[k].g, b.parts[k].p), b.dtype[k], 0.0);
  }
};

}  // namespace

void registerConvOps(OpRegistry& r) {
  r.add("aten.convolution.default", std::make_shared<ConvolutionRule>());
  r.add("aten.convolution_backward.default", std::make_shared<ConvolutionBackwardRule>());
}

}  // namespace lossbound
