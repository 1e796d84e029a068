#include "tests/core/ops/op_harness.h"

#include "core/backend.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace lossbound::test {

IrValue ref(const std::string& name, int index) {
  IrValue v;
  v.kind = IrValue::Kind::Ref;
  v.ref = ValueRef{name, index};
  return v;
}
IrValue in(int i) { return lossbound::test::ref("in" + std::to_string(i)); }
IrValue num(double x) {
  IrValue v;
  v.kind = IrValue::Kind::Float;
  v.floatValue = x;
  return v;
}
IrValue integer(std::int64_t x) {
  IrValue v;
  v.kind = IrValue::Kind::Int;
  v.intValue = x;
  return v;
}
IrValue flag(bool b) {
  IrValue v;
  v.kind = IrValue::Kind::Bool;
  v.boolValue = b;
  return v;
}
IrValue ints(const std::vector<std::int64_t>& xs) {
  IrValue v;
  v.kind = IrValue::Kind::List;
  for (auto x : xs) v.list.push_back(integer(x));
  return v;
}
IrValue list(std::vector<IrValue> xs) {
  IrValue v;
  v.kind = IrValue::Kind::List;
  v.list = std::move(xs);
  return v;
}
IrValue dtypeValue(DType t) {
  IrValue v;
  v.kind = IrValue::Kind::DType;
  v.dtypeValue = t;
  return v;
}
IrValue none() { return IrValue{}; }

Format formatOf(DType t, const PrecisionModel& pm) {
  if (!isFloating(t)) return Format::Fp64;
  return pm.storageFor(t);
}

PrecisionModel modelFor(std::optional<Format> f) {
  PrecisionModel pm;
  pm.override = f;
  return pm;
}

DType dtypeFor(Format f) {
  switch (f) {
    case Format::Fp64:
      return DType::Float64;
    case Format::Fp32:
    case Format::Tf32:
      return DType::Float32;
    case Format::Bf16:
      return DType::BFloat16;
    case Format::Fp16:
      return DType::Float16;
  }
  return DType::Float64;
}

namespace {

Backend& backend() {
  static std::unique_ptr<Backend> b = createCpuBackend();
  return *b;
}

const OpRule& ruleFor(const std::string& op) {
  const OpRule* r = opRegistry().find(op);
  if (!r) throw std::runtime_error("op " + op + " is not registered");
  return *r;
}

/// A node bound to input tensors; evaluates a domain of its rule.
struct Bound {
  Node node;
  std::vector<Tensor> inputs;

  Bound(const OpCase& c, std::vector<Tensor> ins) : inputs(std::move(ins)) {
    node.name = "case";
    node.op = c.op;
    node.args = c.args;
    node.kwargs = c.kwargs;
    for (DType t : c.outDtypes) node.outputs.push_back(TensorSpec{{}, t});
  }
  OpArgs args() const {
    return OpArgs(node, [this](const ValueRef& r) -> const Tensor& {
      if (r.name.size() < 3 || r.name.compare(0, 2, "in") != 0)
        throw std::runtime_error("harness: unknown reference " + r.name);
      return inputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
    });
  }
  void setShapes(const std::vector<Tensor>& outs) {
    for (std::size_t k = 0; k < outs.size() && k < node.outputs.size(); ++k)
      node.outputs[k].shape = outs[k].shape();
  }
};

std::vector<Tensor> midpoints(const std::vector<Tensor>& ins) {
  std::vector<Tensor> out;
  for (const Tensor& t : ins) out.push_back(t.midpoint());
  return out;
}

std::string describe(const Tensor& t, std::int64_t i) {
  std::ostringstream s;
  s.precision(17);
  const Interval v = t.at(i);
  if (v.lo == v.hi)
    s << v.lo;
  else
    s << "[" << v.lo << ", " << v.hi << "]";
  return s.str();
}

std::string inputsString(const std::vector<Tensor>& ins) {
  std::ostringstream s;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    s << " in" << k << shapeString(ins[k].shape()) << "=";
    const std::int64_t n = std::min<std::int64_t>(ins[k].numel(), 6);
    for (std::int64_t i = 0; i < n; ++i) s << (i ? "," : "") << describe(ins[k], i);
    if (ins[k].numel() > n) s << ",...";
  }
  return s.str();
}

