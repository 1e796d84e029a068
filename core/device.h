#pragma once
// Device: the small set of primitives a device-resident replay is written against (allocate,
// free, copy in, copy out, launch a kernel body, gemm, synchronise), so that the orchestration
// (core/program/resident_replay.h) is written once for every device. HostDevice
// (core/host_device.h) implements them with separate host buffers and the kernel bodies run on
// the host; the CUDA device (gpu/cuda_resident_device.h) with the CUDA runtime, cuBLAS and the
// same bodies on the GPU.
//
// Every pointer a primitive takes as "device memory" must lie inside a live allocation of this
// device: the base class keeps the allocation table and checks every call against it (a host
// pointer or a freed buffer handed to a launch is an orchestration bug and throws
// std::logic_error), and it counts every transfer, byte, allocation, free, launch and the peak of
// the bytes in use. The derived classes implement only the raw operations (the do* methods).
// Launches are ordered (one stream); copyOut returns when the data are in host memory.

#include "core/kernels/kernel_types.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace lossbound {

namespace kernels {
struct SoftmaxModel;            // core/kernels/softmax_row.h
struct LayerNormModel;          // core/kernels/layer_norm_row.h
struct LayerNormBackwardModel;  // core/kernels/layer_norm_backward.h
struct EmbeddingBackwardModel;  // core/kernels/embedding_backward.h
struct MaxPoolBackwardModel;    // core/kernels/max_pool.h
struct AvgPoolModel;            // core/kernels/avg_pool.h
struct AvgPoolBackwardShape;    // core/kernels/avg_pool.h
struct GroupNormBackwardModel;  // core/kernels/group_norm_backward.h
struct BatchNormBackwardModel;  // core/kernels/batch_norm_row.h
struct BatchNormModel;          // core/kernels/batch_norm_row.h
struct GemmFinish;              // core/kernels/interval_gemm.h
struct NllLossModel;            // core/kernels/nll_loss.h
}  // namespace kernels

/// Thrown by Device::allocate when the device cannot hold the request; the message says how much
/// was asked for and how much was in use.
class DeviceOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a device has done since it was created (or since resetCounters()).
struct DeviceCounters {
  std::int64_t uploads = 0;        ///< copyIn calls (one per array: lo and hi count separately)
  std::int64_t uploadBytes = 0;    ///< bytes copied host → device
  std::int64_t downloads = 0;      ///< copyOut calls
  std::int64_t downloadBytes = 0;  ///< bytes copied device → host
  std::int64_t allocations = 0;    ///< successful allocate calls
  std::int64_t frees = 0;          ///< free calls
  std::int64_t bytesInUse = 0;     ///< bytes allocated and not freed (not reset)
  std::int64_t peakBytes = 0;      ///< largest bytesInUse seen
  std::int64_t launches = 0;       ///< kernel body launches
  std::int64_t gemms = 0;          ///< gemm calls
  std::int64_t synchronizations = 0;
  std::int64_t failedAllocations = 0;  ///< allocate calls that threw DeviceOutOfMemory

  /// Returns the transfers in both directions.
  std::int64_t transfers() const { return uploads + downloads; }
  /// Returns the bytes moved in both directions.
  std::int64_t transferBytes() const { return uploadBytes + downloadBytes; }
};

/// The device primitives of a resident replay (see the file comment). Not thread-safe: one
/// replay uses a device at a time.
class Device {
 public:
  virtual ~Device() = default;

  /// Returns e.g. "host device (separate host buffers)" or "CUDA device (NVIDIA A100)".
  virtual std::string name() const = 0;

  /// Returns `count` doubles of device memory (uninitialised; count 0 gives a valid 1-element
  /// block); throws DeviceOutOfMemory when the device cannot hold them.
  double* allocate(std::int64_t count);
  /// Frees a block returned by allocate; throws std::logic_error for anything else.
  void free(double* block);
  /// Copies count doubles from host memory `src` to device memory `dst`.
  void copyIn(double* dst, const double* src, std::int64_t count);
  /// Copies count doubles from device memory `src` to host memory `dst`; returns when done.
  void copyOut(double* dst, const double* src, std::int64_t count);

