// Pooling op rules (max_pool2d_with_indices max_pool3d_with_indices avg_pool2d avg_pool3d
// _adaptive_avg_pool2d and their backward ops): per op and precision, 1,000 random cases (3-d and
// 4-d inputs, 1-d style 1×L planes, kernel, stride, padding, dilation, ceil_mode,
// count_include_pad, divisor_override, adaptive up- and down-sampling, point and interval inputs,
// inputs full of ties) with zero escapes from the interval rule and |random − point| ≤ localError;
// vjp against finite differences; the backward ops against the vjp of the forward ops in point
// arithmetic; known answers from PyTorch 1.13 (3-d: 1.13 and 2.15); depth-1 3-d pooling is 2-d
// pooling bit for bit; and the first-order contract of max pooling at
// near-ties.
#include "core/ops/broadcasting.h"
#include "tests/core/ops/nn_test_util.h"
#include "tests/core/ops/rule_call.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <span>

using namespace lossbound;
using namespace lossbound::test;
using namespace lossbound::test::nn;

namespace {

double spreadFor(Format f) { return f == Format::Fp16 ? 4.0 : 12.0; }

std::int64_t uniformInt(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

/// PyTorch's pooling_output_shape (the rules compute it themselves; this picks valid cases).
std::int64_t outSize(std::int64_t in, std::int64_t k, std::int64_t p, std::int64_t s,
                     std::int64_t d, bool ceil) {
  const std::int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  std::int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

/// A random pooling input shape: (N, C, H, W) or (C, H, W), sometimes a 1×L plane.
Shape inputShape(std::mt19937_64& rng) {
  const bool line = rng() % 5 == 0;
  const std::int64_t h = line ? 1 : uniformInt(rng, 1, 7), w = uniformInt(rng, 1, 8);
  if (rng() % 3 == 0) return {uniformInt(rng, 1, 3), h, w};
  return {uniformInt(rng, 1, 2), uniformInt(rng, 1, 3), h, w};
}

/// Input values: wide or moderate random values, or (ties) values from a small set.
Tensor inputValues(const Shape& s, DType t, bool iv, Format f, bool ties, std::mt19937_64& rng) {
  if (!ties) return rng() % 2 ? uniform(s, t, iv, rng, 4.0) : values(s, t, iv, rng, spreadFor(f));
  static const double kSet[] = {-2.0, -1.0, 0.0, 0.0, 0.5, 1.0, 1.0, 3.0};
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& x : v) x = kSet[rng() % 8];
  const Tensor p = Tensor::point(s, t, v);
  if (!iv) return p;
  std::vector<double> lo = v, hi = v;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (rng() % 2) {
      const Interval r = roundOutward(Interval{v[i] - 1e-3, v[i] + 1e-3}, f);
      lo[i] = r.lo;
      hi[i] = r.hi;
    }
  return Tensor::interval(s, t, lo, hi);
}

struct MaxParams {
  std::int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
};

/// Picks max-pool parameters valid for an H × W plane.
MaxParams maxParams(std::int64_t h, std::int64_t w, std::mt19937_64& rng) {
  for (;;) {
    MaxParams p{uniformInt(rng, 1, 3),
                uniformInt(rng, 1, 3),
                uniformInt(rng, 1, 3),
                uniformInt(rng, 1, 3),
                0,
                0,
                uniformInt(rng, 1, 2),
                uniformInt(rng, 1, 2),
                rng() % 2 == 0};
    if (h == 1) p.kh = p.sh = p.dh = 1;
    p.ph = uniformInt(rng, 0, p.kh / 2);
    p.pw = uniformInt(rng, 0, p.kw / 2);
    if (outSize(h, p.kh, p.ph, p.sh, p.dh, p.ceil) >= 1 &&
        outSize(w, p.kw, p.pw, p.sw, p.dw, p.ceil) >= 1)
      return p;
  }
}

/// The max-pool arguments after self (some trailing defaults left out, stride sometimes []).
std::vector<IrValue> maxArgs(const MaxParams& p, std::mt19937_64& rng, bool full = false) {
  std::vector<IrValue> a{
      ints({p.kh, p.kw}),
      (!full && p.sh == p.kh && p.sw == p.kw && rng() % 2) ? ints({}) : ints({p.sh, p.sw}),
      ints({p.ph, p.pw}), ints({p.dh, p.dw}), flag(p.ceil)};
  if (!full && !p.ceil && p.dh == 1 && p.dw == 1 && rng() % 2) a.resize(3);
  if (!full && !p.ceil && p.dh == 1 && p.dw == 1 && p.ph == 0 && p.pw == 0 && rng() % 2)
    a.resize(2);
  return a;
}

CaseMaker maxPool(bool ties) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = "aten.max_pool2d_with_indices.default";
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = inputShape(rng);
    const MaxParams p = maxParams(s[s.size() - 2], s.back(), rng);
    c.inputs.push_back(inputValues(s, t, iv, f, ties, rng));
    c.args = {in(0)};
    for (auto& e : maxArgs(p, rng)) c.args.push_back(e);
    c.outDtypes = {t, DType::Int64};
    return c;
  };
}

/// max_pool2d_with_indices_backward(grad, self, kernel, stride, padding, dilation, ceil, indices)
/// with the indices of the forward rule on self (interval indices for interval cases).
CaseMaker maxPoolBackward(bool ties) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    const DType t = dtypeFor(f);
    for (;;) {
      const Shape s = inputShape(rng);
      const MaxParams p = maxParams(s[s.size() - 2], s.back(), rng);
      OpCase fwd;
      fwd.op = "aten.max_pool2d_with_indices.default";
      fwd.precision = modelFor(std::nullopt);
      fwd.inputs = {inputValues(s, t, iv, f, ties, rng)};
      fwd.args = {in(0)};
      for (auto& e : maxArgs(p, rng, true)) fwd.args.push_back(e);
      fwd.outDtypes = {t, DType::Int64};
      const RuleCall call(fwd);
      const Tensor indices = iv ? call.interval()[1] : call.point()[1];
      // A window made only of padding and dilation holes gets −inf and an index past the plane
      // (PyTorch does the same); its backward is undefined in PyTorch and refused here: skip.
      const double plane = static_cast<double>(s[s.size() - 2] * s.back());
      if (std::any_of(indices.hi().begin(), indices.hi().end(),
                      [plane](double i) { return i >= plane; }))
        continue;
      OpCase c;
      c.op = "aten.max_pool2d_with_indices_backward.default";
      c.precision = fwd.precision;
      c.inputs = {inputValues(indices.shape(), t, iv, f, ties, rng), fwd.inputs[0], indices};
      c.args = {in(0), in(1)};
      for (auto& e : maxArgs(p, rng, true)) c.args.push_back(e);
      c.args.push_back(in(2));
      c.outDtypes = {t};
      return c;
    }
  };
}

/// One dim of 3-d max pooling: kernel, stride, padding, dilation.
struct DimParams {
  std::int64_t k, s, p, d;
};

