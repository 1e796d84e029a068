// CudaDevice: the raw primitives of core/device.h with the CUDA runtime and cuBLAS. The base class
// has already checked every pointer against its allocation table and counts every call; here
// each primitive is one stream-ordered CUDA operation (copyOut waits for its data).
#include "gpu/cuda_check.cuh"
#include "gpu/cuda_resident_device.h"
#include "gpu/cuda_resources.cuh"
#include "gpu/interval_kernels.cuh"

#include <climits>
#include <stdexcept>
#include <string>

namespace lossbound::gpu {

struct CudaDevice::Impl {
  explicit Impl(int device) : resources(device) {}
  /// Makes the device current for the calling thread (replays may run on any thread) and
  /// returns the stream.
  cudaStream_t current() const {
    resources.makeCurrent();
    return resources.stream();
  }
  CudaResources resources;
};

namespace {

std::size_t bytesOf(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(double); }

int cublasDim(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw std::invalid_argument(std::string("CUDA device: ") + what + " = " + std::to_string(v) +
                                " is outside cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

CudaDevice::CudaDevice(int device) : mImpl(std::make_unique<Impl>(device)) {
  probeDevice(mImpl->current());
}

CudaDevice::~CudaDevice() = default;

std::string CudaDevice::name() const {
  return "CUDA device (" + mImpl->resources.deviceName() + ")";
}

double* CudaDevice::doAllocate(std::int64_t count) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytesOf(count), mImpl->current());
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error state of this failed call
    return nullptr;
  }
  LB_CUDA_CHECK(err);
  return static_cast<double*>(p);
}

void CudaDevice::doFree(double* block) {
  // Stream-ordered: the block is reused only after every launch issued before has finished.
  LB_CUDA_CHECK(cudaFreeAsync(block, mImpl->current()));
}

void CudaDevice::doCopyIn(double* dst, const double* src, std::int64_t count) {
  if (count <= 0) return;
  LB_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytesOf(count), cudaMemcpyHostToDevice, mImpl->current()));
  // The source is pageable host memory the caller may free at once: wait for the copy.
  mImpl->resources.synchronize();
}

void CudaDevice::doCopyOut(double* dst, const double* src, std::int64_t count) {
  if (count <= 0) return;
  LB_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytesOf(count), cudaMemcpyDeviceToHost, mImpl->current()));
  mImpl->resources.synchronize();
}

void CudaDevice::doGemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                        std::int64_t n, bool absolute, const kernels::GemmBatch& batch) {
  const int mi = cublasDim(m, "m"), ki = cublasDim(k, "k"), ni = cublasDim(n, "n");
  const int count = cublasDim(batch.count, "batch");
  if (m == 0 || n == 0) return;
  const cudaStream_t s = mImpl->current();
  if (k == 0) {
    LB_CUDA_CHECK(cudaMemsetAsync(c, 0, bytesOf(batch.count * m * n), s));
    return;
  }
  const std::int64_t aCount = kernels::GemmBatch::extent(batch.count, batch.aStride, m * k);
  const std::int64_t bCount = kernels::GemmBatch::extent(batch.count, batch.bStride, k * n);
  const double* pa = a;
  const double* pb = b;
  double* absA = nullptr;
  double* absB = nullptr;
  if (absolute) {  // |A|·|B| on copies: device operands are values of the replay, never changed
    absA = allocate(aCount);
    absB = allocate(bCount);
    launchAbs(a, absA, aCount, s);
    launchAbs(b, absB, bCount, s);
    pa = absA;
    pb = absB;
  }
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: operands swapped, no transposition flags (as
  // CudaBackend::gemm); a batch is one strided-batched call (a stride of 0 shares the operand).
  const double one = 1.0, zero = 0.0;
  if (count == 1)
    LB_CUBLAS_CHECK(cublasDgemm(mImpl->resources.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki,
                                &one, pb, ni, pa, ki, &zero, c, ni));
  else
    LB_CUBLAS_CHECK(cublasDgemmStridedBatched(
        mImpl->resources.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &one, pb, ni,
        static_cast<long long>(batch.bStride), pa, ki, static_cast<long long>(batch.aStride), &zero,
        c, ni, static_cast<long long>(m * n), count));
  if (absolute) {
    free(absA);
    free(absB);
  }
}

void CudaDevice::doUnary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
                         kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) {
  const cudaStream_t s = mImpl->current();
  launchUnary(op, model, x.lo, x.hi, out.lo, out.hi, n, s);
  launchNanToEntire(out.lo, out.hi, n, s);
}

