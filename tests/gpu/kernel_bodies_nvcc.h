#pragma once
// The kernel bodies compiled by nvcc's host pass (kernel_bodies_nvcc.cu), exposed to the plain
// C++ test so that it can compare them bit for bit with the same bodies compiled by g++.

#include "core/kernels/kernel_bodies.h"
#include "core/kernels/layer_norm_row.h"
#include "core/kernels/softmax_row.h"

#include <cstdint>

namespace lossbound::kernels::test {

/// unaryBody compiled by nvcc (host side).
Interval nvccUnaryBody(UnaryOp op, Interval x, const ElementwiseModel& model);
/// binaryBody compiled by nvcc (host side).
Interval nvccBinaryBody(BinaryOp op, Interval x, Interval y, const ElementwiseModel& model);
/// storeBody compiled by nvcc (host side).
Interval nvccStoreBody(Interval x, Format f);
/// midRad compiled by nvcc (host side): returns {m, r}.
Interval nvccMidRad(double lo, double hi, Format input);
/// makeMatmulBound + matmulFinish compiled by nvcc (host side).
Interval nvccMatmulFinish(double g1, double g2, double g4, double k, Format acc, double u,
                          bool points, Format storage);
/// accumulate (in order) + sumFinish compiled by nvcc (host side).
Interval nvccSum(const Interval* x, int n, Format acc, Format store, bool truncating);
/// makeSoftmaxModel compiled by nvcc (host side).
SoftmaxModel nvccMakeSoftmaxModel(Format c, Format s, bool truncating, int kExp, int kLog);
/// softmaxRow compiled by nvcc (host side); scratch holds softmaxRowScratch(n) doubles.
void nvccSoftmaxRow(const double* xlo, const double* xhi, std::int64_t n, const SoftmaxModel& m,
                    bool log, double* ylo, double* yhi, double* scratch);
/// layerNormRow compiled by nvcc (host side).
void nvccLayerNormRow(const double* xlo, const double* xhi, std::int64_t n, const double* wlo,
                      const double* whi, const double* blo, const double* bhi,
                      const LayerNormModel& m, double* ylo, double* yhi, Interval* mean,
                      Interval* rstd);

}  // namespace lossbound::kernels::test
