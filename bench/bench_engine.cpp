// Engine benchmark: interval vs point time for matmul 64…1024 and for a 3-layer MLP forward
// (width 256, batch 64), measured side by side in one run; then a tightness report per op family:
// envelope width / observed randomized spread (fp32 model, point inputs).
// Usage: bench-engine [--quick]
#include "core/backend.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace lossbound;

namespace {

IrValue refTo(const std::string& name) {
  IrValue v;
  v.kind = IrValue::Kind::Ref;
  v.ref = ValueRef{name, 0};
  return v;
}
IrValue num(double x) {
  IrValue v;
  v.kind = IrValue::Kind::Float;
  v.floatValue = x;
  return v;
}
IrValue ints(std::vector<std::int64_t> xs) {
  IrValue v;
  v.kind = IrValue::Kind::List;
  for (auto x : xs) {
    IrValue e;
    e.kind = IrValue::Kind::Int;
    e.intValue = x;
    v.list.push_back(e);
  }
  return v;
}

/// A tiny evaluator for straight-line benchmark programs: named tensors and one domain.
struct Env {
  std::map<std::string, Tensor> values;
  Backend& backend;
  PrecisionModel pm;
  std::mt19937_64 rng{1};

  enum class Domain { Point, Interval, Random };

  Tensor run(const std::string& name, const std::string& op, std::vector<IrValue> args, Domain d,
             DType out = DType::Float32) {
    Node n;
    n.name = name;
    n.op = op;
    n.args = std::move(args);
    n.outputs = {{{}, out}};
    const OpRule* rule = opRegistry().find(op);
    if (!rule) {
      std::fprintf(stderr, "unsupported op %s\n", op.c_str());
      std::exit(4);
    }
    OpArgs a(n, [this](const ValueRef& r) -> const Tensor& { return values.at(r.name); });
    OpContext ctx{pm, backend, &rng};
    std::vector<Tensor> r = d == Domain::Point      ? rule->point(a, ctx)
                            : d == Domain::Interval ? rule->interval(a, ctx)
                                                    : rule->random(a, ctx);
    values[name] = r.at(0);
    return r[0];
  }
};

Tensor randomTensor(const Shape& s, std::mt19937_64& rng, double scale, double rel = 0.0) {
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& x : v) x = static_cast<double>(static_cast<float>(nd(rng)));
  if (rel == 0.0) return Tensor::point(s, DType::Float32, v);
  std::vector<double> lo(v.size()), hi(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double r = rel * std::fabs(v[i]);
    lo[i] = v[i] - r;
    hi[i] = v[i] + r;
  }
  return Tensor::interval(s, DType::Float32, lo, hi);
}

template <typename F>
double seconds(F&& f, int minReps = 3, double minTime = 0.3) {
  // best of repetitions, at least minReps and minTime in total
  double best = 1e300, total = 0;
  for (int rep = 0; rep < minReps || total < minTime; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
    if (rep > 50) break;
  }
  return best;
}

void benchMatmul(Backend& be, bool quick) {
  std::printf("\n== matmul: interval (mm, fp32 model) vs point GEMM (binary64, same backend) ==\n");
  std::printf("%6s %12s %12s %8s %12s %8s %12s %8s\n", "n", "gemm [ms]", "pt-ins [ms]", "ratio",
              "iv-ins [ms]", "ratio", "tf32 [ms]", "ratio");
  std::mt19937_64 rng(7);
  for (std::int64_t n : {64, 128, 256, 512, 1024}) {
    if (quick && n > 256) break;
    Env env{{}, be, {}};
    env.values["A"] = randomTensor({n, n}, rng, 1.0);
    env.values["B"] = randomTensor({n, n}, rng, 1.0);
    env.values["Ai"] = randomTensor({n, n}, rng, 1.0, 1e-6);
    env.values["Bi"] = randomTensor({n, n}, rng, 1.0, 1e-6);
    std::vector<double> c(static_cast<std::size_t>(n * n));
    const double tg = seconds([&] {
      be.gemm(env.values["A"].values().data(), env.values["B"].values().data(), c.data(), n, n, n);
    });
    const double tp = seconds([&] {
      env.run("C", "aten.mm.default", {refTo("A"), refTo("B")}, Env::Domain::Interval);
    });
    const double ti = seconds([&] {
      env.run("C", "aten.mm.default", {refTo("Ai"), refTo("Bi")}, Env::Domain::Interval);
    });
    env.pm.tf32Matmul = true;
    const double tt = seconds([&] {
      env.run("C", "aten.mm.default", {refTo("A"), refTo("B")}, Env::Domain::Interval);
    });
    std::printf("%6lld %12.3f %12.3f %8.2f %12.3f %8.2f %12.3f %8.2f\n", static_cast<long long>(n),
                tg * 1e3, tp * 1e3, tp / tg, ti * 1e3, ti / tg, tt * 1e3, tt / tg);
  }
}