void CudaDevice::doBinary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
                          kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y,
                          std::int64_t yCount, kernels::IntervalSpan out, std::int64_t n) {
  const cudaStream_t s = mImpl->current();
  launchBinary(op, model, x.lo, x.hi, y.lo, y.hi, yCount, out.lo, out.hi, n, s);
  launchNanToEntire(out.lo, out.hi, n, s);
}

void CudaDevice::doRowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out,
                          std::int64_t rows, std::int64_t cols, const kernels::SumModel& model) {
  const cudaStream_t s = mImpl->current();
  launchRowSum(x.lo, x.hi, rows, cols, model, out.lo, out.hi, s);
  launchNanToEntire(out.lo, out.hi, rows, s);
}

void CudaDevice::doSoftmaxRows(const kernels::SoftmaxModel& model, bool log,
                               kernels::ConstIntervalSpan x, kernels::IntervalSpan out,
                               std::int64_t rows, std::int64_t cols, double* scratch) {
  const cudaStream_t s = mImpl->current();
  launchSoftmaxRows(model, log, x.lo, x.hi, rows, cols, out.lo, out.hi, scratch, s);
  launchNanToEntire(out.lo, out.hi, rows * cols, s);
}

void CudaDevice::doAvgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                               const double* params, std::int64_t count, std::int64_t windows,
                               std::int64_t k, const kernels::AvgPoolModel& model,
                               kernels::IntervalSpan out) {
  const cudaStream_t s = mImpl->current();
  launchAvgPoolRows(rows, offsets, params, count, windows, k, model, out, s);
  launchNanToEntire(out.lo, out.hi, count, s);
}

void CudaDevice::doAvgPoolBackward(const kernels::AvgPoolModel& model,
                                   const kernels::AvgPoolBackwardShape& shape,
                                   kernels::ConstIntervalSpan g, const double* wins,
                                   const double* params, kernels::IntervalSpan out) {
  const cudaStream_t s = mImpl->current();
  launchAvgPoolBackward(model, shape, g, wins, params, out, s);
  launchNanToEntire(out.lo, out.hi, shape.planes * shape.inPlane, s);
}

void CudaDevice::doMaxPoolBackward(const kernels::MaxPoolBackwardModel& model,
                                   kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan index,
                                   std::int64_t planes, kernels::IntervalSpan out, double* flag,
                                   double* scratch) {
  const cudaStream_t s = mImpl->current();
  launchMaxPoolBackward(model, g.lo, g.hi, index.lo, index.hi, planes, out.lo, out.hi, flag,
                        scratch, s);
  launchNanToEntire(out.lo, out.hi, planes * model.inPlane, s);
}

void CudaDevice::doGroupNormBackward(const kernels::GroupNormBackwardModel& model,
                                     kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                                     kernels::ConstIntervalSpan mean,
                                     kernels::ConstIntervalSpan rstd,
                                     kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                                     kernels::IntervalSpan dw, kernels::IntervalSpan db,
                                     double* scratch) {
  const cudaStream_t s = mImpl->current();
  launchGroupNormBackward(model, dy, x, mean, rstd, weight, dx, dw, db, scratch, s);
  launchNanToEntire(dx.lo, dx.hi, model.samples * model.channels * model.spatial, s);
  launchNanToEntire(dw.lo, dw.hi, model.channels, s);
  launchNanToEntire(db.lo, db.hi, model.channels, s);
}

void CudaDevice::doEmbeddingBackward(const kernels::EmbeddingBackwardModel& model,
                                     kernels::ConstIntervalSpan g, const double* index,
                                     std::int64_t positions, std::int64_t dim,
                                     kernels::IntervalSpan out, double* flag, double* scratch) {
  const cudaStream_t s = mImpl->current();
  launchEmbeddingBackward(model, g.lo, g.hi, index, positions, dim, out.lo, out.hi, flag, scratch,
                          s);
  launchNanToEntire(out.lo, out.hi, model.numWeights * dim, s);
}

