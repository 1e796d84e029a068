// Convolution geometry, the im2col-style index maps of conv_lowering.h, and gathering.
#include "core/ops/conv_lowering.h"

#include <string>

namespace lossbound::ops {

namespace {

std::string listString(const std::vector<std::int64_t>& v) { return shapeString(v); }

/// Reads an int-list argument of a convolution: `dims` values, or one value for every dim.
std::vector<std::int64_t> spatialList(const OpArgs& a, std::size_t i, const char* name,
                                      std::size_t dims) {
  std::vector<std::int64_t> v = a.intListArg(i, name);
  if (v.size() == 1 && dims > 1) v.assign(dims, v[0]);
  if (v.size() != dims)
    a.fail(std::string(name) + " should list " + std::to_string(dims) +
           " values (one per spatial dim), found " + listString(v));
  return v;
}

/// Returns the row-major multi-index of flat index f in shape s into idx.
void unravel(std::int64_t f, const Shape& s, std::vector<std::int64_t>& idx) {
  idx.resize(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = f % s[d];
    f /= s[d];
  }
}

/// The patch table: entry κ·L + l is the flat input position that kernel offset κ reads for
/// output position l, or −1 where it falls into the padding.
std::vector<std::int64_t> patchTable(const ConvGeometry& g) {
  const std::int64_t K = g.kernelSize(), L = g.outSize();
  std::vector<std::int64_t> t(static_cast<std::size_t>(K * L), -1);
  std::vector<std::int64_t> kappa, o;
  const std::size_t dims = g.kernel.size();
  for (std::int64_t kk = 0; kk < K; ++kk) {
    unravel(kk, g.kernel, kappa);
    for (std::int64_t l = 0; l < L; ++l) {
      unravel(l, g.outSpatial, o);
      std::int64_t flat = 0;
      bool inside = true;
      for (std::size_t d = 0; d < dims && inside; ++d) {
        const std::int64_t i = o[d] * g.stride[d] - g.padding[d] + kappa[d] * g.dilation[d];
        inside = i >= 0 && i < g.inSpatial[d];
        flat = flat * g.inSpatial[d] + i;
      }
      if (inside) t[static_cast<std::size_t>(kk * L + l)] = flat;
    }
  }
  return t;
}

/// The inverse patch table: entry κ·I + i is the output position l whose kernel offset κ reads
/// input position i, or −1 (for fixed κ, l ↦ pos(l, κ) is injective).
std::vector<std::int64_t> inversePatchTable(const ConvGeometry& g,
                                            const std::vector<std::int64_t>& t) {
  const std::int64_t K = g.kernelSize(), L = g.outSize(), I = g.inSize();
  std::vector<std::int64_t> inv(static_cast<std::size_t>(K * I), -1);
  for (std::int64_t kk = 0; kk < K; ++kk)
    for (std::int64_t l = 0; l < L; ++l) {
      const std::int64_t i = t[static_cast<std::size_t>(kk * L + l)];
      if (i >= 0) inv[static_cast<std::size_t>(kk * I + i)] = l;
    }
  return inv;
}

}  // namespace

Shape ConvGeometry::inputShape() const {
  Shape s{batch, inChannels};
  s.insert(s.end(), inSpatial.begin(), inSpatial.end());
  return s;
}

Shape ConvGeometry::weightShape() const {
  Shape s{outChannels, inPerGroup()};
  s.insert(s.end(), kernel.begin(), kernel.end());
  return s;
}

Shape ConvGeometry::outputShape() const {
  Shape s{batch, outChannels};
  s.insert(s.end(), outSpatial.begin(), outSpatial.end());
  return s;
}

bool isTransposed(const OpArgs& a, std::size_t first) {
  return a.boolArg(first + 3, "transposed", false);
}

ConvGeometry transposedConvGeometry(const OpArgs& a, const Shape& input, const Shape& weight,
                                    std::size_t first) {
  if (weight.size() < 3 || input.size() != weight.size())
    a.fail(
        "transposed convolution: expected an input [N, C_in, *spatial] and a weight [C_in, "
        "C_out/groups, *kernel] of the same rank >= 3, found shapes " +
        shapeString(input) + " and " + shapeString(weight));
  const std::size_t dims = weight.size() - 2;
  const std::int64_t groups = a.intArg(first + 5, "groups", 1);
  if (groups < 1) a.fail("groups should be positive, found " + std::to_string(groups));
  const auto stride = spatialList(a, first, "stride", dims),
             padding = spatialList(a, first + 1, "padding", dims),
             dilation = spatialList(a, first + 2, "dilation", dims),
             outPadding = spatialList(a, first + 4, "output_padding", dims);
  // The transposed output, which is the input of the equivalent convolution:
  // out = (in − 1)·stride − 2·padding + dilation·(kernel − 1) + output_padding + 1.
  Shape convInput{input[0], weight[1] * groups};
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  for (std::size_t d = 0; d < dims; ++d) {
    for (const std::int64_t v : {stride[d], padding[d], dilation[d], weight[2 + d], input[2 + d]})
      if (v < 0 || v >= kMax)
        a.fail("transposed convolution: stride " + listString(stride) + ", padding " +
               listString(padding) + ", dilation " + listString(dilation) + " or the sizes are " +
               "out of range");
    if (outPadding[d] < 0 || outPadding[d] >= stride[d])
      a.fail("transposed convolution: output_padding " + listString(outPadding) +
             " must be smaller than the stride " + listString(stride) +
             " (PyTorch also allows it below the dilation; that is not supported)");
    convInput.push_back((input[2 + d] - 1) * stride[d] - 2 * padding[d] +
                        dilation[d] * (weight[2 + d] - 1) + outPadding[d] + 1);
  }
  const ConvGeometry g = convGeometryOf(a, convInput, weight, first);
  if (g.outputShape() != input)
    a.fail("transposed convolution: input " + shapeString(input) + " does not match weight " +
           shapeString(weight) + " (the equivalent convolution of " + shapeString(convInput) +
           " gives " + shapeString(g.outputShape()) + ")");
  return g;
}

ConvGeometry convGeometry(const OpArgs& a, const Shape& input, const Shape& weight,
                          std::size_t first) {
  if (isTransposed(a, first))
    a.fail("transposed convolution: expected transposed=False here (internal)");
  return convGeometryOf(a, input, weight, first);
}

ConvGeometry convGeometryOf(const OpArgs& a, const Shape& input, const Shape& weight,
                            std::size_t first) {
  if (weight.size() < 3)
    a.fail("expected a weight of rank >= 3 ([C_out, C_in/groups, *kernel]), found shape " +
           shapeString(weight));
  const std::size_t dims = weight.size() - 2;
  if (input.size() != dims + 2)
    a.fail("expected a " + std::to_string(dims + 2) + "-D input [N, C_in, *spatial] for weight " +
           shapeString(weight) + ", found shape " + shapeString(input));
  ConvGeometry g;
  g.groups = a.intArg(first + 5, "groups", 1);
  if (g.groups < 1) a.fail("groups should be positive, found " + std::to_string(g.groups));
  g.batch = input[0];
  g.inChannels = input[1];
  g.outChannels = weight[0];
  if (g.outChannels % g.groups != 0)
    a.fail("weight " + shapeString(weight) + ": " + std::to_string(g.outChannels) +
           " output channels do not divide into " + std::to_string(g.groups) + " groups");
  if (weight[1] * g.groups != g.inChannels)
    a.fail("input " + shapeString(input) + " has " + std::to_string(g.inChannels) +
           " channels, weight " + shapeString(weight) + " with " + std::to_string(g.groups) +
           " groups expects " + std::to_string(weight[1] * g.groups));
  g.inSpatial.assign(input.begin() + 2, input.end());
  g.kernel.assign(weight.begin() + 2, weight.end());
  g.stride = spatialList(a, first, "stride", dims);
  g.padding = spatialList(a, first + 1, "padding", dims);
  g.dilation = spatialList(a, first + 2, "dilation", dims);
  for (std::size_t d = 0; d < dims; ++d) {
    if (g.stride[d] < 1 || g.dilation[d] < 1 || g.padding[d] < 0)
      a.fail("expected positive stride and dilation and nonnegative padding, found stride " +
             listString(g.stride) + ", padding " + listString(g.padding) + ", dilation " +
             listString(g.dilation));
    if (g.kernel[d] < 1) a.fail("weight " + shapeString(weight) + " has an empty kernel extent");
    const std::int64_t span = g.inSpatial[d] + 2 * g.padding[d] - g.dilation[d] * (g.kernel[d] - 1);
    if (span < 1)
      a.fail("the padded input " + shapeString(input) + " (padding " + listString(g.padding) +
             ") is smaller than the dilated kernel " + shapeString(weight) + " (dilation " +
             listString(g.dilation) + ")");
    g.outSpatial.push_back((span - 1) / g.stride[d] + 1);
  }
  return g;
}

Shape convProductShape(const ConvGeometry& g, ConvProduct p) {
  switch (p) {
    case ConvProduct::Output:
      return g.outputShape();
    case ConvProduct::GradInput:
      return g.inputShape();
    case ConvProduct::GradWeight:
      return g.weightShape();
    case ConvProduct::GradBias:
      return Shape{g.outChannels};
  }
  return {};
}

void forEachConvGemm(const ConvGeometry& g, ConvProduct p, bool withBias,
                     const std::function<void(const GatheredGemm&)>& fn) {
  const std::int64_t N = g.batch, Ig = g.inPerGroup(), Og = g.outPerGroup(), K = g.kernelSize(),
                     I = g.inSize(), L = g.outSize(), Cin = g.inChannels, Cout = g.outChannels;
  const std::vector<std::int64_t> patch = patchTable(g);
  auto at = [](const std::vector<std::int64_t>& v, std::int64_t i) {
    return v[static_cast<std::size_t>(i)];
  };
  GatheredGemm q;
  switch (p) {
    case ConvProduct::Output:
      // y_g[o, l] = Σ_{(c, κ)} w_g[o, (c, κ)] · col[(c, κ), l]: A is the contiguous weight block.
      q.m = Og, q.k = Ig * K, q.n = L;
      q.a = ConvSource::Weight, q.b = ConvSource::Input;
      q.aIdx.resize(static_cast<std::size_t>(q.m * q.k));
      q.bIdx.resize(static_cast<std::size_t>(q.k * q.n));
      for (std::int64_t s = 0; s < N; ++s)
        for (std::int64_t gr = 0; gr < g.groups; ++gr) {
          for (std::int64_t e = 0; e < q.m * q.k; ++e)
            q.aIdx[static_cast<std::size_t>(e)] = gr * Og * Ig * K + e;
          for (std::int64_t c = 0; c < Ig; ++c)
            for (std::int64_t kk = 0; kk < K; ++kk)
              for (std::int64_t l = 0; l < L; ++l) {
                const std::int64_t pos = at(patch, kk * L + l);
                q.bIdx[static_cast<std::size_t>((c * K + kk) * L + l)] =
                    pos < 0 ? -1 : (s * Cin + gr * Ig + c) * I + pos;
              }
          q.outOff = (s * Cout + gr * Og) * L;
          q.biasRow0 = withBias ? gr * Og : -1;
          fn(q);
        }
      return;
    case ConvProduct::GradInput: {
      // dx_g[c, i] = Σ_{(o, κ)} w[g·Og+o, c, κ] · dy[n, g·Og+o, l(i, κ)] (a full correlation).
      const std::vector<std::int64_t> inv = inversePatchTable(g, patch);
      q.m = Ig, q.k = Og * K, q.n = I;
      q.a = ConvSource::Weight, q.b = ConvSource::GradOutput;
      q.aIdx.resize(static_cast<std::size_t>(q.m * q.k));
      q.bIdx.resize(static_cast<std::size_t>(q.k * q.n));
      for (std::int64_t s = 0; s < N; ++s)
        for (std::int64_t gr = 0; gr < g.groups; ++gr) {
          for (std::int64_t c = 0; c < Ig; ++c)
            for (std::int64_t o = 0; o < Og; ++o)
              for (std::int64_t kk = 0; kk < K; ++kk)
                q.aIdx[static_cast<std::size_t>(c * q.k + o * K + kk)] =
                    ((gr * Og + o) * Ig + c) * K + kk;
          for (std::int64_t o = 0; o < Og; ++o)
            for (std::int64_t kk = 0; kk < K; ++kk)
              for (std::int64_t i = 0; i < I; ++i) {
                const std::int64_t l = at(inv, kk * I + i);
                q.bIdx[static_cast<std::size_t>((o * K + kk) * I + i)] =
                    l < 0 ? -1 : (s * Cout + gr * Og + o) * L + l;
              }
          q.outOff = (s * Cin + gr * Ig) * I;
          q.biasRow0 = withBias ? gr * Ig : -1;  // a transposed convolution's bias
          fn(q);
        }
      return;
    }
    case ConvProduct::GradWeight:
      // dw_g[o, (c, κ)] = Σ_{(n, l)} dy[n, g·Og+o, l] · col_n[(c, κ), l]: k runs over the batch.
      q.m = Og, q.k = N * L, q.n = Ig * K;
      q.a = ConvSource::GradOutput, q.b = ConvSource::Input;
      q.aIdx.resize(static_cast<std::size_t>(q.m * q.k));
      q.bIdx.resize(static_cast<std::size_t>(q.k * q.n));
      for (std::int64_t gr = 0; gr < g.groups; ++gr) {
        for (std::int64_t o = 0; o < Og; ++o)
          for (std::int64_t s = 0; s < N; ++s)
            for (std::int64_t l = 0; l < L; ++l)
              q.aIdx[static_cast<std::size_t>(o * q.k + s * L + l)] =
                  (s * Cout + gr * Og + o) * L + l;
        for (std::int64_t s = 0; s < N; ++s)
          for (std::int64_t l = 0; l < L; ++l)
            for (std::int64_t c = 0; c < Ig; ++c)
              for (std::int64_t kk = 0; kk < K; ++kk) {
                const std::int64_t pos = at(patch, kk * L + l);
                q.bIdx[static_cast<std::size_t>((s * L + l) * q.n + c * K + kk)] =
                    pos < 0 ? -1 : (s * Cin + gr * Ig + c) * I + pos;
              }
        q.outOff = gr * Og * Ig * K;
        fn(q);
      }
      return;
    case ConvProduct::GradBias:
      // db[o] = Σ_{(n, l)} dy[n, o, l] · 1 (exact products: the dot bound covers the sum).
      q.m = Cout, q.k = N * L, q.n = 1;
      q.a = ConvSource::GradOutput, q.b = ConvSource::One;
      q.aIdx.resize(static_cast<std::size_t>(q.m * q.k));
      for (std::int64_t o = 0; o < Cout; ++o)
        for (std::int64_t s = 0; s < N; ++s)
          for (std::int64_t l = 0; l < L; ++l)
            q.aIdx[static_cast<std::size_t>(o * q.k + s * L + l)] = (s * Cout + o) * L + l;
      q.bIdx.assign(static_cast<std::size_t>(q.k), 0);
      q.outOff = 0;
      fn(q);
      return;
  }
}

Tensor gatherTensor(const Tensor& src, const std::vector<std::int64_t>& idx, const Shape& s,
                    bool keepInterval) {
  const auto lo = src.lo(), hi = src.hi();
  std::vector<double> gl(idx.size());
  for (std::size_t e = 0; e < idx.size(); ++e)
    gl[e] = idx[e] < 0 ? 0.0 : lo[static_cast<std::size_t>(idx[e])];
  if (!keepInterval || !src.isInterval()) return Tensor::point(s, src.dtype(), std::move(gl));
  std::vector<double> gh(idx.size());
  for (std::size_t e = 0; e < idx.size(); ++e)
    gh[e] = idx[e] < 0 ? 0.0 : hi[static_cast<std::size_t>(idx[e])];
  return Tensor::interval(s, src.dtype(), std::move(gl), std::move(gh));
}

}  // namespace lossbound::ops