/// max_pool3d_with_indices(self, kernel, stride, padding, dilation, ceil) on a random (C, D, H, W)
/// or (N, C, D, H, W) input, each dim's parameters drawn independently (valid for its extent).
OpCase maxPool3dCase(Format f, bool iv, bool ties, std::mt19937_64& rng, bool full = false) {
  const DType t = dtypeFor(f);
  Shape s = {uniformInt(rng, 1, 3), uniformInt(rng, 1, 4), uniformInt(rng, 1, 5),
             uniformInt(rng, 1, 5)};
  if (rng() % 2) s.insert(s.begin(), uniformInt(rng, 1, 2));
  const bool ceil = rng() % 2 == 0;
  std::vector<DimParams> dims;
  for (std::size_t i = s.size() - 3; i < s.size(); ++i)
    for (;;) {
      DimParams q{uniformInt(rng, 1, 3), uniformInt(rng, 1, 3), 0, uniformInt(rng, 1, 2)};
      q.p = uniformInt(rng, 0, q.k / 2);
      if (outSize(s[i], q.k, q.p, q.s, q.d, ceil) >= 1) {
        dims.push_back(q);
        break;
      }
    }
  const auto list = [&](std::int64_t DimParams::*m) {
    return ints({dims[0].*m, dims[1].*m, dims[2].*m});
  };
  OpCase c;
  c.op = "aten.max_pool3d_with_indices.default";
  c.precision = modelFor(std::nullopt);
  c.inputs.push_back(inputValues(s, t, iv, f, ties, rng));
  c.args = {
      in(0),     list(&DimParams::k), list(&DimParams::s), list(&DimParams::p), list(&DimParams::d),
      flag(ceil)};
  if (!full && !ceil && rng() % 2) c.args.resize(4);  // dilation and ceil_mode left out
  c.outDtypes = {t, DType::Int64};
  return c;
}

CaseMaker maxPool3d(bool ties) {
  return [=](Format f, bool iv, std::mt19937_64& rng) { return maxPool3dCase(f, iv, ties, rng); };
}

/// max_pool3d_with_indices_backward with the indices of the forward rule (as maxPoolBackward).
CaseMaker maxPool3dBackward(bool ties) {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    for (;;) {
      const OpCase fwd = maxPool3dCase(f, iv, ties, rng, true);
      const RuleCall call(fwd);
      const Tensor indices = iv ? call.interval()[1] : call.point()[1];
      const Shape& s = fwd.inputs[0].shape();
      const double plane = static_cast<double>(s[s.size() - 3] * s[s.size() - 2] * s.back());
      if (std::any_of(indices.hi().begin(), indices.hi().end(),
                      [plane](double i) { return i >= plane; }))
        continue;  // a window of holes only (see maxPoolBackward)
      OpCase c;
      c.op = "aten.max_pool3d_with_indices_backward.default";
      c.precision = fwd.precision;
      c.inputs = {inputValues(indices.shape(), fwd.outDtypes[0], iv, f, ties, rng), fwd.inputs[0],
                  indices};
      c.args = {in(0), in(1)};
      for (std::size_t i = 1; i < fwd.args.size(); ++i) c.args.push_back(fwd.args[i]);
      c.args.push_back(in(2));
      c.outDtypes = {fwd.outDtypes[0]};
      return c;
    }
  };
}

struct AvgParams {
  std::int64_t kh, kw, sh, sw, ph, pw;
  bool ceil, countPad;
  std::int64_t divisor;  // 0: None
};

AvgParams avgParams(std::int64_t h, std::int64_t w, std::mt19937_64& rng) {
  for (;;) {
    AvgParams p{uniformInt(rng, 1, 3),
                uniformInt(rng, 1, 3),
                uniformInt(rng, 1, 3),
                uniformInt(rng, 1, 3),
                0,
                0,
                rng() % 2 == 0,
                rng() % 2 == 0,
                rng() % 4 == 0 ? uniformInt(rng, 1, 12) : 0};
    if (h == 1) p.kh = p.sh = 1;
    p.ph = uniformInt(rng, 0, p.kh / 2);
    p.pw = uniformInt(rng, 0, p.kw / 2);
    if (outSize(h, p.kh, p.ph, p.sh, 1, p.ceil) >= 1 &&
        outSize(w, p.kw, p.pw, p.sw, 1, p.ceil) >= 1)
      return p;
  }
}

std::vector<IrValue> avgArgs(const AvgParams& p) {
  return {ints({p.kh, p.kw}), ints({p.sh, p.sw}), ints({p.ph, p.pw}),
          flag(p.ceil),       flag(p.countPad),   p.divisor ? integer(p.divisor) : none()};
}

CaseMaker avgPool() {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = "aten.avg_pool2d.default";
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = inputShape(rng);
    const AvgParams p = avgParams(s[s.size() - 2], s.back(), rng);
    c.inputs.push_back(inputValues(s, t, iv, f, false, rng));
    c.args = {in(0)};
    for (auto& e : avgArgs(p)) c.args.push_back(e);
    // Trailing defaults left out now and then (ceil_mode False, count_include_pad True, None).
    if (!p.ceil && p.countPad && !p.divisor && rng() % 2) c.args.resize(4);
    c.outDtypes = {t};
    return c;
  };
}

CaseMaker avgPoolBackward() {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = "aten.avg_pool2d_backward.default";
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = inputShape(rng);
    const AvgParams p = avgParams(s[s.size() - 2], s.back(), rng);
    Shape o = s;
    o[o.size() - 2] = outSize(s[s.size() - 2], p.kh, p.ph, p.sh, 1, p.ceil);
    o.back() = outSize(s.back(), p.kw, p.pw, p.sw, 1, p.ceil);
    c.inputs = {inputValues(o, t, iv, f, false, rng), inputValues(s, t, false, f, false, rng)};
    c.args = {in(0), in(1)};
    for (auto& e : avgArgs(p)) c.args.push_back(e);
    c.outDtypes = {t};
    return c;
  };
}

/// avg_pool3d(self, kernel, stride, padding, ceil, count_include_pad, divisor_override) on a
/// random (C, D, H, W) or (N, C, D, H, W) input, each dim's parameters drawn independently (valid
/// for its extent); `out` receives the output shape.
OpCase avgPool3dCase(Format f, bool iv, std::mt19937_64& rng, Shape* out = nullptr) {
  const DType t = dtypeFor(f);
  Shape s = {uniformInt(rng, 1, 3), uniformInt(rng, 1, 4), uniformInt(rng, 1, 5),
             uniformInt(rng, 1, 5)};
  if (rng() % 2) s.insert(s.begin(), uniformInt(rng, 1, 2));
  const bool ceil = rng() % 2 == 0, countPad = rng() % 2 == 0;
  const std::int64_t divisor = rng() % 4 == 0 ? uniformInt(rng, 1, 30) : 0;
  std::vector<DimParams> dims;
  Shape o = s;
  for (std::size_t i = s.size() - 3; i < s.size(); ++i)
    for (;;) {
      // avg_pool3d refuses a kernel larger than its dim, padding or not.
      DimParams q{uniformInt(rng, 1, std::min<std::int64_t>(3, s[i])), uniformInt(rng, 1, 3), 0, 1};
      q.p = uniformInt(rng, 0, q.k / 2);
      o[i] = outSize(s[i], q.k, q.p, q.s, 1, ceil);
      if (o[i] >= 1) {
        dims.push_back(q);
        break;
      }
    }
  if (out) *out = o;
  const auto list = [&](std::int64_t DimParams::*m) {
    return ints({dims[0].*m, dims[1].*m, dims[2].*m});
  };
  OpCase c;
  c.op = "aten.avg_pool3d.default";
  c.precision = modelFor(std::nullopt);
  c.inputs.push_back(inputValues(s, t, iv, f, false, rng));
  c.args = {in(0),
            list(&DimParams::k),
            list(&DimParams::s),
            list(&DimParams::p),
            flag(ceil),
            flag(countPad),
            divisor ? integer(divisor) : none()};
  // Trailing defaults left out now and then (ceil_mode False, count_include_pad True, None).
  if (!ceil && countPad && !divisor && rng() % 2) c.args.resize(4);
  c.outDtypes = {t};
  return c;
}

