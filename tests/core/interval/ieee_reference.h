#pragma once
// Test-only oracle for the directed-rounding table: the same operations computed by the FPU in
// IEEE roundTowardNegative / roundTowardPositive mode (fesetround), in a translation unit that is
// compiled with -frounding-math at -O0 so the compiler neither folds nor reorders them.

#include <cstddef>

namespace lossbound::test {

/// The primitive that an IEEE reference computes.
enum class IeeeOp { Add, Sub, Mul, Div, Sqrt, Fma };

/// Computes out[i] = op(a[i], b[i], c[i]) for i < n with one hardware rounding toward -infinity
/// (down) or +infinity (!down); unary ops ignore b and c, binary ops ignore c. Restores
/// round-to-nearest before returning.
void ieeeDirected(IeeeOp op, bool down, const double* a, const double* b, const double* c,
                  double* out, std::size_t n);

}  // namespace lossbound::test
