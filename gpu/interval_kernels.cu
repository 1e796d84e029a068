// Elementwise, matmul-finishing, reduction and softmax-row interval kernels. The per-element work
// is the shared LB_HD bodies of core/kernels/kernel_bodies.h (the rules of core/interval), so the
// device runs exactly the code that tests/gpu checks on the host, with the rounding table mapped to
// the CUDA directed-rounding intrinsics (core/interval/rounding.h under __CUDA_ARCH__).
#include "gpu/cuda_check.cuh"
#include "gpu/interval_kernels.cuh"

#include <algorithm>

namespace lossbound::gpu {

using namespace kernels;
namespace {

constexpr int kBlock = 256;
// Grid-stride loops: a capped grid covers any n (int64) without overflowing gridDim.
constexpr std::int64_t kMaxBlocks = 4096;

unsigned gridFor(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((n + kBlock - 1) / kBlock, 1, kMaxBlocks));
}

__device__ inline std::int64_t firstIndex() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t strideOf() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__global__ void absKernel(const double* x, double* y, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) y[i] = ::fabs(x[i]);
}

__global__ void unaryKernel(UnaryOp op, ElementwiseModel model, const double* xlo,
                            const double* xhi, double* olo, double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const Interval r = unaryBody(op, Interval{xlo[i], xhi[i]}, model);
    olo[i] = r.lo;
    ohi[i] = r.hi;
  }
}

__global__ void binaryKernel(BinaryOp op, ElementwiseModel model, const double* xlo,
                             const double* xhi, const double* ylo, const double* yhi,
                             std::int64_t yCount, double* olo, double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const std::int64_t j = yCount == n ? i : i % yCount;
    const Interval r = binaryBody(op, Interval{xlo[i], xhi[i]}, Interval{ylo[j], yhi[j]}, model);
    olo[i] = r.lo;
    ohi[i] = r.hi;
  }
}

__global__ void nanToEntireKernel(double* olo, double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf())
    if (::isnan(olo[i]) || ::isnan(ohi[i])) {
      olo[i] = -interval_detail::inf();
      ohi[i] = interval_detail::inf();
    }
}

__global__ void flagNonFiniteKernel(const double* xlo, const double* xhi, std::int64_t n,
                                    double* flag) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf())
    if (!isFiniteValue(xlo[i]) || !isFiniteValue(xhi[i]))
      flag[0] = 1.0;  // benign race: all write 1
}

__global__ void gatherKernel(const double* xlo, const double* xhi, const double* offsets,
                             const double* flo, const double* fhi, std::int64_t fillCount,
                             double* olo, double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const auto o = static_cast<std::int64_t>(offsets[i]);
    const std::int64_t f = i % fillCount;
    const double lo = o >= 0 ? xlo[o] : flo[f], hi = o >= 0 ? xhi[o] : fhi[f];
    olo[i] = lo;
    ohi[i] = hi;
  }
}

__global__ void gemmFlagsKernel(const double* xlo, const double* xhi, std::int64_t n,
                                std::int64_t slice, Format in, double* flags) {
  // flags were zeroed; any thread that finds a reason sets "not direct" of its slice (benign
  // race: all writers store 1).
  for (std::int64_t i = firstIndex(); i < n; i += strideOf())
    if (xlo != xhi || !isFiniteValue(xlo[i]) || !gemmRepresentable(xlo[i], in))
      flags[3 * (i / slice)] = 1.0;
}

__global__ void gemmSplitKernel(const double* xlo, const double* xhi, std::int64_t n,
                                std::int64_t slice, Format in, double* mid, double* mag,
                                double* flags) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    double* f = flags + 3 * (i / slice);
    if (f[0] == 0.0) {
      mid[i] = xlo[i];
      mag[i] = ::fabs(xlo[i]);
      continue;
    }
    double m = 0.0, r = 0.0;
    if (!gemmSplit(xlo[i], xhi[i], in, &m, &r)) {
      f[1] = 1.0;
      m = r = 0.0;
    }
    mid[i] = m;
    mag[i] = add_up(::fabs(m), r);
    if (r != 0.0) f[2] = 1.0;
  }
}

__global__ void gemmFinishKernel(const double* g1, const double* g2, const double* g4,
                                 const double* flagsA, const double* flagsB, std::int64_t fas,
                                 std::int64_t fbs, const double* blo, const double* bhi,
                                 GemmFinish finish, double* olo, double* ohi, std::int64_t n,
                                 std::int64_t slice) {
  for (std::int64_t u = firstIndex(); u < n; u += strideOf()) {
    const double* fa = flagsA + (u / slice) * fas;
    const double* fb = flagsB + (u / slice) * fbs;
    const bool finite = fa[1] == 0.0 && fb[1] == 0.0;
    const bool points = fa[2] == 0.0 && fb[2] == 0.0;
    const Interval e =
        finite
            ? gemmFinishElement(g1[u], g2[u], points ? 0.0 : g4[u], points, finish, blo != nullptr,
                                blo ? Interval{blo[u], bhi[u]} : Interval{0.0, 0.0})
            : entireInterval();
    olo[u] = e.lo;
    ohi[u] = e.hi;
  }
}

