// The checked, counted primitives of Device: every pointer is looked up in the table of live
// allocations before the derived class sees it, so an orchestration bug (a host pointer, a freed
// or too short buffer) fails on the host device exactly as it would corrupt memory on a GPU.
#include "core/device.h"

#include "core/kernels/avg_pool.h"
#include "core/kernels/batch_norm_row.h"
#include "core/kernels/embedding_backward.h"
#include "core/kernels/group_norm_backward.h"
#include "core/kernels/max_pool.h"
#include "core/kernels/nll_loss.h"
#include "core/kernels/softmax_row.h"

#include <algorithm>
#include <functional>
#include <memory>

namespace lossbound {

namespace {

constexpr std::int64_t kDoubleBytes = static_cast<std::int64_t>(sizeof(double));

std::string mib(std::int64_t bytes) {
  return std::to_string(static_cast<double>(bytes) / (1024.0 * 1024.0)).substr(0, 8) + " MiB";
}

}  // namespace

double* Device::allocate(std::int64_t count) {
  if (count < 0) throw std::logic_error("device: allocate of a negative count");
  const std::int64_t n = std::max<std::int64_t>(count, 1);
  double* p = doAllocate(n);
  if (!p) {
    ++mCounters.failedAllocations;
    throw DeviceOutOfMemory("out of device memory on " + name() + ": " + mib(n * kDoubleBytes) +
                            " requested with " + mib(mCounters.bytesInUse) + " in use");
  }
  mLive.emplace(p, n);
  ++mCounters.allocations;
  mCounters.bytesInUse += n * kDoubleBytes;
  mCounters.peakBytes = std::max(mCounters.peakBytes, mCounters.bytesInUse);
  return p;
}

void Device::free(double* block) {
  const auto it = mLive.find(block);
  if (it == mLive.end()) throw std::logic_error("device: free of a block it did not allocate");
  mCounters.bytesInUse -= it->second * kDoubleBytes;
  ++mCounters.frees;
  mLive.erase(it);
  doFree(block);
}

void Device::check(const double* p, std::int64_t count, const char* what) const {
  if (count <= 0) return;
  auto it = mLive.upper_bound(p);
  if (p == nullptr || it == mLive.begin())
    throw std::logic_error(std::string("device: ") + what + " is not in device memory");
  --it;
  if (p + count > it->first + it->second)
    throw std::logic_error(std::string("device: ") + what +
                           " is not inside one live device allocation (" + std::to_string(count) +
                           " doubles needed)");
}

void Device::check(kernels::ConstIntervalSpan x, std::int64_t count, const char* what) const {
  check(x.lo, count, what);
  check(x.hi, count, what);
}

void Device::check(kernels::IntervalSpan x, std::int64_t count, const char* what) const {
  check(x.lo, count, what);
  check(x.hi, count, what);
}

void Device::copyIn(double* dst, const double* src, std::int64_t count) {
  check(dst, count, "copy-in destination");
  doCopyIn(dst, src, count);
  ++mCounters.uploads;
  mCounters.uploadBytes += count * kDoubleBytes;
}

void Device::copyOut(double* dst, const double* src, std::int64_t count) {
  check(src, count, "copy-out source");
  doCopyOut(dst, src, count);
  ++mCounters.downloads;
  mCounters.downloadBytes += count * kDoubleBytes;
}

void Device::gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                  std::int64_t n, bool absolute, const kernels::GemmBatch& batch) {
  using kernels::GemmBatch;
  if (batch.count < 1 || batch.aStride < 0 || batch.bStride < 0)
    throw std::logic_error("gemm: a batch needs at least one product and nonnegative strides");
  check(a, GemmBatch::extent(batch.count, batch.aStride, m * k), "gemm A");
  check(b, GemmBatch::extent(batch.count, batch.bStride, k * n), "gemm B");
  check(c, batch.count * m * n, "gemm C");
  doGemm(a, b, c, m, k, n, absolute, batch);
  ++mCounters.gemms;
}

