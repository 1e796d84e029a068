#pragma once
// Launchers of the interval kernels (device-side code only: takes cudaStream_t). Each kernel
// applies one body of core/kernels/kernel_bodies.h (or layer_norm_row.h) per element or per row
// with a grid-stride loop; all launches are
// asynchronous on the given stream and checked (LB_CUDA_CHECK_LAUNCH).

#include "core/kernels/avg_pool.h"
#include "core/kernels/batch_norm_row.h"
#include "core/kernels/embedding_backward.h"
#include "core/kernels/group_norm_backward.h"
#include "core/kernels/interval_gemm.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/layer_norm_backward.h"
#include "core/kernels/layer_norm_row.h"
#include "core/kernels/max_pool.h"
#include "core/kernels/nll_loss.h"
#include "core/kernels/softmax_row.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace lossbound::gpu {

using kernels::BinaryOp;
using kernels::ElementwiseModel;
using kernels::MatmulBound;
using kernels::SoftmaxModel;
using kernels::UnaryOp;

/// y[i] = |x[i]| for i < n.
void launchAbs(const double* x, double* y, std::int64_t n, cudaStream_t stream);
/// out = unaryBody(op, x, model) elementwise.
void launchUnary(UnaryOp op, ElementwiseModel model, const double* xlo, const double* xhi,
                 double* olo, double* ohi, std::int64_t n, cudaStream_t stream);
/// out[i] = binaryBody(op, x[i], y[i mod yCount], model); yCount divides n (y repeats).
void launchBinary(BinaryOp op, ElementwiseModel model, const double* xlo, const double* xhi,
                  const double* ylo, const double* yhi, std::int64_t yCount, double* olo,
                  double* ohi, std::int64_t n, cudaStream_t stream);
/// out = storeBody(x, format) elementwise.
void launchStore(Format format, const double* xlo, const double* xhi, double* olo, double* ohi,
                 std::int64_t n, cudaStream_t stream);
/// Splits an operand (count elements) into mid, |mid| and mag = |mid| + rad (rounded up).
void launchSplit(const double* lo, const double* hi, Format input, std::int64_t count, double* mid,
                 double* absMid, double* mag, cudaStream_t stream);
/// out = matmulFinish(g1, g2, g4, bound, storage) elementwise.
void launchMatmulFinish(const double* g1, const double* g2, const double* g4, MatmulBound bound,
                        Format storage, double* olo, double* ohi, std::int64_t n,
                        cudaStream_t stream);
/// out[i] = selectBody(cond[i mod cn], a[i mod an], b[i mod bn], model.storage) (where,
/// masked_fill).
void launchSelect(ElementwiseModel model, const double* clo, const double* chi, std::int64_t cn,
                  const double* alo, const double* ahi, std::int64_t an, const double* blo,
                  const double* bhi, std::int64_t bn, double* olo, double* ohi, std::int64_t n,
                  cudaStream_t stream);
/// out[p·dim + j] = table[k·dim + j] rounded outward to model.storage, k = tableRow(index[p]);
/// an index out of range gives the entire line and sets flag[0] = kBadIndexFlag.
void launchTakeRows(ElementwiseModel model, const double* tlo, const double* thi, std::int64_t rows,
                    std::int64_t dim, const double* index, std::int64_t count, double* olo,
                    double* ohi, double* flag, cudaStream_t stream);
/// nllLossForward on one thread (the host's order, hence its bits); a target out of range sets
/// flag[0] = kBadIndexFlag.
void launchNllLoss(kernels::NllLossModel model, const double* xlo, const double* xhi,
                   const double* target, const double* wlo, const double* whi, std::int64_t batch,
                   double* olo, double* ohi, double* twlo, double* twhi, double* flag,
                   cudaStream_t stream);
/// nll_loss backward: out = 0, then nllBackwardAt per target position (one thread each); a target
/// out of range sets flag[0] = kBadIndexFlag.
void launchNllLossBackward(kernels::NllLossModel model, const double* glo, const double* ghi,
                           const double* target, const double* wlo, const double* whi,
                           const double* twlo, const double* twhi, std::int64_t batch, double* olo,
                           double* ohi, double* flag, cudaStream_t stream);