__global__ void storeKernel(Format format, const double* xlo, const double* xhi, double* olo,
                            double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const Interval r = storeBody(Interval{xlo[i], xhi[i]}, format);
    olo[i] = r.lo;
    ohi[i] = r.hi;
  }
}

__global__ void splitKernel(const double* lo, const double* hi, Format input, std::int64_t count,
                            double* mid, double* absMid, double* mag) {
  for (std::int64_t i = firstIndex(); i < count; i += strideOf()) {
    double c = 0.0, r = 0.0;
    midRad(lo[i], hi[i], input, &c, &r);  // non-finite operands are handled by the host
    mid[i] = c;
    absMid[i] = ::fabs(c);
    mag[i] = magnitudeUp(c, r);
  }
}

__global__ void matmulFinishKernel(const double* g1, const double* g2, const double* g4,
                                   MatmulBound bound, Format storage, double* olo, double* ohi,
                                   std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const Interval v = matmulFinish(g1[i], g2[i], g4[i], bound, storage);
    olo[i] = v.lo;
    ohi[i] = v.hi;
  }
}

// One block per row (grid-stride over rows); each thread folds a strided slice of the columns,
// then a shared-memory tree folds the threads. The order differs from the CPU's, which is sound:
// any order of add_down (add_up) is a lower (upper) bound.
__global__ void rowSumKernel(const double* xlo, const double* xhi, std::int64_t rows,
                             std::int64_t cols, SumModel model, double* olo, double* ohi) {
  // Plain arrays: __shared__ variables must not have constructors (SumState has initialisers).
  __shared__ double pLo[kBlock], pHi[kBlock], pAbs[kBlock];
  if (model.extremum != 0) {  // amax/amin: one thread folds the row in order (the host's bits)
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x)
      if (threadIdx.x == 0) {
        const Interval v = rowExtremum(xlo + row * cols, xhi + row * cols, cols, 1, model);
        olo[row] = v.lo;
        ohi[row] = v.hi;
      }
    return;
  }
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    SumState acc;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      accumulate(acc, normTerm(Interval{xlo[row * cols + j], xhi[row * cols + j]}, model));
    pLo[threadIdx.x] = acc.sum.lo;
    pHi[threadIdx.x] = acc.sum.hi;
    pAbs[threadIdx.x] = acc.absSumUp;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        const SumState m =
            merge(SumState{{pLo[threadIdx.x], pHi[threadIdx.x]}, pAbs[threadIdx.x]},
                  SumState{{pLo[threadIdx.x + s], pHi[threadIdx.x + s]}, pAbs[threadIdx.x + s]});
        pLo[threadIdx.x] = m.sum.lo;
        pHi[threadIdx.x] = m.sum.hi;
        pAbs[threadIdx.x] = m.absSumUp;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const Interval v =
          rowFinish(SumState{{pLo[0], pHi[0]}, pAbs[0]}, static_cast<double>(cols), model);
      olo[row] = v.lo;
      ohi[row] = v.hi;
    }
    __syncthreads();  // the next row reuses the shared arrays
  }
}

__global__ void rowMaxKernel(const double* xlo, const double* xhi, std::int64_t rows,
                             std::int64_t cols, double* olo, double* ohi) {
  __shared__ double sLo[kBlock], sHi[kBlock];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const double inf = interval_detail::inf();
    double aLo = -inf, aHi = -inf;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const Interval x = sanitize(Interval{xlo[row * cols + j], xhi[row * cols + j]});
      aLo = interval_detail::fmax2(aLo, x.lo);
      aHi = interval_detail::fmax2(aHi, x.hi);
    }
    sLo[threadIdx.x] = aLo;
    sHi[threadIdx.x] = aHi;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        sLo[threadIdx.x] = interval_detail::fmax2(sLo[threadIdx.x], sLo[threadIdx.x + s]);
        sHi[threadIdx.x] = interval_detail::fmax2(sHi[threadIdx.x], sHi[threadIdx.x + s]);
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      olo[row] = sLo[0];
      ohi[row] = sHi[0];
    }
    __syncthreads();
  }
}

// One thread per row (grid-stride over rows), each with its own slice of the scratch buffer
// (rows × softmaxRowScratch(cols) doubles). The simplest mapping of the row body, whose prefix
// and suffix sums are sequential: the device runs exactly the host's loop. The threads of a warp
// read rows `cols` apart (uncoalesced), which is acceptable for the row counts of one step.
__global__ void softmaxRowsKernel(SoftmaxModel model, bool log, const double* xlo,
                                  const double* xhi, std::int64_t rows, std::int64_t cols,
                                  double* olo, double* ohi, double* scratch) {
  const std::int64_t per = softmaxRowScratch(cols);
  for (std::int64_t row = firstIndex(); row < rows; row += strideOf()) {
    const std::int64_t o = row * cols;
    softmaxRow(xlo + o, xhi + o, cols, model, log, olo + o, ohi + o, scratch + row * per);
  }
}