void benchMlp(Backend& be) {
  std::printf("\n== 3-layer MLP forward (batch 64, width 256, fp32 model): addmm + clamp_min ==\n");
  std::mt19937_64 rng(9);
  Env env{{}, be, {}};
  const std::int64_t b = 64, w = 256;
  env.values["x"] = randomTensor({b, w}, rng, 1.0);
  for (int l = 0; l < 3; ++l) {
    // "W" + L, not "W" + std::to_string(l): GCC 12 at -O3 reports a false -Wrestrict on
    // operator+(const char*, std::string&&) (GCC bug 105651).
    const std::string L = std::to_string(l);
    env.values["W" + L] = randomTensor({w, w}, rng, 1.0 / std::sqrt(static_cast<double>(w)));
    env.values["b" + L] = randomTensor({w}, rng, 0.1);
  }
  auto forward = [&](Env::Domain d) {
    std::string h = "x";
    for (int l = 0; l < 3; ++l) {
      const std::string L = std::to_string(l);
      env.run("z" + L, "aten.addmm.default", {refTo("b" + L), refTo(h), refTo("W" + L)}, d);
      h = "z" + L;
      if (l < 2) {
        env.run("h" + L, "aten.clamp_min.default", {refTo(h), num(0.0)}, d);
        h = "h" + L;
      }
    }
    return env.values.at(h);
  };
  const double tp = seconds([&] { forward(Env::Domain::Point); });
  const double ti = seconds([&] { forward(Env::Domain::Interval); });
  const double tr = seconds([&] { forward(Env::Domain::Random); }, 1, 0.0);
  const Tensor iv = forward(Env::Domain::Interval);
  const Tensor pt = forward(Env::Domain::Point);
  double wsum = 0, asum = 0;
  for (std::int64_t i = 0; i < iv.numel(); ++i) {
    wsum += iv.hi()[static_cast<std::size_t>(i)] - iv.lo()[static_cast<std::size_t>(i)];
    asum += std::fabs(pt.values()[static_cast<std::size_t>(i)]);
  }
  const double relw = wsum / asum;
  std::printf("point %.3f ms, interval %.3f ms (ratio %.2f), one randomized execution %.1f ms\n",
              tp * 1e3, ti * 1e3, ti / tp, tr * 1e3);
  std::printf("mean output width / mean |output| from exact fp32 inputs: %.3g\n", relw);
}

/// Envelope width / observed spread of `trials` randomized executions, over elements with a
/// nonzero spread (mean of widths over mean of spreads), and the median per-element ratio.
void tightness(Backend& be, const std::string& family, const std::string& op,
               std::map<std::string, Tensor> inputs, std::vector<IrValue> args, int trials,
               PrecisionModel pm = {}, DType out = DType::Float32) {
  Env env{std::move(inputs), be, pm};
  const Tensor iv = env.run("y", op, args, Env::Domain::Interval, out);
  std::vector<double> mn(static_cast<std::size_t>(iv.numel()), 1e300), mx(mn.size(), -1e300);
  for (int t = 0; t < trials; ++t) {
    const Tensor r = env.run("y", op, args, Env::Domain::Random, out);
    for (std::size_t i = 0; i < mn.size(); ++i) {
      mn[i] = std::min(mn[i], r.values()[i]);
      mx[i] = std::max(mx[i], r.values()[i]);
    }
  }
  double ws = 0, ss = 0, ulps = 0;
  std::vector<double> ratios;
  for (std::size_t i = 0; i < mn.size(); ++i) {
    const double y = std::max(std::fabs(iv.lo()[i]), std::fabs(iv.hi()[i]));
    const double ulp = out == DType::BFloat16 ? std::ldexp(1.0, std::ilogb(y) - 7)
                                              : std::ldexp(1.0, std::ilogb(y) - 23);
    if (y > 0 && std::isfinite(y)) ulps += (iv.hi()[i] - iv.lo()[i]) / ulp;
  }
  ulps /= static_cast<double>(std::max<std::size_t>(mn.size(), 1));
  int zero = 0;
  for (std::size_t i = 0; i < mn.size(); ++i) {
    const double w = iv.hi()[i] - iv.lo()[i], s = mx[i] - mn[i];
    if (!std::isfinite(w)) continue;
    if (s > 0) {
      ws += w;
      ss += s;
      ratios.push_back(w / s);
    } else {
      ++zero;
    }
  }
  std::sort(ratios.begin(), ratios.end());
  const double med = ratios.empty() ? 0 : ratios[ratios.size() / 2];
  std::printf("%-12s %-26s %10.2f %10.2f %10.1f %8d/%zu\n", family.c_str(), op.c_str(),
              ss > 0 ? ws / ss : 0.0, med, ulps, zero, mn.size());
}

