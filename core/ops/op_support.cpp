#include "core/ops/op_support.h"

#include "core/kernels/kernel_bodies.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <string>

namespace lossbound::ops {

namespace {
constexpr double kInf = __builtin_huge_val();

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

// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------

Shape broadcastAll(const OpArgs& args, const std::vector<Shape>& shapes) {
  Shape s;
  bool first = true;
  for (const Shape& x : shapes) {
    if (first) {
      s = x;
      first = false;
      continue;
    }
    const auto b = broadcastShapes(s, x);
    if (!b) args.fail("shapes " + shapeString(s) + " and " + shapeString(x) + " do not broadcast");
    s = *b;
  }
  return s;
}

BroadcastIndex::BroadcastIndex(const Shape& out, const std::vector<Shape>& inputs)
    : mOut(out), mSize(numel(out)) {
  const std::size_t r = out.size();
  for (const Shape& in : inputs) {
    std::vector<std::int64_t> st(r, 0);
    const auto cs = contiguousStrides(in);
    const std::size_t lead = r - in.size();
    for (std::size_t d = 0; d < in.size(); ++d)
      st[lead + d] = (in[d] == 1 && out[lead + d] != 1) ? 0 : cs[d];
    if (in != out) mTrivial = false;
    mStrides.push_back(std::move(st));
  }
}

void BroadcastIndex::offsets(std::int64_t i, std::int64_t* offsets) const {
  const std::size_t nIn = mStrides.size();
  if (mTrivial) {
    for (std::size_t k = 0; k < nIn; ++k) offsets[k] = i;
    return;
  }
  for (std::size_t k = 0; k < nIn; ++k) offsets[k] = 0;
  std::int64_t rem = i;
  for (int d = static_cast<int>(mOut.size()) - 1; d >= 0; --d) {
    const std::int64_t extent = mOut[static_cast<std::size_t>(d)];
    const std::int64_t idx = extent == 0 ? 0 : rem % extent;
    rem = extent == 0 ? 0 : rem / extent;
    for (std::size_t k = 0; k < nIn; ++k)
      offsets[k] += idx * mStrides[k][static_cast<std::size_t>(d)];
  }
}

Tensor broadcastTo(const OpArgs& args, const Tensor& x, const Shape& s) {
  const auto b = broadcastShapes(x.shape(), s);
  if (!b || *b != s)
    args.fail("cannot broadcast shape " + shapeString(x.shape()) + " to " + shapeString(s));
  if (x.shape() == s) return x;
  const BroadcastIndex ix(s, {x.shape()});
  const auto n = static_cast<std::size_t>(ix.size());
  std::vector<double> lo(n), hi;
  if (x.isInterval()) hi.resize(n);
  std::int64_t off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ix.offsets(static_cast<std::int64_t>(i), &off);
    lo[i] = x.lo()[off];
    if (x.isInterval()) hi[i] = x.hi()[off];
  }
  if (x.isInterval()) return Tensor::interval(s, x.dtype(), std::move(lo), std::move(hi));
  return Tensor::point(s, x.dtype(), std::move(lo));
}

Tensor sumToShape(const Tensor& g, const Shape& s) {
  if (g.shape() == s) return g;
  const Shape& gs = g.shape();
  // Output element offsets: the input shape aligned right, broadcast dims summed.
  const BroadcastIndex ix(gs, {s});
  std::vector<double> out(static_cast<std::size_t>(numel(s)), 0.0);
  const auto v = g.values();
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < ix.size(); ++i) {
    ix.offsets(i, &off);
    out[static_cast<std::size_t>(off)] += v[static_cast<std::size_t>(i)];
  }
  return Tensor::point(s, g.dtype(), std::move(out));
}

// ---------------------------------------------------------------------------------------------