// Batch-norm backward: one thread per gathered channel (a long row for one thread, as forward).
__global__ void batchNormBackwardRowsKernel(BatchNormBackwardModel model, const double* dylo,
                                            const double* dyhi, const double* xlo,
                                            const double* xhi, const double* mlo, const double* mhi,
                                            const double* slo, const double* shi, const double* wlo,
                                            const double* whi, double* gilo, double* gihi,
                                            double* gwlo, double* gwhi, double* gblo, double* gbhi,
                                            std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = firstIndex(); r < rows; r += strideOf())
    batchNormBackwardRowAt(model, r, cols, {dylo, dyhi}, {xlo, xhi}, {mlo, mhi}, {slo, shi},
                           {wlo, whi}, {gilo, gihi}, {gwlo, gwhi}, {gblo, gbhi});
}

// Average pooling: one thread per gathered window row.
__global__ void avgPoolRowsKernel(ConstIntervalSpan rows, const double* offsets,
                                  const double* params, std::int64_t count, std::int64_t windows,
                                  std::int64_t k, AvgPoolModel model, IntervalSpan out) {
  for (std::int64_t r = firstIndex(); r < count; r += strideOf()) {
    const std::int64_t w = r % windows;
    const Interval v =
        avgPoolWindow(rows.lo + r * k, rows.hi + r * k, offsets + w * k, k, params + 3 * w, model);
    out.lo[r] = v.lo;
    out.hi[r] = v.hi;
  }
}

// Average-pooling backward: one thread per input element.
__global__ void avgPoolBackwardKernel(AvgPoolModel model, AvgPoolBackwardShape shape,
                                      ConstIntervalSpan g, const double* wins, const double* params,
                                      IntervalSpan out) {
  const std::int64_t n = shape.planes * shape.inPlane;
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const Interval v = avgPoolBackwardInput(g, i, wins, params, shape, model);
    out.lo[i] = v.lo;
    out.hi[i] = v.hi;
  }
}

// Group-norm backward: three passes (core/kernels/group_norm_backward.h), each a grid-stride
// loop over its items; pass 2 and 3 read pass 1's ds and db from the scratch.
__global__ void groupNormChannelSumsKernel(GroupNormBackwardModel model, ConstIntervalSpan dy,
                                           ConstIntervalSpan x, IntervalSpan ds, IntervalSpan db) {
  for (std::int64_t q = firstIndex(); q < model.samples * model.channels; q += strideOf())
    groupNormChannelSums(model, q, dy, x, ds, db);
}
__global__ void groupNormWeightColumnsKernel(GroupNormBackwardModel model, ConstIntervalSpan ds,
                                             ConstIntervalSpan db, ConstIntervalSpan mean,
                                             ConstIntervalSpan rstd, IntervalSpan gw,
                                             IntervalSpan gb) {
  for (std::int64_t ch = firstIndex(); ch < model.channels; ch += strideOf())
    groupNormWeightColumn(model, ch, ds, db, mean, rstd, gw, gb);
}
__global__ void groupNormBackwardRowsKernel(GroupNormBackwardModel model, ConstIntervalSpan dy,
                                            ConstIntervalSpan x, ConstIntervalSpan mean,
                                            ConstIntervalSpan rstd, ConstIntervalSpan weight,
                                            ConstIntervalSpan ds, ConstIntervalSpan db,
                                            IntervalSpan dx) {
  for (std::int64_t r = firstIndex(); r < model.rows(); r += strideOf())
    groupNormBackwardRow(model, r, dy, x, mean, rstd, weight, ds, db, dx);
}

// Max-pool backward: one thread per plane, the outputs in order (the bits of the CPU rule).
__global__ void maxPoolBackwardKernel(MaxPoolBackwardModel model, const double* glo,
                                      const double* ghi, const double* ilo, const double* ihi,
                                      std::int64_t planes, double* olo, double* ohi, double* flag,
                                      double* scratch) {
  for (std::int64_t pl = firstIndex(); pl < planes; pl += strideOf())
    if (!maxPoolBackwardPlane({glo, ghi}, {ilo, ihi}, pl, model, {olo, ohi},
                              scratch + pl * maxPoolBackwardScratch(model.inPlane)))
      flag[0] = kBadIndexFlag;  // benign race: every writer stores the same value
}

// Embedding backward: one thread per column of the weight gradient, the positions in order.
__global__ void embeddingBackwardKernel(EmbeddingBackwardModel model, const double* glo,
                                        const double* ghi, const double* index,
                                        std::int64_t positions, std::int64_t dim, double* olo,
                                        double* ohi, double* flag, double* scratch) {
  for (std::int64_t j = firstIndex(); j < dim; j += strideOf())
    if (!embeddingBackwardColumn({glo, ghi}, index, positions, dim, j, model, {olo, ohi},
                                 scratch + j * 2 * model.numWeights))
      flag[0] = kBadIndexFlag;  // benign race: every writer stores the same value
}