CaseMaker avgPool3dCases() {
  return [](Format f, bool iv, std::mt19937_64& rng) { return avgPool3dCase(f, iv, rng); };
}

/// avg_pool3d_backward(grad_output, self, <the forward's arguments, all spelled out>).
CaseMaker avgPool3dBackwardCases() {
  return [](Format f, bool iv, std::mt19937_64& rng) {
    Shape o;
    const OpCase fwd = avgPool3dCase(f, false, rng, &o);
    OpCase c;
    c.op = "aten.avg_pool3d_backward.default";
    c.precision = fwd.precision;
    c.inputs = {inputValues(o, fwd.outDtypes[0], iv, f, false, rng), fwd.inputs[0]};
    c.args = {in(0), in(1)};
    const std::vector<IrValue> defaults{ints({}),    ints({}),   ints({0}),
                                        flag(false), flag(true), none()};
    for (std::size_t i = 1; i < 7; ++i)
      c.args.push_back(i < fwd.args.size() ? fwd.args[i] : defaults[i - 1]);
    c.outDtypes = fwd.outDtypes;
    return c;
  };
}

/// Adaptive output sizes from 1 to in + 2 (up- and down-sampling).
std::pair<std::int64_t, std::int64_t> adaptiveSize(const Shape& s, std::mt19937_64& rng) {
  return {uniformInt(rng, 1, s[s.size() - 2] + 2), uniformInt(rng, 1, s.back() + 2)};
}

CaseMaker adaptive() {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = "aten._adaptive_avg_pool2d.default";
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = inputShape(rng);
    const auto [oh, ow] = adaptiveSize(s, rng);
    c.inputs.push_back(inputValues(s, t, iv, f, false, rng));
    c.args = {in(0), ints({oh, ow})};
    c.outDtypes = {t};
    return c;
  };
}

CaseMaker adaptiveBackward() {
  return [=](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c;
    c.op = "aten._adaptive_avg_pool2d_backward.default";
    c.precision = modelFor(std::nullopt);
    const DType t = dtypeFor(f);
    const Shape s = inputShape(rng);
    const auto [oh, ow] = adaptiveSize(s, rng);
    Shape o = s;
    o[o.size() - 2] = oh;
    o.back() = ow;
    c.inputs = {inputValues(o, t, iv, f, false, rng), inputValues(s, t, false, f, false, rng)};
    c.args = {in(0), in(1)};
    c.outDtypes = {t};
    return c;
  };
}

/// Distinct moderate values (no ties) for finite differences; integer inputs kept.
CaseMaker forVjp(CaseMaker m) {
  return [m](Format f, bool iv, std::mt19937_64& rng) {
    OpCase c = m(f, iv, rng);
    std::uniform_real_distribution<double> u(-3.0, 3.0);
    for (auto& x : c.inputs) {
      if (!isFloating(x.dtype())) continue;
      std::vector<double> v(static_cast<std::size_t>(x.numel()));
      for (double& e : v) e = u(rng);
      x = Tensor::point(x.shape(), x.dtype(), v);
    }
    return c;
  };
}

/// The known-answer input: 1..35 in a 5 × 7 plane with two large values.
Tensor knownInput() {
  std::vector<double> v(35);
  for (int i = 0; i < 35; ++i) v[static_cast<std::size_t>(i)] = i + 1.0;
  v[9] = 100.0;
  v[34] = 50.0;
  return Tensor::point({1, 1, 5, 7}, DType::Float64, v);
}

void compareValues(const char* what, const Tensor& got, const Shape& shape,
                   const std::vector<double>& want) {
  QVERIFY2(got.shape() == shape, (std::string(what) + ": shape " + shapeString(got.shape()) +
                                  ", expected " + shapeString(shape))
                                     .c_str());
  for (std::size_t i = 0; i < want.size(); ++i)
    QVERIFY2(std::fabs(got.values()[i] - want[i]) <= 1e-12 * std::fabs(want[i]),
             (std::string(what) + "[" + std::to_string(i) +
              "] = " + std::to_string(got.values()[i]) + ", PyTorch " + std::to_string(want[i]))
                 .c_str());
}

/// backward(g) == vjp of the forward op for output gradient g (fp64 points, ties included).
void checkBackwardMatchesVjp(
    const std::string& name, const CaseMaker& forward,
    const std::function<OpCase(const OpCase&, const RuleCall&, const Tensor&)>& backwardCase) {
  std::mt19937_64 rng(std::hash<std::string>{}(name) + 17);
  double worst = 0.0;
  int skipped = 0;
  for (int i = 0; i < 300; ++i) {
    const OpCase fc = forward(Format::Fp64, false, rng);
    const RuleCall fwd(fc);
    std::vector<Tensor> gs;
    for (const Tensor& o : fwd.point())
      gs.push_back(isFloating(o.dtype()) ? randomPoint(o.shape(), o.dtype(), rng, 3.0)
                                         : Tensor::full(o.shape(), o.dtype(), 0.0));
    // max pooling: a window made only of padding and dilation holes gives −inf with an index that
    // points outside the window (PyTorch's too); its vjp is zero, PyTorch's backward op scatters
    // to that index. Not comparable: skip.
    if (std::any_of(fwd.point()[0].values().begin(), fwd.point()[0].values().end(),
                    [](double y) { return std::isinf(y); })) {
      ++skipped;
      continue;
    }
    const auto grads = fwd.vjp(gs);
    std::optional<RuleCall> call;
    try {
      call.emplace(backwardCase(fc, fwd, gs[0]));
    } catch (const OpError&) {
      ++skipped;  // (the same, with an index past the plane: the backward op refuses it)
      continue;
    }
    const RuleCall& bwd = *call;
    const Tensor& z = bwd.point()[0];
    QVERIFY(grads[0].has_value());
    QCOMPARE(z.shape(), grads[0]->shape());
    for (std::int64_t k = 0; k < z.numel(); ++k) {
      const double a = grads[0]->values()[static_cast<std::size_t>(k)];
      const double b = z.values()[static_cast<std::size_t>(k)];
      const double err = std::fabs(a - b) / (std::fabs(a) + std::fabs(b) + 1e-300);
      worst = std::fmax(worst, err);
      QVERIFY2(err <= 1e-14, (name + ": vjp " + std::to_string(a) + " vs backward op " +
                              std::to_string(b) + " at input element " + std::to_string(k))
                                 .c_str());
    }
  }
  qInfo("%-44s backward op vs forward vjp: max rel difference %.3g (%d cases skipped)",
        name.c_str(), worst, skipped);
  QVERIFY(skipped < 100);
}

/// The backward case of an average-pooling forward case fc for output gradient g: the forward's
/// arguments with every default spelled out.
std::function<OpCase(const OpCase&, const RuleCall&, const Tensor&)> avgPoolBackwardOf(
    std::string op) {
  return [op](const OpCase& fc, const RuleCall&, const Tensor& g) {
    OpCase b;
    b.op = op;
    b.precision = fc.precision;
    b.inputs = {g, fc.inputs[0]};
    std::vector<IrValue> a(fc.args.begin() + 1, fc.args.end());
    const std::vector<IrValue> defaults{ints({}),    ints({}),   ints({0}),
                                        flag(false), flag(true), none()};
    while (a.size() < 6) a.push_back(defaults[a.size()]);
    b.args = {in(0), in(1)};
    for (auto& e : a) b.args.push_back(e);
    b.outDtypes = fc.outDtypes;
    return b;
  };
}

}  // namespace

