// Compiled with -frounding-math -O0 (see CMakeLists.txt): every operation below reads the dynamic
// rounding mode at run time. The volatile operands are a second guard against constant folding.
#include "tests/core/interval/ieee_reference.h"

#include <cfenv>
#include <cmath>

namespace lossbound::test {

void ieeeDirected(IeeeOp op, bool down, const double* a, const double* b, const double* c,
                  double* out, std::size_t n) {
  const int previous = std::fegetround();
  std::fesetround(down ? FE_DOWNWARD : FE_UPWARD);
  for (std::size_t i = 0; i < n; ++i) {
    volatile double x = a[i];
    volatile double y = b ? b[i] : 0.0;
    volatile double z = c ? c[i] : 0.0;
    volatile double r = 0.0;
    switch (op) {
      case IeeeOp::Add:
        r = x + y;
        break;
      case IeeeOp::Sub:
        r = x - y;
        break;
      case IeeeOp::Mul:
        r = x * y;
        break;
      case IeeeOp::Div:
        r = x / y;
        break;
      case IeeeOp::Sqrt:
        r = std::sqrt(x);
        break;
      case IeeeOp::Fma:
        r = std::fma(x, y, z);
        break;
    }
    out[i] = r;
  }
  std::fesetround(previous);
}

}  // namespace lossbound::test