void CudaDevice::doBatchNormBackwardRows(
    const kernels::BatchNormBackwardModel& model, kernels::ConstIntervalSpan dy,
    kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan mean,
    kernels::ConstIntervalSpan second, kernels::ConstIntervalSpan weight,
    kernels::IntervalSpan gradInput, kernels::IntervalSpan gradWeight,
    kernels::IntervalSpan gradBias, std::int64_t rows, std::int64_t cols) {
  const cudaStream_t s = mImpl->current();
  launchBatchNormBackwardRows(model, dy.lo, dy.hi, x.lo, x.hi, mean.lo, mean.hi, second.lo,
                              second.hi, weight.lo, weight.hi, gradInput.lo, gradInput.hi,
                              gradWeight.lo, gradWeight.hi, gradBias.lo, gradBias.hi, rows, cols,
                              s);
  launchNanToEntire(gradInput.lo, gradInput.hi, rows * cols, s);
  launchNanToEntire(gradWeight.lo, gradWeight.hi, rows, s);
  launchNanToEntire(gradBias.lo, gradBias.hi, rows, s);
}

void CudaDevice::doLayerNormBackwardRows(
    const kernels::LayerNormBackwardModel& model, kernels::ConstIntervalSpan dy,
    kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
    kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
    kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias, std::int64_t rows,
    std::int64_t n) {
  const cudaStream_t s = mImpl->current();
  launchLayerNormBackwardRows(model, dy.lo, dy.hi, x.lo, x.hi, mean.lo, mean.hi, rstd.lo, rstd.hi,
                              weight.lo, weight.hi, gradInput.lo, gradInput.hi, gradWeight.lo,
                              gradWeight.hi, gradBias.lo, gradBias.hi, rows, n, s);
  launchNanToEntire(gradInput.lo, gradInput.hi, rows * n, s);
  launchNanToEntire(gradWeight.lo, gradWeight.hi, n, s);
  launchNanToEntire(gradBias.lo, gradBias.hi, n, s);
}

void CudaDevice::doSoftmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                                       kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                                       kernels::IntervalSpan out, std::int64_t rows,
                                       std::int64_t cols) {
  const cudaStream_t s = mImpl->current();
  launchSoftmaxBackwardRows(model, log, g.lo, g.hi, y.lo, y.hi, rows, cols, out.lo, out.hi, s);
  launchNanToEntire(out.lo, out.hi, rows * cols, s);
}

void CudaDevice::doLayerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                                 kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                                 kernels::IntervalSpan out, kernels::IntervalSpan mean,
                                 kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) {
  const cudaStream_t s = mImpl->current();
  launchLayerNormRows(model, x.lo, x.hi, weight.lo, weight.hi, bias.lo, bias.hi, out.lo, out.hi,
                      mean.lo, mean.hi, rstd.lo, rstd.hi, rows, cols, s);
  launchNanToEntire(out.lo, out.hi, rows * cols, s);
  launchNanToEntire(mean.lo, mean.hi, rows, s);
  launchNanToEntire(rstd.lo, rstd.hi, rows, s);
}

void CudaDevice::doGather(kernels::ConstIntervalSpan x, std::int64_t /*xCount*/,
                          const double* offsets, kernels::ConstIntervalSpan fill,
                          std::int64_t fillCount, kernels::IntervalSpan out, std::int64_t n) {
  launchGather(x.lo, x.hi, offsets, fill.lo, fill.hi, fillCount, out.lo, out.hi, n,
               mImpl->current());
}

void CudaDevice::doSelect(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
                          std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
                          kernels::ConstIntervalSpan b, std::int64_t bCount,
                          kernels::IntervalSpan out, std::int64_t n) {
  launchSelect(model, cond.lo, cond.hi, condCount, a.lo, a.hi, aCount, b.lo, b.hi, bCount, out.lo,
               out.hi, n, mImpl->current());
}