// Layer-norm backward: grad_input one thread per row, grad_weight/grad_bias one thread per
// column summing the rows in the host's order (the bits of the CPU rule).
__global__ void layerNormBackwardRowsKernel(LayerNormBackwardModel model, const double* dylo,
                                            const double* dyhi, const double* xlo,
                                            const double* xhi, const double* meanlo,
                                            const double* meanhi, const double* rstdlo,
                                            const double* rstdhi, const double* wlo,
                                            const double* whi, double* gilo, double* gihi,
                                            std::int64_t rows, std::int64_t n) {
  for (std::int64_t r = firstIndex(); r < rows; r += strideOf()) {
    const std::int64_t o = r * n;
    layerNormBackwardRow(dylo + o, dyhi + o, xlo + o, xhi + o, Interval{meanlo[r], meanhi[r]},
                         Interval{rstdlo[r], rstdhi[r]}, wlo, whi, n, model, gilo + o, gihi + o);
  }
}

__global__ void layerNormBackwardColumnsKernel(LayerNormBackwardModel model, const double* dylo,
                                               const double* dyhi, const double* xlo,
                                               const double* xhi, const double* meanlo,
                                               const double* meanhi, const double* rstdlo,
                                               const double* rstdhi, double* gwlo, double* gwhi,
                                               double* gblo, double* gbhi, std::int64_t rows,
                                               std::int64_t n) {
  for (std::int64_t j = firstIndex(); j < n; j += strideOf()) {
    Interval gw{}, gb{};
    layerNormBackwardColumn(dylo, dyhi, xlo, xhi, meanlo, meanhi, rstdlo, rstdhi, rows, n, j, model,
                            &gw, &gb);
    gwlo[j] = gw.lo;
    gwhi[j] = gw.hi;
    gblo[j] = gb.lo;
    gbhi[j] = gb.hi;
  }
}

// The backward row body, one thread per row like the forward (its sum is sequential).
__global__ void softmaxBackwardRowsKernel(SoftmaxModel model, bool log, const double* glo,
                                          const double* ghi, const double* ylo, const double* yhi,
                                          std::int64_t rows, std::int64_t cols, double* olo,
                                          double* ohi) {
  for (std::int64_t row = firstIndex(); row < rows; row += strideOf()) {
    const std::int64_t o = row * cols;
    softmaxBackwardRow(glo + o, ghi + o, ylo + o, yhi + o, cols, log, model, olo + o, ohi + o);
  }
}

__global__ void probeKernel(int* flag) { *flag = 1; }

}  // namespace

void launchAbs(const double* x, double* y, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  absKernel<<<gridFor(n), kBlock, 0, stream>>>(x, y, n);
  LB_CUDA_CHECK_LAUNCH(absKernel);
}

void launchUnary(UnaryOp op, ElementwiseModel model, const double* xlo, const double* xhi,
                 double* olo, double* ohi, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  unaryKernel<<<gridFor(n), kBlock, 0, stream>>>(op, model, xlo, xhi, olo, ohi, n);
  LB_CUDA_CHECK_LAUNCH(unaryKernel);
}

void launchBinary(BinaryOp op, ElementwiseModel model, const double* xlo, const double* xhi,
                  const double* ylo, const double* yhi, std::int64_t yCount, double* olo,
                  double* ohi, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  binaryKernel<<<gridFor(n), kBlock, 0, stream>>>(op, model, xlo, xhi, ylo, yhi, yCount, olo, ohi,
                                                  n);
  LB_CUDA_CHECK_LAUNCH(binaryKernel);
}

void launchStore(Format format, const double* xlo, const double* xhi, double* olo, double* ohi,
                 std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  storeKernel<<<gridFor(n), kBlock, 0, stream>>>(format, xlo, xhi, olo, ohi, n);
  LB_CUDA_CHECK_LAUNCH(storeKernel);
}

void launchSplit(const double* lo, const double* hi, Format input, std::int64_t count, double* mid,
                 double* absMid, double* mag, cudaStream_t stream) {
  if (count <= 0) return;
  splitKernel<<<gridFor(count), kBlock, 0, stream>>>(lo, hi, input, count, mid, absMid, mag);
  LB_CUDA_CHECK_LAUNCH(splitKernel);
}

void launchMatmulFinish(const double* g1, const double* g2, const double* g4, MatmulBound bound,
                        Format storage, double* olo, double* ohi, std::int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return;
  matmulFinishKernel<<<gridFor(n), kBlock, 0, stream>>>(g1, g2, g4, bound, storage, olo, ohi, n);
  LB_CUDA_CHECK_LAUNCH(matmulFinishKernel);
}

namespace {
__global__ void selectKernel(ElementwiseModel model, const double* clo, const double* chi,
                             std::int64_t cn, const double* alo, const double* ahi, std::int64_t an,
                             const double* blo, const double* bhi, std::int64_t bn, double* olo,
                             double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const std::int64_t c = i % cn, p = i % an, q = i % bn;
    const Interval v = selectBody(Interval{clo[c], chi[c]}, Interval{alo[p], ahi[p]},
                                  Interval{blo[q], bhi[q]}, model.storage);
    olo[i] = v.lo;
    ohi[i] = v.hi;
  }
}
}  // namespace