/// maxPoolWindow per row r of rows[count×k] with window r mod windows (one thread per row).
void launchMaxPoolRows(const double* rlo, const double* rhi, const double* offsets,
                       const double* starts, std::int64_t count, std::int64_t windows,
                       std::int64_t k, Format s, double* vlo, double* vhi, double* ilo, double* ihi,
                       cudaStream_t stream);
/// Row sums of x[rows×cols] (one block per row, directed-rounding tree), then rowFinish (a sum
/// or a mean, as the model says).
void launchRowSum(const double* xlo, const double* xhi, std::int64_t rows, std::int64_t cols,
                  kernels::SumModel model, double* olo, double* ohi, cudaStream_t stream);
/// Row maxima of x[rows×cols]: [max lo, max hi] per row.
void launchRowMax(const double* xlo, const double* xhi, std::int64_t rows, std::int64_t cols,
                  double* olo, double* ohi, cudaStream_t stream);
/// out = softmaxRow (log: log-softmax) of every row of x[rows×cols]; scratch holds
/// rows × softmaxRowScratch(cols) doubles of device memory (one thread per row).
void launchSoftmaxRows(const SoftmaxModel& model, bool log, const double* xlo, const double* xhi,
                       std::int64_t rows, std::int64_t cols, double* olo, double* ohi,
                       double* scratch, cudaStream_t stream);
/// batchNormBackwardRow per gathered channel row (one thread each); weight lo == nullptr for
/// None.
void launchBatchNormBackwardRows(const kernels::BatchNormBackwardModel& model, const double* dylo,
                                 const double* dyhi, const double* xlo, const double* xhi,
                                 const double* mlo, const double* mhi, const double* slo,
                                 const double* shi, const double* wlo, const double* whi,
                                 double* gilo, double* gihi, double* gwlo, double* gwhi,
                                 double* gblo, double* gbhi, std::int64_t rows, std::int64_t cols,
                                 cudaStream_t stream);
/// Average pooling: avgPoolWindow per gathered window row (one thread each).
void launchAvgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* params,
                       std::int64_t count, std::int64_t windows, std::int64_t k,
                       const kernels::AvgPoolModel& model, kernels::IntervalSpan out,
                       cudaStream_t stream);
/// Average-pooling backward: avgPoolBackwardInput per input element (one thread each).
void launchAvgPoolBackward(const kernels::AvgPoolModel& model,
                           const kernels::AvgPoolBackwardShape& shape, kernels::ConstIntervalSpan g,
                           const double* wins, const double* params, kernels::IntervalSpan out,
                           cudaStream_t stream);
/// native_group_norm_backward: the three passes of core/kernels/group_norm_backward.h, one
/// launch each (one thread per (sample, channel) sum, per channel, per row); `scratch` holds
/// groupNormBackwardScratch(model) doubles (ds and db between the passes).
void launchGroupNormBackward(const kernels::GroupNormBackwardModel& model,
                             kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                             kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                             kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                             kernels::IntervalSpan dw, kernels::IntervalSpan db, double* scratch,
                             cudaStream_t stream);
/// max_pool2d_with_indices_backward: maxPoolBackwardPlane per plane (one thread each, with
/// maxPoolBackwardScratch(inPlane) doubles of `scratch`); an index that is NaN or a point outside
/// the plane sets flag[0] = kBadIndexFlag.
void launchMaxPoolBackward(const kernels::MaxPoolBackwardModel& model, const double* glo,
                           const double* ghi, const double* ilo, const double* ihi,
                           std::int64_t planes, double* olo, double* ohi, double* flag,
                           double* scratch, cudaStream_t stream);
/// embedding_dense_backward: embeddingBackwardColumn per column (one thread each, with
/// 2·numWeights doubles of `scratch`); an index that is not a row sets flag[0] = kBadIndexFlag.
void launchEmbeddingBackward(const kernels::EmbeddingBackwardModel& model, const double* glo,
                             const double* ghi, const double* index, std::int64_t positions,
                             std::int64_t dim, double* olo, double* ohi, double* flag,
                             double* scratch, cudaStream_t stream);
