#include "core/ops/resample_maps.h"

#include "core/ops/arg_readers.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lossbound::ops {

IndexMap pixelShuffleMap(const OpArgs& a, const Shape& in, std::int64_t r, bool unshuffle) {
  const char* name = unshuffle ? "pixel_unshuffle" : "pixel_shuffle";
  if (in.size() < 3) a.fail(std::string(name) + " needs at least 3 dims, found " + shapeString(in));
  if (r <= 0)
    a.fail(std::string(name) + ": the factor must be positive, found " + std::to_string(r));
  const std::size_t lead = in.size() - 3;
  const std::int64_t C = in[lead], H = in[lead + 1], W = in[lead + 2];
  const auto st = contiguousStrides(in);
  Shape sizes(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(lead)), out = sizes;
  std::vector<std::int64_t> strides(st.begin(), st.begin() + static_cast<std::ptrdiff_t>(lead));
  if (!unshuffle) {
    if (C % (r * r) != 0)
      a.fail("pixel_shuffle: channels " + std::to_string(C) + " are not divisible by " +
             std::to_string(r * r));
    const std::int64_t c = C / (r * r);
    // out[c, h·r + i, w·r + j] = in[c·r² + i·r + j, h, w]: walk [c, h, i, w, j].
    sizes.insert(sizes.end(), {c, H, r, W, r});
    strides.insert(strides.end(), {r * r * H * W, W, r * H * W, 1, H * W});
    out.insert(out.end(), {c, H * r, W * r});
  } else {
    if (H % r != 0 || W % r != 0)
      a.fail("pixel_unshuffle: height " + std::to_string(H) + " and width " + std::to_string(W) +
             " are not divisible by " + std::to_string(r));
    const std::int64_t h = H / r, w = W / r;
    // out[c·r² + i·r + j, y, x] = in[c, y·r + i, x·r + j]: walk [c, i, j, y, x].
    sizes.insert(sizes.end(), {C, r, r, h, w});
    strides.insert(strides.end(), {H * W, W, 1, r * W, r});
    out.insert(out.end(), {C * r * r, h, w});
  }
  IndexMap m = stridedMap(sizes, strides, 0);
  m.shape = out;
  return m;
}

std::optional<std::int64_t> nearestSource(std::int64_t dst, std::int64_t in, std::int64_t out,
                                          std::optional<double> scale) {
  const double sd =
      scale && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out);
  const auto clampIn = [in](double v) {
    return std::min(static_cast<std::int64_t>(std::floor(v)), in - 1);
  };
  // float scale and product (CUDA, 2-D CPU), double product (1-D/3-D CPU, fp64)
  const std::int64_t fromFloat =
      clampIn(static_cast<double>(static_cast<float>(dst) * static_cast<float>(sd)));
  const std::int64_t fromDouble =
      clampIn(static_cast<double>(dst) * static_cast<double>(static_cast<float>(sd)));
  const std::int64_t fromExact = clampIn(static_cast<double>(dst) * sd);
  std::int64_t shortcut = fromFloat;
  if (out == in) shortcut = dst;
  if (out == 2 * in) shortcut = dst >> 1;
  if (fromFloat != fromDouble || fromFloat != fromExact || fromFloat != shortcut)
    return std::nullopt;
  return fromFloat;
}

