// CudaBackend: cuBLAS GEMMs and the interval kernels on one device, behind the plain C++ class of
// gpu/cuda_backend.h. Each call uploads its operands, runs on the single stream of
// CudaResources, downloads the results and synchronises.
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.cuh"
#include "gpu/cuda_resources.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/interval_kernels.cuh"

#include <algorithm>
#include <climits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace lossbound::gpu {

using namespace kernels;

struct CudaBackend::Impl {
  explicit Impl(int device) : resources(device) {}
  std::mutex mutex;  // one stream, one handle: calls from several threads take turns
  CudaResources resources;
};

namespace {

/// Returns v as an int for cuBLAS, or throws std::invalid_argument naming the dimension.
int cublasDim(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw std::invalid_argument(std::string("CUDA backend: ") + what + " = " + std::to_string(v) +
                                " is outside cuBLAS's int range [0, " + std::to_string(INT_MAX) +
                                "]");
  return static_cast<int>(v);
}

std::size_t count(std::int64_t a, std::int64_t b = 1) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

/// C[m×n] = A[m×k]·B[k×n] for row-major device matrices, in binary64 round-to-nearest.
void dgemmRowMajor(cublasHandle_t handle, const double* a, const double* b, double* c,
                   std::int64_t m, std::int64_t k, std::int64_t n) {
  // cuBLAS is column-major. A row-major X[r×s] is, byte for byte, the column-major Xᵀ[s×r] with
  // leading dimension s. So we ask cuBLAS for Cᵀ = Bᵀ·Aᵀ (n×m, ld n): no transposition flags,
  // operands swapped, and the column-major Cᵀ it writes is exactly the row-major C.
  const int mi = cublasDim(m, "m"), ki = cublasDim(k, "k"), ni = cublasDim(n, "n");
  const double one = 1.0, zero = 0.0;
  LB_CUBLAS_CHECK(
      cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &one, b, ni, a, ki, &zero, c, ni));
}

void checkSpan(ConstIntervalSpan x, const char* what) {
  if (!x.lo || !x.hi) throw std::invalid_argument(std::string("CUDA backend: null ") + what);
}
void checkSpan(IntervalSpan x, const char* what) {
  if (!x.lo || !x.hi) throw std::invalid_argument(std::string("CUDA backend: null ") + what);
}

/// The device copy of one interval operand.
struct DeviceInterval {
  DeviceBuffer<double> lo, hi;
  DeviceInterval(ConstIntervalSpan x, std::size_t n, cudaStream_t s) : lo(n), hi(n) {
    lo.copyFromHost(x.lo, n, s);
    hi.copyFromHost(x.hi, n, s);
  }
  explicit DeviceInterval(std::size_t n) : lo(n), hi(n) {}
  void toHost(IntervalSpan out, std::size_t n, cudaStream_t s) const {
    lo.copyToHost(out.lo, n, s);
    hi.copyToHost(out.hi, n, s);
  }
};

}  // namespace

CudaBackend::CudaBackend(int device) : mImpl(std::make_unique<Impl>(device)) {
  probeDevice(mImpl->resources.stream());
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::name() const { return "CUDA (" + deviceName() + ")"; }

std::string CudaBackend::deviceName() const { return mImpl->resources.deviceName(); }

void CudaBackend::gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                       std::int64_t n, bool absolute) {
  cublasDim(m, "m");
  cublasDim(k, "k");
  cublasDim(n, "n");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + count(m, n), 0.0);
    return;
  }
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceBuffer<double> da(count(m, k)), db(count(k, n)), dc(count(m, n));
  da.copyFromHost(a, da.size(), s);
  db.copyFromHost(b, db.size(), s);
  if (absolute) {  // |A|·|B|: absolute values in place, then the same RN Dgemm
    launchAbs(da.data(), da.data(), m * k, s);
    launchAbs(db.data(), db.data(), k * n, s);
  }
  dgemmRowMajor(r.cublas(), da.data(), db.data(), dc.data(), m, k, n);
  dc.copyToHost(c, dc.size(), s);
  r.synchronize();
}

bool CudaBackend::unary(UnaryOp op, const ElementwiseModel& model, ConstIntervalSpan x,
                        IntervalSpan out, std::int64_t n) {
  if (n <= 0) return true;
  checkSpan(x, "unary operand");
  checkSpan(out, "unary result");
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceInterval dx(x, count(n), s), dout(count(n));
  launchUnary(op, model, dx.lo.data(), dx.hi.data(), dout.lo.data(), dout.hi.data(), n, s);
  dout.toHost(out, count(n), s);
  r.synchronize();
  return true;
}