/// The layer-norm backward: layerNormBackwardRow per row (one thread each), then
/// layerNormBackwardColumn per column (one thread each, the rows in order); weight lo ==
/// nullptr for None.
void launchLayerNormBackwardRows(const kernels::LayerNormBackwardModel& model, const double* dylo,
                                 const double* dyhi, const double* xlo, const double* xhi,
                                 const double* meanlo, const double* meanhi, const double* rstdlo,
                                 const double* rstdhi, const double* wlo, const double* whi,
                                 double* gilo, double* gihi, double* gwlo, double* gwhi,
                                 double* gblo, double* gbhi, std::int64_t rows, std::int64_t n,
                                 cudaStream_t stream);
/// out = softmaxBackwardRow (log: the log-softmax backward) of every row of g and y
/// [rows×cols] (one thread per row).
void launchSoftmaxBackwardRows(const SoftmaxModel& model, bool log, const double* glo,
                               const double* ghi, const double* ylo, const double* yhi,
                               std::int64_t rows, std::int64_t cols, double* olo, double* ohi,
                               cudaStream_t stream);
/// Stores [-inf, +inf] where an endpoint of out[0..n) is NaN (the device contract of
/// core/device.h: a device libm may give NaN where the bodies would not).
void launchNanToEntire(double* olo, double* ohi, std::int64_t n, cudaStream_t stream);
/// out[i] = x[offsets[i]] (offsets: exact integers as doubles) or fill[i mod fillCount] where
/// offsets[i] < 0; out.hi may be out.lo (a point gather: both writes store the same value).
void launchGather(const double* xlo, const double* xhi, const double* offsets, const double* flo,
                  const double* fhi, std::int64_t fillCount, double* olo, double* ohi,
                  std::int64_t n, cudaStream_t stream);
/// Device::gemmSplit: per slice s of `count` elements, flags[3s..3s+3) = {not direct, not
/// finite, some radius}; mid and mag of each element (kernels::gemmSplit unless the point slice
/// is used as it is).
void launchGemmSplit(const double* xlo, const double* xhi, std::int64_t count, std::int64_t slices,
                     Format in, double* mid, double* mag, double* flags, cudaStream_t stream);
/// Device::gemmFinish: kernels::gemmFinishElement per element, entire when a flag of its slice
/// (u / count; flags at s·flagsAStride, s·flagsBStride) says an operand was not finite;
/// blo == nullptr: no bias.
void launchGemmFinish(const double* g1, const double* g2, const double* g4, const double* flagsA,
                      const double* flagsB, std::int64_t flagsAStride, std::int64_t flagsBStride,
                      const double* blo, const double* bhi, kernels::GemmFinish finish, double* olo,
                      double* ohi, std::int64_t count, std::int64_t slices, cudaStream_t stream);
/// Sets flag[0] = 1 when an endpoint of x[0..n) is not finite (Device::flagNonFinite).
void launchFlagNonFinite(const double* xlo, const double* xhi, std::int64_t n, double* flag,
                         cudaStream_t stream);
/// Launches a one-thread kernel and waits for it: fails when the binary has no code for the
/// device (cudaErrorNoKernelImageForDevice) or the device is unusable.
void probeDevice(cudaStream_t stream);

/// Per row r of x[rows×cols]: layerNormRow → out[r·cols ..), mean[r], rstd[r] (one thread per
/// row); wlo/blo may be nullptr (no weight / no bias).
void launchLayerNormRows(const kernels::LayerNormModel& model, const double* xlo, const double* xhi,
                         const double* wlo, const double* whi, const double* blo, const double* bhi,
                         double* olo, double* ohi, double* mlo, double* mhi, double* rlo,
                         double* rhi, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

/// Per row r of x[rows×cols] (a gathered batch-norm channel): batchNormRow with weight[r],
/// bias[r] and the running statistics rm[r], rv[r] → out[r·cols ..), mean[r], rstd[r] (one
/// thread per row, as layer norm); wlo, blo, rmlo, rvlo may be nullptr (None).
void launchBatchNormRows(const kernels::BatchNormModel& model, const double* xlo, const double* xhi,
                         const double* wlo, const double* whi, const double* blo, const double* bhi,
                         const double* rmlo, const double* rmhi, const double* rvlo,
                         const double* rvhi, double* olo, double* ohi, double* mlo, double* mhi,
                         double* rlo, double* rhi, std::int64_t rows, std::int64_t cols,
                         cudaStream_t stream);

}  // namespace lossbound::gpu