void Device::unary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
                   kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) {
  check(x, n, "unary operand");
  check(out, n, "unary result");
  doUnary(op, model, x, out, n);
  ++mCounters.launches;
}

void Device::binary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
                    kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y, std::int64_t yCount,
                    kernels::IntervalSpan out, std::int64_t n) {
  if (yCount <= 0 || n % yCount != 0)
    throw std::logic_error("device: binary with a repeat count that does not divide n");
  check(x, n, "binary left operand");
  check(y, yCount, "binary right operand");
  check(out, n, "binary result");
  doBinary(op, model, x, y, yCount, out, n);
  ++mCounters.launches;
}

void Device::rowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
                    std::int64_t cols, const kernels::SumModel& model) {
  check(x, rows * cols, "row-sum operand");
  check(out, rows, "row-sum result");
  doRowSum(x, out, rows, cols, model);
  ++mCounters.launches;
}

void Device::softmaxRows(const kernels::SoftmaxModel& model, bool log, kernels::ConstIntervalSpan x,
                         kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols) {
  check(x, rows * cols, "softmax operand");
  check(out, rows * cols, "softmax result");
  double* scratch = allocate(rows * kernels::softmaxRowScratch(cols));
  // The scratch is freed after the launch is ordered: a later launch on the same stream cannot
  // start before this one ends (cudaFree synchronises too).
  const std::unique_ptr<double, std::function<void(double*)>> guard(scratch,
                                                                    [this](double* p) { free(p); });
  doSoftmaxRows(model, log, x, out, rows, cols, scratch);
  ++mCounters.launches;
}

void Device::avgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                         const double* params, std::int64_t count, std::int64_t windows,
                         std::int64_t k, const kernels::AvgPoolModel& model,
                         kernels::IntervalSpan out) {
  if (windows < 1 || count % windows != 0)
    throw std::logic_error("avgPoolRows: count must be a multiple of windows");
  check(rows, count * k, "avg-pool rows");
  check(offsets, windows * k, "avg-pool offsets");
  check(params, 3 * windows, "avg-pool divisors");
  check(out, count, "avg-pool values");
  doAvgPoolRows(rows, offsets, params, count, windows, k, model, out);
  ++mCounters.launches;
}

void Device::avgPoolBackward(const kernels::AvgPoolModel& model,
                             const kernels::AvgPoolBackwardShape& shape,
                             kernels::ConstIntervalSpan g, const double* wins, const double* params,
                             kernels::IntervalSpan out) {
  check(g, shape.planes * shape.windows, "avg-pool-backward gradient");
  check(wins, shape.inPlane * shape.k, "avg-pool-backward windows");
  check(params, 3 * shape.windows, "avg-pool-backward divisors");
  check(out, shape.planes * shape.inPlane, "avg-pool-backward result");
  doAvgPoolBackward(model, shape, g, wins, params, out);
  ++mCounters.launches;
}

void Device::maxPoolBackward(const kernels::MaxPoolBackwardModel& model,
                             kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan index,
                             std::int64_t planes, kernels::IntervalSpan out, double* flag) {
  check(g, planes * model.outPlane, "max-pool-backward gradient");
  check(index, planes * model.outPlane, "max-pool-backward indices");
  check(out, planes * model.inPlane, "max-pool-backward result");
  check(flag, 1, "index flag");
  double* scratch = allocate(planes * kernels::maxPoolBackwardScratch(model.inPlane));
  const std::unique_ptr<double, std::function<void(double*)>> guard(scratch,
                                                                    [this](double* p) { free(p); });
  doMaxPoolBackward(model, g, index, planes, out, flag, scratch);
  ++mCounters.launches;
}

