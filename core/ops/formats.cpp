// Formats of an op under the precision model, PyTorch type promotion, storage rounding.
#include "core/ops/formats.h"

#include "core/kernels/kernel_bodies.h"
#include "core/ops/broadcasting.h"

#include <cfloat>
#include <cmath>

namespace lossbound::ops {

namespace {
int rankOf(DType t) {
  switch (t) {
    case DType::Bool:
      return 0;
    case DType::UInt8:
      return 1;
    case DType::Int8:
      return 2;
    case DType::Int16:
      return 3;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 5;
    case DType::Float16:
      return 6;
    case DType::BFloat16:
      return 7;
    case DType::Float32:
      return 8;
    case DType::Float64:
      return 9;
  }
  return 9;
}
int category(DType t) { return t == DType::Bool ? 0 : (isFloating(t) ? 2 : 1); }
DType higher(DType a, DType b) {
  if ((a == DType::Float16 && b == DType::BFloat16) ||
      (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return rankOf(a) >= rankOf(b) ? a : b;
}
}  // namespace

bool isIntegral(DType t) { return !isFloating(t); }

Format outFormat(const OpArgs& args, const OpContext& ctx, std::size_t k) {
  const DType t = args.outSpec(k).dtype;
  if (isIntegral(t)) return Format::Fp64;
  return ctx.precision.storageFor(t);
}

Format opmathFormat(const PrecisionModel& pm, DType dtype) {
  if (isIntegral(dtype)) return Format::Fp64;
  return pm.storageFor(dtype) == Format::Fp64 ? Format::Fp64 : Format::Fp32;
}

Format accumulationFormat(const PrecisionModel& pm, DType dtype) {
  if (isIntegral(dtype)) return Format::Fp64;
  const Format s = pm.storageFor(dtype);
  return (s == Format::Bf16 || s == Format::Fp16) ? Format::Fp32 : s;
}

DType promoteTypes(const Tensor& a, const Tensor& b) {
  const DType ta = a.dtype(), tb = b.dtype();
  const int ca = category(ta), cb = category(tb);
  const bool da = a.rank() > 0, db = b.rank() > 0;
  if (ca == cb) {
    if (da != db) return da ? ta : tb;
    return higher(ta, tb);
  }
  const bool aWins = ca > cb;
  const DType w = aWins ? ta : tb;
  const bool winnerDim = aWins ? da : db, loserDim = aWins ? db : da;
  if (!winnerDim && loserDim) return category(w) == 2 ? DType::Float32 : DType::Int64;
  return w;
}

double roundTowardZero(double x, Format f) {
  return roundToFormat(x, f, x < 0 ? RoundingDirection::Up : RoundingDirection::Down);
}

Tensor roundOutwardTensor(const Tensor& t, Format f) {
  if (isIntegral(t.dtype()) || f == Format::Fp64) return t.toInterval();
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<double> lo(n), hi(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Interval r = roundOutward(t.at(static_cast<std::int64_t>(i)), f);
    lo[i] = r.lo;
    hi[i] = r.hi;
  }
  return Tensor::interval(t.shape(), t.dtype(), std::move(lo), std::move(hi));
}

Tensor roundNearestTensor(const Tensor& t, Format f) {
  if (isIntegral(t.dtype()) || f == Format::Fp64) return t.isInterval() ? t.midpoint() : t;
  return mapPoint(t, t.dtype(), [f](double x) { return roundNearest(x, f); });
}

Interval scalarEnclosure(double s, Format f) { return kernels::scalarEnclosure(s, f); }

double randomScalar(double s, Format f, std::mt19937_64& rng) {
  if (f == Format::Fp64) return s;
  switch (rng() % 3) {
    case 0:
      return s;
    case 1:
      return roundNearest(s, Format::Fp32);
    default:
      return roundNearest(s, f);
  }
}

}  // namespace lossbound::ops
