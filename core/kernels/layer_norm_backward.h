#pragma once
// The layer-norm backward (native_layer_norm_backward) as LB_HD bodies: one row of grad_input,
// and one column of grad_weight and grad_bias (a sum over the rows). The interval rule of
// core/ops/norm_ops.cpp runs them on the host, and Backend::layerNormBackwardRows on a device,
// so both compute the same bits. The error model (the hull of the reference formula and
// PyTorch's CPU form, every sum a dot product in any order: Higham 2002, eq. 3.5) is derived in
// the file comment of core/ops/norm_ops.cpp.

#include "core/interval/hd.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"
#include "core/interval/rounding.h"
#include "core/kernels/kernel_bodies.h"

#include <cstdint>

namespace lossbound::kernels {

/// How the candidate computes a layer-norm backward: the accumulation format c, its unit
/// roundoff u (2u with truncating accumulation) and smallest subnormal eta, and the storage
/// formats of grad_input, grad_weight and grad_bias.
struct LayerNormBackwardModel {
  Format compute = Format::Fp64;
  double u = 0x1p-53;
  double eta = 0x1p-1074;
  Format inputStorage = Format::Fp64;
  Format weightStorage = Format::Fp64;
  Format biasStorage = Format::Fp64;
};

namespace layer_norm_backward_detail {

/// Returns Σ terms (m of them) in any order in c: the exact enclosure ± γ_m·Σ|t| + m·η, rounded
/// outward to c (ops::dotErrorBound). `next(j)` gives term j.
template <class Next>
LB_HD Interval dotEnclosure(std::int64_t count, std::int64_t m, const LayerNormBackwardModel& md,
                            Next next) {
  Interval s{0.0, 0.0};
  double absS = 0.0;
  for (std::int64_t j = 0; j < count; ++j) {
    const Interval v = next(j);
    s = lossbound::add(s, v);
    absS = add_up(absS, magnitude(v));
  }
  const double e = dotErrorBound(static_cast<double>(m), absS, md.u, md.eta);
  return roundOutward(Interval{sub_down(s.lo, e), add_up(s.hi, e)}, md.compute);
}

}  // namespace layer_norm_backward_detail

/// Encloses grad_input of one row of n elements (dy, x; mu and rs the row's saved mean and rstd;
/// w the weight, wlo == nullptr for None): the hull of the reference formula
/// rs/n·(n·g − Σg − x̂·Σg·x̂) and the CPU form fl(fl(fl(rs·g) + fl(b̂·x)) + ĉ), every step in c,
/// stored outward in the input's storage format (core/ops/norm_ops.cpp).
LB_HD inline void layerNormBackwardRow(const double* dylo, const double* dyhi, const double* xlo,
                                       const double* xhi, Interval mu, Interval rs,
                                       const double* wlo, const double* whi, std::int64_t n,
                                       const LayerNormBackwardModel& md, double* gilo,
                                       double* gihi) {
  using layer_norm_backward_detail::dotEnclosure;
  const ComputeDomain d{md.compute};
  const double u = md.u;
  const Interval nI{static_cast<double>(n), static_cast<double>(n)};
  const Interval invN = d.div(Interval{1.0, 1.0}, nI);
  const bool weighted = wlo != nullptr;
  // g = dy·w exactly (its rounding is in the dot bound); x̂ = (x − mu)·rs in c.
  auto gExact = [&](std::int64_t j) {
    const Interval dy{dylo[j], dyhi[j]};
    return weighted ? lossbound::mul(dy, Interval{wlo[j], whi[j]}) : dy;
  };
  auto xHat = [&](std::int64_t j) { return d.mul(d.sub(Interval{xlo[j], xhi[j]}, mu), rs); };
  // Σ g (with w: a dot product dy·w), Σ g x̂, Σ g x.
  Interval sg;
  if (weighted) {
    sg = dotEnclosure(n, n, md, gExact);
  } else {
    Interval s{0.0, 0.0};
    double absS = 0.0;
    for (std::int64_t j = 0; j < n; ++j) {
      const Interval v = gExact(j);
      s.lo = add_down(s.lo, v.lo);
      s.hi = add_up(s.hi, v.hi);
      absS = add_up(absS, v.hi > -v.lo ? v.hi : -v.lo);
    }
    const double err = sumErrorBound(static_cast<double>(n), absS, u);
    sg = d.round(Interval{sub_down(s.lo, err), add_up(s.hi, err)});
  }
  const std::int64_t m = weighted ? 2 * n : n;
  const Interval sgx =
      dotEnclosure(n, m, md, [&](std::int64_t j) { return lossbound::mul(gExact(j), xHat(j)); });
  const Interval sgX = dotEnclosure(n, m, md, [&](std::int64_t j) {
    return lossbound::mul(gExact(j), Interval{xlo[j], xhi[j]});
  });
  // CPU form coefficients.
  const Interval rs3 = d.mul(d.mul(rs, rs), rs);
  const Interval bb = d.mul(d.mul(d.sub(d.mul(sg, mu), sgX), rs3), invN);
  const Interval tT = d.mul(d.mul(sg, rs), invN);
  for (std::int64_t j = 0; j < n; ++j) {
    const Interval g = weighted ? d.round(gExact(j)) : gExact(j);
    const Interval xh = xHat(j);
    const Interval t = d.sub(d.sub(d.mul(nI, g), sg), d.mul(xh, sgx));
    const Interval ref = hull(d.mul(d.div(rs, nI), t), d.mul(d.mul(rs, invN), t));
    // fl(rs·g) + b̂(x − mean) − T + err, |err| <= u|b̂x| + u(|fl(rs g)| + |b̂x|(1+u)) +
    // γ_2|b̂ mean| + u|T|, then one rounding (core/ops/norm_ops.cpp).
    const Interval xi{xlo[j], xhi[j]};
    const Interval p1 = d.mul(rs, g);
    const double bx = mul_up(magnitude(bb), magnitude(xi));
    double err =
        add_up(mul_up(u, bx), mul_up(u, add_up(magnitude(p1), mul_up(bx, add_up(1.0, u)))));
    err = add_up(err, add_up(mul_up(gammaUp(2.0, u), mul_up(magnitude(bb), magnitude(mu))),
                             mul_up(u, magnitude(tT))));
    const Interval core =
        lossbound::sub(lossbound::add(p1, lossbound::mul(bb, lossbound::sub(xi, mu))), tT);
    const Interval cpu =
        d.round(lossbound::mul(Interval{sub_down(core.lo, err), add_up(core.hi, err)},
                               Interval{sub_down(1.0, u), add_up(1.0, u)}));
    const Interval r = roundOutward(hull(ref, cpu), md.inputStorage);
    gilo[j] = r.lo;
    gihi[j] = r.hi;
  }
}

/// Encloses grad_weight[j] = Σ_rows dy·x̂ and grad_bias[j] = Σ_rows dy (in any order, dot bounds)
/// for column j of the rows × n row-major dy and x, with each row's saved mean and rstd, stored
/// outward in their storage formats.
LB_HD inline void layerNormBackwardColumn(const double* dylo, const double* dyhi, const double* xlo,
                                          const double* xhi, const double* meanlo,
                                          const double* meanhi, const double* rstdlo,
                                          const double* rstdhi, std::int64_t rows, std::int64_t n,
                                          std::int64_t j, const LayerNormBackwardModel& md,
                                          Interval* gw, Interval* gb) {
  using layer_norm_backward_detail::dotEnclosure;
  const ComputeDomain d{md.compute};
  *gw = roundOutward(dotEnclosure(rows, rows, md,
                                  [&](std::int64_t r) {
                                    const std::int64_t i = r * n + j;
                                    const Interval xh = d.mul(d.sub(Interval{xlo[i], xhi[i]},
                                                                    Interval{meanlo[r], meanhi[r]}),
                                                              Interval{rstdlo[r], rstdhi[r]});
                                    return lossbound::mul(Interval{dylo[i], dyhi[i]}, xh);
                                  }),
                     md.weightStorage);
  *gb = roundOutward(dotEnclosure(rows, rows, md,
                                  [&](std::int64_t r) {
                                    const std::int64_t i = r * n + j;
                                    return Interval{dylo[i], dyhi[i]};
                                  }),
                     md.biasStorage);
}

}  // namespace lossbound::kernels
