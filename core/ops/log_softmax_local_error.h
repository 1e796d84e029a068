#pragma once
// Log-softmax's local error in closed form (SoftmaxRule::adjointLocalError): the bound r_i of the
// first-order term Σ|g_i|·r_i without the rigorous interval row (core/kernels/softmax_row.h), whose
// four directed exps per entry were most of the first-order replay's softmax time. Derivation:
// the .cpp.

#include "core/kernels/softmax_row.h"

#include <cstdint>

namespace lossbound::ops {

/// Writes r[j] >= |y − ŷ_j| for every execution y of log-softmax under model m (the model of
/// core/ops/softmax_ops.cpp's file comment, round to nearest) on the exact inputs x[0..n) of one
/// row, ŷ the binary64 point outputs, for the entries whose `needed` flag is set (all when null;
/// the others are left as they were). Returns false, writing nothing useful, when the row holds
/// NaN or +inf, has no entry above −inf, or a bound cannot be shown (the caller then encloses the
/// row with the interval kernel).
bool logSoftmaxRowLocalErrors(const double* x, const double* yPoint, std::int64_t n,
                              const kernels::SoftmaxModel& m, const unsigned char* needed,
                              double* r);

}  // namespace lossbound::ops
