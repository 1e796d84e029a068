// HostDevice: heap blocks as device memory, HostKernelBackend's hooks as kernel launches. The
// hooks already give the bodies' bits (tests/gpu/test_kernel_offload); what is added here is the
// NaN-to-entire step of the device contract (a no-op for the bodies, which never give NaN).
#include "core/host_device.h"

#include "core/kernels/embedding_backward.h"
#include "core/kernels/group_norm_backward.h"
#include "core/kernels/interval_gemm.h"
#include "core/kernels/max_pool.h"

#include <cmath>
#include <cstring>
#include <new>

namespace lossbound {

namespace {

constexpr std::int64_t kDoubleBytes = static_cast<std::int64_t>(sizeof(double));

void nanToEntire(kernels::IntervalSpan out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (std::isnan(out.lo[i]) || std::isnan(out.hi[i])) {
      out.lo[i] = -HUGE_VAL;
      out.hi[i] = HUGE_VAL;
    }
}

}  // namespace

HostDevice::~HostDevice() = default;

std::string HostDevice::name() const {
  std::string n = "host device (separate host buffers";
  if (mCap > 0) n += ", cap " + std::to_string(mCap) + " bytes";
  return n + ")";
}

double* HostDevice::doAllocate(std::int64_t count) {
  const std::int64_t bytes = count * kDoubleBytes;
  if (mCap > 0 && counters().bytesInUse + bytes > mCap) return nullptr;
  auto* p = new (std::nothrow) double[static_cast<std::size_t>(count)];
  if (!p) return nullptr;
  // Poison the fresh block: a launch that reads memory nobody wrote gives NaN, not stale bits.
  for (std::int64_t i = 0; i < count; ++i) p[i] = std::nan("");
  return p;
}

void HostDevice::doFree(double* block) { delete[] block; }

void HostDevice::doCopyIn(double* dst, const double* src, std::int64_t count) {
  std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(double));
}

void HostDevice::doCopyOut(double* dst, const double* src, std::int64_t count) {
  std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(double));
}

void HostDevice::doGemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                        std::int64_t n, bool absolute, const kernels::GemmBatch& batch) {
  for (std::int64_t i = 0; i < batch.count; ++i)
    mKernels.gemm(a + i * batch.aStride, b + i * batch.bStride, c + i * m * n, m, k, n, absolute);
}

void HostDevice::doUnary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
                         kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) {
  mKernels.unary(op, model, x, out, n);
  nanToEntire(out, n);
}

void HostDevice::doBinary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
                          kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y,
                          std::int64_t yCount, kernels::IntervalSpan out, std::int64_t n) {
  mKernels.binary(op, model, x, y, yCount, out, n);
  nanToEntire(out, n);
}

void HostDevice::doRowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out,
                          std::int64_t rows, std::int64_t cols, const kernels::SumModel& model) {
  mKernels.rowSum(x, out, rows, cols, model);
  nanToEntire(out, rows);
}

void HostDevice::doSoftmaxRows(const kernels::SoftmaxModel& model, bool log,
                               kernels::ConstIntervalSpan x, kernels::IntervalSpan out,
                               std::int64_t rows, std::int64_t cols, double* scratch) {
  // One row at a time on the host: the first row's share of the device scratch is enough.
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::softmaxRow(x.lo + r * cols, x.hi + r * cols, cols, model, log, out.lo + r * cols,
                        out.hi + r * cols, scratch);
  nanToEntire(out, rows * cols);
}

void HostDevice::doAvgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                               const double* params, std::int64_t count, std::int64_t windows,
                               std::int64_t k, const kernels::AvgPoolModel& model,
                               kernels::IntervalSpan out) {
  mKernels.avgPoolRows(rows, offsets, params, count, windows, k, model, out);
  nanToEntire(out, count);
}

void HostDevice::doAvgPoolBackward(const kernels::AvgPoolModel& model,
                                   const kernels::AvgPoolBackwardShape& shape,
                                   kernels::ConstIntervalSpan g, const double* wins,
                                   const double* params, kernels::IntervalSpan out) {
  mKernels.avgPoolBackward(model, shape, g, wins, params, out);
  nanToEntire(out, shape.planes * shape.inPlane);
}

void HostDevice::doMaxPoolBackward(const kernels::MaxPoolBackwardModel& model,
                                   kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan index,
                                   std::int64_t planes, kernels::IntervalSpan out, double* flag,
                                   double* scratch) {
  // One plane at a time on the host: the first plane's share of the scratch is enough.
  for (std::int64_t pl = 0; pl < planes; ++pl)
    if (!kernels::maxPoolBackwardPlane(g, index, pl, model, out, scratch))
      flag[0] = kernels::kBadIndexFlag;
  nanToEntire(out, planes * model.inPlane);
}