void launchSelect(ElementwiseModel model, const double* clo, const double* chi, std::int64_t cn,
                  const double* alo, const double* ahi, std::int64_t an, const double* blo,
                  const double* bhi, std::int64_t bn, double* olo, double* ohi, std::int64_t n,
                  cudaStream_t stream) {
  if (n <= 0) return;
  selectKernel<<<gridFor(n), kBlock, 0, stream>>>(model, clo, chi, cn, alo, ahi, an, blo, bhi, bn,
                                                  olo, ohi, n);
  LB_CUDA_CHECK_LAUNCH(selectKernel);
}

namespace {
__global__ void takeRowsKernel(ElementwiseModel model, const double* tlo, const double* thi,
                               std::int64_t rows, std::int64_t dim, const double* index,
                               std::int64_t n, double* olo, double* ohi, double* flag) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) {
    const std::int64_t p = i / dim, j = i % dim;
    const std::int64_t k = tableRow(index[p], rows);
    if (k < 0) flag[0] = kBadIndexFlag;  // benign race: every writer stores the same value
    const Interval v =
        k < 0 ? entireInterval()
              : roundOutward(Interval{tlo[k * dim + j], thi[k * dim + j]}, model.storage);
    olo[i] = v.lo;
    ohi[i] = v.hi;
  }
}

__global__ void checkIndicesKernel(const double* index, std::int64_t rows, std::int64_t count,
                                   double* flag) {
  for (std::int64_t p = firstIndex(); p < count; p += strideOf())
    if (tableRow(index[p], rows) < 0) flag[0] = kBadIndexFlag;
}

__global__ void nllLossKernel(kernels::NllLossModel model, const double* xlo, const double* xhi,
                              const double* target, const double* wlo, const double* whi,
                              std::int64_t batch, double* olo, double* ohi, double* twlo,
                              double* twhi, double* flag) {
  if (firstIndex() != 0) return;
  if (!kernels::nllLossForward(model, {xlo, xhi}, target, {wlo, whi}, batch, {olo, ohi},
                               {twlo, twhi}))
    flag[0] = kBadIndexFlag;
}

__global__ void zeroKernel(double* olo, double* ohi, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += strideOf()) olo[i] = ohi[i] = 0.0;
}

__global__ void nllLossBackwardKernel(kernels::NllLossModel model, const double* glo,
                                      const double* ghi, const double* target, const double* wlo,
                                      const double* whi, const double* twlo, const double* twhi,
                                      std::int64_t targets, double* olo, double* ohi,
                                      double* flag) {
  for (std::int64_t o = firstIndex(); o < targets; o += strideOf())
    if (!kernels::nllBackwardAt(model, o, target, {glo, ghi}, {wlo, whi}, {twlo[0], twhi[0]},
                                {olo, ohi}))
      flag[0] = kBadIndexFlag;  // benign race: every writer stores the same value
}

__global__ void maxPoolRowsKernel(const double* rlo, const double* rhi, const double* offsets,
                                  const double* starts, std::int64_t count, std::int64_t windows,
                                  std::int64_t k, Format s, double* vlo, double* vhi, double* ilo,
                                  double* ihi) {
  for (std::int64_t r = firstIndex(); r < count; r += strideOf()) {
    const std::int64_t w = r % windows;
    Interval v, ix;
    kernels::maxPoolWindow(rlo + r * k, rhi + r * k, offsets + w * k, k, starts[w], s, v, ix);
    vlo[r] = v.lo;
    vhi[r] = v.hi;
    ilo[r] = ix.lo;
    ihi[r] = ix.hi;
  }
}
}  // namespace

void launchMaxPoolRows(const double* rlo, const double* rhi, const double* offsets,
                       const double* starts, std::int64_t count, std::int64_t windows,
                       std::int64_t k, Format s, double* vlo, double* vhi, double* ilo, double* ihi,
                       cudaStream_t stream) {
  if (count <= 0) return;
  maxPoolRowsKernel<<<gridFor(count), kBlock, 0, stream>>>(rlo, rhi, offsets, starts, count,
                                                           windows, k, s, vlo, vhi, ilo, ihi);
  LB_CUDA_CHECK_LAUNCH(maxPoolRowsKernel);
}

void launchNllLossBackward(kernels::NllLossModel model, const double* glo, const double* ghi,
                           const double* target, const double* wlo, const double* whi,
                           const double* twlo, const double* twhi, std::int64_t batch, double* olo,
                           double* ohi, double* flag, cudaStream_t stream) {
  const std::int64_t targets = batch * model.inner, n = targets * model.classes;
  if (n <= 0) return;
  zeroKernel<<<gridFor(n), kBlock, 0, stream>>>(olo, ohi, n);
  LB_CUDA_CHECK_LAUNCH(zeroKernel);
  nllLossBackwardKernel<<<gridFor(targets), kBlock, 0, stream>>>(
      model, glo, ghi, target, wlo, whi, twlo, twhi, targets, olo, ohi, flag);
  LB_CUDA_CHECK_LAUNCH(nllLossBackwardKernel);
}

void launchNllLoss(kernels::NllLossModel model, const double* xlo, const double* xhi,
                   const double* target, const double* wlo, const double* whi, std::int64_t batch,
                   double* olo, double* ohi, double* twlo, double* twhi, double* flag,
                   cudaStream_t stream) {
  nllLossKernel<<<1, 1, 0, stream>>>(model, xlo, xhi, target, wlo, whi, batch, olo, ohi, twlo, twhi,
                                     flag);
  LB_CUDA_CHECK_LAUNCH(nllLossKernel);
}