void Device::groupNormBackward(const kernels::GroupNormBackwardModel& model,
                               kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                               kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                               kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                               kernels::IntervalSpan dw, kernels::IntervalSpan db) {
  const std::int64_t n = model.samples * model.channels * model.spatial;
  check(dy, n, "group-norm-backward gradient");
  check(x, n, "group-norm-backward input");
  check(mean, model.rows(), "group-norm-backward mean");
  check(rstd, model.rows(), "group-norm-backward rstd");
  if (weight.lo) check(weight, model.channels, "group-norm-backward weight");
  check(dx, n, "group-norm-backward grad_input");
  check(dw, model.channels, "group-norm-backward grad_weight");
  check(db, model.channels, "group-norm-backward grad_bias");
  double* scratch = allocate(kernels::groupNormBackwardScratch(model));
  const std::unique_ptr<double, std::function<void(double*)>> guard(scratch,
                                                                    [this](double* p) { free(p); });
  doGroupNormBackward(model, dy, x, mean, rstd, weight, dx, dw, db, scratch);
  ++mCounters.launches;
}

void Device::embeddingBackward(const kernels::EmbeddingBackwardModel& model,
                               kernels::ConstIntervalSpan g, const double* index,
                               std::int64_t positions, std::int64_t dim, kernels::IntervalSpan out,
                               double* flag) {
  check(g, positions * dim, "embedding-backward gradient");
  check(index, positions, "embedding-backward indices");
  check(out, model.numWeights * dim, "embedding-backward result");
  check(flag, 1, "index flag");
  double* scratch = allocate(2 * model.numWeights * dim);
  const std::unique_ptr<double, std::function<void(double*)>> guard(scratch,
                                                                    [this](double* p) { free(p); });
  doEmbeddingBackward(model, g, index, positions, dim, out, flag, scratch);
  ++mCounters.launches;
}

void Device::batchNormBackwardRows(const kernels::BatchNormBackwardModel& model,
                                   kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                                   kernels::ConstIntervalSpan mean,
                                   kernels::ConstIntervalSpan second,
                                   kernels::ConstIntervalSpan weight,
                                   kernels::IntervalSpan gradInput,
                                   kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                                   std::int64_t rows, std::int64_t cols) {
  check(dy, rows * cols, "batch-norm-backward gradient");
  check(x, rows * cols, "batch-norm-backward input");
  check(mean, rows, "batch-norm-backward mean");
  check(second, rows, "batch-norm-backward invstd or running var");
  if (weight.lo) check(weight, rows, "batch-norm-backward weight");
  check(gradInput, rows * cols, "batch-norm-backward grad_input");
  check(gradWeight, rows, "batch-norm-backward grad_weight");
  check(gradBias, rows, "batch-norm-backward grad_bias");
  doBatchNormBackwardRows(model, dy, x, mean, second, weight, gradInput, gradWeight, gradBias, rows,
                          cols);
  ++mCounters.launches;
}

void Device::layerNormBackwardRows(const kernels::LayerNormBackwardModel& model,
                                   kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                                   kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                                   kernels::ConstIntervalSpan weight,
                                   kernels::IntervalSpan gradInput,
                                   kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                                   std::int64_t rows, std::int64_t n) {
  check(dy, rows * n, "layer-norm-backward gradient");
  check(x, rows * n, "layer-norm-backward input");
  check(mean, rows, "layer-norm-backward mean");
  check(rstd, rows, "layer-norm-backward rstd");
  if (weight.lo) check(weight, n, "layer-norm-backward weight");
  check(gradInput, rows * n, "layer-norm-backward grad_input");
  check(gradWeight, n, "layer-norm-backward grad_weight");
  check(gradBias, n, "layer-norm-backward grad_bias");
  doLayerNormBackwardRows(model, dy, x, mean, rstd, weight, gradInput, gradWeight, gradBias, rows,
                          n);
  ++mCounters.launches;
}

void Device::softmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                                 kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                                 kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols) {
  check(g, rows * cols, "softmax-backward gradient");
  check(y, rows * cols, "softmax-backward output");
  check(out, rows * cols, "softmax-backward result");
  doSoftmaxBackwardRows(model, log, g, y, out, rows, cols);
  ++mCounters.launches;
}

