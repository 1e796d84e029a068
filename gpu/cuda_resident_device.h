#pragma once
// CudaDevice: the Device primitives of the resident replay (core/device.h) on one CUDA device:
// cudaMallocAsync/cudaFreeAsync on the stream-ordered pool, cudaMemcpyAsync, the interval kernels
// of gpu/interval_kernels.cuh (the bodies of core/kernels) and cublasDgemm, all on one stream.
// Plain C++ (the CUDA state hides behind a pointer to an incomplete Impl); exists only in CUDA
// builds: callers that must also build without CUDA use createCudaDevice() (gpu/cuda_device.h).
//
// Not verified on a device (none is lent to the project): the host tests run the same
// orchestration on HostDevice; this class is compiled, not executed.

#include "core/device.h"

#include <memory>
#include <string>

namespace lossbound::gpu {

/// The Device on one CUDA GPU (see the file comment).
class CudaDevice final : public Device {
 public:
  /// Creates the device's stream and cuBLAS handle on `device` and probes a launch; throws
  /// std::runtime_error naming the failed call.
  explicit CudaDevice(int device = 0);
  ~CudaDevice() override;

  /// Returns "CUDA device (<name>)".
  std::string name() const override;

 protected:
  double* doAllocate(std::int64_t count) override;
  void doFree(double* block) override;
  void doCopyIn(double* dst, const double* src, std::int64_t count) override;
  void doCopyOut(double* dst, const double* src, std::int64_t count) override;
  void doGemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
              std::int64_t n, bool absolute, const kernels::GemmBatch& batch) override;
  void doUnary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
               kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) override;
  void doBinary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
                kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y, std::int64_t yCount,
                kernels::IntervalSpan out, std::int64_t n) override;
  void doSelect(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
                std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
                kernels::ConstIntervalSpan b, std::int64_t bCount, kernels::IntervalSpan out,
                std::int64_t n) override;
  void doTakeRows(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan table,
                  std::int64_t rows, std::int64_t dim, const double* index, std::int64_t count,
                  kernels::IntervalSpan out, double* flag) override;
  void doNllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
                 const double* target, kernels::ConstIntervalSpan weight, std::int64_t batch,
                 kernels::IntervalSpan out, kernels::IntervalSpan totalWeight,
                 double* flag) override;
  void doNllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                         const double* target, kernels::ConstIntervalSpan weight,
                         kernels::ConstIntervalSpan tw, std::int64_t batch,
                         kernels::IntervalSpan out, double* flag) override;
  void doMaxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* starts,
                     std::int64_t count, std::int64_t windows, std::int64_t k, Format s,
                     kernels::IntervalSpan value, kernels::IntervalSpan index) override;
  void doRowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
                std::int64_t cols, const kernels::SumModel& model) override;
  void doSoftmaxRows(const kernels::SoftmaxModel& model, bool log, kernels::ConstIntervalSpan x,
                     kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols,
                     double* scratch) override;
  void doAvgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* params,
                     std::int64_t count, std::int64_t windows, std::int64_t k,
                     const kernels::AvgPoolModel& model, kernels::IntervalSpan out) override;
  void doAvgPoolBackward(const kernels::AvgPoolModel& model,
                         const kernels::AvgPoolBackwardShape& shape, kernels::ConstIntervalSpan g,
                         const double* wins, const double* params,
                         kernels::IntervalSpan out) override;
  void doMaxPoolBackward(const kernels::MaxPoolBackwardModel& model, kernels::ConstIntervalSpan g,
                         kernels::ConstIntervalSpan index, std::int64_t planes,
                         kernels::IntervalSpan out, double* flag, double* scratch) override;
  void doGroupNormBackward(const kernels::GroupNormBackwardModel& model,
                           kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                           kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                           kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                           kernels::IntervalSpan dw, kernels::IntervalSpan db,
                           double* scratch) override;
  void doEmbeddingBackward(const kernels::EmbeddingBackwardModel& model,
                           kernels::ConstIntervalSpan g, const double* index,
                           std::int64_t positions, std::int64_t dim, kernels::IntervalSpan out,
                           double* flag, double* scratch) override;
  void doBatchNormBackwardRows(const kernels::BatchNormBackwardModel& model,
                               kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                               kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan second,
                               kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
                               kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                               std::int64_t rows, std::int64_t cols) override;
  void doLayerNormBackwardRows(const kernels::LayerNormBackwardModel& model,
                               kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                               kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                               kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
                               kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                               std::int64_t rows, std::int64_t n) override;
  void doSoftmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                             kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                             kernels::IntervalSpan out, std::int64_t rows,
                             std::int64_t cols) override;
  void doLayerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                       kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                       kernels::IntervalSpan out, kernels::IntervalSpan mean,
                       kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) override;
  void doBatchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                       kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                       kernels::ConstIntervalSpan runningMean,
                       kernels::ConstIntervalSpan runningVar, kernels::IntervalSpan out,
                       kernels::IntervalSpan mean, kernels::IntervalSpan rstd, std::int64_t rows,
                       std::int64_t cols) override;
  void doGather(kernels::ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
                kernels::ConstIntervalSpan fill, std::int64_t fillCount, kernels::IntervalSpan out,
                std::int64_t n) override;
  void doGemmSplit(kernels::ConstIntervalSpan x, std::int64_t count, Format in, double* mid,
                   double* mag, double* flags, std::int64_t slices) override;
  void doGemmFinish(const double* g1, const double* g2, const double* g4, const double* flagsA,
                    const double* flagsB, kernels::ConstIntervalSpan bias,
                    const kernels::GemmFinish& finish, kernels::IntervalSpan out,
                    std::int64_t count, std::int64_t slices, std::int64_t flagsAStride,
                    std::int64_t flagsBStride) override;
  void doFlagNonFinite(kernels::ConstIntervalSpan x, std::int64_t n, double* flag) override;
  void doSynchronize() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> mImpl;
};

}  // namespace lossbound::gpu