void launchTakeRows(ElementwiseModel model, const double* tlo, const double* thi, std::int64_t rows,
                    std::int64_t dim, const double* index, std::int64_t count, double* olo,
                    double* ohi, double* flag, cudaStream_t stream) {
  if (count <= 0) return;
  if (dim <= 0) {  // no element to write, but every index is still checked
    checkIndicesKernel<<<gridFor(count), kBlock, 0, stream>>>(index, rows, count, flag);
    LB_CUDA_CHECK_LAUNCH(checkIndicesKernel);
    return;
  }
  const std::int64_t n = count * dim;
  takeRowsKernel<<<gridFor(n), kBlock, 0, stream>>>(model, tlo, thi, rows, dim, index, n, olo, ohi,
                                                    flag);
  LB_CUDA_CHECK_LAUNCH(takeRowsKernel);
}

void launchRowSum(const double* xlo, const double* xhi, std::int64_t rows, std::int64_t cols,
                  SumModel model, double* olo, double* ohi, cudaStream_t stream) {
  if (rows <= 0) return;
  const auto grid = static_cast<unsigned>(std::min<std::int64_t>(rows, 65535));
  rowSumKernel<<<grid, kBlock, 0, stream>>>(xlo, xhi, rows, cols, model, olo, ohi);
  LB_CUDA_CHECK_LAUNCH(rowSumKernel);
}

void launchRowMax(const double* xlo, const double* xhi, std::int64_t rows, std::int64_t cols,
                  double* olo, double* ohi, cudaStream_t stream) {
  if (rows <= 0) return;
  const auto grid = static_cast<unsigned>(std::min<std::int64_t>(rows, 65535));
  rowMaxKernel<<<grid, kBlock, 0, stream>>>(xlo, xhi, rows, cols, olo, ohi);
  LB_CUDA_CHECK_LAUNCH(rowMaxKernel);
}

void launchSoftmaxRows(const SoftmaxModel& model, bool log, const double* xlo, const double* xhi,
                       std::int64_t rows, std::int64_t cols, double* olo, double* ohi,
                       double* scratch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmaxRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(model, log, xlo, xhi, rows, cols, olo,
                                                          ohi, scratch);
  LB_CUDA_CHECK_LAUNCH(softmaxRowsKernel);
}

void launchBatchNormBackwardRows(const BatchNormBackwardModel& model, const double* dylo,
                                 const double* dyhi, const double* xlo, const double* xhi,
                                 const double* mlo, const double* mhi, const double* slo,
                                 const double* shi, const double* wlo, const double* whi,
                                 double* gilo, double* gihi, double* gwlo, double* gwhi,
                                 double* gblo, double* gbhi, std::int64_t rows, std::int64_t cols,
                                 cudaStream_t stream) {
  if (rows <= 0) return;
  batchNormBackwardRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(
      model, dylo, dyhi, xlo, xhi, mlo, mhi, slo, shi, wlo, whi, gilo, gihi, gwlo, gwhi, gblo, gbhi,
      rows, cols);
  LB_CUDA_CHECK_LAUNCH(batchNormBackwardRowsKernel);
}

void launchAvgPoolRows(ConstIntervalSpan rows, const double* offsets, const double* params,
                       std::int64_t count, std::int64_t windows, std::int64_t k,
                       const AvgPoolModel& model, IntervalSpan out, cudaStream_t stream) {
  if (count <= 0) return;
  avgPoolRowsKernel<<<gridFor(count), kBlock, 0, stream>>>(rows, offsets, params, count, windows, k,
                                                           model, out);
  LB_CUDA_CHECK_LAUNCH(avgPoolRowsKernel);
}

void launchAvgPoolBackward(const AvgPoolModel& model, const AvgPoolBackwardShape& shape,
                           ConstIntervalSpan g, const double* wins, const double* params,
                           IntervalSpan out, cudaStream_t stream) {
  const std::int64_t n = shape.planes * shape.inPlane;
  if (n <= 0) return;
  avgPoolBackwardKernel<<<gridFor(n), kBlock, 0, stream>>>(model, shape, g, wins, params, out);
  LB_CUDA_CHECK_LAUNCH(avgPoolBackwardKernel);
}

void launchGroupNormBackward(const GroupNormBackwardModel& model, ConstIntervalSpan dy,
                             ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan rstd,
                             ConstIntervalSpan weight, IntervalSpan dx, IntervalSpan dw,
                             IntervalSpan db, double* scratch, cudaStream_t stream) {
  const std::int64_t nc = model.samples * model.channels;
  if (nc <= 0) return;
  const IntervalSpan ds{scratch, scratch + nc}, dbs{scratch + 2 * nc, scratch + 3 * nc};
  groupNormChannelSumsKernel<<<gridFor(nc), kBlock, 0, stream>>>(model, dy, x, ds, dbs);
  LB_CUDA_CHECK_LAUNCH(groupNormChannelSumsKernel);
  groupNormWeightColumnsKernel<<<gridFor(model.channels), kBlock, 0, stream>>>(
      model, {ds.lo, ds.hi}, {dbs.lo, dbs.hi}, mean, rstd, dw, db);
  LB_CUDA_CHECK_LAUNCH(groupNormWeightColumnsKernel);
  groupNormBackwardRowsKernel<<<gridFor(model.rows()), kBlock, 0, stream>>>(
      model, dy, x, mean, rstd, weight, {ds.lo, ds.hi}, {dbs.lo, dbs.hi}, dx);
  LB_CUDA_CHECK_LAUNCH(groupNormBackwardRowsKernel);
}

