// Batch-norm / group-norm bounds at sizes the tests do not reach. Prints, side by side:
//  1. the moment bound (kernels::rowMoments, shared with layer norm) against n: the relative
//     width of the rstd enclosure and the observed spread of random two-pass/Welford/pairwise
//     executions (ops::norm::randomMoments), in fp32 — where the any-order Welford bound stops
//     being finite;
//  2. native_batch_norm and native_batch_norm_backward at a CNN-like shape (N×C×H×W), training,
//     fp32 and bf16: escapes of many random executions from the interval rule, and the ratio of
//     interval width to observed spread.
// Usage: bench-norm [executions per case, default 100]

#include "core/backend.h"
#include "core/kernels/layer_norm_row.h"
#include "core/ops/broadcasting.h"
#include "core/ops/channel_norm_support.h"
#include "core/ops/libm_model.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace lossbound;

namespace {

IrValue ref(int i) {
  IrValue v;
  v.kind = IrValue::Kind::Ref;
  v.ref = ValueRef{"in" + std::to_string(i), 0};
  return v;
}
IrValue boolean(bool b) {
  IrValue v;
  v.kind = IrValue::Kind::Bool;
  v.boolValue = b;
  return v;
}
IrValue number(double x) {
  IrValue v;
  v.kind = IrValue::Kind::Float;
  v.floatValue = x;
  return v;
}

void momentWidths() {
  std::printf("1. rstd enclosure of one row (fp32 compute, data N(0.5, 1) in fp32)\n");
  std::printf("%10s %14s %14s %14s\n", "n", "rel width", "random spread", "width/spread");
  std::mt19937_64 rng(1);
  std::normal_distribution<double> nd;
  for (std::int64_t n : {64, 256, 1024, 4096, 16384, 65536, 262144}) {
    std::vector<double> x(static_cast<std::size_t>(n)), c(x.size()), d(x.size());
    for (double& v : x) v = static_cast<double>(static_cast<float>(0.5 + nd(rng)));
    const kernels::RowMoments mo = kernels::rowMoments(
        x.data(), x.data(), n,
        {Format::Fp32, 1e-5, ops::modelUlps(ops::LibmFn::Rsqrt, Format::Fp32)}, c.data(), d.data());
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (int t = 0; t < 20; ++t) {
      const auto [mu, m2] = ops::norm::randomMoments(x, Format::Fp32, rng);
      (void)mu;
      const double r = 1.0 / std::sqrt(m2 / static_cast<double>(n) + 1e-5);
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    const double w = (mo.rstd.hi - mo.rstd.lo) / std::fabs(mo.rstd.lo > 0 ? mo.rstd.lo : hi);
    const double s = (hi - lo) / hi;
    std::printf("%10lld %14.3g %14.3g %14.3g\n", static_cast<long long>(n), w, s,
                s > 0 ? w / s : HUGE_VAL);
  }
}

struct Run {
  int escapes = 0;
  double width = 0, spread = 0;
};

Run runCase(const std::string& op, const std::vector<IrValue>& args,
            const std::vector<Tensor>& inputs, const std::vector<DType>& outs, int execs,
            std::mt19937_64& rng, Backend& be) {
  Node node;
  node.name = "bench";
  node.op = op;
  node.args = args;
  for (DType t : outs) node.outputs.push_back({Shape{}, t});
  const OpArgs a(node, [&](const ValueRef& r) -> const Tensor& {
    return inputs.at(static_cast<std::size_t>(std::stoi(r.name.substr(2))));
  });
  const PrecisionModel pm;
  OpContext ctx{pm, be, &rng};
  const OpRule& rule = *opRegistry().find(op);
  const std::vector<Tensor> encl = rule.interval(a, ctx);
  std::vector<std::vector<double>> lo(encl.size()), hi(encl.size());
  for (std::size_t k = 0; k < encl.size(); ++k) {
    lo[k].assign(static_cast<std::size_t>(encl[k].numel()), HUGE_VAL);
    hi[k].assign(lo[k].size(), -HUGE_VAL);
  }
  Run run;
  for (int t = 0; t < execs; ++t) {
    const std::vector<Tensor> r = rule.random(a, ctx);
    for (std::size_t k = 0; k < r.size(); ++k)
      for (std::int64_t i = 0; i < r[k].numel(); ++i) {
        const double v = r[k].values()[static_cast<std::size_t>(i)];
        run.escapes += !contains(encl[k].at(i), v);
        lo[k][static_cast<std::size_t>(i)] = std::min(lo[k][static_cast<std::size_t>(i)], v);
        hi[k][static_cast<std::size_t>(i)] = std::max(hi[k][static_cast<std::size_t>(i)], v);
      }
  }
  for (std::size_t k = 0; k < encl.size(); ++k)
    for (std::int64_t i = 0; i < encl[k].numel(); ++i) {
      const Interval e = encl[k].at(i);
      if (!std::isfinite(e.hi - e.lo)) continue;
      run.width += e.hi - e.lo;
      run.spread += hi[k][static_cast<std::size_t>(i)] - lo[k][static_cast<std::size_t>(i)];
    }
  return run;
}

void batchNormRuns(int execs) {
  std::printf("\n2. batch norm, training, x ~ N(0.5, 1), %d random executions per case\n", execs);
  std::printf("%-44s %-6s %8s %14s\n", "op, shape", "dtype", "escapes", "width/spread");
  std::unique_ptr<Backend> be = createCpuBackend();
  std::mt19937_64 rng(2);
  std::normal_distribution<double> nd;
  const Shape xs{8, 4, 16, 16};  // 2,048 elements per channel
  for (DType t : {DType::Float32, DType::BFloat16}) {
    const Format f = storageFormat(t).value();
    auto tensor = [&](const Shape& s, double mean, double sd) {
      std::vector<double> v(static_cast<std::size_t>(numel(s)));
      for (double& e : v) e = roundToFormat(mean + sd * nd(rng), f, RoundingDirection::Nearest);
      return Tensor::point(s, t, v);
    };
    const Tensor x = tensor(xs, 0.5, 1.0), w = tensor({4}, 1.0, 0.2), b = tensor({4}, 0.0, 0.5);
    const Run fwd = runCase(
        "aten.native_batch_norm.default",
        {ref(0), ref(1), ref(2), IrValue{}, IrValue{}, boolean(true), number(0.1), number(1e-5)},
        {x, w, b}, {t, t, t}, execs, rng, *be);
    std::printf("%-44s %-6s %8d %14.3g\n", "native_batch_norm [8,4,16,16]",
                t == DType::Float32 ? "fp32" : "bf16", fwd.escapes, fwd.width / fwd.spread);
    // Backward with the exact saved statistics rounded to the dtype.
    std::vector<double> mean(4), rstd(4);
    for (int c = 0; c < 4; ++c) {
      long double s = 0, q = 0;
      for (int n = 0; n < 8; ++n)
        for (int i = 0; i < 256; ++i)
          s += x.values()[static_cast<std::size_t>((n * 4 + c) * 256 + i)];
      const long double mu = s / 2048;
      for (int n = 0; n < 8; ++n)
        for (int i = 0; i < 256; ++i) {
          const long double dlt = x.values()[static_cast<std::size_t>((n * 4 + c) * 256 + i)] - mu;
          q += dlt * dlt;
        }
      mean[static_cast<std::size_t>(c)] =
          roundToFormat(static_cast<double>(mu), f, RoundingDirection::Nearest);
      rstd[static_cast<std::size_t>(c)] = roundToFormat(
          static_cast<double>(1 / std::sqrt(q / 2048 + 1e-5L)), f, RoundingDirection::Nearest);
    }
    IrValue mask;
    mask.kind = IrValue::Kind::List;
    mask.list = {boolean(true), boolean(true), boolean(true)};
    const Run bwd = runCase(
        "aten.native_batch_norm_backward.default",
        {ref(0), ref(1), ref(2), IrValue{}, IrValue{}, ref(3), ref(4), boolean(true), number(1e-5),
         mask},
        {tensor(xs, 0.0, 1.0), x, w, Tensor::point({4}, t, mean), Tensor::point({4}, t, rstd)},
        {t, t, t}, execs, rng, *be);
    std::printf("%-44s %-6s %8d %14.3g\n", "native_batch_norm_backward [8,4,16,16]",
                t == DType::Float32 ? "fp32" : "bf16", bwd.escapes, bwd.width / bwd.spread);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int execs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 100;
  momentWidths();
  batchNormRuns(execs);
  return 0;
}
