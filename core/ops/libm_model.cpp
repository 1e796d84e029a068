// The candidate's libm: ulp tables (CUDA 13, glibc 2.36) and their use in each domain.
#include "core/ops/libm_model.h"

#include "core/ops/formats.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace lossbound::ops {

int publishedUlps(LibmFn fn, Format f) {
  if (f == Format::Fp64) {
    // glibc 2.36 x86_64 libm-test-ulps "double" and CUDA 13 double-precision table, maximum.
    switch (fn) {
      case LibmFn::Exp:
        return 1;
      case LibmFn::Expm1:
        return 1;
      case LibmFn::Log:
        return 1;
      case LibmFn::Log1p:
        return 1;
      case LibmFn::Tanh:
        return 2;
      case LibmFn::Erf:
        return 2;
      case LibmFn::Sigmoid:
        return 3;  // exp (1) + add (0.5) + div (0.5), relative
      case LibmFn::Pow:
        return 2;
      case LibmFn::Rsqrt:
        return 1;  // 1/sqrt: two correctly rounded steps; CUDA rsqrt 1 ulp
      case LibmFn::Sin:
      case LibmFn::Cos:
        return 2;  // CUDA 13 sin/cos 2 (full range); glibc 2.36 x86_64 sin/cos "double" 1
    }
    return 4;
  }
  // Single precision: CUDA 13 single-precision table (non-fast-math) and glibc 2.36 "float".
  switch (fn) {
    case LibmFn::Exp:
      return 2;
    case LibmFn::Expm1:
      return 1;
    case LibmFn::Log:
      return 1;
    case LibmFn::Log1p:
      return 1;
    case LibmFn::Tanh:
      return 2;
    case LibmFn::Erf:
      return 2;
    case LibmFn::Sigmoid:
      return 4;  // exp (2) + add (0.5) + div (0.5), relative
    case LibmFn::Pow:
      return 4;
    case LibmFn::Rsqrt:
      return 2;
    case LibmFn::Sin:
    case LibmFn::Cos:
      // CUDA 13 sinf/cosf 2 (full range, without -use_fast_math); glibc 2.36 x86_64 sin/cos
      // "float" 1; PyTorch's CPU kernels call SLEEF's Sleef_sinf*_u10 / cosf*_u10 (1.0 ulp).
      return 2;
  }
  return 4;
}

int modelUlps(LibmFn fn, Format f) { return publishedUlps(fn, f) + 1; }

namespace {
/// Relative size of `ulps` ulps in f, with slack for ulp(computed) vs ulp(exact) (ulps ≤ 8).
double relUlps(int ulps, Format f) {
  return mul_up(mul_up(2.0 * ulps, unitRoundoff(f)), 1.0 + 0x1p-10);
}
}  // namespace

Interval widenUlps(Interval x, int ulps, Format f) {
  x = sanitize(x);
  if (isEmpty(x) || ulps <= 0) return x;
  const double rel = relUlps(ulps, f);
  const double abs = mul_up(static_cast<double>(ulps), smallestSubnormal(f));
  const double lo = sub_down(x.lo, add_up(mul_up(rel, std::fabs(x.lo)), abs));
  const double hi = add_up(x.hi, add_up(mul_up(rel, std::fabs(x.hi)), abs));
  return {lo, hi};
}

double perturbUlps(double v, int publishedUlpsCount, Format f, std::mt19937_64& rng) {
  double w = roundNearest(v, f);
  if (!std::isfinite(w) || publishedUlpsCount <= 0) return w;
  // For fp64 the binary64 libm value is itself up to publishedUlps off; move at most 1 more.
  const int k = f == Format::Fp64 ? 1 : publishedUlpsCount;
  const int j = static_cast<int>(rng() % static_cast<std::uint64_t>(2 * k + 1)) - k;
  for (int i = 0; i < std::abs(j); ++i) {
    if (f == Format::Fp64) {
      w = std::nextafter(w, j > 0 ? kInf : -kInf);
    } else if (f == Format::Fp32) {
      w = static_cast<double>(
          std::nextafterf(static_cast<float>(w), j > 0 ? HUGE_VALF : -HUGE_VALF));
    } else {
      w = roundToFormat(std::nextafter(w, j > 0 ? kInf : -kInf), f,
                        j > 0 ? RoundingDirection::Up : RoundingDirection::Down);
    }
  }
  return w;
}

Interval libmEnclosure(Interval exact, LibmFn fn, Format compute, Format store) {
  return roundOutward(widenUlps(exact, modelUlps(fn, compute), compute), store);
}

double libmRandom(double exactValue, LibmFn fn, Format compute, Format store,
                  std::mt19937_64& rng) {
  return roundNearest(perturbUlps(exactValue, publishedUlps(fn, compute), compute, rng), store);
}

double libmLocalError(double y, LibmFn fn, Format compute, Format store) {
  const int k = modelUlps(fn, compute);
  double e = add_up(mul_up(relUlps(k, compute), std::fabs(y)),
                    mul_up(static_cast<double>(k), smallestSubnormal(compute)));
  if (store != compute)
    e = add_up(e, add_up(mul_up(mul_up(unitRoundoff(store), 1.0 + 0x1p-10), std::fabs(y)),
                         smallestSubnormal(store)));
  return e;
}

}  // namespace lossbound::ops
