#pragma once
// One registration function per op family; registry.cpp calls each of them.

namespace lossbound {

class OpRegistry;

/// add sub mul div neg rsub (tensor and scalar forms, in-place variants), exp log sqrt rsqrt sin
/// cos pow (Tensor_Scalar, Tensor_Tensor, Scalar), reciprocal abs, comparisons (eq ne lt gt le
/// ge), bitwise_not logical_not, where, masked_fill, clamp, maximum minimum, nan_to_num.
void registerElementwiseOps(OpRegistry& r);
/// mm addmm baddbmm bmm mv matmul dot (midpoint–radius interval matmul on the Backend).
void registerMatmulOps(OpRegistry& r);
/// sum (all forms) mean amax amin max min, all any.
void registerReductionOps(OpRegistry& r);
/// view _unsafe_view _reshape_alias expand t transpose permute slice narrow select unsqueeze
/// squeeze flip roll cat stack split chunk unbind clone detach alias lift_fresh_copy tril triu
/// _to_copy to copy, and the *_copy forms of the views.
void registerViewOps(OpRegistry& r);
/// ones zeros full empty (and _like, new_ forms) arange eye scalar_tensor fill fill_ zero_.
void registerCreationOps(OpRegistry& r);
/// addcmul addcdiv lerp (SGD and AdamW updates).
void registerOptimizerOps(OpRegistry& r);
/// relu threshold_backward gelu gelu_backward silu sigmoid tanh, their backward ops, and
/// relu_ sigmoid_ tanh_.
void registerActivationOps(OpRegistry& r);
/// _softmax _softmax_backward_data _log_softmax _log_softmax_backward_data.
void registerSoftmaxOps(OpRegistry& r);
/// native_layer_norm native_layer_norm_backward.
void registerNormOps(OpRegistry& r);
/// native_batch_norm _native_batch_norm_legit (.default, .no_stats)
/// _native_batch_norm_legit_no_training _native_batch_norm_legit_functional
/// native_batch_norm_backward.
void registerBatchNormOps(OpRegistry& r);
/// native_group_norm native_group_norm_backward.
void registerGroupNormOps(OpRegistry& r);
/// embedding embedding_dense_backward.
void registerEmbeddingOps(OpRegistry& r);
/// nll_loss_forward nll_loss_backward (1-D and 2-D, all reductions, ignore_index).
void registerLossOps(OpRegistry& r);
/// hardswish hardsigmoid leaky_relu elu celu, their backward ops, and hardswish_ hardsigmoid_
/// leaky_relu_ elu_ celu_.
void registerPiecewiseActivationOps(OpRegistry& r);
/// softplus softplus_backward mish mish_ mish_backward.
void registerSoftplusMishOps(OpRegistry& r);
/// max_pool2d_with_indices max_pool2d_with_indices_backward.
void registerMaxPoolOps(OpRegistry& r);
/// avg_pool2d avg_pool2d_backward avg_pool3d avg_pool3d_backward _adaptive_avg_pool2d
/// _adaptive_avg_pool2d_backward.
void registerAvgPoolOps(OpRegistry& r);
/// convolution convolution_backward (1-D/2-D/3-D, lowered to GEMMs on the Backend).
void registerConvOps(OpRegistry& r);
/// slice_scatter select_scatter slice_backward select_backward.
void registerSliceScatterOps(OpRegistry& r);
/// as_strided as_strided_copy as_strided_scatter (over the input's row-major elements).
void registerAsStridedOps(OpRegistry& r);
/// constant_pad_nd.
void registerPadOps(OpRegistry& r);
/// im2col col2im (F.unfold, F.fold).
void registerIm2ColOps(OpRegistry& r);
/// linalg_solve_triangular (unit diagonal, left).
void registerTriangularSolveOps(OpRegistry& r);
/// cumsum cumsum_.
void registerCumsumOps(OpRegistry& r);
/// gather index_select scatter (src, value) scatter_add index_add.
void registerGatherScatterOps(OpRegistry& r);
/// index.Tensor index_put (accumulate or not) masked_select nonzero masked_scatter.
void registerAdvancedIndexOps(OpRegistry& r);
/// topk sort (.default, .stable) histc argmax argmin.
void registerSortOps(OpRegistry& r);
/// _grouped_mm (mixture-of-experts products, each group lowered to the GEMM of gemm.h).
void registerGroupedMmOps(OpRegistry& r);
/// pixel_shuffle pixel_unshuffle upsample_nearest1d/2d/3d (.vec, .default) and their backward;
/// calls registerBilinearOps.
void registerUpsampleOps(OpRegistry& r);
/// upsample_bilinear2d (.vec, .default) and its backward.
void registerBilinearOps(OpRegistry& r);
/// floor_divide floor_divide_, div (.Tensor_mode, .Scalar_mode, in-place) with rounding_mode
/// 'floor' or 'trunc' (integers; registered with the elementwise family, after div.Tensor).
void registerIntegerDivisionOps(OpRegistry& r);
/// linalg_vector_norm, norm.ScalarOpt_dim, norm.Scalar of order 2, 1 or inf (registered with the
/// reduction family).
void registerVectorNormOps(OpRegistry& r);

}  // namespace lossbound
