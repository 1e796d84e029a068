#pragma once
// CudaBackend: the Backend on one CUDA device — cuBLAS GEMMs in round-to-nearest, interval
// kernels whose bodies are the shared rules of core/kernels/kernel_bodies.h, host-side parallelFor.
// Plain C++ (no CUDA types; the CUDA state hides behind a pointer to an incomplete Impl), so any
// target may include it. It exists only in CUDA builds; callers that must also build without CUDA
// use createCudaBackend() from gpu/cuda_device.h.
//
// Every method takes and returns host memory (row-major, binary64, interval operands as separate
// lo/hi arrays like Tensor), runs on the backend's single stream and returns when the results are
// in host memory. Methods may be called from several threads; calls are serialised internally.
// Errors (allocation, launch, cuBLAS, sizes beyond cuBLAS's int range) throw std::runtime_error
// or std::invalid_argument with a message naming the failed call.

#include "core/backend.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/softmax_row.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lossbound::gpu {

using kernels::BinaryOp;
using kernels::ConstIntervalSpan;
using kernels::ElementwiseModel;
using kernels::IntervalSpan;
using kernels::SoftmaxModel;
using kernels::SumModel;
using kernels::UnaryOp;

/// How the candidate computes a matrix product (the CPU rule's GemmModel): input rounding
/// (tf32/bf16/...), accumulation format and its unit roundoff (2u when truncating), storage.
struct MatmulModel {
  Format input = Format::Fp64;
  Format accumulation = Format::Fp64;
  double accumulationRoundoff = 0x1p-53;
  Format storage = Format::Fp64;
};

/// The Backend on one CUDA device (see the file comment).
class CudaBackend final : public Backend {
 public:
  /// Creates the backend on `device`: stream, cuBLAS handle, and a probe kernel launch that fails
  /// when the binary has no code for the device; throws std::runtime_error naming the call.
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;

  /// Returns "CUDA (<device name>)".
  std::string name() const override;
  /// Returns the device name as the driver reports it.
  std::string deviceName() const;

  /// C = A·B (or |A|·|B|) with cublasDgemm in round-to-nearest; k == 0 gives zeros.
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute = false) override;
  /// Runs body on the host over [0, n) in chunks on std::threads; rethrows the first exception.
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override;

  /// Returns true: unary, binary and rowSum run on the device.
  bool offersIntervalKernels() const override { return true; }
  /// out[i] = unaryBody(op, x[i], model) for i < n; returns true (offered).
  bool unary(UnaryOp op, const ElementwiseModel& model, ConstIntervalSpan x, IntervalSpan out,
             std::int64_t n) override;
  /// out[i] = binaryBody(op, x[i], y[i mod yCount], model) for i < n (yCount divides n: a right
  /// operand broadcast over leading dims repeats); returns true (offered).
  bool binary(BinaryOp op, const ElementwiseModel& model, ConstIntervalSpan x, ConstIntervalSpan y,
              std::int64_t yCount, IntervalSpan out, std::int64_t n) override;
  /// out[i] = storeBody(x[i], format) = roundOutward(x[i], format).
  void store(Format format, ConstIntervalSpan x, IntervalSpan out, std::int64_t n);

  /// Encloses every C[m×n] the candidate can compute as A[m×k]·B[k×n] for point matrices inside
  /// the interval operands, in any order: midpoint–radius on three cuBLAS Dgemm calls and the
  /// CPU rule's finishing arithmetic (core/kernels/kernel_bodies.h); any non-finite operand
  /// endpoint makes every element entire, as on the CPU.
  void intervalMatmul(ConstIntervalSpan a, ConstIntervalSpan b, IntervalSpan c, std::int64_t m,
                      std::int64_t k, std::int64_t n, const MatmulModel& model);

  /// Encloses every row sum (x is rows×cols, out has rows entries) the candidate can compute in
  /// any order: directed-rounding tree reductions, then sumFinish (γ_(cols-1) term, overflow).
  bool rowSum(ConstIntervalSpan x, IntervalSpan out, std::int64_t rows, std::int64_t cols,
              const SumModel& model) override;
  /// out row r = softmaxRow(x row r, model, log) for x[rows×cols] (softmax or log-softmax over
  /// the last dim), one device thread per row; returns true (offered). The device libm inside
  /// the body's exp/log bounds may move them by its published margin (both enclose).
  bool softmaxRows(const SoftmaxModel& model, bool log, ConstIntervalSpan x, IntervalSpan out,
                   std::int64_t rows, std::int64_t cols) override;
  /// Encloses every row maximum (exact: max is not rounded): [max lo, max hi] per row.
  void rowMax(ConstIntervalSpan x, IntervalSpan out, std::int64_t rows, std::int64_t cols);

  /// The CPU rule's layer norm rows (kernels::layerNormRow, one device thread per row), bit for
  /// bit: x is rows×cols, weight/bias cols entries or lo == nullptr for None; returns true.
  bool layerNormRows(const kernels::LayerNormModel& model, ConstIntervalSpan x,
                     ConstIntervalSpan weight, ConstIntervalSpan bias, IntervalSpan out,
                     IntervalSpan mean, IntervalSpan rstd, std::int64_t rows,
                     std::int64_t cols) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> mImpl;
};

}  // namespace lossbound::gpu