void Device::layerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                           kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                           kernels::IntervalSpan out, kernels::IntervalSpan mean,
                           kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) {
  check(x, rows * cols, "layer-norm operand");
  if (weight.lo) check(weight, cols, "layer-norm weight");
  if (bias.lo) check(bias, cols, "layer-norm bias");
  check(out, rows * cols, "layer-norm result");
  check(mean, rows, "layer-norm mean");
  check(rstd, rows, "layer-norm rstd");
  doLayerNormRows(model, x, weight, bias, out, mean, rstd, rows, cols);
  ++mCounters.launches;
}

void Device::gather(kernels::ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
                    kernels::ConstIntervalSpan fill, std::int64_t fillCount,
                    kernels::IntervalSpan out, std::int64_t n) {
  if (fillCount != 1 && fillCount != n)
    throw std::logic_error("gather: the fill needs 1 or n elements, found " +
                           std::to_string(fillCount));
  check(x, xCount, "gather operand");
  check(offsets, n, "gather offsets");
  check(fill, fillCount, "gather fill");
  check(out, n, "gather result");
  doGather(x, xCount, offsets, fill, fillCount, out, n);
  ++mCounters.launches;
}

void Device::select(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
                    std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
                    kernels::ConstIntervalSpan b, std::int64_t bCount, kernels::IntervalSpan out,
                    std::int64_t n) {
  if (condCount < 1 || aCount < 1 || bCount < 1)
    throw std::logic_error("select: every operand needs at least one element");
  check(cond, condCount, "select condition");
  check(a, aCount, "select operand");
  check(b, bCount, "select operand");
  check(out, n, "select result");
  doSelect(model, cond, condCount, a, aCount, b, bCount, out, n);
  ++mCounters.launches;
}

void Device::takeRows(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan table,
                      std::int64_t rows, std::int64_t dim, const double* index, std::int64_t count,
                      kernels::IntervalSpan out, double* flag) {
  check(table, rows * dim, "embedding table");
  check(index, count, "embedding indices");
  check(out, count * dim, "embedding result");
  check(flag, 1, "index flag");
  doTakeRows(model, table, rows, dim, index, count, out, flag);
  ++mCounters.launches;
}

void Device::nllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
                     const double* target, kernels::ConstIntervalSpan weight, std::int64_t batch,
                     kernels::IntervalSpan out, kernels::IntervalSpan totalWeight, double* flag) {
  const std::int64_t targets = batch * model.inner;
  check(x, targets * model.classes, "nll_loss input");
  check(target, targets, "nll_loss target");
  if (weight.lo) check(weight, model.classes, "nll_loss weight");
  check(out, model.reduction == 0 ? targets : 1, "nll_loss output");
  check(totalWeight, 1, "nll_loss total_weight");
  check(flag, 1, "index flag");
  doNllLoss(model, x, target, weight, batch, out, totalWeight, flag);
  ++mCounters.launches;
}

void Device::nllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                             const double* target, kernels::ConstIntervalSpan weight,
                             kernels::ConstIntervalSpan tw, std::int64_t batch,
                             kernels::IntervalSpan out, double* flag) {
  const std::int64_t targets = batch * model.inner;
  check(g, model.reduction == 0 ? targets : 1, "nll_loss_backward grad");
  check(target, targets, "nll_loss_backward target");
  if (weight.lo) check(weight, model.classes, "nll_loss_backward weight");
  check(tw, 1, "nll_loss_backward total_weight");
  check(out, targets * model.classes, "nll_loss_backward result");
  check(flag, 1, "index flag");
  doNllLossBackward(model, g, target, weight, tw, batch, out, flag);
  ++mCounters.launches;
}