void tightnessReport(Backend& be) {
  std::printf("\n== tightness (fp32 model, exact inputs, 300 randomized executions) ==\n");
  std::printf("%-12s %-26s %10s %10s %10s %10s\n", "family", "op", "width/spr", "median",
              "width[ulp]", "no spread");
  std::mt19937_64 rng(11);
  const Tensor a = randomTensor({64, 64}, rng, 1.0), b = randomTensor({64, 64}, rng, 1.0);
  std::uniform_real_distribution<double> pos(0.5, 4.0);
  std::vector<double> pv(64 * 64);
  for (double& v : pv) v = static_cast<float>(pos(rng));
  const Tensor p = Tensor::point({64, 64}, DType::Float32, pv);
  tightness(be, "elementwise", "aten.add.Tensor", {{"a", a}, {"b", b}}, {refTo("a"), refTo("b")},
            300);
  tightness(be, "elementwise", "aten.mul.Tensor", {{"a", a}, {"b", b}}, {refTo("a"), refTo("b")},
            300);
  tightness(be, "elementwise", "aten.div.Scalar", {{"a", a}}, {refTo("a"), num(10.0)}, 300);
  tightness(be, "elementwise", "aten.exp.default", {{"a", a}}, {refTo("a")}, 300);
  tightness(be, "elementwise", "aten.log.default", {{"p", p}}, {refTo("p")}, 300);
  tightness(be, "elementwise", "aten.rsqrt.default", {{"p", p}}, {refTo("p")}, 300);
  tightness(be, "matmul", "aten.mm.default", {{"a", a}, {"b", b}}, {refTo("a"), refTo("b")}, 300);
  PrecisionModel tf32;
  tf32.tf32Matmul = true;
  tightness(be, "matmul tf32", "aten.mm.default", {{"a", a}, {"b", b}}, {refTo("a"), refTo("b")},
            300, tf32);
  const Tensor big = randomTensor({16, 1024}, rng, 1.0);
  tightness(be, "reduction", "aten.sum.dim_IntList", {{"x", big}}, {refTo("x"), ints({1})}, 300);
  tightness(be, "reduction", "aten.mean.dim", {{"x", big}}, {refTo("x"), ints({1})}, 300);
  tightness(be, "optimizer", "aten.addcmul.default", {{"a", a}, {"b", b}, {"p", p}},
            {refTo("a"), refTo("b"), refTo("p")}, 300);
  tightness(be, "optimizer", "aten.addcdiv.default", {{"a", a}, {"b", b}, {"p", p}},
            {refTo("a"), refTo("b"), refTo("p")}, 300);
  tightness(be, "optimizer", "aten.lerp.Scalar", {{"a", a}, {"b", b}},
            {refTo("a"), refTo("b"), num(0.1)}, 300);
  tightness(be, "view/cast", "aten._to_copy.default", {{"a", a}}, {refTo("a")}, 300, {},
            DType::BFloat16);
  std::printf(
      "(width/spr: mean envelope width over mean observed spread on elements with a spread;\n"
      " median: median per-element ratio; width[ulp]: mean width in ulps of the result's format;\n"
      " no spread: elements whose executions all agreed, e.g. correctly rounded ops.)\n");
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  auto be = createCpuBackend();
  std::printf("backend: %s\n", be->name().c_str());
  benchMatmul(*be, quick);
  benchMlp(*be);
  tightnessReport(*be);
  return 0;
}