void HostDevice::doGroupNormBackward(const kernels::GroupNormBackwardModel& model,
                                     kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                                     kernels::ConstIntervalSpan mean,
                                     kernels::ConstIntervalSpan rstd,
                                     kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                                     kernels::IntervalSpan dw, kernels::IntervalSpan db,
                                     double* scratch) {
  kernels::groupNormBackward(model, dy, x, mean, rstd, weight, dx, dw, db, scratch);
  nanToEntire(dx, model.samples * model.channels * model.spatial);
  nanToEntire(dw, model.channels);
  nanToEntire(db, model.channels);
}

void HostDevice::doEmbeddingBackward(const kernels::EmbeddingBackwardModel& model,
                                     kernels::ConstIntervalSpan g, const double* index,
                                     std::int64_t positions, std::int64_t dim,
                                     kernels::IntervalSpan out, double* flag, double* scratch) {
  // One column at a time on the host: the first column's share of the scratch is enough.
  for (std::int64_t j = 0; j < dim; ++j)
    if (!kernels::embeddingBackwardColumn(g, index, positions, dim, j, model, out, scratch))
      flag[0] = kernels::kBadIndexFlag;
  nanToEntire(out, model.numWeights * dim);
}

void HostDevice::doBatchNormBackwardRows(
    const kernels::BatchNormBackwardModel& model, kernels::ConstIntervalSpan dy,
    kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan mean,
    kernels::ConstIntervalSpan second, kernels::ConstIntervalSpan weight,
    kernels::IntervalSpan gradInput, kernels::IntervalSpan gradWeight,
    kernels::IntervalSpan gradBias, std::int64_t rows, std::int64_t cols) {
  mKernels.batchNormBackwardRows(model, dy, x, mean, second, weight, gradInput, gradWeight,
                                 gradBias, rows, cols);
  nanToEntire(gradInput, rows * cols);
  nanToEntire(gradWeight, rows);
  nanToEntire(gradBias, rows);
}

void HostDevice::doLayerNormBackwardRows(
    const kernels::LayerNormBackwardModel& model, kernels::ConstIntervalSpan dy,
    kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
    kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
    kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias, std::int64_t rows,
    std::int64_t n) {
  mKernels.layerNormBackwardRows(model, dy, x, mean, rstd, weight, gradInput, gradWeight, gradBias,
                                 rows, n);
  nanToEntire(gradInput, rows * n);
  nanToEntire(gradWeight, n);
  nanToEntire(gradBias, n);
}

void HostDevice::doSoftmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                                       kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                                       kernels::IntervalSpan out, std::int64_t rows,
                                       std::int64_t cols) {
  mKernels.softmaxBackwardRows(model, log, g, y, out, rows, cols);
  nanToEntire(out, rows * cols);
}

void HostDevice::doLayerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                                 kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                                 kernels::IntervalSpan out, kernels::IntervalSpan mean,
                                 kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) {
  mKernels.layerNormRows(model, x, weight, bias, out, mean, rstd, rows, cols);
  nanToEntire(out, rows * cols);
  nanToEntire(mean, rows);
  nanToEntire(rstd, rows);
}

void HostDevice::doGather(kernels::ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
                          kernels::ConstIntervalSpan fill, std::int64_t fillCount,
                          kernels::IntervalSpan out, std::int64_t n) {
  mKernels.gather(x, xCount, offsets, fill, fillCount, out, n);
}

void HostDevice::doSelect(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
                          std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
                          kernels::ConstIntervalSpan b, std::int64_t bCount,
                          kernels::IntervalSpan out, std::int64_t n) {
  mKernels.select(model, cond, condCount, a, aCount, b, bCount, out, n);
}

void HostDevice::doTakeRows(const kernels::ElementwiseModel& model,
                            kernels::ConstIntervalSpan table, std::int64_t rows, std::int64_t dim,
                            const double* index, std::int64_t count, kernels::IntervalSpan out,
                            double* flag) {
  for (std::int64_t p = 0; p < count; ++p) {
    const std::int64_t k = kernels::tableRow(index[p], rows);
    if (k < 0) flag[0] = kernels::kBadIndexFlag;
    for (std::int64_t j = 0; j < dim; ++j) {
      const Interval v =
          k < 0
              ? entireInterval()
              : roundOutward(Interval{table.lo[k * dim + j], table.hi[k * dim + j]}, model.storage);
      out.lo[p * dim + j] = v.lo;
      out.hi[p * dim + j] = v.hi;
    }
  }
}