  /// C[m×n] = A[m×k]·B[k×n] (|A|·|B| with `absolute`) in binary64 round-to-nearest, row-major
  /// device matrices (the contract of Backend::gemm), for each product of `batch` (C of product
  /// i at i·m·n; cublasDgemmStridedBatched on the GPU).
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute, const kernels::GemmBatch& batch = {});

  // ---- Kernel body launches: the contracts of the Backend hooks (core/backend.h), on device
  // memory. A NaN endpoint in a result (the bodies never give one; a device libm might) is stored
  // as the entire line, as core/ops/kernel_offload.cpp does on the host.

  /// out[i] = kernels::unaryBody(op, x[i], model) for i < n.
  void unary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
             kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n);
  /// out[i] = kernels::binaryBody(op, x[i], y[i mod yCount], model) for i < n.
  void binary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
              kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y, std::int64_t yCount,
              kernels::IntervalSpan out, std::int64_t n);
  /// out[i] = kernels::selectBody(cond[i mod condCount], a[i mod aCount], b[i mod bCount],
  /// model.storage) for i < n (Backend::select).
  void select(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
              std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
              kernels::ConstIntervalSpan b, std::int64_t bCount, kernels::IntervalSpan out,
              std::int64_t n);
  /// out[p·dim + j] = table[k·dim + j] rounded outward to model.storage for k = index[p], p <
  /// count (Backend::takeRows); an index that is not a row (kernels::tableRow) gives the entire
  /// line and sets flag[0] = kernels::kBadIndexFlag.
  void takeRows(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan table,
                std::int64_t rows, std::int64_t dim, const double* index, std::int64_t count,
                kernels::IntervalSpan out, double* flag);
  /// kernels::nllLossForward (Backend::nllLoss; weight lo == nullptr for None) in one pass, in
  /// the host's order; a target out of range sets flag[0] = kernels::kBadIndexFlag.
  void nllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
               const double* target, kernels::ConstIntervalSpan weight, std::int64_t batch,
               kernels::IntervalSpan out, kernels::IntervalSpan totalWeight, double* flag);
  /// Backend::nllLossBackward (weight lo == nullptr for None); a target out of range sets
  /// flag[0] = kernels::kBadIndexFlag.
  void nllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                       const double* target, kernels::ConstIntervalSpan weight,
                       kernels::ConstIntervalSpan tw, std::int64_t batch, kernels::IntervalSpan out,
                       double* flag);
  /// Backend::maxPoolRows (offsets and starts in device memory).
  void maxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* starts,
                   std::int64_t count, std::int64_t windows, std::int64_t k, Format s,
                   kernels::IntervalSpan value, kernels::IntervalSpan index);
  /// Backend::avgPoolRows (offsets and params in device memory).
  void avgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets, const double* params,
                   std::int64_t count, std::int64_t windows, std::int64_t k,
                   const kernels::AvgPoolModel& model, kernels::IntervalSpan out);
  /// Backend::avgPoolBackward (wins and params in device memory), one thread per input.
  void avgPoolBackward(const kernels::AvgPoolModel& model,
                       const kernels::AvgPoolBackwardShape& shape, kernels::ConstIntervalSpan g,
                       const double* wins, const double* params, kernels::IntervalSpan out);
  /// Backend::maxPoolBackward, reading the indices on the device; an index that is NaN or a
  /// point outside the plane sets flag[0] = kernels::kBadIndexFlag. Allocates a scratch of
  /// planes × kernels::maxPoolBackwardScratch(inPlane) doubles for the launch (one plane per
  /// thread), so it may throw DeviceOutOfMemory.
  void maxPoolBackward(const kernels::MaxPoolBackwardModel& model, kernels::ConstIntervalSpan g,
                       kernels::ConstIntervalSpan index, std::int64_t planes,
                       kernels::IntervalSpan out, double* flag);
  /// Backend::groupNormBackward (weight lo == nullptr for None). Allocates a scratch of
  /// kernels::groupNormBackwardScratch(model) doubles for ds and db between the passes, so it
  /// may throw DeviceOutOfMemory.
  void groupNormBackward(const kernels::GroupNormBackwardModel& model,
                         kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                         kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                         kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                         kernels::IntervalSpan dw, kernels::IntervalSpan db);
  /// Encloses every row sum of x[rows×cols] in any order (Backend::rowSum).
  void rowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
              std::int64_t cols, const kernels::SumModel& model);
  /// out row r = kernels::softmaxRow(x row r, model, log) (Backend::softmaxRows); allocates a
  /// scratch of rows × kernels::softmaxRowScratch(cols) doubles for the launch (one thread per
  /// row needs one each), so it may throw DeviceOutOfMemory.
  void softmaxRows(const kernels::SoftmaxModel& model, bool log, kernels::ConstIntervalSpan x,
                   kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols);
  /// kernels::embeddingBackwardColumn for every column (Backend::embeddingBackward), reading the
  /// indices on the device; an index that is not a row sets flag[0] = kernels::kBadIndexFlag.
  /// Allocates a scratch of 2·numWeights·dim doubles for the launch (one column per thread), so
  /// it may throw DeviceOutOfMemory.
  void embeddingBackward(const kernels::EmbeddingBackwardModel& model, kernels::ConstIntervalSpan g,
                         const double* index, std::int64_t positions, std::int64_t dim,
                         kernels::IntervalSpan out, double* flag);
  /// kernels::batchNormBackwardRow per gathered channel row (Backend::batchNormBackwardRows;
  /// weight lo == nullptr for None).
  void batchNormBackwardRows(const kernels::BatchNormBackwardModel& model,
                             kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                             kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan second,
                             kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
                             kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                             std::int64_t rows, std::int64_t cols);
  /// The rows of grad_input and the columns of grad_weight and grad_bias of a layer-norm
  /// backward (Backend::layerNormBackwardRows; weight lo == nullptr for None).
  void layerNormBackwardRows(const kernels::LayerNormBackwardModel& model,
                             kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                             kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                             kernels::ConstIntervalSpan weight, kernels::IntervalSpan gradInput,
                             kernels::IntervalSpan gradWeight, kernels::IntervalSpan gradBias,
                             std::int64_t rows, std::int64_t n);
  /// out row r = kernels::softmaxBackwardRow(g row r, y row r, model, log)
  /// (Backend::softmaxBackwardRows).
  void softmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                           kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                           kernels::IntervalSpan out, std::int64_t rows, std::int64_t cols);
  /// kernels::layerNormRow per row (Backend::layerNormRows); weight/bias lo == nullptr for None.
  void layerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                     kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                     kernels::IntervalSpan out, kernels::IntervalSpan mean,
                     kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols);
  /// kernels::batchNormRowAt per row: batch norm with weight[r], bias[r], or group norm
  /// (model.groups > 0) with each element's channel (Backend::batchNormRows; lo == nullptr for
  /// None).
  void batchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                     kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                     kernels::ConstIntervalSpan runningMean, kernels::ConstIntervalSpan runningVar,
                     kernels::IntervalSpan out, kernels::IntervalSpan mean,
                     kernels::IntervalSpan rstd, std::int64_t rows, std::int64_t cols);
  /// out[i] = x[offsets[i]] for offsets[i] >= 0, else fill[i mod fillCount], for i < n
  /// (Backend::gather; x has xCount elements, offsets are exact integers stored as doubles, fill
  /// is 1 or n elements in device memory; for a point gather x.hi == x.lo and out.hi == out.lo).
  void gather(kernels::ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
              kernels::ConstIntervalSpan fill, std::int64_t fillCount, kernels::IntervalSpan out,
              std::int64_t n);
  /// Splits `slices` consecutive interval-GEMM operands of `count` elements each
  /// (Backend::intervalGemm): flags[3s..3s+3) = {not direct, not finite, some radius} of slice s;
  /// a point slice (x.hi == x.lo) whose values are all finite and representable in `in` is used
  /// as it is (mid = x, mag = |x|), else per element kernels::gemmSplit (mid, mag = |mid| +
  /// radius rounded up).
  void gemmSplit(kernels::ConstIntervalSpan x, std::int64_t count, Format in, double* mid,
                 double* mag, double* flags, std::int64_t slices = 1);
  /// out[u] = kernels::gemmFinishElement(g1[u], g2[u], g4[u], no radius in either operand, ...)
  /// for u < count·slices, or the entire line when an operand was not finite, reading the flags
  /// of gemmSplit for slice s = u / count at flagsA + s·flagsAStride and flagsB + s·flagsBStride
  /// (3 for an operand split per slice, 0 for one shared operand); bias: count·slices elements or
  /// lo == nullptr.
  void gemmFinish(const double* g1, const double* g2, const double* g4, const double* flagsA,
                  const double* flagsB, kernels::ConstIntervalSpan bias,
                  const kernels::GemmFinish& finish, kernels::IntervalSpan out, std::int64_t count,
                  std::int64_t slices = 1, std::int64_t flagsAStride = 0,
                  std::int64_t flagsBStride = 0);
  /// Sets flag[0] = 1 when an endpoint of x[0..n) is not finite (leaves it alone otherwise).
  void flagNonFinite(kernels::ConstIntervalSpan x, std::int64_t n, double* flag);
  /// Waits until every launch and copy issued so far has finished.
  void synchronize();

  /// Returns the counters.
  const DeviceCounters& counters() const { return mCounters; }
  /// Zeroes the counters except bytesInUse; peakBytes restarts from bytesInUse.
  void resetCounters();
  /// Returns the number of live allocations.
  std::size_t liveAllocations() const { return mLive.size(); }

 protected:
  /// Returns count doubles of raw device memory, or nullptr when the device is out of memory.
  virtual double* doAllocate(std::int64_t count) = 0;
  /// Frees raw device memory returned by doAllocate.
  virtual void doFree(double* block) = 0;
  /// Raw copies and launches (arguments already checked by the base class).
  virtual void doCopyIn(double* dst, const double* src, std::int64_t count) = 0;
  /// See copyOut.
  virtual void doCopyOut(double* dst, const double* src, std::int64_t count) = 0;
  /// See gemm.
  virtual void doGemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                      std::int64_t n, bool absolute, const kernels::GemmBatch& batch) = 0;
  /// See unary.
  virtual void doUnary(kernels::UnaryOp op, const kernels::ElementwiseModel& model,
                       kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t n) = 0;
  /// See binary.
  virtual void doBinary(kernels::BinaryOp op, const kernels::ElementwiseModel& model,
                        kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan y,
                        std::int64_t yCount, kernels::IntervalSpan out, std::int64_t n) = 0;
  /// See select.
  virtual void doSelect(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan cond,
                        std::int64_t condCount, kernels::ConstIntervalSpan a, std::int64_t aCount,
                        kernels::ConstIntervalSpan b, std::int64_t bCount,
                        kernels::IntervalSpan out, std::int64_t n) = 0;
  /// See takeRows.
  virtual void doTakeRows(const kernels::ElementwiseModel& model, kernels::ConstIntervalSpan table,
                          std::int64_t rows, std::int64_t dim, const double* index,
                          std::int64_t count, kernels::IntervalSpan out, double* flag) = 0;
  /// See nllLoss.
  virtual void doNllLoss(const kernels::NllLossModel& model, kernels::ConstIntervalSpan x,
                         const double* target, kernels::ConstIntervalSpan weight,
                         std::int64_t batch, kernels::IntervalSpan out,
                         kernels::IntervalSpan totalWeight, double* flag) = 0;
  /// See nllLossBackward.
  virtual void doNllLossBackward(const kernels::NllLossModel& model, kernels::ConstIntervalSpan g,
                                 const double* target, kernels::ConstIntervalSpan weight,
                                 kernels::ConstIntervalSpan tw, std::int64_t batch,
                                 kernels::IntervalSpan out, double* flag) = 0;
  /// See maxPoolRows.
  virtual void doMaxPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                             const double* starts, std::int64_t count, std::int64_t windows,
                             std::int64_t k, Format s, kernels::IntervalSpan value,
                             kernels::IntervalSpan index) = 0;
  /// See avgPoolBackward.
  virtual void doAvgPoolBackward(const kernels::AvgPoolModel& model,
                                 const kernels::AvgPoolBackwardShape& shape,
                                 kernels::ConstIntervalSpan g, const double* wins,
                                 const double* params, kernels::IntervalSpan out) = 0;
  /// See avgPoolRows.
  virtual void doAvgPoolRows(kernels::ConstIntervalSpan rows, const double* offsets,
                             const double* params, std::int64_t count, std::int64_t windows,
                             std::int64_t k, const kernels::AvgPoolModel& model,
                             kernels::IntervalSpan out) = 0;
  /// See maxPoolBackward. `scratch` is device memory of planes ×
  /// kernels::maxPoolBackwardScratch(inPlane) doubles, allocated (and counted) by the base class.
  virtual void doMaxPoolBackward(const kernels::MaxPoolBackwardModel& model,
                                 kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan index,
                                 std::int64_t planes, kernels::IntervalSpan out, double* flag,
                                 double* scratch) = 0;
  /// See groupNormBackward. `scratch` is device memory of
  /// kernels::groupNormBackwardScratch(model) doubles, allocated (and counted) by the base class.
  virtual void doGroupNormBackward(const kernels::GroupNormBackwardModel& model,
                                   kernels::ConstIntervalSpan dy, kernels::ConstIntervalSpan x,
                                   kernels::ConstIntervalSpan mean, kernels::ConstIntervalSpan rstd,
                                   kernels::ConstIntervalSpan weight, kernels::IntervalSpan dx,
                                   kernels::IntervalSpan dw, kernels::IntervalSpan db,
                                   double* scratch) = 0;
  /// See rowSum.
  virtual void doRowSum(kernels::ConstIntervalSpan x, kernels::IntervalSpan out, std::int64_t rows,
                        std::int64_t cols, const kernels::SumModel& model) = 0;
  /// See softmaxRows.
  /// `scratch` is device memory of rows × kernels::softmaxRowScratch(cols) doubles, allocated
  /// (and counted) by the base class.
  virtual void doSoftmaxRows(const kernels::SoftmaxModel& model, bool log,
                             kernels::ConstIntervalSpan x, kernels::IntervalSpan out,
                             std::int64_t rows, std::int64_t cols, double* scratch) = 0;
  /// See embeddingBackward. `scratch` is device memory of 2·numWeights·dim doubles, allocated
  /// (and counted) by the base class.
  virtual void doEmbeddingBackward(const kernels::EmbeddingBackwardModel& model,
                                   kernels::ConstIntervalSpan g, const double* index,
                                   std::int64_t positions, std::int64_t dim,
                                   kernels::IntervalSpan out, double* flag, double* scratch) = 0;
  /// See batchNormBackwardRows.
  virtual void doBatchNormBackwardRows(
      const kernels::BatchNormBackwardModel& model, kernels::ConstIntervalSpan dy,
      kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan mean,
      kernels::ConstIntervalSpan second, kernels::ConstIntervalSpan weight,
      kernels::IntervalSpan gradInput, kernels::IntervalSpan gradWeight,
      kernels::IntervalSpan gradBias, std::int64_t rows, std::int64_t cols) = 0;
  /// See layerNormBackwardRows.
  virtual void doLayerNormBackwardRows(
      const kernels::LayerNormBackwardModel& model, kernels::ConstIntervalSpan dy,
      kernels::ConstIntervalSpan x, kernels::ConstIntervalSpan mean,
      kernels::ConstIntervalSpan rstd, kernels::ConstIntervalSpan weight,
      kernels::IntervalSpan gradInput, kernels::IntervalSpan gradWeight,
      kernels::IntervalSpan gradBias, std::int64_t rows, std::int64_t n) = 0;
  /// See softmaxBackwardRows.
  virtual void doSoftmaxBackwardRows(const kernels::SoftmaxModel& model, bool log,
                                     kernels::ConstIntervalSpan g, kernels::ConstIntervalSpan y,
                                     kernels::IntervalSpan out, std::int64_t rows,
                                     std::int64_t cols) = 0;
  /// See layerNormRows.
  virtual void doLayerNormRows(const kernels::LayerNormModel& model, kernels::ConstIntervalSpan x,
                               kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                               kernels::IntervalSpan out, kernels::IntervalSpan mean,
                               kernels::IntervalSpan rstd, std::int64_t rows,
                               std::int64_t cols) = 0;
  /// See batchNormRows.
  virtual void doBatchNormRows(const kernels::BatchNormModel& model, kernels::ConstIntervalSpan x,
                               kernels::ConstIntervalSpan weight, kernels::ConstIntervalSpan bias,
                               kernels::ConstIntervalSpan runningMean,
                               kernels::ConstIntervalSpan runningVar, kernels::IntervalSpan out,
                               kernels::IntervalSpan mean, kernels::IntervalSpan rstd,
                               std::int64_t rows, std::int64_t cols) = 0;
  /// See gather.
  virtual void doGather(kernels::ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
                        kernels::ConstIntervalSpan fill, std::int64_t fillCount,
                        kernels::IntervalSpan out, std::int64_t n) = 0;
  /// See gemmSplit.
  virtual void doGemmSplit(kernels::ConstIntervalSpan x, std::int64_t count, Format in, double* mid,
                           double* mag, double* flags, std::int64_t slices) = 0;
  /// See gemmFinish.
  virtual void doGemmFinish(const double* g1, const double* g2, const double* g4,
                            const double* flagsA, const double* flagsB,
                            kernels::ConstIntervalSpan bias, const kernels::GemmFinish& finish,
                            kernels::IntervalSpan out, std::int64_t count, std::int64_t slices,
                            std::int64_t flagsAStride, std::int64_t flagsBStride) = 0;
  /// See flagNonFinite.
  virtual void doFlagNonFinite(kernels::ConstIntervalSpan x, std::int64_t n, double* flag) = 0;
  /// See synchronize.
  virtual void doSynchronize() = 0;

 private:
  /// Throws std::logic_error unless [p, p + count) lies in one live allocation.
  void check(const double* p, std::int64_t count, const char* what) const;
  void check(kernels::ConstIntervalSpan x, std::int64_t count, const char* what) const;
  void check(kernels::IntervalSpan x, std::int64_t count, const char* what) const;

  std::map<const double*, std::int64_t> mLive;  // block → doubles
  DeviceCounters mCounters;
};

}  // namespace lossbound
