// Resampling: pixel_shuffle, pixel_unshuffle, upsample_nearest1d/2d/3d (.vec and .default) and
// their backward ops.
//
// The forward ops move values: index maps (resample_maps.h), exact in every domain. Nearest
// upsampling reads input element floor(dst · scale) along each resized dim, the scale computed in
// float as PyTorch's CPU and CUDA kernels do.
// upsample_nearest*_backward(grad_output, output_size, input_size, scales): each input element
// receives the sum of the gradients of the outputs that read it. Contract: the order-free sum of
// those k terms, |fl(Σ) − Σ| <= γ_{k−1} Σ|terms| (Higham 2002, eq. 4.4), every partial sum in the
// storage format or a finer accumulator rounded once (scatter_writes.h: the CPU kernel's opmath
// buffer, CUDA's atomics in the storage format); localError is the distance of the point value to
// that enclosure at exact inputs. vjp: the gradient gathered through the forward map.
#include "core/ops/families.h"
#include "core/ops/formats.h"
#include "core/ops/gather_rule.h"
#include "core/ops/nn_support.h"
#include "core/ops/registry.h"
#include "core/ops/resample_maps.h"
#include "core/ops/scatter_writes.h"

#include <memory>
#include <string>

namespace lossbound {

namespace {

using namespace ops;

IndexMap pixelShuffleGather(const OpArgs& a, const Shape& s) {
  return pixelShuffleMap(a, s, a.intArg(1, "upscale_factor"), false);
}

IndexMap pixelUnshuffleGather(const OpArgs& a, const Shape& s) {
  return pixelShuffleMap(a, s, a.intArg(1, "downscale_factor"), true);
}

/// upsample_nearest{D}d(self, output_size, scales...) / .vec(self, output_size, scale_factors).
template <int D>
IndexMap nearestGather(const OpArgs& a, const Shape& s) {
  return nearestUpsampleMap(a, s, upsampleOutputShape(a, s, D), upsampleScales(a, 2, 2, D));
}

/// upsample_nearest{D}d_backward(grad_output, output_size, input_size, scales...) and .vec.
template <int D>
class NearestBackwardRule final : public OpRule {
 public:
  std::vector<Tensor> point(const OpArgs& a, OpContext&) const override {
    const auto [base, w] = plan(a);
    return {scatterPoint(base, a.tensor(0), w, ScatterMode::Accumulate, a.outSpec().dtype)};
  }

  std::vector<Tensor> interval(const OpArgs& a, OpContext& ctx) const override {
    const auto [base, w] = plan(a);
    const DType t = a.outSpec().dtype;
    if (auto r = offerScatterSum(ctx.backend, base.shape(), a.tensor(0), w, t, outFormat(a, ctx),
                                 isIntegral(t)))
      return {std::move(*r)};
    return {scatterInterval(base, a.tensor(0), w, ScatterMode::Accumulate, t, outFormat(a, ctx),
                            isIntegral(t))};
  }

  std::vector<Tensor> random(const OpArgs& a, OpContext& ctx) const override {
    const auto [base, w] = plan(a);
    const DType t = a.outSpec().dtype;
    return {scatterRandom(base, a.tensor(0), w, ScatterMode::Accumulate, t, outFormat(a, ctx),
                          accumulationFormat(ctx.precision, t), isIntegral(t), *ctx.rng)};
  }

  std::vector<std::optional<Tensor>> vjp(const OpArgs& a, std::span<const Tensor>,
                                         std::span<const Tensor> g, OpContext&) const override {
    std::vector<std::optional<Tensor>> out(a.tensorInputs().size());
    const Tensor& go = a.tensor(0);
    if (isFloating(go.dtype())) out[0] = applyIndexMap(g[0], map(a), go.dtype());
    return out;
  }

  std::vector<Tensor> localError(const OpArgs& a, std::span<const Tensor> o,
                                 OpContext& ctx) const override {
    if (isIntegral(a.outSpec().dtype)) return zeroLocalError(o);
    return nn::localErrorVia(*this, a, o, ctx);
  }

 private:
  /// The forward op's input shape: input_size (argument 2), as a full shape.
  static Shape inputShape(const OpArgs& a) {
    const Shape s = a.intListArg(2, "input_size");
    if (s.size() != a.tensor(0).shape().size())
      a.fail("upsample backward: input_size " + shapeString(s) + " and grad_output " +
             shapeString(a.tensor(0).shape()) + " have different ranks");
    return s;
  }

  /// The forward map from the input (this op's output) to grad_output's elements.
  static IndexMap map(const OpArgs& a) {
    return nearestUpsampleMap(a, inputShape(a), a.tensor(0).shape(), upsampleScales(a, 3, 3, D));
  }

  static std::pair<Tensor, std::vector<ScatterWrite>> plan(const OpArgs& a) {
    const IndexMap m = map(a);
    std::vector<ScatterWrite> w(m.offsets.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = {m.offsets[i], static_cast<std::int64_t>(i)};
    return {Tensor::full(inputShape(a), a.outSpec().dtype, 0.0), std::move(w)};
  }
};

template <int D>
void registerNearest(OpRegistry& r) {
  const std::string name = "aten.upsample_nearest" + std::to_string(D) + "d";
  const auto fwd = std::make_shared<const GatherRule>(nearestGather<D>);
  r.add(name + ".vec", fwd);
  r.add(name + ".default", fwd);
  const auto back = std::make_shared<const NearestBackwardRule<D>>();
  r.add(name + "_backward.vec", back);
  r.add(name + "_backward.default", back);
}

}  // namespace

void registerUpsampleOps(OpRegistry& r) {
  r.add("aten.pixel_shuffle.default", std::make_shared<const GatherRule>(pixelShuffleGather));
  r.add("aten.pixel_unshuffle.default", std::make_shared<const GatherRule>(pixelUnshuffleGather));
  registerNearest<1>(r);
  registerNearest<2>(r);
  registerNearest<3>(r);
  registerBilinearOps(r);
}

}  // namespace lossbound