class TestPoolOps : public QObject {
  Q_OBJECT
 private slots:
  void maxPool2dWithIndices() {
    checkAllFormats("max_pool2d_with_indices", maxPool(false));
    checkAllFormats("max_pool2d_with_indices (ties)", maxPool(true));
    checkVjpCases("max_pool2d_with_indices", forVjp(maxPool(false)));
  }
  void maxPool2dWithIndicesBackward() {
    checkAllFormats("max_pool2d_with_indices_backward", maxPoolBackward(false));
    checkAllFormats("max_pool2d_with_indices_backward (ties)", maxPoolBackward(true));
    checkVjpCases("max_pool2d_with_indices_backward", forVjp(maxPoolBackward(false)));
  }
  void maxPool3dWithIndices() {
    checkAllFormats("max_pool3d_with_indices", maxPool3d(false));
    checkAllFormats("max_pool3d_with_indices (ties)", maxPool3d(true));
    checkVjpCases("max_pool3d_with_indices", forVjp(maxPool3d(false)));
  }
  void maxPool3dWithIndicesBackward() {
    checkAllFormats("max_pool3d_with_indices_backward", maxPool3dBackward(false));
    checkAllFormats("max_pool3d_with_indices_backward (ties)", maxPool3dBackward(true));
    checkVjpCases("max_pool3d_with_indices_backward", forVjp(maxPool3dBackward(false)));
  }
  void maxPool3dWithUnitDepthIsMaxPool2d() {
    // A depth-1 window over a (C, 1, H, W) volume is the 2-d window over (C, H, W): the same
    // values and indices, point and interval, in every domain the rules have.
    std::mt19937_64 rng(29);
    for (int i = 0; i < 200; ++i) {
      const bool iv = i % 2 == 1;
      const Shape s2 = inputShape(rng);
      if (s2.size() != 3) continue;
      const MaxParams p = maxParams(s2[1], s2[2], rng);
      OpCase c2;
      c2.op = "aten.max_pool2d_with_indices.default";
      c2.precision = modelFor(std::nullopt);
      c2.inputs = {inputValues(s2, DType::Float32, iv, Format::Fp32, i % 4 == 0, rng)};
      c2.args = {in(0),
                 ints({p.kh, p.kw}),
                 ints({p.sh, p.sw}),
                 ints({p.ph, p.pw}),
                 ints({p.dh, p.dw}),
                 flag(p.ceil)};
      c2.outDtypes = {DType::Float32, DType::Int64};
      OpCase c3 = c2;
      c3.op = "aten.max_pool3d_with_indices.default";
      c3.inputs = {c2.inputs[0].reshaped({s2[0], 1, s2[1], s2[2]})};
      c3.args = {in(0),
                 ints({1, p.kh, p.kw}),
                 ints({1, p.sh, p.sw}),
                 ints({0, p.ph, p.pw}),
                 ints({1, p.dh, p.dw}),
                 flag(p.ceil)};
      const RuleCall r2(c2), r3(c3);
      const auto same = [](std::span<const double> a, std::span<const double> b) {
        return a.size() == b.size() &&
               std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
                 return std::memcmp(&x, &y, sizeof x) == 0;  // NaN too: the same bits
               });
      };
      for (std::size_t k = 0; k < 2; ++k) {
        QVERIFY(same(r2.point()[k].values(), r3.point()[k].values()));
        QVERIFY(same(r2.interval()[k].lo(), r3.interval()[k].lo()));
        QVERIFY(same(r2.interval()[k].hi(), r3.interval()[k].hi()));
      }
    }
  }
  void avgPool2d() {
    checkAllFormats("avg_pool2d", avgPool());
    checkVjpCases("avg_pool2d", forVjp(avgPool()));
  }
  void avgPool2dBackward() {
    checkAllFormats("avg_pool2d_backward", avgPoolBackward());
    checkVjpCases("avg_pool2d_backward", forVjp(avgPoolBackward()));
  }
  void avgPool3d() {
    checkAllFormats("avg_pool3d", avgPool3dCases());
    checkVjpCases("avg_pool3d", forVjp(avgPool3dCases()));
  }
  void avgPool3dBackward() {
    checkAllFormats("avg_pool3d_backward", avgPool3dBackwardCases());
    checkVjpCases("avg_pool3d_backward", forVjp(avgPool3dBackwardCases()));
  }
  void avgPool3dWithUnitDepthIsAvgPool2d() {
    // A depth-1 window over a (C, 1, H, W) volume is the 2-d window over (C, H, W): the same bits,
    // point and interval, forward and backward, and the forward's random executions.
    std::mt19937_64 rng(31);
    for (int i = 0; i < 200; ++i) {
      const bool iv = i % 2 == 1;
      const Format f = i % 3 == 0 ? Format::Bf16 : Format::Fp32;
      const Shape s2 = inputShape(rng);
      if (s2.size() != 3) continue;
      const AvgParams p = avgParams(s2[1], s2[2], rng);
      if (p.kh > s2[1] || p.kw > s2[2]) continue;  // avg_pool3d refuses (avg_pool2d does not)
      OpCase c2;
      c2.op = "aten.avg_pool2d.default";
      c2.precision = modelFor(std::nullopt);
      c2.inputs = {inputValues(s2, dtypeFor(f), iv, f, false, rng)};
      c2.args = {in(0)};
      for (auto& e : avgArgs(p)) c2.args.push_back(e);
      c2.outDtypes = {dtypeFor(f)};
      OpCase c3 = c2;
      c3.op = "aten.avg_pool3d.default";
      c3.inputs = {c2.inputs[0].reshaped({s2[0], 1, s2[1], s2[2]})};
      c3.args[1] = ints({1, p.kh, p.kw});
      c3.args[2] = ints({1, p.sh, p.sw});
      c3.args[3] = ints({0, p.ph, p.pw});
      const RuleCall f2(c2), f3(c3);
      const Tensor y2 = f2.point()[0];
      OpCase b2;
      b2.op = "aten.avg_pool2d_backward.default";
      b2.precision = c2.precision;
      b2.inputs = {inputValues(y2.shape(), y2.dtype(), iv, f, false, rng), c2.inputs[0]};
      b2.args = {in(0), in(1)};
      for (std::size_t k = 1; k < c2.args.size(); ++k) b2.args.push_back(c2.args[k]);
      b2.outDtypes = c2.outDtypes;
      OpCase b3 = b2;
      b3.op = "aten.avg_pool3d_backward.default";
      const Shape& o = y2.shape();
      b3.inputs = {b2.inputs[0].reshaped({o[0], 1, o[1], o[2]}), c3.inputs[0]};
      for (std::size_t k = 1; k < 4; ++k) b3.args[k + 1] = c3.args[k];
      const RuleCall r2b(b2), r3b(b3);
      const auto same = [](std::span<const double> a, std::span<const double> b) {
        return a.size() == b.size() &&
               std::equal(a.begin(), a.end(), b.begin(),
                          [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; });
      };
      for (const auto& [r2, r3] : {std::pair<const RuleCall*, const RuleCall*>{&f2, &f3},
                                   std::pair<const RuleCall*, const RuleCall*>{&r2b, &r3b}}) {
        QVERIFY(same(r2->point()[0].values(), r3->point()[0].values()));
        QVERIFY(same(r2->interval()[0].lo(), r3->interval()[0].lo()));
        QVERIFY(same(r2->interval()[0].hi(), r3->interval()[0].hi()));
      }
      // The forward's random executions too (the same draws; the 3-d backward draws one more
      // kernel, CUDA's stride-1 sum of undivided gradients).
      std::mt19937_64 g2(i), g3(i);
      QVERIFY(same(f2.random(g2)[0].values(), f3.random(g3)[0].values()));
    }
  }
  void avgPool3dBackwardUndividedSumMayOverflow() {
    // CUDA's stride-1 avg_pool3d backward sums the gradients before dividing: two gradients of
    // 0x1.7p+127 reaching one input overflow fp32 (inf, times 1/8, is inf) although every quotient
    // and their sum are finite. The enclosure must hold inf, and a random execution can give it.
    // (Found by a review: the per-quotient bound alone gave about 4.9e37.)
    for (const DType t : {DType::Float32, DType::BFloat16}) {
      OpCase b;
      b.op = "aten.avg_pool3d_backward.default";
      b.precision = modelFor(std::nullopt);
      b.inputs = {Tensor::point({1, 1, 1, 1, 2}, t, {0x1.7p+127, 0x1.7p+127}),
                  Tensor::point({1, 1, 2, 2, 3}, t, std::vector<double>(12, 1.0))};
      b.args = {in(0), in(1), ints({2}), ints({1}), ints({0}), flag(false), flag(true), none()};
      b.outDtypes = {t};
      const RuleCall call(b);
      QCOMPARE(call.interval()[0].at(1).hi, HUGE_VAL);
      QVERIFY(std::isfinite(call.point()[0].values()[1]));
      std::mt19937_64 rng(7);
      bool sawInf = false;
      for (int i = 0; i < 64 && !sawInf; ++i) sawInf = std::isinf(call.random(rng)[0].values()[1]);
      QVERIFY(sawInf);
      // Away from overflow the 3-d backward keeps the 2-d bound (inputs of one window: finite).
      QVERIFY(std::isfinite(call.interval()[0].at(0).hi));
    }
  }
  void adaptiveAvgPool2d() {
    checkAllFormats("_adaptive_avg_pool2d", adaptive());
    checkVjpCases("_adaptive_avg_pool2d", forVjp(adaptive()));
  }
  void adaptiveAvgPool2dBackward() {
    checkAllFormats("_adaptive_avg_pool2d_backward", adaptiveBackward());
    checkVjpCases("_adaptive_avg_pool2d_backward", forVjp(adaptiveBackward()));
  }
  void backwardOpsMatchForwardVjp() {
    for (bool ties : {false, true})
      checkBackwardMatchesVjp(ties ? "max_pool2d (ties)" : "max_pool2d", maxPool(ties),
                              [](const OpCase& fc, const RuleCall& fwd, const Tensor& g) {
                                OpCase b;
                                b.op = "aten.max_pool2d_with_indices_backward.default";
                                b.precision = fc.precision;
                                b.inputs = {g, fc.inputs[0], fwd.point()[1]};
                                // The forward args with every default spelled out, then the
                                // indices.
                                std::vector<IrValue> a(fc.args.begin() + 1, fc.args.end());
                                const std::vector<IrValue> defaults{ints({}), ints({}), ints({0}),
                                                                    ints({1}), flag(false)};
                                while (a.size() < 5) a.push_back(defaults[a.size()]);
                                if (a[1].list.empty()) a[1] = a[0];
                                b.args = {in(0), in(1)};
                                for (auto& e : a) b.args.push_back(e);
                                b.args.push_back(in(2));
                                b.outDtypes = {fc.outDtypes[0]};
                                return b;
                              });
    checkBackwardMatchesVjp("avg_pool2d", avgPool(),
                            avgPoolBackwardOf("aten.avg_pool2d_backward.default"));
    checkBackwardMatchesVjp("avg_pool3d", avgPool3dCases(),
                            avgPoolBackwardOf("aten.avg_pool3d_backward.default"));
    checkBackwardMatchesVjp("_adaptive_avg_pool2d", adaptive(),
                            [](const OpCase& fc, const RuleCall&, const Tensor& g) {
                              OpCase b;
                              b.op = "aten._adaptive_avg_pool2d_backward.default";
                              b.precision = fc.precision;
                              b.inputs = {g, fc.inputs[0]};
                              b.args = {in(0), in(1)};
                              b.outDtypes = fc.outDtypes;
                              return b;
                            });
  }
  void knownAnswers() {
    // Values and indices printed by PyTorch 1.13 (torch.ops.aten.*, float64) for knownInput().
    const auto run = [](const std::string& op, std::vector<IrValue> args, std::vector<DType> outs) {
      OpCase c;
      c.op = op;
      c.precision = modelFor(std::nullopt);
      c.inputs = {knownInput()};
      c.args = {in(0)};
      for (auto& e : args) c.args.push_back(e);
      c.outDtypes = std::move(outs);
      return RuleCall(c).point();
    };
    const std::vector<DType> maxOuts{DType::Float64, DType::Int64};
    auto m = run("aten.max_pool2d_with_indices.default",
                 {ints({3, 2}), ints({2, 3}), ints({1, 1}), ints({1, 2}), flag(true)}, maxOuts);
    compareValues("max (dilation, ceil)", m[0], {1, 1, 3, 3},
                  {9, 100, 13, 23, 100, 27, 30, 33, 34});
    compareValues("max indices (dilation, ceil)", m[1], {1, 1, 3, 3},
                  {8, 9, 12, 22, 9, 26, 29, 32, 33});
    m = run("aten.max_pool2d_with_indices.default",
            {ints({2, 2}), ints({2, 2}), ints({1, 1}), ints({1, 1}), flag(true)}, maxOuts);
    compareValues("max (padding, ceil)", m[0], {1, 1, 3, 4},
                  {1, 3, 5, 7, 15, 100, 19, 21, 29, 31, 33, 50});
    compareValues("max indices (padding, ceil)", m[1], {1, 1, 3, 4},
                  {0, 2, 4, 6, 14, 9, 18, 20, 28, 30, 32, 34});
    // max_pool3d_with_indices on a 1 x 1 x 3 x 4 x 5 volume (printed by PyTorch 1.13 and 2.15,
    // identical): padding and ceil_mode, dilation with padding, a depth-1 kernel.
    std::vector<double> vol(60);
    for (std::size_t i = 0; i < vol.size(); ++i) vol[i] = static_cast<double>((i * 7) % 23);
    vol[17] = vol[41] = 100.0;  // equal maxima in overlapping windows
    const auto run3 = [&vol](std::vector<IrValue> args) {
      OpCase c;
      c.op = "aten.max_pool3d_with_indices.default";
      c.precision = modelFor(std::nullopt);
      c.inputs = {Tensor::point({1, 1, 3, 4, 5}, DType::Float64, vol)};
      c.args = {in(0)};
      for (auto& e : args) c.args.push_back(e);
      c.outDtypes = {DType::Float64, DType::Int64};
      return RuleCall(c).point();
    };
    m = run3({ints({2, 2, 2}), ints({1, 2, 2}), ints({1, 1, 1}), ints({1, 1, 1}), flag(true)});
    compareValues("max3d (padding, ceil)", m[0], {1, 1, 4, 3, 3},
                  {0, 14,  21, 12, 19, 22, 13, 100, 18, 2, 16,  21, 14, 21, 22, 15, 100, 20,
                   4, 100, 9,  16, 21, 21, 17, 22,  22, 4, 100, 9,  16, 19, 21, 17, 8,   22});
    compareValues("max3d indices (padding, ceil)", m[1], {1, 1, 4, 3, 3},
                  {0,  2,  3,  5,  6,  13, 15, 17, 19, 20, 22, 3,  25, 26, 13, 35, 17, 39,
                   40, 41, 44, 45, 26, 49, 55, 36, 59, 40, 41, 44, 45, 52, 49, 55, 57, 59});
    m = run3({ints({3, 2, 2}), ints({2, 1, 2}), ints({1, 0, 1}), ints({1, 2, 1}), flag(false)});
    compareValues("max3d (dilation, padding)", m[0], {1, 1, 2, 2, 3},
                  {3, 17, 22, 15, 100, 20, 5, 100, 10, 17, 22, 22});
    compareValues("max3d indices (dilation, padding)", m[1], {1, 1, 2, 2, 3},
                  {30, 32, 13, 35, 17, 39, 50, 41, 54, 55, 36, 59});
    m = run3({ints({1, 3, 2}), ints({1, 1, 1}), ints({0, 1, 0}), ints({1, 1, 2}), flag(true)});
    compareValues("max3d indices (depth-1 kernel)", m[1], {1, 1, 3, 4, 3},
                  {2,  3,  9,  12, 13, 9,  17, 13, 17, 17, 13, 17, 22, 26, 29, 32, 26, 29,
                   32, 36, 39, 32, 36, 39, 42, 41, 49, 52, 41, 49, 52, 58, 59, 52, 58, 59});
    // avg_pool3d on the same volume (printed by PyTorch 1.13 and 2.15, identical): padding and
    // ceil_mode with and without counting the padding, a divisor override; and the backward of
    // the first for g = 1..36.
    const auto avg3 = [&vol](std::vector<IrValue> args) {
      OpCase c;
      c.op = "aten.avg_pool3d.default";
      c.precision = modelFor(std::nullopt);
      c.inputs = {Tensor::point({1, 1, 3, 4, 5}, DType::Float64, vol)};
      c.args = {in(0)};
      for (auto& e : args) c.args.push_back(e);
      c.outDtypes = {DType::Float64};
      return c;
    };
    const std::vector<IrValue> padCeil{ints({2, 3, 2}), ints({1, 2, 2}), ints({1, 1, 1}),
                                       flag(true),      flag(true),      none()};
    compareValues("avg3d (count_include_pad, ceil)", RuleCall(avg3(padCeil)).point()[0],
                  {1, 1, 4, 3, 3},
                  {0x1.p+0,
                   0x1.caaaaaaaaaaabp+1,
                   0x1.1aaaaaaaaaaabp+2,
                   0x1.1555555555555p+1,
                   0x1.b800000000000p+3,
                   0x1.c000000000000p+2,
                   0x1.a000000000000p+0,
                   0x1.e000000000000p+3,
                   0x1.d000000000000p+1,
                   0x1.2aaaaaaaaaaabp+1,
                   0x1.f555555555555p+2,
                   0x1.e555555555555p+2,
                   0x1.3555555555555p+2,
                   0x1.4800000000000p+4,
                   0x1.a2aaaaaaaaaabp+3,
                   0x1.c000000000000p+1,
                   0x1.2800000000000p+4,
                   0x1.f000000000000p+2,
                   0x1.8000000000000p+1,
                   0x1.d555555555555p+3,
                   0x1.c000000000000p+2,
                   0x1.7555555555555p+2,
                   0x1.5555555555555p+3,
                   0x1.a555555555555p+3,
                   0x1.p+2,
                   0x1.2800000000000p+2,
                   0x1.1800000000000p+3,
                   0x1.aaaaaaaaaaaabp+0,
                   0x1.4d55555555555p+3,
                   0x1.eaaaaaaaaaaabp+1,
                   0x1.9555555555555p+1,
                   0x1.f555555555555p+1,
                   0x1.c555555555555p+2,
                   0x1.1000000000000p+1,
                   0x1.2000000000000p+0,
                   0x1.2800000000000p+2});
    std::vector<IrValue> noPadCount = padCeil;
    noPadCount[4] = flag(false);
    compareValues("avg3d (no pad count, ceil)", RuleCall(avg3(noPadCount)).point()[0],
                  {1, 1, 4, 3, 3},
                  {0x1.8000000000000p+2,
                   0x1.5800000000000p+3,
                   0x1.a800000000000p+3,
                   0x1.1555555555555p+3,
                   0x1.b800000000000p+4,
                   0x1.c000000000000p+3,
                   0x1.a000000000000p+3,
                   0x1.e000000000000p+5,
                   0x1.d000000000000p+3,
                   0x1.c000000000000p+2,
                   0x1.7800000000000p+3,
                   0x1.6c00000000000p+3,
                   0x1.3555555555555p+3,
                   0x1.4800000000000p+4,
                   0x1.a2aaaaaaaaaabp+3,
                   0x1.c000000000000p+3,
                   0x1.2800000000000p+5,
                   0x1.f000000000000p+3,
                   0x1.2000000000000p+3,
                   0x1.6000000000000p+4,
                   0x1.5000000000000p+3,
                   0x1.7555555555555p+3,
                   0x1.5555555555555p+3,
                   0x1.a555555555555p+3,
                   0x1.p+4,
                   0x1.2800000000000p+3,
                   0x1.1800000000000p+4,
                   0x1.4000000000000p+3,
                   0x1.f400000000000p+4,
                   0x1.7000000000000p+3,
                   0x1.9555555555555p+3,
                   0x1.f555555555555p+2,
                   0x1.c555555555555p+3,
                   0x1.1000000000000p+4,
                   0x1.2000000000000p+2,
                   0x1.2800000000000p+4});
    compareValues(
        "avg3d (divisor_override 5)",
        RuleCall(avg3({ints({3, 2, 2}), ints({2, 1, 2}), ints({1, 0, 1}), flag(false), flag(true),
                       integer(5)}))
            .point()[0],
        {1, 1, 2, 3, 3},
        {0x1.6666666666666p+2, 0x1.2cccccccccccdp+4, 0x1.2333333333333p+4, 0x1.8000000000000p+2,
         0x1.399999999999ap+4, 0x1.3000000000000p+4, 0x1.999999999999ap+2, 0x1.3cccccccccccdp+5,
         0x1.3cccccccccccdp+4, 0x1.ccccccccccccdp+2, 0x1.199999999999ap+5, 0x1.0cccccccccccdp+4,
         0x1.e666666666666p+2, 0x1.2333333333333p+4, 0x1.199999999999ap+4, 0x1.p+3,
         0x1.3000000000000p+4, 0x1.2666666666666p+4});
    OpCase b3 = avg3(padCeil);
    b3.op = "aten.avg_pool3d_backward.default";
    std::vector<double> g36(36);
    for (std::size_t i = 0; i < g36.size(); ++i) g36[i] = static_cast<double>(i + 1);
    b3.inputs.insert(b3.inputs.begin(), Tensor::point({1, 1, 4, 3, 3}, DType::Float64, g36));
    b3.args = {in(0), in(1)};
    for (const IrValue& e : padCeil) b3.args.push_back(e);
    compareValues(
        "avg3d backward (count_include_pad, ceil)", RuleCall(b3).point()[0], {1, 1, 3, 4, 5},
        {0x1.d555555555556p-1, 0x1.1555555555555p+0, 0x1.1555555555555p+0, 0x1.4000000000000p+0,
         0x1.4000000000000p+0, 0x1.2aaaaaaaaaaaap+1, 0x1.5555555555556p+1, 0x1.5555555555556p+1,
         0x1.8000000000000p+1, 0x1.8000000000000p+1, 0x1.6aaaaaaaaaaaap+0, 0x1.9555555555556p+0,
         0x1.9555555555556p+0, 0x1.c000000000000p+0, 0x1.c000000000000p+0, 0x1.12aaaaaaaaaaap+2,
         0x1.2d55555555556p+2, 0x1.2d55555555556p+2, 0x1.4800000000000p+2, 0x1.4800000000000p+2,
         0x1.3555555555555p+1, 0x1.4aaaaaaaaaaabp+1, 0x1.4aaaaaaaaaaabp+1, 0x1.6000000000000p+1,
         0x1.6000000000000p+1, 0x1.5555555555555p+2, 0x1.6aaaaaaaaaaabp+2, 0x1.6aaaaaaaaaaabp+2,
         0x1.8000000000000p+2, 0x1.8000000000000p+2, 0x1.7555555555555p+1, 0x1.8aaaaaaaaaaabp+1,
         0x1.8aaaaaaaaaaabp+1, 0x1.a000000000000p+1, 0x1.a000000000000p+1, 0x1.0155555555555p+3,
         0x1.0eaaaaaaaaaabp+3, 0x1.0eaaaaaaaaaabp+3, 0x1.1c00000000000p+3, 0x1.1c00000000000p+3,
         0x1.f555555555556p+1, 0x1.0555555555555p+2, 0x1.0555555555555p+2, 0x1.1000000000000p+2,
         0x1.1000000000000p+2, 0x1.0aaaaaaaaaaabp+3, 0x1.1555555555555p+3, 0x1.1555555555555p+3,
         0x1.2000000000000p+3, 0x1.2000000000000p+3, 0x1.1aaaaaaaaaaabp+2, 0x1.2555555555555p+2,
         0x1.2555555555555p+2, 0x1.3000000000000p+2, 0x1.3000000000000p+2, 0x1.7955555555555p+3,
         0x1.86aaaaaaaaaabp+3, 0x1.86aaaaaaaaaabp+3, 0x1.9400000000000p+3, 0x1.9400000000000p+3});
    const std::vector<DType> f64{DType::Float64};
    auto a = run("aten.avg_pool2d.default",
                 {ints({3, 3}), ints({2, 2}), ints({1, 1}), flag(true), flag(true), none()}, f64);
    compareValues(
        "avg (count_include_pad, ceil)", a[0], {1, 1, 3, 4},
        {0x1.1c71c71c71c72p+1, 0x1.caaaaaaaaaaabp+3, 0x1.6aaaaaaaaaaabp+2, 0x1.1c71c71c71c72p+2,
         0x1.4aaaaaaaaaaabp+3, 0x1.b000000000000p+4, 0x1.3000000000000p+4, 0x1.b555555555555p+3,
         0x1.71c71c71c71c7p+3, 0x1.2555555555555p+4, 0x1.3aaaaaaaaaaabp+4, 0x1.ee38e38e38e39p+3});
    a = run("aten.avg_pool2d.default",
            {ints({3, 3}), ints({2, 2}), ints({1, 1}), flag(true), flag(false), none()}, f64);
    compareValues("avg (no pad count, ceil)", a[0], {1, 1, 3, 4},
                  {5.0, 21.5, 8.5, 10.0, 15.5, 27.0, 19.0, 20.5, 26.0, 27.5, 29.5, 34.75});
    a = run("aten.avg_pool2d.default",
            {ints({3, 2}), ints({2, 2}), ints({1, 0}), flag(false), flag(true), integer(5)}, f64);
    compareValues("avg (divisor_override 5)", a[0], {1, 1, 3, 3},
                  {4.0, 23.6, 7.2, 18.6, 39.0, 23.4, 20.8, 22.4, 24.0});
    a = run("aten._adaptive_avg_pool2d.default", {ints({7, 9})}, f64);
    compareValues("adaptive (upsampling)", a[0], {1, 1, 7, 9},
                  {1.0,   1.5,  2.5,  3.5,  4.0,  4.5,  5.5,  6.5,  7.0,  4.5,  5.0,  28.5, 29.5,
                   7.5,   8.0,  9.0,  10.0, 10.5, 11.5, 12.0, 35.5, 36.5, 14.5, 15.0, 16.0, 17.0,
                   17.5,  15.0, 15.5, 16.5, 17.5, 18.0, 18.5, 19.5, 20.5, 21.0, 18.5, 19.0, 20.0,
                   21.0,  21.5, 22.0, 23.0, 24.0, 24.5, 25.5, 26.0, 27.0, 28.0, 28.5, 29.0, 30.0,
                   34.75, 39.0, 29.0, 29.5, 30.5, 31.5, 32.0, 32.5, 33.5, 42.0, 50.0});
    // _adaptive_avg_pool2d_backward of g = 1..63 (7 × 9) to the 5 × 7 input.
    std::vector<double> g(63);
    for (int i = 0; i < 63; ++i) g[static_cast<std::size_t>(i)] = i + 1.0;
    OpCase b;
    b.op = "aten._adaptive_avg_pool2d_backward.default";
    b.precision = modelFor(std::nullopt);
    b.inputs = {Tensor::point({1, 1, 7, 9}, DType::Float64, g), knownInput()};
    b.args = {in(0), in(1)};
    b.outDtypes = f64;
    compareValues("adaptive backward (upsampling)", RuleCall(b).point()[0], {1, 1, 5, 7},
                  {9.75, 8.25,  9.75, 24.0,  14.25,  15.75, 26.25, 22.25, 16.0,  17.0,  37.0,  20.0,
                   21.0, 33.25, 85.0, 59.0,  61.0,   128.0, 67.0,  69.0,  107.0, 62.75, 43.0,  44.0,
                   91.0, 47.0,  48.0, 73.75, 117.75, 80.25, 81.75, 168.0, 86.25, 87.75, 134.25});
  }
  void intervalIndicesSpanTies() {
    // A 2 × 2 window of equal values: the kernels report the first; the index enclosure spans
    // all four, and the backward rule sends hull(0, g) to each.
    OpCase c;
    c.op = "aten.max_pool2d_with_indices.default";
    c.precision = modelFor(std::nullopt);
    c.inputs = {Tensor::point({1, 2, 2}, DType::Float32, {1.0, 1.0, 1.0, 1.0})};
    c.args = {in(0), ints({2, 2})};
    c.outDtypes = {DType::Float32, DType::Int64};
    const RuleCall call(c);
    QCOMPARE(call.point()[1].values()[0], 0.0);
    const Interval idx = call.interval()[1].at(0);
    QCOMPARE(idx.lo, 0.0);
    QCOMPARE(idx.hi, 3.0);
    OpCase b;
    b.op = "aten.max_pool2d_with_indices_backward.default";
    b.precision = c.precision;
    b.inputs = {Tensor::point({1, 1, 1}, DType::Float32, {2.0}), c.inputs[0], call.interval()[1]};
    b.args = {in(0),        in(1),        ints({2, 2}), ints({2, 2}),
              ints({0, 0}), ints({1, 1}), flag(false),  in(2)};
    b.outDtypes = {DType::Float32};
    const Tensor gx = RuleCall(b).interval()[0];
    for (std::int64_t i = 0; i < 4; ++i) {
      QCOMPARE(gx.at(i).lo, 0.0);
      QCOMPARE(gx.at(i).hi, 2.0);
    }
  }
  void maxPoolFirstOrderAtTies() {
    // Windows with (near-)ties. The reference holds exact values v, the candidate values x within
    // one storage rounding of each v, chosen independently per element (rounded to nearest, or,
    // for a v halfway between two values of the format, either of them: two tied exact values
    // may then be stored one ulp apart in either order). The first-order method predicts
    // max(v) + (x_i − v_i) for the point argmax i; localError must cover the rest.
    // (Rounding every element to nearest alone never changes the max value: RN is monotone, so
    // the max of the stored values is the stored max; only the index can differ.)
    std::mt19937_64 rng(41);
    int checks = 0, switched = 0, missed = 0;
    for (Format f : {Format::Fp32, Format::Bf16, Format::Fp16}) {
      const DType t = dtypeFor(f);
      for (int i = 0; i < 300; ++i) {
        OpCase c = maxPool(true)(f, false, rng);
        const Tensor& x = c.inputs[0];
        std::vector<double> v(x.values().begin(), x.values().end()), xs(v.size());
        for (std::size_t k = 0; k < v.size(); ++k) {
          const double next =
              roundToFormat(std::nextafter(v[k], HUGE_VAL), f, RoundingDirection::Up);
          if (rng() % 2) {
            const double lo = v[k];
            v[k] = 0.5 * (lo + next);  // exact in binary64; within one rounding of both
            xs[k] = rng() % 2 ? lo : next;
          } else {
            xs[k] = v[k];
          }
        }
        OpCase exact = c, stored = c;
        exact.inputs[0] = Tensor::point(x.shape(), t, v);
        stored.inputs[0] = Tensor::point(x.shape(), t, xs);
        const RuleCall ref(exact), cand(stored);
        const Tensor le = ref.localError()[0];
        const Tensor& y = ref.point()[0];
        const Tensor& idx = ref.point()[1];
        const Tensor r = cand.random(rng)[0];
        const std::int64_t plane = x.shape()[x.shape().size() - 2] * x.shape().back();
        const std::int64_t outPlane = y.shape()[y.shape().size() - 2] * y.shape().back();
        for (std::int64_t k = 0; k < y.numel(); ++k) {
          const auto ku = static_cast<std::size_t>(k);
          if (!std::isfinite(y.values()[ku])) continue;  // a window of padding only
          const auto src = static_cast<std::size_t>((k / outPlane) * plane +
                                                    static_cast<std::int64_t>(idx.values()[ku]));
          const double predicted = y.values()[ku] + (xs[src] - v[src]);
          const double miss = std::fabs(r.values()[ku] - predicted);
          switched += cand.point()[1].values()[ku] != idx.values()[ku];
          missed += miss > 0.0;
          ++checks;
          QVERIFY2(miss <= le.values()[ku] * (1.0 + 1e-6),
                   (std::string(formatName(f)) + ": max over a near-tie misses by " +
                    std::to_string(miss) + " > localError " + std::to_string(le.values()[ku]))
                       .c_str());
        }
      }
    }
    qInfo(
        "max_pool2d first order at ties: %d checks, %d with another argmax in the candidate, "
        "%d where the linearization through the point argmax misses",
        checks, switched, missed);
    QVERIFY(missed > 0);  // the case the tie term is for does occur
  }
  void badArgumentsAreErrors() {
    std::mt19937_64 rng(5);
    const auto expectError = [&](const std::string& op, std::vector<IrValue> args, Shape s,
                                 std::vector<DType> outs) {
      OpCase c;
      c.op = op;
      c.precision = modelFor(std::nullopt);
      c.inputs = {randomPoint(s, DType::Float32, rng)};
      c.args = {in(0)};
      for (auto& e : args) c.args.push_back(e);
      c.outDtypes = std::move(outs);
      QVERIFY_THROWS_EXCEPTION(OpError, checkEnclosure(c, 1, rng));
    };
    const std::vector<DType> mo{DType::Float32, DType::Int64}, ao{DType::Float32};
    // padding larger than half the kernel
    expectError("aten.max_pool2d_with_indices.default", {ints({2, 2}), ints({}), ints({2, 2})},
                {1, 4, 4}, mo);
    // 2-d input
    expectError("aten.max_pool2d_with_indices.default", {ints({2, 2})}, {4, 4}, mo);
    // kernel larger than the input: empty output
    expectError("aten.avg_pool2d.default", {ints({5, 5})}, {1, 4, 4}, ao);
    // zero stride
    expectError("aten.avg_pool2d.default", {ints({2, 2}), ints({0, 1})}, {1, 4, 4}, ao);
    // output_size of three values
    expectError("aten._adaptive_avg_pool2d.default", {ints({1, 2, 3})}, {1, 4, 4}, ao);
    // 3-d pooling: a 3-d input, a kernel of two values, padding past half the kernel, a zero
    // dilation, a kernel deeper than the input
    const std::string mp3 = "aten.max_pool3d_with_indices.default";
    expectError(mp3, {ints({2, 2, 2})}, {1, 4, 4}, mo);
    expectError(mp3, {ints({2, 2})}, {1, 2, 4, 4}, mo);
    expectError(mp3, {ints({2, 2, 2}), ints({}), ints({0, 2, 0})}, {1, 2, 4, 4}, mo);
    expectError(mp3, {ints({2, 2, 2}), ints({}), ints({0}), ints({1, 0, 1})}, {1, 2, 4, 4}, mo);
    expectError(mp3, {ints({3, 2, 2})}, {1, 2, 4, 4}, mo);
    const std::string ap3 = "aten.avg_pool3d.default";
    expectError(ap3, {ints({2, 2, 2})}, {4, 4}, ao);
    expectError(ap3, {ints({2, 2})}, {1, 2, 4, 4}, ao);
    expectError(ap3, {ints({2, 2, 2}), ints({1, 0, 1})}, {1, 2, 4, 4}, ao);
    expectError(ap3, {ints({2, 5, 2})}, {1, 2, 4, 4}, ao);
    // a kernel deeper than the input even with padding that would make the output non-empty
    expectError(ap3, {ints({3, 2, 2}), ints({1, 1, 1}), ints({1, 0, 0})}, {1, 2, 4, 4}, ao);
  }
  void maxPoolBackwardBadIndexIsAnError() {
    // A 2×2 plane pooled to one output: a point index past the plane, or a NaN one, is reported
    // by the interval rule (which runs kernels::maxPoolBackwardPlane) with what was found.
    for (const double bad : {4.0, -1.0, std::nan("")}) {
      OpCase b;
      b.op = "aten.max_pool2d_with_indices_backward.default";
      b.precision = modelFor(std::nullopt);
      b.inputs = {Tensor::point({1, 1, 1}, DType::Float32, {2.0}),
                  Tensor::point({1, 2, 2}, DType::Float32, {1.0, 2.0, 3.0, 4.0}),
                  Tensor::point({1, 1, 1}, DType::Int64, {bad})};
      b.args = {in(0),        in(1),        ints({2, 2}), ints({2, 2}),
                ints({0, 0}), ints({1, 1}), flag(false),  in(2)};
      b.outDtypes = {DType::Float32};
      std::string message;
      try {
        RuleCall(b).interval();
      } catch (const OpError& e) {
        message = e.what();
      }
      QVERIFY2(message.find(std::isnan(bad) ? "NaN" : "outside the 2 x 2 input plane") !=
                   std::string::npos,
               message.c_str());
    }
    // The 3-d backward names the 2 x 2 x 2 volume.
    OpCase b;
    b.op = "aten.max_pool3d_with_indices_backward.default";
    b.precision = modelFor(std::nullopt);
    b.inputs = {Tensor::point({1, 1, 1, 1}, DType::Float32, {2.0}),
                Tensor::point({1, 2, 2, 2}, DType::Float32, {1, 2, 3, 4, 5, 6, 7, 8}),
                Tensor::point({1, 1, 1, 1}, DType::Int64, {8.0})};
    b.args = {in(0),           in(1),           ints({2, 2, 2}), ints({2, 2, 2}),
              ints({0, 0, 0}), ints({1, 1, 1}), flag(false),     in(2)};
    b.outDtypes = {DType::Float32};
    std::string message;
    try {
      RuleCall(b).interval();
    } catch (const OpError& e) {
      message = e.what();
    }
    QVERIFY2(message.find("index 8 is outside the 2 x 2 x 2 input plane") != std::string::npos,
             message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestPoolOps)
#include "test_pool_ops.moc"
