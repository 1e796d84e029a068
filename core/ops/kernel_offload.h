#pragma once
// Offers the per-element and per-row work of an op rule to the backend's interval kernel hooks
// (core/backend.h). Each function returns the result tensor when the backend computed it, or
// nullopt when the rule must compute on the host itself: the backend offers no kernels, or an
// operand endpoint is not finite (the host rules keep exact ±inf semantics, e.g. attention masks,
// which the kernel bodies' sanitizing would widen).

#include "core/backend.h"
#include "core/ops/reduction_layout.h"
#include "core/tensor/tensor.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace lossbound::ops {

/// Returns kernels::unaryBody(op, x_i, model) for every element of x, labelled `dtype`.
std::optional<Tensor> offerUnary(Backend& backend, kernels::UnaryOp op,
                                 const kernels::ElementwiseModel& model, const Tensor& x,
                                 DType dtype);

/// Returns kernels::binaryBody(op, x_i, y_i, model) shaped `shape`, the broadcast shape of x and
/// y. Offered when one operand has that shape and the other broadcasts over leading dims only
/// (a scalar, a bias row, a position table): it then repeats in memory. When the full-shaped
/// operand is y, the commutative add, mul, eq and ne are offered with the operands swapped
/// (which gives the same bits: they are symmetric). Any other broadcast is offered as gathers
/// of the broadcast operands to the full shape (offerGather), then one elementwise call.
std::optional<Tensor> offerBinary(Backend& backend, kernels::BinaryOp op,
                                  const kernels::ElementwiseModel& model, const Tensor& x,
                                  const Tensor& y, const Shape& shape, DType dtype);

/// Returns kernels::selectBody(cond_i, a_i, b_i, model.storage) shaped `shape`, the broadcast
/// shape of the three (where, masked_fill, index_put through a mask). An operand that repeats
/// along leading dims is read as it is, any other broadcast operand is gathered to the full shape
/// first (as offerBinary does). Offered for any endpoints: the body keeps exact ±inf points as
/// the host rule does.
std::optional<Tensor> offerSelect(Backend& backend, const kernels::ElementwiseModel& model,
                                  const Tensor& cond, const Tensor& a, const Tensor& b,
                                  const Shape& shape, DType dtype);

/// Returns table[index] (rows of the table viewed as [rows, dim], rows its leading dim, every
/// value rounded outward to model.storage) shaped `shape`, labelled `dtype` (embedding, and
/// x[idx] through aten.index); nothing when the backend declines, e.g. for an index out of range,
/// or when the table has a non-finite endpoint. With keepPoint, a point table gives a point
/// result (the form aten.index's host rule gives; embedding's is an interval).
std::optional<Tensor> offerTakeRows(Backend& backend, const kernels::ElementwiseModel& model,
                                    const Tensor& table, const Tensor& index, const Shape& shape,
                                    DType dtype, bool keepPoint = false);

/// Returns kernels::nllLossForward's (output, total_weight) for self x (batch × model.classes ×
/// model.inner), the integer target and weight (nullptr for None): output shaped `outShape`
/// (reduction none) or 0-d, labelled t0, total_weight 0-d labelled t1. Offered for finite x and
/// weight; nothing when the backend declines, e.g. for a target out of range.
std::optional<std::vector<Tensor>> offerNllLoss(Backend& backend,
                                                const kernels::NllLossModel& model, const Tensor& x,
                                                const Tensor& target, const Tensor* weight,
                                                std::int64_t batch, const Shape& outShape, DType t0,
                                                DType t1);

/// Returns nll_loss_backward's grad_input (shaped `shape`, labelled `dtype`) for grad g, the
/// integer target, weight (nullptr for None) and total_weight tw: Backend::nllLossBackward.
/// Offered for finite g, weight and tw; nothing when the backend declines.
std::optional<Tensor> offerNllLossBackward(Backend& backend, const kernels::NllLossModel& model,
                                           const Tensor& g, const Tensor& target,
                                           const Tensor* weight, const Tensor& tw,
                                           std::int64_t batch, const Shape& shape, DType dtype);

/// Returns max_pool2d_with_indices' (values labelled `dtype`, indices int64), both shaped
/// `shape`, for x of `planes` planes of inPlane elements: each plane's windows gathered into rows
/// of k (offsets: windows·k plane offsets, -1 past a window's end; starts: one per window), then
/// Backend::maxPoolRows. Offered for finite x.
std::optional<std::vector<Tensor>> offerMaxPool(Backend& backend, const Tensor& x,
                                                std::int64_t planes, std::int64_t inPlane,
                                                std::int64_t windows, std::int64_t k,
                                                const std::vector<double>& offsets,
                                                const std::vector<double>& starts, Format s,
                                                const Shape& shape, DType dtype);

/// Returns avg_pool2d's (or _adaptive_avg_pool2d's) output labelled `dtype`, shaped `shape`, for
/// x of `planes` planes of inPlane elements: each plane's windows gathered into rows of k (as for
/// offerMaxPool), then Backend::avgPoolRows with each window's divisor, kH and kW (params: 3 per
/// window). Offered for finite x.
std::optional<Tensor> offerAvgPool(Backend& backend, const Tensor& x, std::int64_t planes,
                                   std::int64_t inPlane, std::int64_t windows, std::int64_t k,
                                   const std::vector<double>& offsets,
                                   const std::vector<double>& params,
                                   const kernels::AvgPoolModel& model, const Shape& shape,
                                   DType dtype);

/// Returns x gathered through `offsets` (output element i takes x[offsets[i]], -1: `fill`), shaped
/// `shape`, labelled `dtype`: a point tensor when x and fill are points, else an interval tensor
/// (the form ops::applyIndexMap gives). Offered for any endpoints (moving a value is exact).
std::optional<Tensor> offerGather(Backend& backend, const Tensor& x,
                                  const std::vector<std::int64_t>& offsets, const Shape& shape,
                                  DType dtype, Interval fill);

/// Returns x gathered through `offsets` over `base`: element i is x[offsets[i]], or base[i] where
/// offsets[i] is -1 (one part of a cat written over the parts before it), shaped like base and
/// labelled `dtype`; a point tensor when x and base are points.
std::optional<Tensor> offerGatherOver(Backend& backend, const Tensor& x,
                                      const std::vector<std::int64_t>& offsets, const Tensor& base,
                                      DType dtype);

/// Returns the enclosure of every row sum of x viewed as rows×cols (contiguous rows), shaped
/// `shape` (rows elements) and labelled `dtype`.
std::optional<Tensor> offerRowSum(Backend& backend, const kernels::SumModel& model, const Tensor& x,
                                  std::int64_t rows, std::int64_t cols, const Shape& shape,
                                  DType dtype);

/// Returns the enclosure of every reduction of x over layout `l` (each output's terms in the
/// order of l.inner) as model says: the row sums of x itself when the rows are contiguous, else
/// of x gathered into rows first (moving values is exact); shaped `shape`, labelled `dtype`.
std::optional<Tensor> offerReduction(Backend& backend, const kernels::SumModel& model,
                                     const Tensor& x, const ReductionLayout& l, const Shape& shape,
                                     DType dtype);

}  // namespace lossbound::ops