IndexMap nearestUpsampleMap(const OpArgs& a, const Shape& in, const Shape& out,
                            const std::vector<std::optional<double>>& scales) {
  const std::size_t dims = scales.size();
  if (in.size() < dims || out.size() != in.size())
    a.fail("upsample: input " + shapeString(in) + " and output " + shapeString(out) +
           " do not match");
  const std::size_t lead = in.size() - dims;
  for (std::size_t d = 0; d < lead; ++d)
    if (in[d] != out[d])
      a.fail("upsample: leading dims of " + shapeString(in) + " and " + shapeString(out) +
             " differ");
  for (std::size_t d = lead; d < in.size(); ++d)
    if (in[d] <= 0 && out[d] > 0)
      a.fail("upsample: an empty input dim cannot be upsampled to " + std::to_string(out[d]));
  // Per trailing dim, the input offset of each output index; then the product over the dims.
  const auto st = contiguousStrides(in);
  std::vector<std::vector<std::int64_t>> along(dims);
  for (std::size_t k = 0; k < dims; ++k) {
    const std::size_t d = lead + k;
    for (std::int64_t o = 0; o < out[d]; ++o) {
      const auto src = nearestSource(o, in[d], out[d], scales[k]);
      if (!src)
        a.fail("upsample nearest: PyTorch's kernels read different inputs for output index " +
               std::to_string(o) + " of dim " + std::to_string(d) + " (" + std::to_string(in[d]) +
               " -> " + std::to_string(out[d]) +
               "): the CPU and CUDA kernels differ there; not supported");
      along[k].push_back(*src * st[d]);
    }
  }
  IndexMap m;
  m.shape = out;
  const std::int64_t n = numel(out);
  m.offsets.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, off = 0;
    for (std::size_t d = out.size(); d-- > 0;) {
      const std::int64_t idx = rest % out[d];
      rest /= out[d];
      off += d >= lead ? along[d - lead][static_cast<std::size_t>(idx)] : idx * st[d];
    }
    m.offsets[static_cast<std::size_t>(i)] = off;
  }
  return m;
}

std::int64_t scaledSize(const OpArgs& a, std::int64_t in, double scale) {
  const double v = std::floor(static_cast<double>(in) * scale);
  if (!(v >= 1 && v < 2147483648.0))
    a.fail("upsample: size " + std::to_string(in) + " times scale factor " + std::to_string(scale) +
           " gives an output size out of range (" + std::to_string(v) + ")");
  return static_cast<std::int64_t>(v);
}

Shape upsampleOutputShape(const OpArgs& a, const Shape& in, int dims) {
  const auto d = static_cast<std::size_t>(dims);
  if (in.size() < d)
    a.fail("upsample: input " + shapeString(in) + " has fewer than " + std::to_string(dims) +
           " dims");
  Shape out = in;
  const std::size_t lead = in.size() - d;
  if (a.arg(1).kind == IrValue::Kind::List) {
    const auto size = a.intListArg(1, "output_size");
    if (size.size() != d)
      a.fail("upsample: output_size " + shapeString(size) + " should have " + std::to_string(dims) +
             " entries");
    for (std::size_t k = 0; k < d; ++k) {
      if (size[k] <= 0)
        a.fail("upsample: output sizes should be positive, found " + shapeString(size));
      out[lead + k] = size[k];
    }
    return out;
  }
  const auto scales = upsampleScales(a, 2, 2, dims);
  for (std::size_t k = 0; k < d; ++k) {
    if (!scales[k] || !(*scales[k] > 0))
      a.fail("upsample: neither an output size nor a positive scale factor for dim " +
             std::to_string(lead + k));
    out[lead + k] = scaledSize(a, in[lead + k], *scales[k]);
  }
  return out;
}

std::vector<std::optional<double>> upsampleScales(const OpArgs& a, std::size_t listArg,
                                                  std::size_t firstScalar, int dims) {
  std::vector<std::optional<double>> out(static_cast<std::size_t>(dims));
  const std::string op = a.node().op;
  if (op.ends_with(".vec")) {
    const IrValue& v = a.arg(listArg);
    if (v.kind == IrValue::Kind::List) {
      if (v.list.size() != out.size())
        a.fail("upsample: expected " + std::to_string(dims) + " scale factors, found " +
               std::to_string(v.list.size()));
      for (std::size_t k = 0; k < out.size(); ++k) {
        const IrValue& e = v.list[k];
        if (e.kind == IrValue::Kind::Float)
          out[k] = e.floatValue;
        else if (e.kind == IrValue::Kind::Int)
          out[k] = static_cast<double>(e.intValue);
      }
    }
    return out;
  }
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = optionalNumber(a, firstScalar + k, "");
  return out;
}

}  // namespace lossbound::ops
