#pragma once
// The compute backend: the heavy kernels op rules delegate to. The CPU backend (Eigen, both
// cores) is the reference and the test oracle; the CUDA backend (gpu/) must agree with it.
// All matrices are row-major, binary64, contiguous.

#include "core/kernels/kernel_types.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lossbound {

class Device;  // core/device.h

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

/// Heavy kernels shared by the op rules; implementations must be thread-compatible.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Returns e.g. "CPU (Eigen, 2 threads)" or "CUDA (NVIDIA A100)".
  virtual std::string name() const = 0;

  /// C[m×n] = A[m×k] · B[k×n] in binary64 round-to-nearest (any order); with `absolute`,
  /// computes |A|·|B| instead. No rounding mode is assumed inside the library.
  virtual void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                    std::int64_t n, bool absolute = false) = 0;

  /// Runs body(begin, end) over [0, n) in parallel chunks on the process's thread pool (within
  /// this backend's thread budget); returns when all are done. A throwing body does not end the
  /// process: the first exception is rethrown here (core/parallel/thread_pool.h).
  virtual void parallelFor(std::int64_t n,
                           const std::function<void(std::int64_t, std::int64_t)>& body) = 0;

  /// Returns the number of host threads this backend may use at once (its thread budget).
  virtual int threads() const { return 1; }

  /// Returns the device on which the interval method keeps a replay's tensors between ops
  /// (core/program/resident_replay.h), or nullptr: op by op through this backend's hooks.
  virtual Device* residentDevice() { return nullptr; }

  // ---- Optional interval kernels ------------------------------------------------------------
  // A backend may take over the per-element and per-row work of some op rules (the CUDA backend
  // does). Each hook returns false when the backend does not offer it, and the op rule then
  // computes on the host itself; when it returns true, `out` holds what the bodies of
  // core/kernels/kernel_bodies.h give (bit for bit for elementwise ops; reductions may sum in
  // another order, which directed rounding makes sound). Host memory in and out, contiguous.
  // The CPU backend offers none: its op rules are the reference the hooks are tested against.

  /// Returns true when the backend offers any interval kernel hook (op rules skip the
  /// preparation of an offer otherwise).
  virtual bool offersIntervalKernels() const { return false; }

  /// out[i] = kernels::unaryBody(op, x[i], model) for i < n.
  virtual bool unary(kernels::UnaryOp /*op*/, const kernels::ElementwiseModel& /*model*/,
                     kernels::ConstIntervalSpan /*x*/, kernels::IntervalSpan /*out*/,
                     std::int64_t /*n*/) {
    return false;
  }
  /// out[i] = kernels::binaryBody(op, x[i], y[i mod yCount], model) for i < n; yCount divides n
  /// (y broadcast over leading dims repeats every yCount elements).
  virtual bool binary(kernels::BinaryOp /*op*/, const kernels::ElementwiseModel& /*model*/,
                      kernels::ConstIntervalSpan /*x*/, kernels::ConstIntervalSpan /*y*/,
                      std::int64_t /*yCount*/, kernels::IntervalSpan /*out*/, std::int64_t /*n*/) {
    return false;
  }
  /// out[i] = kernels::selectBody(cond[i mod condCount], a[i mod aCount], b[i mod bCount],
  /// model.storage) for i < n (where, masked_fill: operands repeat along leading dims).
  virtual bool select(const kernels::ElementwiseModel& /*model*/,
                      kernels::ConstIntervalSpan /*cond*/, std::int64_t /*condCount*/,
                      kernels::ConstIntervalSpan /*a*/, std::int64_t /*aCount*/,
                      kernels::ConstIntervalSpan /*b*/, std::int64_t /*bCount*/,
                      kernels::IntervalSpan /*out*/, std::int64_t /*n*/) {
    return false;
  }

  /// out[p·dim + j] = table[k·dim + j] rounded outward to model.storage, k = the integer index[p]
  /// (a point operand), for p < count (embedding); declined (false) when an index is not an
  /// integer in [0, rows): the host rule then reports it.
  virtual bool takeRows(const kernels::ElementwiseModel& /*model*/,
                        kernels::ConstIntervalSpan /*table*/, std::int64_t /*rows*/,
                        std::int64_t /*dim*/, const double* /*index*/, std::int64_t /*count*/,
                        kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// kernels::nllLossForward(model, x, target, weight, batch, out, totalWeight): nll_loss forward,
  /// target values as lower endpoints (a point operand); declined (false) when a target is out of
  /// range: the host rule then reports it.
  virtual bool nllLoss(const kernels::NllLossModel& /*model*/, kernels::ConstIntervalSpan /*x*/,
                       const double* /*target*/,
                       kernels::ConstIntervalSpan /*weight: classes, lo == nullptr for None*/,
                       std::int64_t /*batch*/, kernels::IntervalSpan /*out*/,
                       kernels::IntervalSpan /*totalWeight*/) {
    return false;
  }

  /// nll_loss backward: out (batch × model.classes × model.inner) = 0 except at each kept target,
  /// where it is kernels::nllBackwardAt with grad g (batch·inner elements for reduction none,
  /// else one) and total_weight tw (one); declined (false) for a target out of range.
  virtual bool nllLossBackward(const kernels::NllLossModel& /*model*/,
                               kernels::ConstIntervalSpan /*g*/, const double* /*target*/,
                               kernels::ConstIntervalSpan /*weight: lo == nullptr for None*/,
                               kernels::ConstIntervalSpan /*tw*/, std::int64_t /*batch*/,
                               kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// Max pooling: for each r < count, kernels::maxPoolWindow over row r of rows[count×k] with the
  /// window w = r mod windows (its plane offsets offsets[w·k..], -1 past its end, and starts[w];
  /// both shape-only), storage s → value[r], index[r].
  virtual bool maxPoolRows(kernels::ConstIntervalSpan /*rows*/, const double* /*offsets*/,
                           const double* /*starts*/, std::int64_t /*count*/,
                           std::int64_t /*windows*/, std::int64_t /*k*/, Format /*s*/,
                           kernels::IntervalSpan /*value*/, kernels::IntervalSpan /*index*/) {
    return false;
  }

  /// Average pooling: for each r < count, kernels::avgPoolWindow over row r of rows[count×k] with
  /// the window w = r mod windows (its plane offsets offsets[w·k..], -1 past its end, and its
  /// divisor, kH and kW params[3w..]; both shape-only) → out[r].
  virtual bool avgPoolRows(kernels::ConstIntervalSpan /*rows*/, const double* /*offsets*/,
                           const double* /*params*/, std::int64_t /*count*/,
                           std::int64_t /*windows*/, std::int64_t /*k*/,
                           const kernels::AvgPoolModel& /*model*/, kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// avg_pool2d_backward and _adaptive_avg_pool2d_backward: out[i] =
  /// kernels::avgPoolBackwardInput(g, i, wins, params, shape, model) for every input i <
  /// planes × inPlane (wins[inPlane × k]: each position's windows, -1 past the last; params[3 ×
  /// windows]: each window's divisor, kH and kW; both shape-only).
  virtual bool avgPoolBackward(const kernels::AvgPoolModel& /*model*/,
                               const kernels::AvgPoolBackwardShape& /*shape*/,
                               kernels::ConstIntervalSpan /*g*/, const double* /*wins*/,
                               const double* /*params*/, kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// max_pool2d_with_indices_backward: kernels::maxPoolBackwardPlane for every plane of
  /// out[planes × model.inPlane] from g and the index enclosures [planes × model.outPlane].
  /// Declines (or, on a device, flags) an index that is NaN or a point outside the plane.
  virtual bool maxPoolBackward(const kernels::MaxPoolBackwardModel& /*model*/,
                               kernels::ConstIntervalSpan /*g*/,
                               kernels::ConstIntervalSpan /*index*/, std::int64_t /*planes*/,
                               kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// native_group_norm_backward: the passes of core/kernels/group_norm_backward.h over dy and x
  /// (N·C·HxW), mean and rstd (N·G), weight (C, lo == nullptr for None) → dx, dw and db (C).
  virtual bool groupNormBackward(
      const kernels::GroupNormBackwardModel& /*model*/, kernels::ConstIntervalSpan /*dy*/,
      kernels::ConstIntervalSpan /*x*/, kernels::ConstIntervalSpan /*mean*/,
      kernels::ConstIntervalSpan /*rstd*/, kernels::ConstIntervalSpan /*weight*/,
      kernels::IntervalSpan /*dx*/, kernels::IntervalSpan /*dw*/, kernels::IntervalSpan /*db*/) {
    return false;
  }

  /// Encloses every row sum of x[rows×cols] in any order: accumulate, then kernels::sumFinish.
  virtual bool rowSum(kernels::ConstIntervalSpan /*x*/, kernels::IntervalSpan /*out*/,
                      std::int64_t /*rows*/, std::int64_t /*cols*/,
                      const kernels::SumModel& /*model*/) {
    return false;
  }
  /// out row r = kernels::softmaxRow(x row r, model, log) for the rows×cols row-major x (softmax
  /// or log-softmax over the last dim).
  virtual bool softmaxRows(const kernels::SoftmaxModel& /*model*/, bool /*log*/,
                           kernels::ConstIntervalSpan /*x*/, kernels::IntervalSpan /*out*/,
                           std::int64_t /*rows*/, std::int64_t /*cols*/) {
    return false;
  }
  /// out row r = kernels::softmaxBackwardRow(g row r, y row r, model, log) for rows×cols
  /// row-major g and y (_softmax_backward_data, or _log_softmax_backward_data, over the last dim).
  virtual bool softmaxBackwardRows(const kernels::SoftmaxModel& /*model*/, bool /*log*/,
                                   kernels::ConstIntervalSpan /*g*/,
                                   kernels::ConstIntervalSpan /*y*/, kernels::IntervalSpan /*out*/,
                                   std::int64_t /*rows*/, std::int64_t /*cols*/) {
    return false;
  }

  /// out[i] = x[offsets[i]] for offsets[i] >= 0, else fill[i mod fillCount], for i < n: the
  /// gather of a view op (values are moved, never rounded, so any device gives the host's bits);
  /// fillCount is 1 (one fill value) or n (the elements other parts of a cat put there). offsets
  /// are exact integers below 2^53 stored as doubles, computed from shapes and IR arguments only
  /// (never from tensor values); x holds xCount elements. For a point x, x.hi == x.lo and the
  /// caller may pass out.hi == out.lo.
  virtual bool gather(kernels::ConstIntervalSpan /*x*/, std::int64_t /*xCount*/,
                      const double* /*offsets*/, kernels::ConstIntervalSpan /*fill*/,
                      std::int64_t /*fillCount*/, kernels::IntervalSpan /*out*/,
                      std::int64_t /*n*/) {
    return false;
  }

  /// out = what ops::intervalGemm (core/ops/gemm.h) writes, product by product of `batch`, for
  /// the m×k operands in a and the k×n operands in b (a point operand has hi == lo: the rule's
  /// point tensor), bias batch.count·m×n or lo == nullptr, inputs rounded to `in`, finishing
  /// constants `finish` — bit for bit with the same RN GEMMs: the split and finishing bodies of
  /// core/kernels/interval_gemm.h around three gemm calls per product (each product decides on
  /// its own whether its operands are points, as the CPU rule does).
  virtual bool intervalGemm(kernels::ConstIntervalSpan /*a*/, kernels::ConstIntervalSpan /*b*/,
                            kernels::ConstIntervalSpan /*bias*/, std::int64_t /*m*/,
                            std::int64_t /*k*/, std::int64_t /*n*/,
                            const kernels::GemmBatch& /*batch*/, Format /*in*/,
                            const kernels::GemmFinish& /*finish*/, kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// For each row r of x[rows×cols]: kernels::layerNormRow → out row r, mean[r], rstd[r].
  virtual bool layerNormRows(const kernels::LayerNormModel& /*model*/,
                             kernels::ConstIntervalSpan /*x*/,
                             kernels::ConstIntervalSpan /*weight: lo == nullptr for None*/,
                             kernels::ConstIntervalSpan /*bias: lo == nullptr for None*/,
                             kernels::IntervalSpan /*out*/, kernels::IntervalSpan /*mean*/,
                             kernels::IntervalSpan /*rstd*/, std::int64_t /*rows*/,
                             std::int64_t /*cols*/) {
    return false;
  }

  /// embedding_dense_backward: column j of out[numWeights × dim] =
  /// kernels::embeddingBackwardColumn(g[positions × dim], index, j) for every j; the indices
  /// are exact integers stored as doubles (the lower endpoints of the index tensor). Declines
  /// (or, on a device, flags) an index that is not a row.
  virtual bool embeddingBackward(const kernels::EmbeddingBackwardModel& /*model*/,
                                 kernels::ConstIntervalSpan /*g*/, const double* /*index*/,
                                 std::int64_t /*positions*/, std::int64_t /*dim*/,
                                 kernels::IntervalSpan /*out*/) {
    return false;
  }

  /// native_layer_norm_backward for rows×n row-major dy and x with each row's saved mean and
  /// rstd (rows elements) and weight (n, lo == nullptr for None): gradInput row r =
  /// kernels::layerNormBackwardRow, gradWeight[j] and gradBias[j] =
  /// kernels::layerNormBackwardColumn (sums over the rows in row order).
  virtual bool layerNormBackwardRows(
      const kernels::LayerNormBackwardModel& /*model*/, kernels::ConstIntervalSpan /*dy*/,
      kernels::ConstIntervalSpan /*x*/, kernels::ConstIntervalSpan /*mean*/,
      kernels::ConstIntervalSpan /*rstd*/, kernels::ConstIntervalSpan /*weight*/,
      kernels::IntervalSpan /*gradInput*/, kernels::IntervalSpan /*gradWeight*/,
      kernels::IntervalSpan /*gradBias*/, std::int64_t /*rows*/, std::int64_t /*n*/) {
    return false;
  }

  /// For each row r of dy and x [rows×cols] (one channel of a batch norm, gathered):
  /// kernels::batchNormBackwardRow with mean[r], second[r] (save_invstd, or the running variance
  /// in eval) and weight[r] (lo == nullptr for None) → gradInput row r, gradWeight[r],
  /// gradBias[r].
  virtual bool batchNormBackwardRows(
      const kernels::BatchNormBackwardModel& /*model*/, kernels::ConstIntervalSpan /*dy*/,
      kernels::ConstIntervalSpan /*x*/, kernels::ConstIntervalSpan /*mean*/,
      kernels::ConstIntervalSpan /*second*/, kernels::ConstIntervalSpan /*weight*/,
      kernels::IntervalSpan /*gradInput*/, kernels::IntervalSpan /*gradWeight*/,
      kernels::IntervalSpan /*gradBias*/, std::int64_t /*rows*/, std::int64_t /*cols*/) {
    return false;
  }

  /// For each row r of x[rows×cols] (one channel of a batch norm, gathered):
  /// kernels::batchNormRow with weight[r], bias[r], runningMean[r], runningVar[r] (read in eval
  /// only) → out row r, mean[r], rstd[r]. With model.groups = G > 0 the rows are a group norm's
  /// (n, g) of D·HxW elements and weight/bias have C = G·D values: element k takes channel
  /// g·D + k / HxW (kernels::batchNormRowAt); the running statistics are not read.
  virtual bool batchNormRows(const kernels::BatchNormModel& /*model*/,
                             kernels::ConstIntervalSpan /*x*/,
                             kernels::ConstIntervalSpan /*weight: rows, lo == nullptr for None*/,
                             kernels::ConstIntervalSpan /*bias: rows, lo == nullptr for None*/,
                             kernels::ConstIntervalSpan /*runningMean: rows, or lo == nullptr*/,
                             kernels::ConstIntervalSpan /*runningVar: rows, or lo == nullptr*/,
                             kernels::IntervalSpan /*out*/, kernels::IntervalSpan /*mean*/,
                             kernels::IntervalSpan /*rstd*/, std::int64_t /*rows*/,
                             std::int64_t /*cols*/) {
    return false;
  }
};

/// Returns the CPU backend: Eigen GEMMs and parallel loops on up to `threads` threads of the
/// process's thread pool (0 = the whole pool).
std::unique_ptr<Backend> createCpuBackend(int threads = 0);

}  // namespace lossbound
