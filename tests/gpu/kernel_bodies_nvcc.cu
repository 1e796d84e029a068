// The host side of a CUDA translation unit: the kernel bodies as nvcc compiles them
// (__host__ __device__, host pass). A trivial kernel keeps the device pass honest too: the same
// bodies must also compile for the device in this unit.
#include "tests/gpu/kernel_bodies_nvcc.h"

namespace lossbound::kernels::test {

__global__ void unaryBodyKernel(UnaryOp op, ElementwiseModel model, const Interval* x,
                                Interval* out) {
  out[threadIdx.x] = unaryBody(op, x[threadIdx.x], model);
}

__global__ void softmaxRowKernel(const double* xlo, const double* xhi, std::int64_t n,
                                 SoftmaxModel m, bool log, double* ylo, double* yhi,
                                 double* scratch) {
  softmaxRow(xlo, xhi, n, m, log, ylo, yhi, scratch);
}

Interval nvccUnaryBody(UnaryOp op, Interval x, const ElementwiseModel& model) {
  return unaryBody(op, x, model);
}

Interval nvccBinaryBody(BinaryOp op, Interval x, Interval y, const ElementwiseModel& model) {
  return binaryBody(op, x, y, model);
}

Interval nvccStoreBody(Interval x, Format f) { return storeBody(x, f); }

Interval nvccMidRad(double lo, double hi, Format input) {
  double m = 0.0, r = 0.0;
  midRad(lo, hi, input, &m, &r);
  return {m, r};
}

Interval nvccMatmulFinish(double g1, double g2, double g4, double k, Format acc, double u,
                          bool points, Format storage) {
  return matmulFinish(g1, g2, g4, makeMatmulBound(k, acc, u, points), storage);
}

Interval nvccSum(const Interval* x, int n, Format acc, Format store, bool truncating) {
  SumState s;
  for (int i = 0; i < n; ++i) accumulate(s, x[i]);
  return sumFinish(s, static_cast<double>(n), acc, store, truncating);
}

SoftmaxModel nvccMakeSoftmaxModel(Format c, Format s, bool truncating, int kExp, int kLog) {
  return makeSoftmaxModel(c, s, truncating, kExp, kLog);
}

void nvccSoftmaxRow(const double* xlo, const double* xhi, std::int64_t n, const SoftmaxModel& m,
                    bool log, double* ylo, double* yhi, double* scratch) {
  softmaxRow(xlo, xhi, n, m, log, ylo, yhi, scratch);
}

__global__ void layerNormRowKernel(LayerNormModel m, const double* x, std::int64_t n, double* y,
                                   Interval* stats) {
  layerNormRow(x, x, n, nullptr, nullptr, nullptr, nullptr, m, y, y + n, stats, stats + 1);
}

void nvccLayerNormRow(const double* xlo, const double* xhi, std::int64_t n, const double* wlo,
                      const double* whi, const double* blo, const double* bhi,
                      const LayerNormModel& m, double* ylo, double* yhi, Interval* mean,
                      Interval* rstd) {
  layerNormRow(xlo, xhi, n, wlo, whi, blo, bhi, m, ylo, yhi, mean, rstd);
}

}  // namespace lossbound::kernels::test
