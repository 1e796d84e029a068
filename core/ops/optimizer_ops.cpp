// Optimizer updates: addcmul addcdiv lerp (Scalar and Tensor weights) and their in-place forms;
// SGD and AdamW otherwise use elementwise ops (mul_, add_ with alpha, sqrt, div, ...).
//
// Error model of "any reasonable implementation" (PyTorch CPU/CUDA pointwise kernels):
// - addcmul: self + value·t1·t2 evaluated as (value·t1)·t2 (C++ left to right), or another
//   association, each product rounded in opmath or in the storage format, the final addition
//   possibly fused (FMA); the interval rule takes the hull over associations with every product
//   rounded outward (RO ⊇ exact covers the fused forms);
// - addcdiv: self + value·t1/t2 as (value·t1)/t2 or value·(t1/t2), same treatment;
// - lerp: PyTorch's two-branch formula, weight < 0.5 (or |weight| < 0.5 in later versions):
//   self + w·(end - self), else end - (end - self)·(1 - w); both branches when ambiguous.
#include "core/ops/broadcasting.h"
#include "core/ops/error_bounds.h"
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/random_arith.h"
#include "core/ops/registry.h"

#include <cmath>
#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

enum class Kind { Addcmul, Addcdiv, Lerp };

/// The third operand: a tensor (addcmul/addcdiv t2, lerp.Tensor weight) or lerp's scalar weight.
Tensor thirdOperand(const OpArgs& a) {
  if (a.isTensor(2)) return a.tensor(2);
  return Tensor::scalar(a.numberArg(2, "weight"), DType::Float64);
}

double valueOf(const OpArgs& a, Kind k) {
  return k == Kind::Lerp ? 1.0 : a.numberArg(3, "value", 1.0);
}

double exact(Kind k, double s, double x, double y, double v) {
  switch (k) {
    case Kind::Addcmul:
      return s + v * x * y;
    case Kind::Addcdiv:
      return s + v * x / y;
    case Kind::Lerp:
      return y < 0.5 ? s + y * (x - s) : x - (x - s) * (1 - y);  // PyTorch's formula
  }
  return s;
}