double roundNearestIn(double x, Format f) {
  if (f == Format::Fp64) return x;
  return roundToFormat(x, f == Format::Tf32 ? Format::Fp32 : f, RoundingDirection::Nearest);
}

}  // namespace

Tensor sampleInside(const Tensor& t, std::mt19937_64& rng) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<double> v(n);
  const Format f = storageFormat(t.dtype()).value_or(Format::Fp64);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    const Interval x = t.at(static_cast<std::int64_t>(i));
    if (!isFloating(t.dtype())) {
      const auto lo = static_cast<std::int64_t>(std::ceil(x.lo)),
                 hi = static_cast<std::int64_t>(std::floor(x.hi));
      v[i] = static_cast<double>(
          hi <= lo
              ? lo
              : lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
      continue;
    }
    double s;
    switch (rng() % 5) {
      case 0:
        s = x.lo;
        break;
      case 1:
        s = x.hi;
        break;
      case 2:
        s = midpoint(x);
        break;
      default:
        s = x.lo + (x.hi - x.lo) * u01(rng);
        break;
    }
    if (!(s >= x.lo)) s = x.lo;
    if (!(s <= x.hi)) s = x.hi;
    const double r = roundNearestIn(s, f);
    if (rng() % 4 != 0 && r >= x.lo && r <= x.hi) s = r;  // mostly values the candidate can store
    v[i] = s;
  }
  return Tensor::point(t.shape(), t.dtype(), std::move(v));
}