bool CudaBackend::binary(BinaryOp op, const ElementwiseModel& model, ConstIntervalSpan x,
                         ConstIntervalSpan y, std::int64_t yCount, IntervalSpan out,
                         std::int64_t n) {
  if (n <= 0) return true;
  if (yCount <= 0 || n % yCount != 0)
    throw std::invalid_argument("CUDA backend: binary op expects yCount dividing n (" +
                                std::to_string(n) + "), found " + std::to_string(yCount));
  checkSpan(x, "left operand");
  checkSpan(y, "right operand");
  checkSpan(out, "binary result");
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceInterval dx(x, count(n), s), dy(y, count(yCount), s), dout(count(n));
  launchBinary(op, model, dx.lo.data(), dx.hi.data(), dy.lo.data(), dy.hi.data(), yCount,
               dout.lo.data(), dout.hi.data(), n, s);
  dout.toHost(out, count(n), s);
  r.synchronize();
  return true;
}

void CudaBackend::store(Format format, ConstIntervalSpan x, IntervalSpan out, std::int64_t n) {
  if (n <= 0) return;
  checkSpan(x, "store operand");
  checkSpan(out, "store result");
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceInterval dx(x, count(n), s), dout(count(n));
  launchStore(format, dx.lo.data(), dx.hi.data(), dout.lo.data(), dout.hi.data(), n, s);
  dout.toHost(out, count(n), s);
  r.synchronize();
}

namespace {
/// Returns {all finite, all points} of an operand after rounding to the input format (the CPU
/// rule's midRad flags), computed on the host before the upload.
std::pair<bool, bool> operandFlags(ConstIntervalSpan x, std::size_t count, Format input) {
  bool points = true;
  for (std::size_t i = 0; i < count; ++i) {
    double m = 0.0, r = 0.0;
    if (!midRad(x.lo[i], x.hi[i], input, &m, &r)) return {false, false};
    if (r != 0.0) points = false;
  }
  return {true, points};
}
}  // namespace

void CudaBackend::intervalMatmul(ConstIntervalSpan a, ConstIntervalSpan b, IntervalSpan c,
                                 std::int64_t m, std::int64_t k, std::int64_t n,
                                 const MatmulModel& model) {
  cublasDim(m, "m");
  cublasDim(k, "k");
  cublasDim(n, "n");
  if (m == 0 || n == 0) return;
  checkSpan(a, "matmul left operand");
  checkSpan(b, "matmul right operand");
  checkSpan(c, "matmul result");
  const auto [finiteA, pointsA] = operandFlags(a, count(m, k), model.input);
  const auto [finiteB, pointsB] = operandFlags(b, count(k, n), model.input);
  if (!finiteA || !finiteB) {  // as the CPU rule: an unbounded operand makes everything entire
    std::fill(c.lo, c.lo + count(m, n), -interval_detail::inf());
    std::fill(c.hi, c.hi + count(m, n), interval_detail::inf());
    return;
  }
  const MatmulBound bound = makeMatmulBound(static_cast<double>(k), model.accumulation,
                                            model.accumulationRoundoff, pointsA && pointsB);
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceBuffer<double> g1(count(m, n)), g2(count(m, n)), g4(count(m, n));
  if (k == 0) {  // empty sums: the GEMMs are zero
    g1.zero(g1.size(), s);
    g2.zero(g2.size(), s);
    g4.zero(g4.size(), s);
  } else {
    DeviceInterval da(a, count(m, k), s), db(b, count(k, n), s);
    DeviceBuffer<double> midA(count(m, k)), absA(count(m, k)), magA(count(m, k));
    DeviceBuffer<double> midB(count(k, n)), absB(count(k, n)), magB(count(k, n));
    launchSplit(da.lo.data(), da.hi.data(), model.input, m * k, midA.data(), absA.data(),
                magA.data(), s);
    launchSplit(db.lo.data(), db.hi.data(), model.input, k * n, midB.data(), absB.data(),
                magB.data(), s);
    dgemmRowMajor(r.cublas(), midA.data(), midB.data(), g1.data(), m, k, n);
    dgemmRowMajor(r.cublas(), absA.data(), absB.data(), g2.data(), m, k, n);
    dgemmRowMajor(r.cublas(), magA.data(), magB.data(), g4.data(), m, k, n);
    r.synchronize();  // the operand buffers go out of scope here
  }
  DeviceInterval dc(count(m, n));
  launchMatmulFinish(g1.data(), g2.data(), g4.data(), bound, model.storage, dc.lo.data(),
                     dc.hi.data(), m * n, s);
  dc.toHost(c, count(m, n), s);
  r.synchronize();
}

