#pragma once
// A Backend paired with a Device: the GEMMs, loops and interval kernel hooks are those of the
// wrapped backend, and residentDevice() gives the interval method the device on which a replay
// keeps its tensors (core/program/resident_replay.h). `--backend cuda` pairs the CUDA backend
// with gpu::CudaDevice; `--backend host-device` pairs the CPU backend with HostDevice
// (core/host_device.h), which runs the device-resident orchestration on the host's counting
// device: a check of residency, transfers and frees where no GPU exists, not a speed-up.

#include "core/backend.h"
#include "core/device.h"

#include <memory>
#include <string>
#include <utility>

namespace lossbound {

class DeviceBackend final : public Backend {
 public:
  /// Pairs `inner` (its hooks and GEMMs) with `device` (the resident replay's memory).
  DeviceBackend(std::unique_ptr<Backend> inner, std::unique_ptr<Device> device)
      : mInner(std::move(inner)), mDevice(std::move(device)) {}

  /// Returns the wrapped backend's name and the device's.
  std::string name() const override {
    return mInner->name() + "; interval replays device-resident on " + mDevice->name();
  }
  /// Delegates to the wrapped backend.
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute = false) override {
    mInner->gemm(a, b, c, m, k, n, absolute);
  }
  /// Delegates to the wrapped backend.
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mInner->parallelFor(n, body);
  }
  /// Returns the wrapped backend's thread budget.
  int threads() const override { return mInner->threads(); }
  /// Returns the paired device.
  Device* residentDevice() override { return mDevice.get(); }
  /// Returns whether the wrapped backend offers interval kernel hooks.
  bool offersIntervalKernels() const override { return mInner->offersIntervalKernels(); }
  /// Delegates to the wrapped backend.
  bool unary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
             kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) override {
    return mInner->unary(op, model, x, out, n);
  }
  /// Delegates to the wrapped backend.
  bool binary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
              kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y, std::int64_t yCount,
              kernels::IntervalSpan out, std::int64_t n) override {
    return mInner->binary(op, model, x, y, yCount, out, n);
  }
  /// Delegates to the wrapped backend.
  bool rowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
              std::int64_t cols, const kernels::SumModel& model) override {
    return mInner->rowSum(x, out, rows, cols, model);
  }
  /// Delegates to the wrapped backend.
  bool softmaxRows(const kernels::SoftmaxModel& model, bool log, kernels::ConstIntervalSpan x,
                   kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols) override {
    return mInner->softmaxRows(model, log, x, out, rows, cols);
  }
  /// Delegates to the wrapped backend.
  bool embeddingBackward(const kernels::EmbeddingBackwardModel& model, kernels::ConstIntervalSpan g,
                         const double* index, std::int64_t positions, std::int64_t dim,
                         kernels::IntervalSpan out) override {
    return mInner->embeddingBackward(model, g, index, positions, dim, out);
  }
  /// Delegates to the wrapped backend.
  bool batchNormBackwardRows(const kernels::BatchNormBackwardModel& model,
                             kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                             kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan second,
                             kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
                             kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                             std::int64_t rows, std::int64_t cols) override {
    return mInner->batchNormBackwardRows(model, dy, x, mean, second, weight, gradInput, gradWeight,
                                         gradBias, rows, cols);
  }
  /// Delegates to the wrapped backend.
  bool layerNormBackwardRows(const kernels::LayerNormBackwardModel& model,
                             kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                             kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                             kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
                             kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                             std::int64_t rows, std::int64_t n) override {
    return mInner->layerNormBackwardRows(model, dy, x, mean, rstd, weight, gradInput, gradWeight,
                                         gradBias, rows, n);
  }
  /// Delegates to the wrapped backend.
  bool softmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                           kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                           kernels::IntervalSpan out, std::int64_t rows,
                           std::int64_t cols) override {
    return mInner->softmaxBackwardRows(model, log, g, y, out, rows, cols);
  }
  /// Delegates to the wrapped backend.
  bool select(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
              std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
              kernels::ConstIntervalSpan b, std::int64_t bCount, kernels::IntervalSpan out,
              std::int64_t n) override {
    return mInner->select(model, cond, condCount, a, aCount, b, bCount, out, n);
  }
  /// Delegates to the wrapped backend.
  bool takeRows(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan table,
                std::int64_t rows, std::int64_t dim, const double* index, std::int64_t count,
                kernels::IntervalSpan out) override {
    return mInner->takeRows(model, table, rows, dim, index, count, out);
  }
  /// Delegates to the wrapped backend.
  bool nllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
               const double* target, kernels::ConstIntervalSpan weight, std::int64_t batch,
               kernels::IntervalSpan out, kernels::IntervalSpan totalWeight) override {
    return mInner->nllLoss(model, x, target, weight, batch, out, totalWeight);
  }
  /// Delegates to the wrapped backend.
  bool nllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                       const double* target, kernels::ConstIntervalSpan weight,
                       kernels::ConstIntervalSpan tw, std::int64_t batch,
                       kernels::IntervalSpan out) override {
    return mInner->nllLossBackward(model, g, target, weight, tw, batch, out);
  }
  /// Delegates to the wrapped backend.
  bool maxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* starts,
                   std::int64_t count, std::int64_t windows, std::int64_t k, Format s,
                   kernels::IntervalSpan value, kernels::IntervalSpan index) override {
    return mInner->maxPoolRows(rows, offsets, starts, count, windows, k, s, value, index);
  }
  /// Delegates to the wrapped backend.
  bool avgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* params,
                   std::int64_t count, std::int64_t windows, std::int64_t k,
                   const kernels::AvgPoolModel& model, kernels::IntervalSpan out) override {
    return mInner->avgPoolRows(rows, offsets, params, count, windows, k, model, out);
  }
  /// Delegates to the wrapped backend.
  bool avgPoolBackward(const kernels::AvgPoolModel& model,
                       const kernels::AvgPoolBackwardShape& shape, kernels::ConstIntervalSpan g,
                       const double* wins, const double* params,
                       kernels::IntervalSpan out) override {
    return mInner->avgPoolBackward(model, shape, g, wins, params, out);
  }
  /// Delegates to the wrapped backend.
  bool maxPoolBackward(const kernels::MaxPoolBackwardModel& model, kernels::ConstIntervalSpan g,
                       kernels::ConstIntervalSpan index, std::int64_t planes,
                       kernels::IntervalSpan out) override {
    return mInner->maxPoolBackward(model, g, index, planes, out);
  }
  /// Delegates to the wrapped backend.
  bool groupNormBackward(const kernels::GroupNormBackwardModel& model,
                         kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                         kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                         kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                         kernels::IntervalSpan dw, kernels::IntervalSpan db) override {
    return mInner->groupNormBackward(model, dy, x, mean, rstd, weight, dx, dw, db);
  }
  /// Delegates to the wrapped backend.
  bool gather(kernels::ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
              kernels::ConstIntervalSpan fill, std::int64_t fillCount, kernels::IntervalSpan out,
              std::int64_t n) override {
    return mInner->gather(x, xCount, offsets, fill, fillCount, out, n);
  }
  /// Delegates to the wrapped backend.
  bool intervalGemm(kernels::ConstIntervalSpan a, kernels::ConstIntervalSpan b,
                    kernels::ConstIntervalSpan bias, std::int64_t m, std::int64_t k, std::int64_t n,
                    const kernels::GemmBatch& batch, Format in, const kernels::GemmFinish& finish,
                    kernels::IntervalSpan out) override {
    return mInner->intervalGemm(a, b, bias, m, k, n, batch, in, finish, out);
  }
  /// Delegates to the wrapped backend.
  bool batchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                     kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                     kernels::ConstIntervalSpan runningMean, kernels::ConstIntervalSpan runningVar,
                     kernels::IntervalSpan out, kernels::IntervalSpan mean,
                     kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) override {
    return mInner->batchNormRows(model, x, weight, bias, runningMean, runningVar, out, mean, rstd,
                                 rows, cols);
  }
  /// Delegates to the wrapped backend.
  bool layerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                     kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                     kernels::IntervalSpan out, kernels::IntervalSpan mean,
                     kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols) override {
    return mInner->layerNormRows(model, x, weight, bias, out, mean, rstd, rows, cols);
  }

 private:
  std::unique_ptr<Backend> mInner;
  std::unique_ptr<Device> mDevice;
};

}  // namespace lossbound