double roundNearest(double x, Format f) {
  switch (f) {
    case Format::Fp64:
      return x;
    case Format::Fp32:
      // The cast is correctly rounded; values beyond the float range are handled by
      // roundToFormat (the cast would be undefined behaviour).
      if (std::fabs(x) <= static_cast<double>(FLT_MAX))
        return static_cast<double>(static_cast<float>(x));
      return roundToFormat(x, f, RoundingDirection::Nearest);
    default:
      return roundToFormat(x, f, RoundingDirection::Nearest);
  }
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

// ---------------------------------------------------------------------------------------------

double gammaUp(std::int64_t n, double u) {
  if (n <= 0) return 0.0;
  const double nu = mul_up(static_cast<double>(n), u);
  if (nu >= 1.0) return kInf;
  return div_up(nu, sub_down(1.0, nu));
}

double sumErrorBound(std::int64_t n, double absSumUp, double u) {
  if (n <= 1 || absSumUp == 0.0) return 0.0;
  return mul_up(gammaUp(n - 1, u), absSumUp);
}

double dotErrorBound(std::int64_t n, double absDotUp, double u, double eta) {
  if (n <= 0) return 0.0;
  const double g = absDotUp == 0.0 ? 0.0 : mul_up(gammaUp(n, u), absDotUp);
  return add_up(g, mul_up(static_cast<double>(n), eta));
}

Interval roundedSumEnclosure(const SumEnclosure& s, std::int64_t n, Format acc, Format store,
                             bool truncating) {
  const double u = unitRoundoff(acc) * (truncating ? 2.0 : 1.0);
  const double e = sumErrorBound(n, s.absSumUp, u);
  // Every partial sum is bounded by (1 + γ)·Σ|x|: if that can pass the largest finite value of
  // the accumulator, an implementation may overflow to ±inf.
  if (!(add_up(s.absSumUp, e) < largestFinite(acc))) return entireInterval();
  const Interval r{sub_down(s.sum.lo, e), add_up(s.sum.hi, e)};
  return roundOutward(r, store);
}

// ---------------------------------------------------------------------------------------------

double addIn(double a, double b, Format f) { return roundNearest(a + b, f); }
double mulIn(double a, double b, Format f) { return roundNearest(a * b, f); }

double fmaIn(double a, double b, double c, Format f) {
  if (f == Format::Fp64) return std::fma(a, b, c);
  if (f == Format::Fp32) {
    const auto isF = [](double x) {
      return std::fabs(x) <= static_cast<double>(FLT_MAX) &&
             static_cast<double>(static_cast<float>(x)) == x;
    };
    if (isF(a) && isF(b) && isF(c))
      return static_cast<double>(
          std::fmaf(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
  }
  // Inputs outside f, or bf16/fp16 accumulation: a faithful result (double rounding).
  return roundNearest(std::fma(a, b, c), f);
}

namespace {
double sequentialSum(std::span<double> t, Format f) {
  double s = t.empty() ? 0.0 : t[0];
  for (std::size_t i = 1; i < t.size(); ++i) s = addIn(s, t[i], f);
  return s;
}
double pairwiseSum(std::span<double> t, Format f) {
  std::size_t n = t.size();
  if (n == 0) return 0.0;
  while (n > 1) {
    const std::size_t half = n / 2;
    for (std::size_t i = 0; i < half; ++i) t[i] = addIn(t[2 * i], t[2 * i + 1], f);
    if (n % 2) t[half] = t[n - 1];
    n = half + n % 2;
  }
  return t[0];
}
double randomTreeSum(std::span<double> t, Format f, std::mt19937_64& rng) {
  std::size_t n = t.size();
  if (n == 0) return 0.0;
  while (n > 1) {
    const std::size_t i = static_cast<std::size_t>(rng() % (n - 1));
    t[i] = addIn(t[i], t[i + 1], f);
    std::move(t.begin() + static_cast<std::ptrdiff_t>(i) + 2,
              t.begin() + static_cast<std::ptrdiff_t>(n),
              t.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    --n;
  }
  return t[0];
}
}  // namespace

double randomSum(std::span<double> terms, Format f, std::mt19937_64& rng) {
  const std::size_t n = terms.size();
  if (n == 0) return 0.0;
  if (n == 1) return roundNearest(terms[0], f);
  std::shuffle(terms.begin(), terms.end(), rng);
  const int mode = static_cast<int>(rng() % 4);
  if (mode == 0) return sequentialSum(terms, f);
  if (mode == 1) return pairwiseSum(terms, f);
  if (mode == 2 && n <= 512) return randomTreeSum(terms, f, rng);
  // Blocked (split-K like): random block size, each block sequential, partials combined.
  const std::size_t b = 1 + static_cast<std::size_t>(rng() % n);
  std::size_t m = 0;
  for (std::size_t start = 0; start < n; start += b) {
    const std::size_t len = std::min(b, n - start);
    terms[m++] = sequentialSum(terms.subspan(start, len), f);
  }
  return (rng() & 1) ? sequentialSum(terms.first(m), f) : pairwiseSum(terms.first(m), f);
}

double randomDot(std::span<const double> a, std::span<const double> b, Format f,
                 std::mt19937_64& rng, std::vector<double>& scratch) {
  const std::size_t n = a.size();
  if (n == 0) return 0.0;
  if (rng() & 1) {
    scratch.resize(n);
    for (std::size_t i = 0; i < n; ++i) scratch[i] = mulIn(a[i], b[i], f);
    return randomSum(scratch, f, rng);
  }
  // FMA chains over random-size blocks of a random permutation, partials summed at random.
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::shuffle(idx.begin(), idx.end(), rng);
  const std::size_t blk = (rng() & 1) ? n : 1 + static_cast<std::size_t>(rng() % n);
  scratch.clear();
  for (std::size_t start = 0; start < n; start += blk) {
    const std::size_t end = std::min(n, start + blk);
    double acc = mulIn(a[idx[start]], b[idx[start]], f);
    for (std::size_t i = start + 1; i < end; ++i) acc = fmaIn(a[idx[i]], b[idx[i]], acc, f);
    scratch.push_back(acc);
  }
  return randomSum(scratch, f, rng);
}

// ---------------------------------------------------------------------------------------------

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

double roundingError(double y, Format c, Format f) {
  const double a = std::fabs(y);
  double e =
      add_up(mul_up(unitRoundoff(f), mul_up(a, 1.0 + unitRoundoff(c))), 0.5 * smallestSubnormal(f));
  if (c != f) e = add_up(e, add_up(mul_up(unitRoundoff(c), a), 0.5 * smallestSubnormal(c)));
  return e;
}

// ---------------------------------------------------------------------------------------------

std::vector<int> reduceDims(const OpArgs& args, std::size_t i, std::string_view name, int rank) {
  const IrValue* v = nullptr;
  if (i < args.size() && args.arg(i).kind != IrValue::Kind::None)
    v = &args.arg(i);
  else if (const IrValue* k = args.kwarg(name); k && k->kind != IrValue::Kind::None)
    v = k;
  std::vector<int> dims;
  if (v &&
      (v->kind == IrValue::Kind::Int || (v->kind == IrValue::Kind::List && !v->list.empty()))) {
    for (std::int64_t d : args.intListArg(i, name)) {
      try {
        dims.push_back(normalizeDim(d, static_cast<std::size_t>(rank)));
      } catch (const std::out_of_range& e) {
        args.fail(e.what());
      }
    }
    if (rank == 0) dims.clear();
  } else {
    for (int d = 0; d < rank; ++d) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

std::optional<DType> dtypeArg(const OpArgs& args, std::size_t i, std::string_view name) {
  if (i < args.size() && args.arg(i).kind == IrValue::Kind::DType) return args.arg(i).dtypeValue;
  if (const IrValue* k = args.kwarg(name); k && k->kind == IrValue::Kind::DType)
    return k->dtypeValue;
  return std::nullopt;
}

bool isNumber(const OpArgs& args, std::size_t i) {
  const auto k = args.arg(i).kind;
  return k == IrValue::Kind::Int || k == IrValue::Kind::Float || k == IrValue::Kind::Bool;
}

Tensor tensorOrScalar(const OpArgs& args, std::size_t i, DType scalarDtype) {
  if (args.isTensor(i)) return args.tensor(i);
  if (!isNumber(args, i))
    args.fail("argument " + std::to_string(i) + " should be a tensor or a number");
  return Tensor::scalar(args.numberArg(i, ""), scalarDtype);
}

Shape reducedShape(const Shape& s, const std::vector<int>& dims, bool keepdim) {
  Shape out;
  for (std::size_t d = 0; d < s.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
    if (!reduced)
      out.push_back(s[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

ReductionLayout reductionLayout(const Shape& s, const std::vector<int>& dims) {
  const auto strides = contiguousStrides(s);
  Shape keptShape, redShape;
  std::vector<std::int64_t> keptStride, redStride;
  for (std::size_t d = 0; d < s.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
    (reduced ? redShape : keptShape).push_back(s[d]);
    (reduced ? redStride : keptStride).push_back(strides[d]);
  }
  auto offsets = [](const Shape& shape, const std::vector<std::int64_t>& stride) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(numel(shape)));
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t rem = static_cast<std::int64_t>(i), off = 0;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        const auto du = static_cast<std::size_t>(d);
        off += (rem % shape[du]) * stride[du];
        rem /= shape[du];
      }
      out[i] = off;
    }
    return out;
  };
  return {offsets(keptShape, keptStride), offsets(redShape, redStride)};
}

// ---------------------------------------------------------------------------------------------

namespace {
class LambdaRule final : public OpRule {
 public:
  explicit LambdaRule(RuleFns fns) : mFns(std::move(fns)) {}
  std::vector<Tensor> point(const OpArgs& a, OpContext& c) const override {
    return mFns.point(a, c);
  }
  std::vector<Tensor> interval(const OpArgs& a, OpContext& c) const override {
    return mFns.interval(a, c);
  }
  std::vector<Tensor> random(const OpArgs& a, OpContext& c) const override {
    return mFns.random(a, c);
  }
  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor> o,
                                         std::span<const Tensor> g, OpContext& c) const override {
    return mFns.vjp(a, o, g, c);
  }
  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& c) const override {
    return mFns.localError(a, o, c);
  }

 private:
  RuleFns mFns;
};
}  // namespace

std::shared_ptr<const OpRule> makeRule(RuleFns fns) {
  return std::make_shared<LambdaRule>(std::move(fns));
}

std::vector<Tensor> zeroLocalError(std::span<const Tensor> outputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : outputs) out.push_back(Tensor::full(t.shape(), t.dtype(), 0.0));
  return out;
}

std::vector<std::optional<Tensor>> noGradients(const OpArgs& args) {
  std::vector<std::optional<Tensor>> out;
  for (const Tensor* t : args.tensorInputs()) {
    if (isFloating(t->dtype()))
      out.emplace_back(Tensor::full(t->shape(), t->dtype(), 0.0));
    else
      out.emplace_back(std::nullopt);
  }
  return out;
}

}  // namespace lossbound::ops