bool CudaBackend::rowSum(ConstIntervalSpan x, IntervalSpan out, std::int64_t rows,
                         std::int64_t cols, const SumModel& model) {
  if (rows <= 0) return true;
  checkSpan(out, "row sum result");
  if (cols <= 0) {
    std::fill(out.lo, out.lo + rows, 0.0);
    std::fill(out.hi, out.hi + rows, 0.0);
    return true;
  }
  checkSpan(x, "row sum operand");
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceInterval dx(x, count(rows, cols), s), dout(count(rows));
  launchRowSum(dx.lo.data(), dx.hi.data(), rows, cols, model, dout.lo.data(), dout.hi.data(), s);
  dout.toHost(out, count(rows), s);
  r.synchronize();
  return true;
}

bool CudaBackend::softmaxRows(const SoftmaxModel& model, bool log, ConstIntervalSpan x,
                              IntervalSpan out, std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0) return true;
  checkSpan(x, "softmax operand");
  checkSpan(out, "softmax result");
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceInterval dx(x, count(rows, cols), s), dout(count(rows, cols));
  DeviceBuffer<double> scratch(count(rows, softmaxRowScratch(cols)));
  launchSoftmaxRows(model, log, dx.lo.data(), dx.hi.data(), rows, cols, dout.lo.data(),
                    dout.hi.data(), scratch.data(), s);
  dout.toHost(out, count(rows, cols), s);
  r.synchronize();
  return true;
}

void CudaBackend::rowMax(ConstIntervalSpan x, IntervalSpan out, std::int64_t rows,
                         std::int64_t cols) {
  if (rows <= 0) return;
  if (cols <= 0)
    throw std::invalid_argument("CUDA backend: rowMax of an empty row (cols = 0) is undefined");
  checkSpan(x, "row max operand");
  checkSpan(out, "row max result");
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  DeviceInterval dx(x, count(rows, cols), s), dout(count(rows));
  launchRowMax(dx.lo.data(), dx.hi.data(), rows, cols, dout.lo.data(), dout.hi.data(), s);
  dout.toHost(out, count(rows), s);
  r.synchronize();
}

bool CudaBackend::layerNormRows(const LayerNormModel& model, ConstIntervalSpan x,
                                ConstIntervalSpan weight, ConstIntervalSpan bias, IntervalSpan out,
                                IntervalSpan mean, IntervalSpan rstd, std::int64_t rows,
                                std::int64_t cols) {
  if (rows <= 0) return true;
  if (cols < 0)
    throw std::invalid_argument("CUDA backend: layer norm with cols = " + std::to_string(cols));
  checkSpan(mean, "layer norm mean");
  checkSpan(rstd, "layer norm rstd");
  if (cols > 0) {
    checkSpan(x, "layer norm input");
    checkSpan(out, "layer norm result");
    if (weight.lo) checkSpan(weight, "layer norm weight");
    if (bias.lo) checkSpan(bias, "layer norm bias");
  }
  std::lock_guard lock(mImpl->mutex);
  const CudaResources& r = mImpl->resources;
  r.makeCurrent();
  const cudaStream_t s = r.stream();
  const std::size_t n = count(rows, cols);
  // Weight and bias are uploaded only when given (an empty DeviceInterval stands for None).
  const std::size_t nw = weight.lo && cols > 0 ? count(cols) : 0;
  const std::size_t nb = bias.lo && cols > 0 ? count(cols) : 0;
  DeviceInterval dx(x, n, s), dw(weight, nw, s), db(bias, nb, s), dout(n), dmean(count(rows)),
      drstd(count(rows));
  launchLayerNormRows(model, dx.lo.data(), dx.hi.data(), dw.lo.data(), dw.hi.data(), db.lo.data(),
                      db.hi.data(), dout.lo.data(), dout.hi.data(), dmean.lo.data(),
                      dmean.hi.data(), drstd.lo.data(), drstd.hi.data(), rows, cols, s);
  dout.toHost(out, n, s);
  dmean.toHost(mean, count(rows), s);
  drstd.toHost(rstd, count(rows), s);
  r.synchronize();
  return true;
}

}  // namespace lossbound::gpu