void launchMaxPoolBackward(const MaxPoolBackwardModel& model, const double* glo, const double* ghi,
                           const double* ilo, const double* ihi, std::int64_t planes, double* olo,
                           double* ohi, double* flag, double* scratch, cudaStream_t stream) {
  if (planes <= 0 || model.inPlane <= 0) return;
  maxPoolBackwardKernel<<<gridFor(planes), kBlock, 0, stream>>>(model, glo, ghi, ilo, ihi, planes,
                                                                olo, ohi, flag, scratch);
  LB_CUDA_CHECK_LAUNCH(maxPoolBackwardKernel);
}

void launchEmbeddingBackward(const EmbeddingBackwardModel& model, const double* glo,
                             const double* ghi, const double* index, std::int64_t positions,
                             std::int64_t dim, double* olo, double* ohi, double* flag,
                             double* scratch, cudaStream_t stream) {
  if (dim <= 0 || model.numWeights <= 0) return;
  embeddingBackwardKernel<<<gridFor(dim), kBlock, 0, stream>>>(model, glo, ghi, index, positions,
                                                               dim, olo, ohi, flag, scratch);
  LB_CUDA_CHECK_LAUNCH(embeddingBackwardKernel);
}

void launchLayerNormBackwardRows(const LayerNormBackwardModel& model, const double* dylo,
                                 const double* dyhi, const double* xlo, const double* xhi,
                                 const double* meanlo, const double* meanhi, const double* rstdlo,
                                 const double* rstdhi, const double* wlo, const double* whi,
                                 double* gilo, double* gihi, double* gwlo, double* gwhi,
                                 double* gblo, double* gbhi, std::int64_t rows, std::int64_t n,
                                 cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return;
  layerNormBackwardRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(
      model, dylo, dyhi, xlo, xhi, meanlo, meanhi, rstdlo, rstdhi, wlo, whi, gilo, gihi, rows, n);
  LB_CUDA_CHECK_LAUNCH(layerNormBackwardRowsKernel);
  layerNormBackwardColumnsKernel<<<gridFor(n), kBlock, 0, stream>>>(
      model, dylo, dyhi, xlo, xhi, meanlo, meanhi, rstdlo, rstdhi, gwlo, gwhi, gblo, gbhi, rows, n);
  LB_CUDA_CHECK_LAUNCH(layerNormBackwardColumnsKernel);
}

void launchSoftmaxBackwardRows(const SoftmaxModel& model, bool log, const double* glo,
                               const double* ghi, const double* ylo, const double* yhi,
                               std::int64_t rows, std::int64_t cols, double* olo, double* ohi,
                               cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmaxBackwardRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(model, log, glo, ghi, ylo, yhi,
                                                                  rows, cols, olo, ohi);
  LB_CUDA_CHECK_LAUNCH(softmaxBackwardRowsKernel);
}

void probeDevice(cudaStream_t stream) {
  int* flag = nullptr;
  LB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int)));
  probeKernel<<<1, 1, 0, stream>>>(flag);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  const cudaError_t freeErr = cudaFree(flag);
  checkCuda(err, "launch of probeKernel (does this binary contain code for the device?)", __FILE__,
            __LINE__);
  checkCuda(freeErr, "cudaFree(flag)", __FILE__, __LINE__);
}

// ---- Layer norm rows -------------------------------------------------------------------------
// One thread per row (grid-stride over rows) runs the whole row body, exactly as the CPU rule
// does on the host: same operations in the same order, so the same bits. This is the simplest
// correct mapping, not the fastest: each thread walks its own row (uncoalesced loads) and rows
// give the only parallelism. The body needs no scratch beyond its output row. A block-per-row
// version would sum in another order — sound, but no longer bit-identical to the CPU rule.
namespace {
__global__ void layerNormRowsKernel(LayerNormModel model, const double* xlo, const double* xhi,
                                    const double* wlo, const double* whi, const double* blo,
                                    const double* bhi, double* olo, double* ohi, double* mlo,
                                    double* mhi, double* rlo, double* rhi, std::int64_t rows,
                                    std::int64_t cols) {
  for (std::int64_t r = firstIndex(); r < rows; r += strideOf()) {
    const std::int64_t o = r * cols;
    Interval mean{}, rstd{};
    layerNormRow(xlo + o, xhi + o, cols, wlo, whi, blo, bhi, model, olo + o, ohi + o, &mean, &rstd);
    mlo[r] = mean.lo;
    mhi[r] = mean.hi;
    rlo[r] = rstd.lo;
    rhi[r] = rstd.hi;
  }
}
}  // namespace

