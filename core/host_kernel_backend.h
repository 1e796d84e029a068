#pragma once
// HostKernelBackend: the CPU backend plus every interval kernel hook, run on the host with the
// shared kernel bodies (core/kernels/kernel_bodies.h) and the emulated directed rounding. It is
// what the CUDA backend does minus the device: the op rules' offers, the bodies and the shapes
// they are given can be tested on a machine without a GPU (tests/gpu/test_kernel_offload), and
// bench-replay measures which share of a replay the CUDA backend would take. Sums accumulate in
// index order, as the CPU rules do, so every hook is bit-identical to the rule it replaces.
// It also takes the two hooks only the device-resident replay uses (gather, intervalGemm; the
// per-op CudaBackend declines them), so that test_kernel_offload checks them against the CPU
// rules too; HostDevice (core/host_device.h) runs its launches through these methods.

#include "core/backend.h"
#include "core/kernels/avg_pool.h"
#include "core/kernels/batch_norm_row.h"
#include "core/kernels/embedding_backward.h"
#include "core/kernels/group_norm_backward.h"
#include "core/kernels/interval_gemm.h"
#include "core/kernels/kernel_bodies.h"
#include "core/kernels/layer_norm_backward.h"
#include "core/kernels/layer_norm_row.h"
#include "core/kernels/max_pool.h"
#include "core/kernels/nll_loss.h"
#include "core/kernels/softmax_row.h"

#include <atomic>
#include <memory>
#include <vector>

namespace lossbound::kernels {

/// The CPU backend whose interval kernel hooks run the kernel bodies on the host (see above).
class HostKernelBackend final : public Backend {
 public:
  HostKernelBackend() : mCpu(createCpuBackend()) {}

  std::string name() const override { return "host kernels (" + mCpu->name() + ")"; }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    mCpu->gemm(a, b, c, m, k, n, absolute);
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mCpu->parallelFor(n, body);
  }