EnclosureReport checkEnclosure(const OpCase& c, int trials, std::mt19937_64& rng) {
  const OpRule& rule = ruleFor(c.op);
  EnclosureReport rep;
  OpContext ctx{c.precision, backend(), &rng};

  Bound mid(c, midpoints(c.inputs));
  const std::vector<Tensor> pointOut = rule.point(mid.args(), ctx);
  Bound box(c, c.inputs);
  box.setShapes(pointOut);
  const std::vector<Tensor> encl = rule.interval(box.args(), ctx);
  if (encl.size() != pointOut.size()) {
    rep.escapes = 1;
    rep.firstEscape = "interval() returned " + std::to_string(encl.size()) + " outputs, point() " +
                      std::to_string(pointOut.size());
    return rep;
  }
  for (std::size_t k = 0; k < encl.size(); ++k) {
    if (encl[k].shape() != pointOut[k].shape()) {
      rep.escapes = 1;
      rep.firstEscape = "output " + std::to_string(k) + ": interval shape " +
                        shapeString(encl[k].shape()) + " vs point shape " +
                        shapeString(pointOut[k].shape());
      return rep;
    }
  }
  const bool allPoints = std::none_of(c.inputs.begin(), c.inputs.end(),
                                      [](const Tensor& t) { return t.isInterval(); });
  if (allPoints) {
    for (std::size_t k = 0; k < encl.size(); ++k)
      for (std::int64_t i = 0; i < encl[k].numel(); ++i) {
        const double p = pointOut[k].values()[static_cast<std::size_t>(i)];
        if (std::isfinite(p) && !contains(encl[k].at(i), p)) {
          ++rep.escapes;
          if (rep.firstEscape.empty())
            rep.firstEscape = c.op + ": point() output " + std::to_string(k) + "[" +
                              std::to_string(i) + "] = " + describe(pointOut[k], i) + " outside " +
                              describe(encl[k], i) + inputsString(c.inputs);
        }
      }
  }

  std::vector<std::vector<double>> mn(encl.size()), mx(encl.size());
  for (std::size_t k = 0; k < encl.size(); ++k) {
    mn[k].assign(static_cast<std::size_t>(encl[k].numel()), __builtin_huge_val());
    mx[k].assign(static_cast<std::size_t>(encl[k].numel()), -__builtin_huge_val());
  }
  for (int t = 0; t < trials; ++t) {
    std::vector<Tensor> sample;
    for (const Tensor& x : c.inputs) sample.push_back(x.isInterval() ? sampleInside(x, rng) : x);
    Bound b(c, sample);
    b.setShapes(pointOut);
    const std::vector<Tensor> r = rule.random(b.args(), ctx);
    ++rep.trials;
    for (std::size_t k = 0; k < encl.size() && k < r.size(); ++k) {
      if (r[k].shape() != encl[k].shape()) {
        ++rep.escapes;
        if (rep.firstEscape.empty())
          rep.firstEscape = "random() output shape " + shapeString(r[k].shape()) + " vs " +
                            shapeString(encl[k].shape());
        continue;
      }
      for (std::int64_t i = 0; i < r[k].numel(); ++i) {
        const double v = r[k].values()[static_cast<std::size_t>(i)];
        const Interval e = encl[k].at(i);
        const bool entire = e.lo == -__builtin_huge_val() && e.hi == __builtin_huge_val();
        if ((std::isnan(v) && !entire) || (!std::isnan(v) && !contains(e, v))) {
          ++rep.escapes;
          if (rep.firstEscape.empty()) {
            std::ostringstream s;
            s.precision(17);
            s << c.op << ": random output " << k << "[" << i << "] = " << v << " outside "
              << describe(encl[k], i) << " (point " << describe(pointOut[k], i) << ");"
              << inputsString(sample);
            rep.firstEscape = s.str();
          }
        }
        auto& lo = mn[k][static_cast<std::size_t>(i)];
        auto& hi = mx[k][static_cast<std::size_t>(i)];
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  for (std::size_t k = 0; k < encl.size(); ++k)
    for (std::int64_t i = 0; i < encl[k].numel(); ++i) {
      const Interval e = encl[k].at(i);
      const double w = e.hi - e.lo;
      const double spread = mx[k][static_cast<std::size_t>(i)] - mn[k][static_cast<std::size_t>(i)];
      if (!std::isfinite(w) || !std::isfinite(spread)) continue;
      rep.widthSum += w;
      rep.spreadSum += spread;
      const double m = std::max(std::fabs(midpoint(e)), 1e-300);
      rep.relWidthMax = std::max(rep.relWidthMax, w / m);
    }
  return rep;
}

std::vector<Tensor> intervalOutputs(const OpCase& c) {
  const OpRule& rule = ruleFor(c.op);
  OpContext ctx{c.precision, backend(), nullptr};
  Bound mid(c, midpoints(c.inputs));
  const std::vector<Tensor> pointOut = rule.point(mid.args(), ctx);
  Bound box(c, c.inputs);
  box.setShapes(pointOut);
  return rule.interval(box.args(), ctx);
}

std::vector<Tensor> localErrorOutputs(const OpCase& c, std::vector<Tensor>* pointOut) {
  const OpRule& rule = ruleFor(c.op);
  OpContext ctx{c.precision, backend(), nullptr};
  Bound b(c, midpoints(c.inputs));
  const std::vector<Tensor> out = rule.point(b.args(), ctx);
  b.setShapes(out);
  if (pointOut) *pointOut = out;
  const std::vector<bool> held(b.args().tensorInputs().size(), true);  // exact point inputs
  ctx.exactOperands = &held;
  return rule.localError(b.args(), out, ctx);
}

VjpReport checkVjp(const OpCase& c, std::mt19937_64& rng, int directions, double h) {
  const OpRule& rule = ruleFor(c.op);
  VjpReport rep;
  OpContext ctx{c.precision, backend(), nullptr};
  std::normal_distribution<double> nd;

  Bound b(c, midpoints(c.inputs));
  const std::vector<Tensor> out = rule.point(b.args(), ctx);
  b.setShapes(out);
  std::vector<Tensor> g;
  for (const Tensor& o : out) {
    std::vector<double> v(static_cast<std::size_t>(o.numel()), 0.0);
    if (isFloating(o.dtype()))
      for (double& x : v) x = nd(rng);
    g.push_back(Tensor::point(o.shape(), o.dtype(), std::move(v)));
  }
  const OpArgs args = b.args();
  const auto grads = rule.vjp(args, out, g, ctx);
  const auto& tensorInputs = args.tensorInputs();
  if (grads.size() != tensorInputs.size()) {
    rep.maxRelError = __builtin_huge_val();
    rep.where = "vjp returned " + std::to_string(grads.size()) + " gradients for " +
                std::to_string(tensorInputs.size()) + " tensor inputs";
    return rep;
  }
  // Map tensorInputs entries back to c.inputs indices (the harness names them in<i>).
  std::vector<int> inputIndex;
  for (const ValueRef& r : args.tensorRefs()) inputIndex.push_back(std::stoi(r.name.substr(2)));

  auto objective = [&](const std::vector<Tensor>& ins) {
    Bound bb(c, ins);
    bb.setShapes(out);
    const auto o = rule.point(bb.args(), ctx);
    long double s = 0;
    for (std::size_t k = 0; k < o.size(); ++k)
      for (std::int64_t i = 0; i < o[k].numel(); ++i)
        s += static_cast<long double>(g[k].values()[static_cast<std::size_t>(i)]) *
             o[k].values()[static_cast<std::size_t>(i)];
    return static_cast<double>(s);
  };
  // The rounding noise of the difference quotient itself: each binary64 output carries an error
  // of a few ulps (2^-50 relative covers ops with up to 4 roundings), divided by 2h.
  double magnitude = 0.0;
  for (std::size_t k = 0; k < out.size(); ++k)
    for (std::int64_t i = 0; i < out[k].numel(); ++i)
      magnitude += std::fabs(g[k].values()[static_cast<std::size_t>(i)] *
                             out[k].values()[static_cast<std::size_t>(i)]);
  const double noise = 2 * magnitude * 0x1p-50 / (2 * h);

  for (int dir = 0; dir < directions; ++dir) {
    std::vector<Tensor> plus = b.inputs, minus = b.inputs;
    double analytic = 0.0, scale = 0.0;
    std::vector<bool> seen(c.inputs.size(), false);
    for (std::size_t e = 0; e < grads.size(); ++e) {
      const int idx = inputIndex[e];
      if (!grads[e] || seen[static_cast<std::size_t>(idx)]) continue;
      const Tensor& x = b.inputs[static_cast<std::size_t>(idx)];
      if (!isFloating(x.dtype())) continue;
      seen[static_cast<std::size_t>(idx)] = true;
      // Sum gradients of every tensorInputs entry that refers to this input (an input may be
      // passed twice, e.g. mul(x, x)).
      std::vector<double> gsum(static_cast<std::size_t>(x.numel()), 0.0);
      for (std::size_t e2 = e; e2 < grads.size(); ++e2)
        if (inputIndex[e2] == idx && grads[e2]) {
          if (grads[e2]->numel() != x.numel()) {
            rep.maxRelError = __builtin_huge_val();
            rep.where = "gradient of in" + std::to_string(idx) + " has shape " +
                        shapeString(grads[e2]->shape()) + ", input " + shapeString(x.shape());
            return rep;
          }
          for (std::size_t i = 0; i < gsum.size(); ++i) gsum[i] += grads[e2]->values()[i];
        }
      std::vector<double> p(gsum.size()), m(gsum.size());
      for (std::size_t i = 0; i < gsum.size(); ++i) {
        const double xi = x.values()[i];
        const double d = nd(rng) * (std::fabs(xi) + 1e-2);
        p[i] = xi + h * d;
        m[i] = xi - h * d;
        analytic += gsum[i] * d;
        scale += std::fabs(gsum[i] * d);
      }
      plus[static_cast<std::size_t>(idx)] = Tensor::point(x.shape(), x.dtype(), std::move(p));
      minus[static_cast<std::size_t>(idx)] = Tensor::point(x.shape(), x.dtype(), std::move(m));
    }
    const double fd = (objective(plus) - objective(minus)) / (2 * h);
    const double excess = std::max(0.0, std::fabs(fd - analytic) - noise);
    const double err = excess / (scale + std::fabs(fd) + 1e-300);
    if (err > rep.maxRelError) {
      rep.maxRelError = err;
      std::ostringstream s;
      s.precision(12);
      s << c.op << ": finite difference " << fd << " vs vjp " << analytic << ";"
        << inputsString(b.inputs);
      rep.where = s.str();
    }
  }
  return rep;
}

namespace {

/// Returns the case's inputs as exact points: each midpoint rounded to nearest in its dtype.
std::vector<Tensor> exactInputs(const OpCase& c) {
  std::vector<Tensor> ins;
  for (const Tensor& t : c.inputs) {
    const Tensor m = t.midpoint();
    const Format f = storageFormat(m.dtype()).value_or(Format::Fp64);
    std::vector<double> v(m.values().begin(), m.values().end());
    for (double& x : v) x = roundNearestIn(x, f);
    ins.push_back(Tensor::point(m.shape(), m.dtype(), std::move(v)));
  }
  return ins;
}

}  // namespace

LocalErrorReport checkLocalError(const OpCase& c, int trials, std::mt19937_64& rng) {
  const OpRule& rule = ruleFor(c.op);
  LocalErrorReport rep;
  OpContext ctx{c.precision, backend(), &rng};
  const std::vector<Tensor> ins = exactInputs(c);
  Bound b(c, ins);
  const auto out = rule.point(b.args(), ctx);
  b.setShapes(out);
  const std::vector<bool> held(b.args().tensorInputs().size(), true);  // exact inputs
  ctx.exactOperands = &held;
  const auto le = rule.localError(b.args(), out, ctx);
  ctx.exactOperands = nullptr;
  for (int t = 0; t < trials; ++t) {
    const auto r = rule.random(b.args(), ctx);
    ++rep.trials;
    for (std::size_t k = 0; k < out.size() && k < r.size() && k < le.size(); ++k) {
      const bool fp64 = formatOf(c.outDtypes.at(k), c.precision) == Format::Fp64;
      const double factor = (fp64 ? 2.0 : 1.0) * (1.0 + 1e-6);
      for (std::int64_t i = 0; i < out[k].numel(); ++i) {
        const auto ui = static_cast<std::size_t>(i);
        const double y = out[k].values()[ui], v = r[k].values()[ui];
        if (!std::isfinite(y) || !std::isfinite(v)) continue;
        const double bound = le[k].values()[ui];
        const double d = std::fabs(v - y);
        if (bound > 0) rep.maxRatio = std::max(rep.maxRatio, d / bound);
        if (!(d <= bound * factor)) {
          ++rep.violations;
          if (rep.first.empty()) {
            std::ostringstream s;
            s.precision(17);
            s << c.op << ": |random - point| = " << d << " > localError " << bound << " at output "
              << k << "[" << i << "] (point " << y << ", random " << v << ");" << inputsString(ins);
            rep.first = s.str();
          }
        }
      }
    }
  }
  return rep;
}

AdjointErrorReport checkAdjointLocalError(const OpCase& c, int trials, std::mt19937_64& rng) {
  const OpRule& rule = ruleFor(c.op);
  AdjointErrorReport rep;
  OpContext ctx{c.precision, backend(), &rng};
  const std::vector<Tensor> ins = exactInputs(c);
  Bound b(c, ins);
  const auto out = rule.point(b.args(), ctx);
  b.setShapes(out);
  // The four adjoints, on every floating output (the one-element adjoint on output 0 only).
  std::vector<std::vector<Tensor>> adjoints(4);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const auto y = out[k].values();
    std::vector<double> signs(y.size()), ones(y.size(), 1.0), prop(y.size()), one(y.size(), 0.0);
    for (std::size_t i = 0; i < y.size(); ++i) {
      signs[i] = ((rng() & 1) ? 1.0 : -1.0) * std::ldexp(1.0, static_cast<int>(rng() % 5) - 2);
      prop[i] = std::isfinite(y[i]) ? y[i] : 0.0;
    }
    if (k == 0 && !y.empty()) one[rng() % y.size()] = 1.0;
    const Shape& s = out[k].shape();
    adjoints[0].push_back(Tensor::point(s, out[k].dtype(), signs));
    adjoints[1].push_back(Tensor::point(s, out[k].dtype(), ones));
    adjoints[2].push_back(Tensor::point(s, out[k].dtype(), prop));
    adjoints[3].push_back(Tensor::point(s, out[k].dtype(), one));
  }
  std::vector<AdjointLocalError> bounds;
  for (const auto& g : adjoints) {
    const auto t = rule.adjointLocalError(b.args(), out, g, ctx);
    if (!t) return rep;
    bounds.push_back(*t);
    if (!(std::sqrt(t->sumSquares) <= t->bound * (1.0 + 1e-12))) ++rep.probabilisticAbove;
  }
  rep.hooked = true;
  const double lambda = std::sqrt(2.0 * std::log(2.0 / 1e-6));
  std::vector<double> meanSquares(adjoints.size(), 0.0);
  for (int t = 0; t < trials; ++t) {
    const auto r = rule.random(b.args(), ctx);
    ++rep.trials;
    for (std::size_t a = 0; a < adjoints.size(); ++a) {
      long double dot = 0.0L;
      for (std::size_t k = 0; k < out.size() && k < r.size(); ++k)
        for (std::int64_t i = 0; i < out[k].numel(); ++i) {
          const auto ui = static_cast<std::size_t>(i);
          const double y = out[k].values()[ui], v = r[k].values()[ui];
          const double g = adjoints[a][k].values()[ui];
          if (g == 0.0 || !std::isfinite(y) || !std::isfinite(v)) continue;
          dot += static_cast<long double>(g) * (static_cast<long double>(v) - y);
        }
      const double d = std::fabs(static_cast<double>(dot)), bound = bounds[a].bound;
      const double p = std::sqrt(bounds[a].sumSquares);
      meanSquares[a] += d * d / trials;
      if (!(d <= lambda * p * (1.0 + 1e-6))) ++rep.probabilisticEscapes;
      ++rep.checks;
      if (bound > 0) rep.maxRatio = std::max(rep.maxRatio, d / bound);
      if (!(d <= bound * (1.0 + 1e-6))) {
        ++rep.violations;
        if (rep.first.empty()) {
          std::ostringstream s;
          s.precision(17);
          s << c.op << ": |Σ<g, random - point>| = " << d << " > adjointLocalError " << bound
            << " for adjoint " << a << " (0 signs, 1 ones, 2 ∝ y, 3 one element);"
            << inputsString(ins);
          rep.first = s.str();
        }
      }
    }
  }
  for (std::size_t a = 0; a < adjoints.size(); ++a) {
    const double p = std::sqrt(bounds[a].sumSquares), rms = std::sqrt(meanSquares[a]);
    if (rms > 0.0) rep.maxRmsRatio = std::max(rep.maxRmsRatio, p > 0.0 ? rms / p : HUGE_VAL);
  }
  return rep;
}

double wideValue(std::mt19937_64& rng, double spread) {
  std::uniform_real_distribution<double> e(-spread, spread), m(1.0, 2.0);
  const double v = std::ldexp(m(rng), static_cast<int>(std::floor(e(rng))));
  return (rng() & 1) ? v : -v;
}

Tensor randomPoint(const Shape& s, DType t, std::mt19937_64& rng, double spread,
                   std::int64_t intHigh) {
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  const Format f = storageFormat(t).value_or(Format::Fp64);
  for (double& x : v) {
    if (t == DType::Bool)
      x = static_cast<double>(rng() & 1);
    else if (!isFloating(t))
      x = static_cast<double>(rng() % static_cast<std::uint64_t>(intHigh));
    else
      x = roundNearestIn(wideValue(rng, spread), f);
  }
  return Tensor::point(s, t, std::move(v));
}

Tensor randomInterval(const Shape& s, DType t, std::mt19937_64& rng, double rel, double spread) {
  const Tensor p = randomPoint(s, t, rng, spread);
  if (!isFloating(t)) return p.toInterval();
  const Format f = storageFormat(t).value_or(Format::Fp64);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> lo(p.values().begin(), p.values().end()), hi = lo;
  for (std::size_t i = 0; i < lo.size(); ++i) {
    if (rng() % 4 == 0) continue;  // some degenerate elements
    const double r = rel * u(rng) * std::fabs(lo[i]);
    const Interval x = roundOutward(Interval{lo[i] - r, hi[i] + r}, f);
    lo[i] = x.lo;
    hi[i] = x.hi;
  }
  return Tensor::interval(s, t, std::move(lo), std::move(hi));
}

Shape randomShape(int rank, std::mt19937_64& rng, int maxExtent, double zeroProb) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Shape s;
  for (int d = 0; d < rank; ++d)
    s.push_back(u(rng) < zeroProb
                    ? 0
                    : 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(maxExtent)));
  return s;
}

Shape broadcastableTo(const Shape& s, std::mt19937_64& rng) {
  Shape r = s;
  const std::size_t drop = s.empty() ? 0 : rng() % (s.size() + 1);
  r.erase(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(drop));
  for (auto& d : r)
    if (rng() % 3 == 0) d = 1;
  return r;
}

}  // namespace lossbound::test