/// addcmul addcdiv lerp (Scalar and Tensor forms, in place): the hull over the associations and
/// branches of the file comment, each product rounded outward; random picks one per element.
class UpdateRule final : public OpRule {
 public:
  explicit UpdateRule(Kind kind) : mKind(kind) {}

  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const double v = valueOf(a, mKind);
    return {mapPoint3(a, a.tensor(0), a.tensor(1), thirdOperand(a), a.outSpec().dtype,
                      [&](double s, double x, double y) { return exact(mKind, s, x, y, v); })};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format f = outFormat(a, ctx);
    const Interval v = scalarEnclosure(valueOf(a, mKind), f);
    const bool one = valueOf(a, mKind) == 1.0;
    const bool scalarWeight = mKind == Kind::Lerp && !a.isTensor(2);
    Tensor w = thirdOperand(a);
    if (scalarWeight) {
      const Interval e = scalarEnclosure(w.values()[0], f);
      w = Tensor::interval({}, DType::Float64, {e.lo}, {e.hi});
    }
    auto ro = [f](Interval x) { return roundOutward(x, f); };
    return {mapInterval3(
        a, a.tensor(0), a.tensor(1), w, t, [&](Interval s, Interval x, Interval y) -> Interval {
          switch (mKind) {
            case Kind::Addcmul: {
              const Interval p =
                  one ? ro(mul(x, y))
                      : hull(hull(ro(mul(ro(mul(v, x)), y)), ro(mul(v, ro(mul(x, y))))),
                             ro(mul(x, ro(mul(v, y)))));
              return ro(add(s, p));
            }
            case Kind::Addcdiv: {
              const Interval p =
                  one ? ro(div(x, y)) : hull(ro(div(ro(mul(v, x)), y)), ro(mul(v, ro(div(x, y)))));
              return ro(add(s, p));
            }
            case Kind::Lerp: {
              const Interval d = ro(sub(x, s));
              Interval r = emptyInterval();
              const bool maybeLow = y.lo < 0.5, maybeHigh = y.hi >= 0.5 || y.lo <= -0.5;
              if (maybeLow) r = hull(r, ro(add(s, ro(mul(y, d)))));
              if (maybeHigh) r = hull(r, ro(sub(x, ro(mul(d, ro(sub(Interval{1.0, 1.0}, y)))))));
              return r;
            }
          }
          return entireInterval();
        })};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    std::mt19937_64& rng = *ctx.rng;
    const DType t = a.outSpec().dtype;
    const Format f = outFormat(a, ctx);
    const Format c = (f == Format::Fp64 || (rng() & 1)) ? f : Format::Fp32;
    const double v = randomScalar(valueOf(a, mKind), f, rng);
    Tensor w = thirdOperand(a);
    if (mKind == Kind::Lerp && !a.isTensor(2))
      w = Tensor::scalar(randomScalar(w.values()[0], f, rng), DType::Float64);
    const int assoc = static_cast<int>(rng() % 3);
    const bool fused = (rng() & 1) != 0;
    const bool absBranch = (rng() & 1) != 0;
    return {mapPoint3(a, a.tensor(0), a.tensor(1), w, t, [&](double s, double x, double y) {
      double r = 0;
      switch (mKind) {
        case Kind::Addcmul: {
          double p1, p2;  // value·t1·t2 = p1·p2 with one product rounded first
          if (assoc == 0) {
            p1 = mulIn(v, x, c);
            p2 = y;
          } else if (assoc == 1) {
            p1 = v;
            p2 = mulIn(x, y, c);
          } else {
            p1 = x;
            p2 = mulIn(v, y, c);
          }
          r = fused ? fmaIn(p1, p2, s, c) : addIn(s, mulIn(p1, p2, c), c);
          break;
        }
        case Kind::Addcdiv: {
          const double q = assoc == 0 ? roundNearest(mulIn(v, x, c) / y, c)
                                      : mulIn(v, roundNearest(x / y, c), c);
          r = addIn(s, q, c);
          break;
        }
        case Kind::Lerp: {
          const double d = addIn(x, -s, c);
          const bool low = absBranch ? std::fabs(y) < 0.5 : y < 0.5;
          if (low)
            r = fused ? fmaIn(y, d, s, c) : addIn(s, mulIn(y, d, c), c);
          else
            r = addIn(x, -mulIn(d, addIn(1.0, -y, c), c), c);
          break;
        }
      }
      return roundNearest(r, f);
    })};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    const Tensor &s = a.tensor(0), &x = a.tensor(1);
    const Tensor y = thirdOperand(a);
    const double v = valueOf(a, mKind);
    const DType gt = g[0].dtype();
    auto grad = [&](const Tensor& input, const Tensor& full) -> std::optional<Tensor> {
      if (!isFloating(input.dtype())) return std::nullopt;
      return sumToShape(full, input.shape()).withDtype(input.dtype());
    };
    std::vector<std::optional<Tensor>> out;
    switch (mKind) {
      case Kind::Addcmul:
        out.push_back(grad(s, mapPoint2(a, g[0], s, gt, [](double gv, double) { return gv; })));
        out.push_back(grad(x, mapPoint3(a, g[0], x, y, gt, [v](double gv, double, double yv) {
                             return gv * v * yv;
                           })));
        out.push_back(grad(y, mapPoint3(a, g[0], x, y, gt, [v](double gv, double xv, double) {
                             return gv * v * xv;
                           })));
        break;
      case Kind::Addcdiv:
        out.push_back(grad(s, mapPoint2(a, g[0], s, gt, [](double gv, double) { return gv; })));
        out.push_back(grad(x, mapPoint3(a, g[0], x, y, gt, [v](double gv, double, double yv) {
                             return gv * v / yv;
                           })));
        out.push_back(grad(y, mapPoint3(a, g[0], x, y, gt, [v](double gv, double xv, double yv) {
                             return -gv * v * xv / (yv * yv);
                           })));
        break;
      case Kind::Lerp:
        out.push_back(grad(s, mapPoint3(a, g[0], s, y, gt,
                                        [](double gv, double, double w) { return gv * (1 - w); })));
        out.push_back(grad(
            x, mapPoint3(a, g[0], x, y, gt, [](double gv, double, double w) { return gv * w; })));
        if (a.isTensor(2))
          out.push_back(grad(y, mapPoint3(a, g[0], s, x, gt, [](double gv, double sv, double ev) {
                               return gv * (ev - sv);
                             })));
        break;
    }
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> outs,
                                 OpContext& ctx) const override {
    const DType t = a.outSpec().dtype;
    const Format f = outFormat(a, ctx), c = opmathFormat(ctx.precision, t);
    const double uF = unitRoundoff(f);
    const double v = valueOf(a, mKind);
    // Intermediates round in opmath or in F (u_F bounds both); the scalar value/weight converts
    // with relative error <= u_F. First order: the intermediate magnitudes times their errors.
    const Tensor mags = mapPoint3(a, a.tensor(0), a.tensor(1), thirdOperand(a), t,
                                  [&](double s, double x, double y) {
                                    switch (mKind) {
                                      case Kind::Addcmul:
                                        return 4 * uF * std::fabs(v * x * y);
                                      case Kind::Addcdiv:
                                        return 4 * uF * std::fabs(v * x / y);
                                      case Kind::Lerp: {
                                        const double d = std::fabs(x - s);
                                        return uF * (3 * d * (std::fabs(y) + std::fabs(1 - y)) + d);
                                      }
                                    }
                                    return 0.0;
                                  });
    return {mapPoint2(a, outs[0], mags, t, [&](double y, double m) {
      return add_up(roundingError(y, c, f), m * (1 + 8 * uF));
    })};
  }

 private:
  Kind mKind;
};

}  // namespace

void registerOptimizerOps(OpRegistry& r) {
  for (const char* op : {"aten.addcmul.default", "aten.addcmul_.default"})
    r.add(op, std::make_shared<const UpdateRule>(Kind::Addcmul));
  for (const char* op : {"aten.addcdiv.default", "aten.addcdiv_.default"})
    r.add(op, std::make_shared<const UpdateRule>(Kind::Addcdiv));
  for (const char* op :
       {"aten.lerp.Scalar", "aten.lerp_.Scalar", "aten.lerp.Tensor", "aten.lerp_.Tensor"})
    r.add(op, std::make_shared<const UpdateRule>(Kind::Lerp));
}

}  // namespace lossbound