  bool offersIntervalKernels() const override { return true; }
  bool unary(UnaryOp op, const ElementwiseModel& model, ConstIntervalSpan x, IntervalSpan out,
             std::int64_t n) override {
    ++unaryCalls;
    for (std::int64_t i = 0; i < n; ++i) put(out, i, unaryBody(op, {x.lo[i], x.hi[i]}, model));
    return true;
  }
  bool binary(BinaryOp op, const ElementwiseModel& model, ConstIntervalSpan x, ConstIntervalSpan y,
              std::int64_t yCount, IntervalSpan out, std::int64_t n) override {
    ++binaryCalls;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t j = i % yCount;
      put(out, i, binaryBody(op, {x.lo[i], x.hi[i]}, {y.lo[j], y.hi[j]}, model));
    }
    return true;
  }
  bool rowSum(ConstIntervalSpan x, IntervalSpan out, std::int64_t rows, std::int64_t cols,
              const SumModel& model) override {
    ++rowSumCalls;
    if (model.extremum != 0) {
      for (std::int64_t r = 0; r < rows; ++r)
        put(out, r, rowExtremum(x.lo + r * cols, x.hi + r * cols, cols, 1, model));
      return true;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      SumState s;
      for (std::int64_t c = 0; c < cols; ++c)
        accumulate(s, normTerm({x.lo[r * cols + c], x.hi[r * cols + c]}, model));
      put(out, r, rowFinish(s, static_cast<double>(cols), model));
    }
    return true;
  }

  bool softmaxRows(const SoftmaxModel& model, bool log, ConstIntervalSpan x, IntervalSpan out,
                   std::int64_t rows, std::int64_t cols) override {
    ++rowKernelCalls;
    std::vector<double> scratch(static_cast<std::size_t>(softmaxRowScratch(cols)));
    for (std::int64_t r = 0; r < rows; ++r)
      softmaxRow(x.lo + r * cols, x.hi + r * cols, cols, model, log, out.lo + r * cols,
                 out.hi + r * cols, scratch.data());
    return true;
  }
  bool embeddingBackward(const EmbeddingBackwardModel& model, ConstIntervalSpan g,
                         const double* index, std::int64_t positions, std::int64_t dim,
                         IntervalSpan out) override {
    for (std::int64_t p = 0; p < positions; ++p)
      if (tableRow(index[p], model.numWeights) < 0) return false;
    ++rowKernelCalls;
    std::vector<double> scratch(static_cast<std::size_t>(2 * model.numWeights));
    for (std::int64_t j = 0; j < dim; ++j)
      embeddingBackwardColumn(g, index, positions, dim, j, model, out, scratch.data());
    return true;
  }
  bool batchNormBackwardRows(const BatchNormBackwardModel& model, ConstIntervalSpan dy,
                             ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan second,
                             ConstIntervalSpan weight, IntervalSpan gradInput,
                             IntervalSpan gradWeight, IntervalSpan gradBias, std::int64_t rows,
                             std::int64_t cols) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < rows; ++r)
      batchNormBackwardRowAt(model, r, cols, dy, x, mean, second, weight, gradInput, gradWeight,
                             gradBias);
    return true;
  }
  bool layerNormBackwardRows(const LayerNormBackwardModel& model, ConstIntervalSpan dy,
                             ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan rstd,
                             ConstIntervalSpan weight, IntervalSpan gradInput,
                             IntervalSpan gradWeight, IntervalSpan gradBias, std::int64_t rows,
                             std::int64_t n) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < rows; ++r)
      layerNormBackwardRow(dy.lo + r * n, dy.hi + r * n, x.lo + r * n, x.hi + r * n,
                           {mean.lo[r], mean.hi[r]}, {rstd.lo[r], rstd.hi[r]}, weight.lo, weight.hi,
                           n, model, gradInput.lo + r * n, gradInput.hi + r * n);
    for (std::int64_t j = 0; j < n; ++j) {
      Interval gw, gb;
      layerNormBackwardColumn(dy.lo, dy.hi, x.lo, x.hi, mean.lo, mean.hi, rstd.lo, rstd.hi, rows, n,
                              j, model, &gw, &gb);
      put(gradWeight, j, gw);
      put(gradBias, j, gb);
    }
    return true;
  }
  bool softmaxBackwardRows(const SoftmaxModel& model, bool log, ConstIntervalSpan g,
                           ConstIntervalSpan y, IntervalSpan out, std::int64_t rows,
                           std::int64_t cols) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < rows; ++r)
      softmaxBackwardRow(g.lo + r * cols, g.hi + r * cols, y.lo + r * cols, y.hi + r * cols, cols,
                         log, model, out.lo + r * cols, out.hi + r * cols);
    return true;
  }
  bool layerNormRows(const LayerNormModel& model, ConstIntervalSpan x, ConstIntervalSpan weight,
                     ConstIntervalSpan bias, IntervalSpan out, IntervalSpan mean, IntervalSpan rstd,
                     std::int64_t rows, std::int64_t cols) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < rows; ++r) {
      Interval m, s;
      layerNormRow(x.lo + r * cols, x.hi + r * cols, cols, weight.lo, weight.hi, bias.lo, bias.hi,
                   model, out.lo + r * cols, out.hi + r * cols, &m, &s);
      put(mean, r, m);
      put(rstd, r, s);
    }
    return true;
  }

  bool batchNormRows(const BatchNormModel& model, ConstIntervalSpan x, ConstIntervalSpan weight,
                     ConstIntervalSpan bias, ConstIntervalSpan runningMean,
                     ConstIntervalSpan runningVar, IntervalSpan out, IntervalSpan mean,
                     IntervalSpan rstd, std::int64_t rows, std::int64_t cols) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < rows; ++r) {
      Interval m, s;
      batchNormRowAt(model, r, cols, x, weight, bias, runningMean, runningVar, out, &m, &s);
      put(mean, r, m);
      put(rstd, r, s);
    }
    return true;
  }

  bool select(const ElementwiseModel& model, ConstIntervalSpan cond, std::int64_t condCount,
              ConstIntervalSpan a, std::int64_t aCount, ConstIntervalSpan b, std::int64_t bCount,
              IntervalSpan out, std::int64_t n) override {
    ++selectCalls;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t c = i % condCount, p = i % aCount, q = i % bCount;
      put(out, i,
          selectBody(Interval{cond.lo[c], cond.hi[c]}, Interval{a.lo[p], a.hi[p]},
                     Interval{b.lo[q], b.hi[q]}, model.storage));
    }
    return true;
  }

  bool takeRows(const ElementwiseModel& model, ConstIntervalSpan table, std::int64_t rows,
                std::int64_t dim, const double* index, std::int64_t count,
                IntervalSpan out) override {
    for (std::int64_t p = 0; p < count; ++p)
      if (tableRow(index[p], rows) < 0) return false;
    ++gatherCalls;
    for (std::int64_t p = 0; p < count; ++p) {
      const std::int64_t k = tableRow(index[p], rows);
      for (std::int64_t j = 0; j < dim; ++j)
        put(out, p * dim + j,
            roundOutward(Interval{table.lo[k * dim + j], table.hi[k * dim + j]}, model.storage));
    }
    return true;
  }

  bool nllLoss(const NllLossModel& model, ConstIntervalSpan x, const double* target,
               ConstIntervalSpan weight, std::int64_t batch, IntervalSpan out,
               IntervalSpan totalWeight) override {
    for (std::int64_t o = 0; o < batch * model.inner; ++o)
      if (nllTargetClass(target[o], model) == -2) return false;
    ++rowKernelCalls;
    return nllLossForward(model, x, target, weight, batch, out, totalWeight);
  }

  bool nllLossBackward(const NllLossModel& model, ConstIntervalSpan g, const double* target,
                       ConstIntervalSpan weight, ConstIntervalSpan tw, std::int64_t batch,
                       IntervalSpan out) override {
    const std::int64_t targets = batch * model.inner;
    for (std::int64_t o = 0; o < targets; ++o)
      if (nllTargetClass(target[o], model) == -2) return false;
    ++rowKernelCalls;
    for (std::int64_t e = 0; e < targets * model.classes; ++e) out.lo[e] = out.hi[e] = 0.0;
    for (std::int64_t o = 0; o < targets; ++o)
      nllBackwardAt(model, o, target, g, weight, {tw.lo[0], tw.hi[0]}, out);
    return true;
  }

  bool maxPoolRows(ConstIntervalSpan rows, const double* offsets, const double* starts,
                   std::int64_t count, std::int64_t windows, std::int64_t k, Format s,
                   IntervalSpan value, IntervalSpan index) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < count; ++r) {
      const std::int64_t w = r % windows;
      Interval v, ix;
      maxPoolWindow(rows.lo + r * k, rows.hi + r * k, offsets + w * k, k, starts[w], s, v, ix);
      put(value, r, v);
      put(index, r, ix);
    }
    return true;
  }

  bool avgPoolRows(ConstIntervalSpan rows, const double* offsets, const double* params,
                   std::int64_t count, std::int64_t windows, std::int64_t k,
                   const AvgPoolModel& model, IntervalSpan out) override {
    ++rowKernelCalls;
    for (std::int64_t r = 0; r < count; ++r) {
      const std::int64_t w = r % windows;
      put(out, r,
          avgPoolWindow(rows.lo + r * k, rows.hi + r * k, offsets + w * k, k, params + 3 * w,
                        model));
    }
    return true;
  }

  bool avgPoolBackward(const AvgPoolModel& model, const AvgPoolBackwardShape& shape,
                       ConstIntervalSpan g, const double* wins, const double* params,
                       IntervalSpan out) override {
    ++rowKernelCalls;
    for (std::int64_t i = 0; i < shape.planes * shape.inPlane; ++i)
      put(out, i, avgPoolBackwardInput(g, i, wins, params, shape, model));
    return true;
  }

  bool maxPoolBackward(const MaxPoolBackwardModel& model, ConstIntervalSpan g,
                       ConstIntervalSpan index, std::int64_t planes, IntervalSpan out) override {
    std::vector<double> scratch(static_cast<std::size_t>(maxPoolBackwardScratch(model.inPlane)));
    for (std::int64_t pl = 0; pl < planes; ++pl)
      if (!maxPoolBackwardPlane(g, index, pl, model, out, scratch.data())) return false;
    ++rowKernelCalls;
    return true;
  }

  bool groupNormBackward(const GroupNormBackwardModel& model, ConstIntervalSpan dy,
                         ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan rstd,
                         ConstIntervalSpan weight, IntervalSpan dx, IntervalSpan dw,
                         IntervalSpan db) override {
    ++rowKernelCalls;
    std::vector<double> scratch(static_cast<std::size_t>(groupNormBackwardScratch(model)));
    kernels::groupNormBackward(model, dy, x, mean, rstd, weight, dx, dw, db, scratch.data());
    return true;
  }

  bool gather(ConstIntervalSpan x, std::int64_t /*xCount*/, const double* offsets,
              ConstIntervalSpan fill, std::int64_t fillCount, IntervalSpan out,
              std::int64_t n) override {
    ++gatherCalls;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto o = static_cast<std::int64_t>(offsets[i]);
      const std::int64_t f = i % fillCount;
      const double lo = o >= 0 ? x.lo[o] : fill.lo[f], hi = o >= 0 ? x.hi[o] : fill.hi[f];
      out.lo[i] = lo;
      out.hi[i] = hi;  // the same array as out.lo for a point gather: the same value
    }
    return true;
  }

  bool intervalGemm(ConstIntervalSpan a, ConstIntervalSpan b, ConstIntervalSpan bias,
                    std::int64_t m, std::int64_t k, std::int64_t n, const GemmBatch& batch,
                    Format in, const GemmFinish& finish, IntervalSpan out) override {
    ++gemmCalls;
    // The composition of ops::intervalGemm on spans, product by product: split (the untouched
    // values of a point operand whose values are all finite and representable in `in`), three
    // GEMMs, finish.
    const std::int64_t mn = m * n;
    for (std::int64_t p = 0; p < batch.count; ++p) {
      const auto at = [](ConstIntervalSpan s, std::int64_t o) {
        return ConstIntervalSpan{s.lo + o, s.hi + o};
      };
      const ConstIntervalSpan ap = at(a, p * batch.aStride), bp = at(b, p * batch.bStride);
      const IntervalSpan op{out.lo + p * mn, out.hi + p * mn};
      std::vector<double> midA, magA, midB, magB;
      bool anyRadius = false;
      const bool finite = splitOperand(ap, m * k, in, midA, magA, anyRadius) &&
                          splitOperand(bp, k * n, in, midB, magB, anyRadius);
      if (!finite) {
        for (std::int64_t i = 0; i < mn; ++i) put(op, i, entireInterval());
        continue;
      }
      std::vector<double> g1(static_cast<std::size_t>(mn)), g2(g1.size()), g4;
      mCpu->gemm(midA.data(), midB.data(), g1.data(), m, k, n, false);
      mCpu->gemm(midA.data(), midB.data(), g2.data(), m, k, n, true);
      if (anyRadius) {
        g4.resize(g1.size());
        mCpu->gemm(magA.data(), magB.data(), g4.data(), m, k, n, false);
      }
      for (std::int64_t i = 0; i < mn; ++i) {
        const std::int64_t u = p * mn + i;
        put(op, i,
            gemmFinishElement(g1[i], g2[i], anyRadius ? g4[i] : 0.0, !anyRadius, finish,
                              bias.lo != nullptr,
                              bias.lo ? Interval{bias.lo[u], bias.hi[u]} : Interval{0.0, 0.0}));
      }
    }
    return true;
  }

  /// How many times each hook was taken (softmax and layer-norm rows count as row kernels).
  std::atomic<int> unaryCalls{0}, binaryCalls{0}, rowSumCalls{0}, rowKernelCalls{0}, gatherCalls{0},
      gemmCalls{0}, selectCalls{0};

 private:
  /// Midpoints and magnitudes |m| + r (rounded up) of an operand, as ops::intervalGemm's midRad;
  /// returns false when an endpoint is not finite; sets anyRadius when a radius is not zero.
  static bool splitOperand(ConstIntervalSpan x, std::int64_t count, Format in,
                           std::vector<double>& mid, std::vector<double>& mag, bool& anyRadius) {
    mid.resize(static_cast<std::size_t>(count));
    mag.resize(mid.size());
    bool direct = x.lo == x.hi;
    for (std::int64_t i = 0; i < count && direct; ++i)
      direct = isFiniteValue(x.lo[i]) && gemmRepresentable(x.lo[i], in);
    for (std::int64_t i = 0; i < count; ++i) {
      if (direct) {
        mid[i] = x.lo[i];
        mag[i] = ::fabs(x.lo[i]);
        continue;
      }
      double m = 0.0, r = 0.0;
      if (!gemmSplit(x.lo[i], x.hi[i], in, &m, &r)) return false;
      mid[i] = m;
      mag[i] = add_up(::fabs(m), r);
      if (r != 0.0) anyRadius = true;
    }
    return true;
  }
  static void put(IntervalSpan out, std::int64_t i, Interval v) {
    out.lo[i] = v.lo;
    out.hi[i] = v.hi;
  }
  std::unique_ptr<Backend> mCpu;
};

}  // namespace lossbound::kernels
