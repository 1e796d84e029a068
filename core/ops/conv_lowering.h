#pragma once
// The lowering of a (non-transposed, N-d) convolution and of its three gradients to matrix
// products whose operands are *gathered* from the tensors involved (im2col and its transposes):
//   output      y[n, g·Og+o, l]   = Σ_{c, κ} w[g·Og+o, c, κ] · x[n, g·Ig+c, pos(l, κ)]  (+ bias)
//   grad_input  dx[n, g·Ig+c, i]  = Σ_{o, κ} w[g·Og+o, c, κ] · dy[n, g·Og+o, l(i, κ)]
//   grad_weight dw[g·Og+o, c, κ]  = Σ_{n, l} dy[n, g·Og+o, l] · x[n, g·Ig+c, pos(l, κ)]
//   grad_bias   db[o]            = Σ_{n, l} dy[n, o, l] · 1
// where pos(l, κ) = l·stride − padding + κ·dilation per spatial dim, and positions outside the
// input (padding) or between strides are exact zeros. Every output element is one dot product,
// so the order-free dot-product bound applies to each of them (gemm.h).
// Invariant: the products of one ConvProduct tile its output in disjoint row-major m×n blocks.

#include "core/ops/op_rule.h"
#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace lossbound::ops {

/// The geometry of a non-transposed N-d convolution as aten.convolution defines it: input
/// [N, C_in, *in], weight [C_out, C_in/groups, *kernel], output [N, C_out, *out] with
/// out_d = (in_d + 2·padding_d − dilation_d·(kernel_d − 1) − 1) / stride_d + 1.
struct ConvGeometry {
  std::int64_t batch = 0, inChannels = 0, outChannels = 0, groups = 1;
  Shape inSpatial, kernel, outSpatial;
  std::vector<std::int64_t> stride, padding, dilation;

  /// Returns C_in / groups.
  std::int64_t inPerGroup() const { return inChannels / groups; }
  /// Returns C_out / groups.
  std::int64_t outPerGroup() const { return outChannels / groups; }
  /// Returns the number of kernel positions (product of the kernel extents).
  std::int64_t kernelSize() const { return numel(kernel); }
  /// Returns the number of input positions per channel.
  std::int64_t inSize() const { return numel(inSpatial); }
  /// Returns the number of output positions per channel.
  std::int64_t outSize() const { return numel(outSpatial); }
  /// Returns [N, C_in, *in].
  Shape inputShape() const;
  /// Returns [C_out, C_in/groups, *kernel].
  Shape weightShape() const;
  /// Returns [N, C_out, *out].
  Shape outputShape() const;
};

/// Reads the geometry of a convolution node from the input and weight shapes and the int-list
/// arguments stride, padding, dilation at positions first, first+1, first+2 (a one-element list
/// applies to every spatial dim) and groups at first+5; calls args.fail() naming what was
/// expected for bad ranks, channels that do not divide by groups, non-positive strides or
/// dilations, negative padding, or an output that would be empty for a non-empty input.
/// convGeometry also refuses transposed=True (first+3); convGeometryOf ignores it.
ConvGeometry convGeometry(const OpArgs& args, const Shape& input, const Shape& weight,
                          std::size_t first);
ConvGeometry convGeometryOf(const OpArgs& args, const Shape& input, const Shape& weight,
                            std::size_t first);

/// Returns true when the node's `transposed` argument (first+3) is set.
bool isTransposed(const OpArgs& args, std::size_t first);

/// The geometry of the convolution a transposed convolution is the input gradient of: for a
/// transposed input x [N, C_in, *in] and weight [C_in, C_out/groups, *kernel], the convolution
/// whose input is the transposed output y [N, C_out, *out] (out = (in − 1)·stride − 2·padding +
/// dilation·(kernel − 1) + output_padding + 1, output_padding at first+4) and whose output is x.
/// Then y = the GradInput product with grad_output x (+ bias per row), and the transposed
/// convolution's gradients are the Output product (for x) and GradWeight (roles swapped).
ConvGeometry transposedConvGeometry(const OpArgs& args, const Shape& input, const Shape& weight,
                                    std::size_t first);

/// The tensors a convolution product gathers its operands from.
enum class ConvSource { Input, Weight, GradOutput, One };

/// One product C[m×n] = A[m×k]·B[k×n] (+ bias[biasRow0 + i] on row i) with operands gathered
/// from source tensors: A[e] = a[aIdx[e]], B[e] = b[bIdx[e]], index −1 meaning an exact zero.
/// C is the row-major block of the product's output that starts at outOff.
struct GatheredGemm {
  std::int64_t m = 0, k = 0, n = 0;
  ConvSource a = ConvSource::Weight, b = ConvSource::Input;
  std::vector<std::int64_t> aIdx, bIdx;
  std::int64_t outOff = 0;
  std::int64_t biasRow0 = -1;  ///< −1: no bias
};

/// What a lowered product computes.
enum class ConvProduct { Output, GradInput, GradWeight, GradBias };

/// Returns the shape of a product's result (output, input, weight, or [C_out]).
Shape convProductShape(const ConvGeometry& g, ConvProduct p);

/// Calls fn once per GatheredGemm of product p, in an order whose blocks tile the result:
/// per (sample, group) for Output and GradInput, per group for GradWeight, one for GradBias.
/// `withBias` sets biasRow0 on the Output products (a convolution's bias, per output channel)
/// and on the GradInput products (a transposed convolution's, per input channel).
void forEachConvGemm(const ConvGeometry& g, ConvProduct p, bool withBias,
                     const std::function<void(const GatheredGemm&)>& fn);

/// Returns the tensor of shape `s` with elements src[idx[e]] (exact 0 where idx[e] == −1): an
/// interval tensor when src is one and `keepInterval`, a point tensor of src's values otherwise.
Tensor gatherTensor(const Tensor& src, const std::vector<std::int64_t>& idx, const Shape& s,
                    bool keepInterval);

}  // namespace lossbound::ops