void Device::maxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                         const double* starts, std::int64_t count, std::int64_t windows,
                         std::int64_t k, Format s, kernels::IntervalSpan value,
                         kernels::IntervalSpan index) {
  if (windows < 1 || count % windows != 0)
    throw std::logic_error("maxPoolRows: count must be a multiple of windows");
  check(rows, count * k, "max-pool rows");
  check(offsets, windows * k, "max-pool offsets");
  check(starts, windows, "max-pool starts");
  check(value, count, "max-pool values");
  check(index, count, "max-pool indices");
  doMaxPoolRows(rows, offsets, starts, count, windows, k, s, value, index);
  ++mCounters.launches;
}

void Device::batchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                           kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                           kernels::ConstIntervalSpan runningMean,
                           kernels::ConstIntervalSpan runningVar, kernels::IntervalSpan out,
                           kernels::IntervalSpan mean, kernels::IntervalSpan rstd,
                           std::int64_t rows, std::int64_t cols) {
  check(x, rows * cols, "batch-norm operand");
  const std::int64_t affine = kernels::affineCount(model, rows, cols);
  if (weight.lo) check(weight, affine, "batch-norm weight");
  if (bias.lo) check(bias, affine, "batch-norm bias");
  if (runningMean.lo) check(runningMean, rows, "batch-norm running mean");
  if (runningVar.lo) check(runningVar, rows, "batch-norm running var");
  check(out, rows * cols, "batch-norm result");
  check(mean, rows, "batch-norm mean");
  check(rstd, rows, "batch-norm rstd");
  doBatchNormRows(model, x, weight, bias, runningMean, runningVar, out, mean, rstd, rows, cols);
  ++mCounters.launches;
}

void Device::gemmSplit(kernels::ConstIntervalSpan x, std::int64_t count, Format in, double* mid,
                       double* mag, double* flags, std::int64_t slices) {
  if (slices < 1) throw std::logic_error("gemmSplit: at least one slice");
  check(x, count * slices, "gemm operand");
  check(mid, count * slices, "gemm midpoints");
  check(mag, count * slices, "gemm magnitudes");
  check(flags, 3 * slices, "gemm flags");
  doGemmSplit(x, count, in, mid, mag, flags, slices);
  ++mCounters.launches;
}

void Device::gemmFinish(const double* g1, const double* g2, const double* g4, const double* flagsA,
                        const double* flagsB, kernels::ConstIntervalSpan bias,
                        const kernels::GemmFinish& finish, kernels::IntervalSpan out,
                        std::int64_t count, std::int64_t slices, std::int64_t flagsAStride,
                        std::int64_t flagsBStride) {
  if (slices < 1 || flagsAStride < 0 || flagsBStride < 0)
    throw std::logic_error("gemmFinish: at least one slice and nonnegative flag strides");
  const std::int64_t total = count * slices;
  check(g1, total, "gemm g1");
  check(g2, total, "gemm g2");
  check(g4, total, "gemm g4");
  check(flagsA, (slices - 1) * flagsAStride + 3, "gemm flags");
  check(flagsB, (slices - 1) * flagsBStride + 3, "gemm flags");
  if (bias.lo) check(bias, total, "gemm bias");
  check(out, total, "gemm result");
  doGemmFinish(g1, g2, g4, flagsA, flagsB, bias, finish, out, count, slices, flagsAStride,
               flagsBStride);
  ++mCounters.launches;
}

void Device::flagNonFinite(kernels::ConstIntervalSpan x, std::int64_t n, double* flag) {
  check(x, n, "finiteness operand");
  check(flag, 1, "finiteness flag");
  doFlagNonFinite(x, n, flag);
  ++mCounters.launches;
}

void Device::synchronize() {
  doSynchronize();
  ++mCounters.synchronizations;
}

void Device::resetCounters() {
  const std::int64_t inUse = mCounters.bytesInUse;
  mCounters = DeviceCounters{};
  mCounters.bytesInUse = inUse;
  mCounters.peakBytes = inUse;
}

}  // namespace lossbound