void HostDevice::doNllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
                           const double* target, kernels::ConstIntervalSpan weight,
                           std::int64_t batch, kernels::IntervalSpan out,
                           kernels::IntervalSpan totalWeight, double* flag) {
  if (!kernels::nllLossForward(model, x, target, weight, batch, out, totalWeight))
    flag[0] = kernels::kBadIndexFlag;
  nanToEntire(out, model.reduction == 0 ? batch * model.inner : 1);
  nanToEntire(totalWeight, 1);
}

void HostDevice::doNllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                                   const double* target, kernels::ConstIntervalSpan weight,
                                   kernels::ConstIntervalSpan tw, std::int64_t batch,
                                   kernels::IntervalSpan out, double* flag) {
  const std::int64_t targets = batch * model.inner, n = targets * model.classes;
  for (std::int64_t e = 0; e < n; ++e) out.lo[e] = out.hi[e] = 0.0;
  for (std::int64_t o = 0; o < targets; ++o)
    if (!kernels::nllBackwardAt(model, o, target, g, weight, {tw.lo[0], tw.hi[0]}, out))
      flag[0] = kernels::kBadIndexFlag;
  nanToEntire(out, n);
}

void HostDevice::doMaxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                               const double* starts, std::int64_t count, std::int64_t windows,
                               std::int64_t k, Format s, kernels::IntervalSpan value,
                               kernels::IntervalSpan index) {
  mKernels.maxPoolRows(rows, offsets, starts, count, windows, k, s, value, index);
  nanToEntire(value, count);
}

void HostDevice::doBatchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                                 kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                                 kernels::ConstIntervalSpan runningMean,
                                 kernels::ConstIntervalSpan runningVar, kernels::IntervalSpan out,
                                 kernels::IntervalSpan mean, kernels::IntervalSpan rstd,
                                 std::int64_t rows, std::int64_t cols) {
  mKernels.batchNormRows(model, x, weight, bias, runningMean, runningVar, out, mean, rstd, rows,
                         cols);
  nanToEntire(out, rows * cols);
  nanToEntire(mean, rows);
  nanToEntire(rstd, rows);
}

void HostDevice::doGemmSplit(kernels::ConstIntervalSpan x, std::int64_t count, Format in,
                             double* mid, double* mag, double* flags, std::int64_t slices) {
  for (std::int64_t s = 0; s < slices; ++s) {
    double* f = flags + 3 * s;
    const std::int64_t o = s * count;
    f[0] = f[1] = f[2] = 0.0;
    if (x.lo != x.hi) f[0] = 1.0;
    for (std::int64_t i = o; i < o + count && f[0] == 0.0; ++i)
      if (!kernels::isFiniteValue(x.lo[i]) || !kernels::gemmRepresentable(x.lo[i], in)) f[0] = 1.0;
    for (std::int64_t i = o; i < o + count; ++i) {
      if (f[0] == 0.0) {
        mid[i] = x.lo[i];
        mag[i] = std::fabs(x.lo[i]);
        continue;
      }
      double m = 0.0, r = 0.0;
      if (!kernels::gemmSplit(x.lo[i], x.hi[i], in, &m, &r)) {
        f[1] = 1.0;
        m = r = 0.0;
      }
      mid[i] = m;
      mag[i] = add_up(std::fabs(m), r);
      if (r != 0.0) f[2] = 1.0;
    }
  }
}

void HostDevice::doGemmFinish(const double* g1, const double* g2, const double* g4,
                              const double* flagsA, const double* flagsB,
                              kernels::ConstIntervalSpan bias, const kernels::GemmFinish& finish,
                              kernels::IntervalSpan out, std::int64_t count, std::int64_t slices,
                              std::int64_t flagsAStride, std::int64_t flagsBStride) {
  for (std::int64_t u = 0; u < count * slices; ++u) {
    const double* fa = flagsA + (u / count) * flagsAStride;
    const double* fb = flagsB + (u / count) * flagsBStride;
    const bool finite = fa[1] == 0.0 && fb[1] == 0.0;
    const bool points = fa[2] == 0.0 && fb[2] == 0.0;
    const Interval e =
        finite ? kernels::gemmFinishElement(
                     g1[u], g2[u], points ? 0.0 : g4[u], points, finish, bias.lo != nullptr,
                     bias.lo ? Interval{bias.lo[u], bias.hi[u]} : Interval{0.0, 0.0})
               : entireInterval();
    out.lo[u] = e.lo;
    out.hi[u] = e.hi;
  }
}

void HostDevice::doFlagNonFinite(kernels::ConstIntervalSpan x, std::int64_t n, double* flag) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x.lo[i]) || !std::isfinite(x.hi[i])) {
      flag[0] = 1.0;
      return;
    }
}

}  // namespace lossbound