void launchLayerNormRows(const LayerNormModel& model, const double* xlo, const double* xhi,
                         const double* wlo, const double* whi, const double* blo, const double* bhi,
                         double* olo, double* ohi, double* mlo, double* mhi, double* rlo,
                         double* rhi, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0) return;
  layerNormRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(
      model, xlo, xhi, wlo, whi, blo, bhi, olo, ohi, mlo, mhi, rlo, rhi, rows, cols);
  LB_CUDA_CHECK_LAUNCH(layerNormRowsKernel);
}

// ---- Batch norm rows (one gathered channel per row) ------------------------------------------
// One thread per row, as layer norm: the body's operations in the CPU rule's order, the same bits.
namespace {
__global__ void batchNormRowsKernel(BatchNormModel model, const double* xlo, const double* xhi,
                                    const double* wlo, const double* whi, const double* blo,
                                    const double* bhi, const double* rmlo, const double* rmhi,
                                    const double* rvlo, const double* rvhi, double* olo,
                                    double* ohi, double* mlo, double* mhi, double* rlo, double* rhi,
                                    std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = firstIndex(); r < rows; r += strideOf()) {
    Interval mean{}, rstd{};
    batchNormRowAt(model, r, cols, {xlo, xhi}, {wlo, whi}, {blo, bhi}, {rmlo, rmhi}, {rvlo, rvhi},
                   {olo, ohi}, &mean, &rstd);
    mlo[r] = mean.lo;
    mhi[r] = mean.hi;
    rlo[r] = rstd.lo;
    rhi[r] = rstd.hi;
  }
}
}  // namespace

void launchBatchNormRows(const BatchNormModel& model, const double* xlo, const double* xhi,
                         const double* wlo, const double* whi, const double* blo, const double* bhi,
                         const double* rmlo, const double* rmhi, const double* rvlo,
                         const double* rvhi, double* olo, double* ohi, double* mlo, double* mhi,
                         double* rlo, double* rhi, std::int64_t rows, std::int64_t cols,
                         cudaStream_t stream) {
  if (rows <= 0) return;
  batchNormRowsKernel<<<gridFor(rows), kBlock, 0, stream>>>(model, xlo, xhi, wlo, whi, blo, bhi,
                                                            rmlo, rmhi, rvlo, rvhi, olo, ohi, mlo,
                                                            mhi, rlo, rhi, rows, cols);
  LB_CUDA_CHECK_LAUNCH(batchNormRowsKernel);
}

void launchNanToEntire(double* olo, double* ohi, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  nanToEntireKernel<<<gridFor(n), kBlock, 0, stream>>>(olo, ohi, n);
  LB_CUDA_CHECK_LAUNCH(nanToEntireKernel);
}

void launchGather(const double* xlo, const double* xhi, const double* offsets, const double* flo,
                  const double* fhi, std::int64_t fillCount, double* olo, double* ohi,
                  std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  gatherKernel<<<gridFor(n), kBlock, 0, stream>>>(xlo, xhi, offsets, flo, fhi, fillCount, olo, ohi,
                                                  n);
  LB_CUDA_CHECK_LAUNCH(gatherKernel);
}

void launchGemmSplit(const double* xlo, const double* xhi, std::int64_t count, std::int64_t slices,
                     Format in, double* mid, double* mag, double* flags, cudaStream_t stream) {
  LB_CUDA_CHECK(
      cudaMemsetAsync(flags, 0, static_cast<std::size_t>(3 * slices) * sizeof(double), stream));
  const std::int64_t n = count * slices;
  if (n <= 0) return;
  gemmFlagsKernel<<<gridFor(n), kBlock, 0, stream>>>(xlo, xhi, n, count, in, flags);
  LB_CUDA_CHECK_LAUNCH(gemmFlagsKernel);
  gemmSplitKernel<<<gridFor(n), kBlock, 0, stream>>>(xlo, xhi, n, count, in, mid, mag, flags);
  LB_CUDA_CHECK_LAUNCH(gemmSplitKernel);
}

void launchGemmFinish(const double* g1, const double* g2, const double* g4, const double* flagsA,
                      const double* flagsB, std::int64_t flagsAStride, std::int64_t flagsBStride,
                      const double* blo, const double* bhi, GemmFinish finish, double* olo,
                      double* ohi, std::int64_t count, std::int64_t slices, cudaStream_t stream) {
  const std::int64_t n = count * slices;
  if (n <= 0) return;
  gemmFinishKernel<<<gridFor(n), kBlock, 0, stream>>>(
      g1, g2, g4, flagsA, flagsB, flagsAStride, flagsBStride, blo, bhi, finish, olo, ohi, n, count);
  LB_CUDA_CHECK_LAUNCH(gemmFinishKernel);
}

void launchFlagNonFinite(const double* xlo, const double* xhi, std::int64_t n, double* flag,
                         cudaStream_t stream) {
  if (n <= 0) return;
  flagNonFiniteKernel<<<gridFor(n), kBlock, 0, stream>>>(xlo, xhi, n, flag);
  LB_CUDA_CHECK_LAUNCH(flagNonFiniteKernel);
}

}  // namespace lossbound::gpu