void CudaDevice::doTakeRows(const kernels::ElementwiseModel& model,
                            kernels::ConstIntervalSpan table, std::int64_t rows, std::int64_t dim,
                            const double* index, std::int64_t count, kernels::IntervalSpan out,
                            double* flag) {
  launchTakeRows(model, table.lo, table.hi, rows, dim, index, count, out.lo, out.hi, flag,
                 mImpl->current());
}

void CudaDevice::doNllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
                           const double* target, kernels::ConstIntervalSpan weight,
                           std::int64_t batch, kernels::IntervalSpan out,
                           kernels::IntervalSpan totalWeight, double* flag) {
  const cudaStream_t s = mImpl->current();
  launchNllLoss(model, x.lo, x.hi, target, weight.lo, weight.hi, batch, out.lo, out.hi,
                totalWeight.lo, totalWeight.hi, flag, s);
  launchNanToEntire(out.lo, out.hi, model.reduction == 0 ? batch * model.inner : 1, s);
  launchNanToEntire(totalWeight.lo, totalWeight.hi, 1, s);
}

void CudaDevice::doNllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                                   const double* target, kernels::ConstIntervalSpan weight,
                                   kernels::ConstIntervalSpan tw, std::int64_t batch,
                                   kernels::IntervalSpan out, double* flag) {
  const cudaStream_t s = mImpl->current();
  launchNllLossBackward(model, g.lo, g.hi, target, weight.lo, weight.hi, tw.lo, tw.hi, batch,
                        out.lo, out.hi, flag, s);
  launchNanToEntire(out.lo, out.hi, batch * model.inner * model.classes, s);
}

void CudaDevice::doMaxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                               const double* starts, std::int64_t count, std::int64_t windows,
                               std::int64_t k, Format s, kernels::IntervalSpan value,
                               kernels::IntervalSpan index) {
  const cudaStream_t st = mImpl->current();
  launchMaxPoolRows(rows.lo, rows.hi, offsets, starts, count, windows, k, s, value.lo, value.hi,
                    index.lo, index.hi, st);
  launchNanToEntire(value.lo, value.hi, count, st);
}

void CudaDevice::doBatchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                                 kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                                 kernels::ConstIntervalSpan runningMean,
                                 kernels::ConstIntervalSpan runningVar, kernels::IntervalSpan out,
                                 kernels::IntervalSpan mean, kernels::IntervalSpan rstd,
                                 std::int64_t rows, std::int64_t cols) {
  const cudaStream_t s = mImpl->current();
  launchBatchNormRows(model, x.lo, x.hi, weight.lo, weight.hi, bias.lo, bias.hi, runningMean.lo,
                      runningMean.hi, runningVar.lo, runningVar.hi, out.lo, out.hi, mean.lo,
                      mean.hi, rstd.lo, rstd.hi, rows, cols, s);
  launchNanToEntire(out.lo, out.hi, rows * cols, s);
  launchNanToEntire(mean.lo, mean.hi, rows, s);
  launchNanToEntire(rstd.lo, rstd.hi, rows, s);
}

void CudaDevice::doGemmSplit(kernels::ConstIntervalSpan x, std::int64_t count, Format in,
                             double* mid, double* mag, double* flags, std::int64_t slices) {
  launchGemmSplit(x.lo, x.hi, count, slices, in, mid, mag, flags, mImpl->current());
}

void CudaDevice::doGemmFinish(const double* g1, const double* g2, const double* g4,
                              const double* flagsA, const double* flagsB,
                              kernels::ConstIntervalSpan bias, const kernels::GemmFinish& finish,
                              kernels::IntervalSpan out, std::int64_t count, std::int64_t slices,
                              std::int64_t flagsAStride, std::int64_t flagsBStride) {
  launchGemmFinish(g1, g2, g4, flagsA, flagsB, flagsAStride, flagsBStride, bias.lo, bias.hi, finish,
                   out.lo, out.hi, count, slices, mImpl->current());
}

void CudaDevice::doFlagNonFinite(kernels::ConstIntervalSpan x, std::int64_t n, double* flag) {
  launchFlagNonFinite(x.lo, x.hi, n, flag, mImpl->current());
}

void CudaDevice::doSynchronize() { mImpl->resources.synchronize(); }

}  // namespace lossbound::gpu
