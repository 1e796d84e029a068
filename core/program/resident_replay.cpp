// The resident replay (resident_replay.h): plans recorded from the CPU rules' own kernel offers,
// values that live on the host, the device or both, transfers only at the host/device boundary.
#include "core/program/resident_replay.h"

#include "core/backend.h"
#include "core/ir/program_parser.h"
#include "core/kernels/avg_pool.h"
#include "core/kernels/batch_norm_row.h"
#include "core/kernels/embedding_backward.h"
#include "core/kernels/group_norm_backward.h"
#include "core/kernels/interval_gemm.h"
#include "core/kernels/layer_norm_backward.h"
#include "core/kernels/layer_norm_row.h"
#include "core/kernels/max_pool.h"
#include "core/kernels/nll_loss.h"
#include "core/kernels/softmax_row.h"
#include "core/ops/op_rule.h"
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

namespace lossbound {

namespace {

using kernels::ConstIntervalSpan;
using kernels::IntervalSpan;

constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

std::string nodeLabel(const Node& n) { return "node '" + n.name + "' (" + n.op + ")"; }

void forEachRef(const IrValue& v, const std::function<void(const ValueRef&)>& f) {
  if (v.kind == IrValue::Kind::Ref) f(v.ref);
  for (const IrValue& e : v.list) forEachRef(e, f);
}

void forEachRef(const Node& n, const std::function<void(const ValueRef&)>& f) {
  for (const IrValue& a : n.args) forEachRef(a, f);
  for (const auto& [k, v] : n.kwargs) forEachRef(v, f);
}

bool sameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// ---- Plans -----------------------------------------------------------------------------------

enum class HookKind {
  Unary,
  Binary,
  Select,
  TakeRows,
  NllLoss,
  NllLossBackward,
  MaxPool,
  AvgPool,
  AvgPoolBackward,
  MaxPoolBackward,
  GroupNormBackward,
  RowSum,
  Softmax,
  SoftmaxBackward,
  LayerNorm,
  LayerNormBackward,
  EmbeddingBackward,
  BatchNormBackward,
  BatchNorm,
  Gather,
  IntervalGemm
};

/// Where one hook operand comes from.
struct Source {
  enum class Kind { None, Arg, Temp, Const } kind = Kind::None;
  int index = 0;  ///< Arg: the node's operand; Temp: the earlier call
  int slot = 0;   ///< Temp: that call's output
  std::int64_t count = 0;
  bool indexMap = false;             ///< Const: a gather's offsets (one array)
  std::vector<double> lo, hi;        ///< Const: the data the rule made
  std::shared_ptr<double> dlo, dhi;  ///< Const: device copies, made once
};

/// One recorded hook call.
struct Call {
  HookKind kind = HookKind::Unary;
  kernels::UnaryOp uop = kernels::UnaryOp::Neg;
  kernels::BinaryOp bop = kernels::BinaryOp::Add;
  kernels::ElementwiseModel em;
  kernels::SumModel sm;
  kernels::SoftmaxModel smx;
  kernels::LayerNormModel lnm;
  kernels::LayerNormBackwardModel lnb;
  kernels::EmbeddingBackwardModel ebm;
  kernels::MaxPoolBackwardModel mpb;
  kernels::AvgPoolModel apm;
  kernels::AvgPoolBackwardShape aps;
  kernels::GroupNormBackwardModel gnb;
  kernels::BatchNormBackwardModel bbm;
  kernels::BatchNormModel bnm;
  kernels::NllLossModel nll;
  kernels::GemmFinish gf;
  Format gin = Format::Fp64;  ///< IntervalGemm: the input format; MaxPool: the storage format
  std::int64_t gm = 0, gk = 0, gn = 0;
  kernels::GemmBatch gb;
  bool log = false;
  std::int64_t n = 0, yCount = 0, rows = 0, cols = 0;
  std::vector<Source> in;
  std::vector<std::int64_t> outCounts;
  std::vector<char> outPoint;         ///< the output is one array (a point gather)
  std::vector<IntervalSpan> outPtrs;  ///< recording only
  std::vector<double> markerBase;     ///< recording only: the marker written to each output
};

/// Where one result of the node comes from.
struct ResultMap {
  enum class Kind { Out, Alias, Const } kind = Kind::Const;
  int call = 0, slot = 0, arg = 0;
  Tensor constant;
  std::shared_ptr<double> dlo, dhi;  ///< Const: device copies, made once (as plan constants)
  Shape shape;
  DType dtype = DType::Float32;
  bool interval = false;
};

/// A node's device plan (device == false: host fallback, with the reason).
struct Plan {
  bool device = false;
  std::string reason;
  std::vector<Call> calls;
  std::vector<ResultMap> results;
};

bool sameModel(const kernels::ElementwiseModel& a, const kernels::ElementwiseModel& b) {
  return a.compute == b.compute && a.storage == b.storage && a.ulps == b.ulps &&
         sameBits(a.exponent, b.exponent) && a.expUlps == b.expUlps &&
         sameBits(a.clampLo, b.clampLo) && sameBits(a.clampHi, b.clampHi);
}
bool sameModel(const kernels::SumModel& a, const kernels::SumModel& b) {
  return a.accumulation == b.accumulation && a.storage == b.storage &&
         a.truncating == b.truncating && a.mean == b.mean && a.exact == b.exact &&
         a.extremum == b.extremum;
}
bool sameModel(const kernels::SoftmaxModel& a, const kernels::SoftmaxModel& b) {
  return a.c == b.c && a.s == b.s && sameBits(a.u, b.u) && sameBits(a.uAcc, b.uAcc) &&
         sameBits(a.eta, b.eta) && a.kExp == b.kExp && a.kLog == b.kLog &&
         sameBits(a.beta, b.beta) && sameBits(a.etaExp, b.etaExp) &&
         sameBits(a.noShiftT, b.noShiftT);
}
bool sameModel(const kernels::LayerNormModel& a, const kernels::LayerNormModel& b) {
  return a.compute == b.compute && a.outStorage == b.outStorage && a.meanStorage == b.meanStorage &&
         a.rstdStorage == b.rstdStorage && sameBits(a.eps, b.eps) && a.rsqrtUlps == b.rsqrtUlps;
}

bool sameModel(const kernels::BatchNormBackwardModel& a, const kernels::BatchNormBackwardModel& b) {
  return a.compute == b.compute && a.stat == b.stat && sameBits(a.u, b.u) &&
         sameBits(a.eta, b.eta) && sameBits(a.uS, b.uS) && sameBits(a.etaS, b.etaS) &&
         a.storable == b.storable && a.training == b.training && sameBits(a.eps, b.eps) &&
         a.rsqrtUlps == b.rsqrtUlps && a.inputStorage == b.inputStorage &&
         a.weightStorage == b.weightStorage && a.biasStorage == b.biasStorage;
}
bool sameModel(const kernels::EmbeddingBackwardModel& a, const kernels::EmbeddingBackwardModel& b) {
  return sameBits(a.u, b.u) && a.storage == b.storage && a.numWeights == b.numWeights &&
         a.padding == b.padding;
}
bool sameModel(const kernels::AvgPoolModel& a, const kernels::AvgPoolModel& b) {
  return a.acc == b.acc && a.store == b.store && a.narrow == b.narrow && a.adaptive == b.adaptive &&
         a.rawSum == b.rawSum;
}
bool sameModel(const kernels::AvgPoolBackwardShape& a, const kernels::AvgPoolBackwardShape& b) {
  return a.planes == b.planes && a.windows == b.windows && a.inPlane == b.inPlane && a.k == b.k;
}
bool sameModel(const kernels::MaxPoolBackwardModel& a, const kernels::MaxPoolBackwardModel& b) {
  return a.storage == b.storage && a.outPlane == b.outPlane && a.inPlane == b.inPlane;
}
bool sameModel(const kernels::GroupNormBackwardModel& a, const kernels::GroupNormBackwardModel& b) {
  return a.compute == b.compute && a.stat == b.stat && sameBits(a.u, b.u) &&
         sameBits(a.eta, b.eta) && sameBits(a.uS, b.uS) && sameBits(a.etaS, b.etaS) &&
         a.samples == b.samples && a.channels == b.channels && a.spatial == b.spatial &&
         a.groups == b.groups && a.inputStorage == b.inputStorage &&
         a.weightStorage == b.weightStorage && a.biasStorage == b.biasStorage;
}
bool sameModel(const kernels::LayerNormBackwardModel& a, const kernels::LayerNormBackwardModel& b) {
  return a.compute == b.compute && sameBits(a.u, b.u) && sameBits(a.eta, b.eta) &&
         a.inputStorage == b.inputStorage && a.weightStorage == b.weightStorage &&
         a.biasStorage == b.biasStorage;
}
bool sameModel(const kernels::BatchNormModel& a, const kernels::BatchNormModel& b) {
  return a.moments.compute == b.moments.compute && sameBits(a.moments.eps, b.moments.eps) &&
         a.moments.rsqrtUlps == b.moments.rsqrtUlps &&
         a.moments.statStorage == b.moments.statStorage && a.outStorage == b.outStorage &&
         a.meanStorage == b.meanStorage && a.rstdStorage == b.rstdStorage &&
         a.training == b.training && a.groups == b.groups && a.spatial == b.spatial;
}

bool sameModel(const kernels::NllLossModel& a, const kernels::NllLossModel& b) {
  return a.c == b.c && a.acc == b.acc && a.outStorage == b.outStorage &&
         a.weightStorage == b.weightStorage && sameBits(a.u, b.u) && sameBits(a.eta, b.eta) &&
         a.reduction == b.reduction && a.weighted == b.weighted && sameBits(a.ignore, b.ignore) &&
         a.classes == b.classes && a.inner == b.inner;
}

bool sameModel(const kernels::GemmFinish& a, const kernels::GemmFinish& b) {
  const double x[] = {a.kEta, a.cMid,   a.cEtaMid, a.cAcc,      a.cEtaAcc,  a.gAcc,    a.up,
                      a.upRN, a.downRN, a.maxAcc,  a.kRadFloor, a.absAlpha, a.absBeta, a.alpha,
                      a.beta, a.al.lo,  a.al.hi,   a.be.lo,     a.be.hi};
  const double y[] = {b.kEta, b.cMid,   b.cEtaMid, b.cAcc,      b.cEtaAcc,  b.gAcc,    b.up,
                      b.upRN, b.downRN, b.maxAcc,  b.kRadFloor, b.absAlpha, b.absBeta, b.alpha,
                      b.beta, b.al.lo,  b.al.hi,   b.be.lo,     b.be.hi};
  for (std::size_t i = 0; i < sizeof(x) / sizeof(x[0]); ++i)
    if (!sameBits(x[i], y[i])) return false;
  return a.plain == b.plain && a.out == b.out;
}

bool samePlan(const Plan& a, const Plan& b) {
  if (a.device != b.device || a.calls.size() != b.calls.size() ||
      a.results.size() != b.results.size())
    return false;
  for (std::size_t j = 0; j < a.calls.size(); ++j) {
    const Call &x = a.calls[j], &y = b.calls[j];
    if (x.kind != y.kind || x.uop != y.uop || x.bop != y.bop || !sameModel(x.em, y.em) ||
        !sameModel(x.sm, y.sm) || !sameModel(x.smx, y.smx) || !sameModel(x.lnm, y.lnm) ||
        !sameModel(x.lnb, y.lnb) || !sameModel(x.ebm, y.ebm) || !sameModel(x.mpb, y.mpb) ||
        !sameModel(x.apm, y.apm) || !sameModel(x.aps, y.aps) || !sameModel(x.gnb, y.gnb) ||
        !sameModel(x.bbm, y.bbm) || !sameModel(x.bnm, y.bnm) || !sameModel(x.nll, y.nll) ||
        !sameModel(x.gf, y.gf) || x.gin != y.gin || x.gm != y.gm || x.gk != y.gk || x.gn != y.gn ||
        x.gb.count != y.gb.count || x.gb.aStride != y.gb.aStride || x.gb.bStride != y.gb.bStride ||
        x.log != y.log || x.n != y.n || x.yCount != y.yCount || x.rows != y.rows ||
        x.cols != y.cols || x.outCounts != y.outCounts || x.outPoint != y.outPoint ||
        x.in.size() != y.in.size())
      return false;
    for (std::size_t s = 0; s < x.in.size(); ++s) {
      const Source &p = x.in[s], &q = y.in[s];
      if (p.kind != q.kind || p.index != q.index || p.slot != q.slot || p.count != q.count ||
          p.indexMap != q.indexMap || !sameBits(p.lo, q.lo) || !sameBits(p.hi, q.hi))
        return false;
    }
  }
  for (std::size_t k = 0; k < a.results.size(); ++k) {
    const ResultMap &p = a.results[k], &q = b.results[k];
    if (p.kind != q.kind || p.call != q.call || p.slot != q.slot || p.arg != q.arg ||
        p.shape != q.shape || p.dtype != q.dtype || p.interval != q.interval)
      return false;
    if (p.kind == ResultMap::Kind::Const &&
        (p.constant.isInterval() != q.constant.isInterval() ||
         !std::equal(p.constant.lo().begin(), p.constant.lo().end(), q.constant.lo().begin(),
                     q.constant.lo().end(), [](double u, double v) { return sameBits(u, v); }) ||
         !std::equal(p.constant.hi().begin(), p.constant.hi().end(), q.constant.hi().begin(),
                     q.constant.hi().end(), [](double u, double v) { return sameBits(u, v); })))
      return false;
  }
  return true;
}

/// A Backend that offers every interval kernel hook and records the calls instead of computing:
/// each output is filled with a marker (distinct per recording) so that a result which is not
/// exactly what a hook wrote is recognised. GEMMs are computed on the host (the rule may go on)
/// but make the node a host node: their operands are host arithmetic on operand values.
class RecordingBackend final : public Backend {
 public:
  RecordingBackend(Backend& host, const std::vector<Tensor>& args, double marker)
      : mHost(host), mArgs(args), mMarker(marker) {}

  std::string name() const override { return "plan recorder"; }
  void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
            std::int64_t n, bool absolute) override {
    foreign = true;
    mHost.gemm(a, b, c, m, k, n, absolute);
  }
  void parallelFor(std::int64_t n,
                   const std::function<void(std::int64_t, std::int64_t)>& body) override {
    mHost.parallelFor(n, body);
  }
  int threads() const override { return mHost.threads(); }
  bool offersIntervalKernels() const override { return true; }

  bool unary(kernels::UnaryOp op, const kernels::ElementwiseModel& model, ConstIntervalSpan x,
             IntervalSpan out, std::int64_t n) override {
    Call c;
    c.kind = HookKind::Unary;
    c.uop = op;
    c.em = model;
    c.n = n;
    c.in = {resolve(x, n)};
    return record(std::move(c), {{out, n}});
  }
  bool binary(kernels::BinaryOp op, const kernels::ElementwiseModel& model, ConstIntervalSpan x,
              ConstIntervalSpan y, std::int64_t yCount, IntervalSpan out, std::int64_t n) override {
    Call c;
    c.kind = HookKind::Binary;
    c.bop = op;
    c.em = model;
    c.n = n;
    c.yCount = yCount;
    c.in = {resolve(x, n), resolve(y, yCount)};
    return record(std::move(c), {{out, n}});
  }
  bool select(const kernels::ElementwiseModel& model, ConstIntervalSpan cond,
              std::int64_t condCount, ConstIntervalSpan a, std::int64_t aCount, ConstIntervalSpan b,
              std::int64_t bCount, IntervalSpan out, std::int64_t n) override {
    Call c;
    c.kind = HookKind::Select;
    c.em = model;
    c.n = n;
    c.in = {resolve(cond, condCount), resolve(a, aCount), resolve(b, bCount)};
    return record(std::move(c), {{out, n}});
  }
  bool takeRows(const kernels::ElementwiseModel& model, ConstIntervalSpan table, std::int64_t rows,
                std::int64_t dim, const double* index, std::int64_t count,
                IntervalSpan out) override {
    Call c;
    c.kind = HookKind::TakeRows;
    c.em = model;
    c.rows = rows;
    c.cols = dim;
    c.n = count;
    c.in = {resolve(table, rows * dim), resolveLo(index, count)};
    return record(std::move(c), {{out, count * dim}});
  }
  bool nllLoss(const kernels::NllLossModel& model, ConstIntervalSpan x, const double* target,
               ConstIntervalSpan weight, std::int64_t batch, IntervalSpan out,
               IntervalSpan totalWeight) override {
    Call c;
    c.kind = HookKind::NllLoss;
    c.nll = model;
    c.n = batch;
    const std::int64_t targets = batch * model.inner;
    c.in = {resolve(x, targets * model.classes), resolveLo(target, targets),
            resolve(weight, model.classes)};
    return record(std::move(c), {{out, model.reduction == 0 ? targets : 1}, {totalWeight, 1}});
  }
  bool nllLossBackward(const kernels::NllLossModel& model, ConstIntervalSpan g,
                       const double* target, ConstIntervalSpan weight, ConstIntervalSpan tw,
                       std::int64_t batch, IntervalSpan out) override {
    Call c;
    c.kind = HookKind::NllLossBackward;
    c.nll = model;
    c.n = batch;
    const std::int64_t targets = batch * model.inner;
    c.in = {resolve(g, model.reduction == 0 ? targets : 1), resolveLo(target, targets),
            resolve(weight, model.classes), resolve(tw, 1)};
    return record(std::move(c), {{out, targets * model.classes}});
  }
  bool maxPoolRows(ConstIntervalSpan rows, const double* offsets, const double* starts,
                   std::int64_t count, std::int64_t windows, std::int64_t k, Format s,
                   IntervalSpan value, IntervalSpan index) override {
    Call c;
    c.kind = HookKind::MaxPool;
    c.gin = s;
    c.n = count;
    c.rows = windows;
    c.cols = k;
    c.in = {resolve(rows, count * k), shapeConstant(offsets, windows * k),
            shapeConstant(starts, windows)};
    return record(std::move(c), {{value, count}, {index, count}});
  }
  bool avgPoolRows(ConstIntervalSpan rows, const double* offsets, const double* params,
                   std::int64_t count, std::int64_t windows, std::int64_t k,
                   const kernels::AvgPoolModel& model, IntervalSpan out) override {
    Call c;
    c.kind = HookKind::AvgPool;
    c.apm = model;
    c.n = count;
    c.rows = windows;
    c.cols = k;
    c.in = {resolve(rows, count * k), shapeConstant(offsets, windows * k),
            shapeConstant(params, 3 * windows)};
    return record(std::move(c), {{out, count}});
  }
  bool rowSum(ConstIntervalSpan x, IntervalSpan out, std::int64_t rows, std::int64_t cols,
              const kernels::SumModel& model) override {
    Call c;
    c.kind = HookKind::RowSum;
    c.sm = model;
    c.rows = rows;
    c.cols = cols;
    c.in = {resolve(x, rows * cols)};
    return record(std::move(c), {{out, rows}});
  }
  bool softmaxRows(const kernels::SoftmaxModel& model, bool log, ConstIntervalSpan x,
                   IntervalSpan out, std::int64_t rows, std::int64_t cols) override {
    Call c;
    c.kind = HookKind::Softmax;
    c.smx = model;
    c.log = log;
    c.rows = rows;
    c.cols = cols;
    c.in = {resolve(x, rows * cols)};
    return record(std::move(c), {{out, rows * cols}});
  }
  bool softmaxBackwardRows(const kernels::SoftmaxModel& model, bool log, ConstIntervalSpan g,
                           ConstIntervalSpan y, IntervalSpan out, std::int64_t rows,
                           std::int64_t cols) override {
    Call c;
    c.kind = HookKind::SoftmaxBackward;
    c.smx = model;
    c.log = log;
    c.rows = rows;
    c.cols = cols;
    c.in = {resolve(g, rows * cols), resolve(y, rows * cols)};
    return record(std::move(c), {{out, rows * cols}});
  }
  bool layerNormRows(const kernels::LayerNormModel& model, ConstIntervalSpan x,
                     ConstIntervalSpan weight, ConstIntervalSpan bias, IntervalSpan out,
                     IntervalSpan mean, IntervalSpan rstd, std::int64_t rows,
                     std::int64_t cols) override {
    Call c;
    c.kind = HookKind::LayerNorm;
    c.lnm = model;
    c.rows = rows;
    c.cols = cols;
    c.in = {resolve(x, rows * cols), resolve(weight, cols), resolve(bias, cols)};
    return record(std::move(c), {{out, rows * cols}, {mean, rows}, {rstd, rows}});
  }

  bool batchNormBackwardRows(const kernels::BatchNormBackwardModel& model, ConstIntervalSpan dy,
                             ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan second,
                             ConstIntervalSpan weight, IntervalSpan gradInput,
                             IntervalSpan gradWeight, IntervalSpan gradBias, std::int64_t rows,
                             std::int64_t cols) override {
    Call c;
    c.kind = HookKind::BatchNormBackward;
    c.bbm = model;
    c.rows = rows;
    c.cols = cols;
    c.in = {resolve(dy, rows * cols), resolve(x, rows * cols), resolve(mean, rows),
            resolve(second, rows), resolve(weight, rows)};
    return record(std::move(c), {{gradInput, rows * cols}, {gradWeight, rows}, {gradBias, rows}});
  }
  bool embeddingBackward(const kernels::EmbeddingBackwardModel& model, ConstIntervalSpan g,
                         const double* index, std::int64_t positions, std::int64_t dim,
                         IntervalSpan out) override {
    Call c;
    c.kind = HookKind::EmbeddingBackward;
    c.ebm = model;
    c.n = positions;
    c.cols = dim;
    c.in = {resolve(g, positions * dim), resolveLo(index, positions)};
    return record(std::move(c), {{out, model.numWeights * dim}});
  }
  bool avgPoolBackward(const kernels::AvgPoolModel& model,
                       const kernels::AvgPoolBackwardShape& shape, ConstIntervalSpan g,
                       const double* wins, const double* params, IntervalSpan out) override {
    Call c;
    c.kind = HookKind::AvgPoolBackward;
    c.apm = model;
    c.aps = shape;
    c.in = {resolve(g, shape.planes * shape.windows), shapeConstant(wins, shape.inPlane * shape.k),
            shapeConstant(params, 3 * shape.windows)};
    return record(std::move(c), {{out, shape.planes * shape.inPlane}});
  }
  bool maxPoolBackward(const kernels::MaxPoolBackwardModel& model, ConstIntervalSpan g,
                       ConstIntervalSpan index, std::int64_t planes, IntervalSpan out) override {
    Call c;
    c.kind = HookKind::MaxPoolBackward;
    c.mpb = model;
    c.n = planes;
    c.in = {resolve(g, planes * model.outPlane), resolve(index, planes * model.outPlane)};
    return record(std::move(c), {{out, planes * model.inPlane}});
  }
  bool groupNormBackward(const kernels::GroupNormBackwardModel& model, ConstIntervalSpan dy,
                         ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan rstd,
                         ConstIntervalSpan weight, IntervalSpan dx, IntervalSpan dw,
                         IntervalSpan db) override {
    Call c;
    c.kind = HookKind::GroupNormBackward;
    c.gnb = model;
    const std::int64_t n = model.samples * model.channels * model.spatial;
    c.in = {resolve(dy, n), resolve(x, n), resolve(mean, model.rows()), resolve(rstd, model.rows()),
            resolve(weight, model.channels)};
    return record(std::move(c), {{dx, n}, {dw, model.channels}, {db, model.channels}});
  }
  bool layerNormBackwardRows(const kernels::LayerNormBackwardModel& model, ConstIntervalSpan dy,
                             ConstIntervalSpan x, ConstIntervalSpan mean, ConstIntervalSpan rstd,
                             ConstIntervalSpan weight, IntervalSpan gradInput,
                             IntervalSpan gradWeight, IntervalSpan gradBias, std::int64_t rows,
                             std::int64_t n) override {
    Call c;
    c.kind = HookKind::LayerNormBackward;
    c.lnb = model;
    c.rows = rows;
    c.cols = n;
    c.in = {resolve(dy, rows * n), resolve(x, rows * n), resolve(mean, rows), resolve(rstd, rows),
            resolve(weight, n)};
    return record(std::move(c), {{gradInput, rows * n}, {gradWeight, n}, {gradBias, n}});
  }

  bool batchNormRows(const kernels::BatchNormModel& model, ConstIntervalSpan x,
                     ConstIntervalSpan weight, ConstIntervalSpan bias,
                     ConstIntervalSpan runningMean, ConstIntervalSpan runningVar, IntervalSpan out,
                     IntervalSpan mean, IntervalSpan rstd, std::int64_t rows,
                     std::int64_t cols) override {
    Call c;
    c.kind = HookKind::BatchNorm;
    c.bnm = model;
    c.rows = rows;
    c.cols = cols;
    const std::int64_t affine = kernels::affineCount(model, rows, cols);
    c.in = {resolve(x, rows * cols), resolve(weight, affine), resolve(bias, affine),
            resolve(runningMean, rows), resolve(runningVar, rows)};
    return record(std::move(c), {{out, rows * cols}, {mean, rows}, {rstd, rows}});
  }

  bool gather(ConstIntervalSpan x, std::int64_t xCount, const double* offsets,
              ConstIntervalSpan fill, std::int64_t fillCount, IntervalSpan out,
              std::int64_t n) override {
    Call c;
    c.kind = HookKind::Gather;
    c.n = n;
    c.cols = xCount;
    c.in = {resolve(x, xCount), shapeConstant(offsets, n), resolve(fill, fillCount)};
    return record(std::move(c), {{out, n}});
  }

  bool intervalGemm(ConstIntervalSpan a, ConstIntervalSpan b, ConstIntervalSpan bias,
                    std::int64_t m, std::int64_t k, std::int64_t n, const kernels::GemmBatch& batch,
                    Format in, const kernels::GemmFinish& finish, IntervalSpan out) override {
    // The device splits each operand once or per product: strides of 0 or one whole matrix.
    if (batch.count < 1 || (batch.aStride != 0 && batch.aStride != m * k) ||
        (batch.bStride != 0 && batch.bStride != k * n))
      return false;
    Call c;
    c.kind = HookKind::IntervalGemm;
    c.gf = finish;
    c.gin = in;
    c.gm = m;
    c.gk = k;
    c.gn = n;
    c.gb = batch;
    using kernels::GemmBatch;
    c.in = {resolve(a, GemmBatch::extent(batch.count, batch.aStride, m * k)),
            resolve(b, GemmBatch::extent(batch.count, batch.bStride, k * n)),
            resolve(bias, batch.count * m * n)};
    return record(std::move(c), {{out, batch.count * m * n}});
  }

  /// Returns the marker value of element i of an output whose first marker is `base`: not
  /// representable in fp32 (so a storage rounding applied afterwards shows), distinct per output.
  static double markerAt(double base, std::int64_t i) {
    return base + static_cast<double>(i) * (1.0 + 0x1p-40);
  }
  /// Returns true when out[0..count) still holds the marker written from `base`.
  static bool holdsMarker(const double* lo, const double* hi, std::int64_t count, double base) {
    for (std::int64_t i = 0; i < count; ++i) {
      const double m = markerAt(base, i);
      if (!sameBits(lo[i], m) || (hi != lo && !sameBits(hi[i], m + 1.0))) return false;
    }
    return true;
  }

  std::vector<Call> calls;
  bool foreign = false;

 private:
  Source resolve(ConstIntervalSpan s, std::int64_t count) {
    Source src;
    src.count = count;
    if (!s.lo) return src;
    for (std::size_t k = 0; k < mArgs.size(); ++k) {
      const Tensor& t = mArgs[k];
      if (t.numel() == count && count > 0 && s.lo == t.lo().data() && s.hi == t.hi().data()) {
        src.kind = Source::Kind::Arg;
        src.index = static_cast<int>(k);
        return src;
      }
    }
    for (std::size_t j = calls.size(); j-- > 0;)
      for (std::size_t o = 0; o < calls[j].outPtrs.size(); ++o)
        if (calls[j].outPtrs[o].lo == s.lo && calls[j].outPtrs[o].hi == s.hi &&
            calls[j].outCounts[o] == count && count > 0 &&
            holdsMarker(s.lo, s.hi, count, calls[j].markerBase[o])) {
          src.kind = Source::Kind::Temp;
          src.index = static_cast<int>(j);
          src.slot = static_cast<int>(o);
          return src;
        }
    src.kind = Source::Kind::Const;
    src.lo.assign(s.lo, s.lo + count);
    src.hi.assign(s.hi, s.hi + count);
    return src;
  }

  /// A constant the rule computed from shapes and IR arguments only (a gather's index map, a
  /// pooling window's offsets): one array, kept on the device as a plan constant.
  static Source shapeConstant(const double* values, std::int64_t count) {
    Source src;
    src.kind = Source::Kind::Const;
    src.indexMap = true;
    src.count = count;
    src.lo.assign(values, values + count);
    return src;
  }

  /// resolve() for an operand read through its lower endpoints only (an index tensor of either
  /// form: the host rules read values(), the lower endpoints).
  Source resolveLo(const double* lo, std::int64_t count) {
    for (std::size_t k = 0; k < mArgs.size(); ++k)
      if (mArgs[k].numel() == count && count > 0 && lo == mArgs[k].lo().data()) {
        Source src;
        src.kind = Source::Kind::Arg;
        src.index = static_cast<int>(k);
        src.count = count;
        return src;
      }
    return resolve({lo, lo}, count);
  }

  bool record(Call c, std::vector<std::pair<IntervalSpan, std::int64_t>> outs) {
    for (auto& [span, count] : outs) {
      const double base = mMarker + 1024.0 * static_cast<double>(mOutputs++);
      const bool point = span.lo == span.hi;  // one array: a point gather
      for (std::int64_t i = 0; i < count; ++i) {
        span.hi[i] = markerAt(base, i) + 1.0;
        span.lo[i] = markerAt(base, i);
      }
      c.outPoint.push_back(point ? 1 : 0);
      c.outPtrs.push_back(span);
      c.outCounts.push_back(count);
      c.markerBase.push_back(base);
    }
    calls.push_back(std::move(c));
    return true;
  }

  Backend& mHost;
  const std::vector<Tensor>& mArgs;
  double mMarker;
  int mOutputs = 0;
};

/// Shape, dtype and form of a value: what a plan may depend on.
struct Meta {
  Shape shape;
  DType dtype = DType::Float32;
  bool interval = false;
};

/// Returns a tensor of `m` filled with a placeholder: element i is p + i·step (points) or
/// [p + i·step, p + i·step + w] (intervals), so that two fillings differ everywhere.
Tensor placeholder(const Meta& m, double p, double step, double w) {
  const auto n = static_cast<std::size_t>(numel(m.shape));
  std::vector<double> lo(n);
  for (std::size_t i = 0; i < n; ++i) lo[i] = p + static_cast<double>(i % 4096) * step;
  if (!m.interval) return Tensor::point(m.shape, m.dtype, std::move(lo));
  std::vector<double> hi(lo);
  for (double& v : hi) v += w;
  return Tensor::interval(m.shape, m.dtype, std::move(lo), std::move(hi));
}

/// True for the creation ops whose results depend on their operand's shape and dtype only
/// (ones_like, new_zeros, fill with a Python number, ...): a result they make on the host is a
/// constant of the plan.
bool madeFromShapeOnly(const std::string& op) {
  static const std::set<std::string> ops = {"aten.ones_like.default",
                                            "aten.zeros_like.default",
                                            "aten.empty_like.default",
                                            "aten.full_like.default",
                                            "aten.new_zeros.default",
                                            "aten.new_ones.default",
                                            "aten.new_empty.default",
                                            "aten.new_full.default",
                                            "aten.fill.Scalar",
                                            "aten.fill_.Scalar",
                                            "aten.zero.default",
                                            "aten.zero_.default",
                                            "aten.new_empty_strided.default"};
  return ops.count(op) > 0;
}

/// True when `op` reads its first operand's shape and dtype only (the ops above, and fill with
/// a 0-d tensor: `labels[:, 20:] = -100`): what it makes depends on its other operands alone.
bool readsFirstOperandShapeOnly(const std::string& op) {
  return madeFromShapeOnly(op) || op == "aten.fill.Tensor" || op == "aten.fill_.Tensor";
}

/// Records one plan of `rule` on `node` with placeholder operands (see the file comment), or the
/// operand's own value where `fixedValues` holds one (an operand that is the same in every replay).
Plan recordPlan(const Node& node, const OpRule& rule, const std::vector<ValueRef>& refs,
                const std::vector<Meta>& metas, const std::vector<const Tensor*>& fixedValues,
                double p, double step, double w, double marker, const PrecisionModel& precision,
                Backend& host) {
  Plan plan;
  std::vector<Tensor> args;
  args.reserve(metas.size());
  for (std::size_t k = 0; k < metas.size(); ++k)
    args.push_back(fixedValues[k] ? *fixedValues[k] : placeholder(metas[k], p, step, w));
  RecordingBackend rec(host, args, marker);
  OpContext ctx{precision, rec, nullptr};
  std::vector<Tensor> results;
  try {
    const OpArgs a(node, [&](const ValueRef& r) -> const Tensor& {
      for (std::size_t k = 0; k < refs.size(); ++k)
        if (refs[k].name == r.name && refs[k].index == r.index) return args[k];
      throw std::logic_error("unresolved reference");
    });
    results = rule.interval(a, ctx);
  } catch (const std::exception& e) {
    plan.reason = std::string(
                      "the rule fails on its recording operands (placeholders, and the "
                      "values of fixed integer operands): ") +
                  e.what();
    return plan;
  }
  if (rec.foreign) {
    plan.reason = "a GEMM on host-computed operands";
    return plan;
  }
  for (std::size_t slot = 0; slot < results.size(); ++slot) {
    const Tensor& t = results[slot];
    ResultMap r;
    r.shape = t.shape();
    r.dtype = t.dtype();
    r.interval = t.isInterval();
    bool mapped = false;
    for (std::size_t j = 0; j < rec.calls.size() && !mapped; ++j)
      for (std::size_t o = 0; o < rec.calls[j].outPtrs.size() && !mapped; ++o) {
        const IntervalSpan s = rec.calls[j].outPtrs[o];
        const bool form = t.isInterval() ? s.lo != s.hi : s.lo == s.hi;
        if (form && t.numel() > 0 && t.numel() == rec.calls[j].outCounts[o] &&
            t.lo().data() == s.lo && t.hi().data() == s.hi &&
            RecordingBackend::holdsMarker(s.lo, s.hi, t.numel(), rec.calls[j].markerBase[o])) {
          r.kind = ResultMap::Kind::Out;
          r.call = static_cast<int>(j);
          r.slot = static_cast<int>(o);
          mapped = true;
        }
      }
    for (std::size_t k = 0; k < args.size() && !mapped; ++k)
      if (t.numel() > 0 && t.numel() == args[k].numel() && t.lo().data() == args[k].lo().data() &&
          t.isInterval() == args[k].isInterval() &&
          (!t.isInterval() || t.hi().data() == args[k].hi().data())) {
        r.kind = ResultMap::Kind::Alias;
        r.arg = static_cast<int>(k);
        mapped = true;
      }
    if (!mapped) {
      // Data the rule made itself. Two fillings cannot show every value dependence (ne(x, -100)
      // is all true for both), so only a node without tensor operands may have such a result,
      // or a creation op that reads its operand's shape only (ones_like), or an output the trace
      // holds as None (a masked-off gradient: nothing reads it), or an empty one (eval batch
      // norm's save_mean on PyTorch's CPU). An empty result carries no value at all.
      const bool unread = (slot < node.outputs.size() && node.outputs[slot].none) || t.numel() == 0;
      if (!args.empty() && !unread && !madeFromShapeOnly(node.op)) {
        plan.reason =
            "a result computed on the host from the operands (result " + std::to_string(slot) + ")";
        return plan;
      }
      r.kind = ResultMap::Kind::Const;
      r.constant = t;
    }
    plan.results.push_back(std::move(r));
  }
  for (Call& c : rec.calls)
    for (const Source& src : c.in)
      if (src.kind == Source::Kind::Const && src.count > 1 && !src.indexMap) {
        // Only a scalar made from the IR (a Python number's enclosure) may be a rule-made
        // operand: a larger one could be host arithmetic on the operands.
        plan.reason = "a hook operand computed on the host";
        return plan;
      }
  for (Call& c : rec.calls) {
    c.outPtrs.clear();
    c.markerBase.clear();
  }
  plan.calls = std::move(rec.calls);
  plan.device = true;
  return plan;
}

// ---- Values ----------------------------------------------------------------------------------

/// One value of the replay: on the host, on the device, or both.
struct Value {
  Meta meta;
  std::optional<Tensor> host;
  std::shared_ptr<double> lo, hi;  ///< device copy (hi == lo for a point value)
  bool leaf = false;               ///< a program input or constant
  bool onDevice() const { return static_cast<bool>(lo); }
};

std::shared_ptr<double> deviceArray(Device& device, std::int64_t count) {
  double* p = device.allocate(count);
  return std::shared_ptr<double>(p, [&device](double* q) {
    try {
      device.free(q);
    } catch (...) {  // a deleter must not throw; the allocation table reports leaks instead
    }
  });
}

}  // namespace

struct ResidentEvaluator::Impl {
  Impl(const Program& p, Device& d, Backend& h) : program(p), device(d), host(h) {}

  const Program& program;
  Device& device;
  Backend& host;
  std::vector<std::optional<Plan>> plans;  // per node
  std::vector<std::string> planKeys;
  std::optional<PrecisionModel> planPrecision;
  /// Per node: the results of a host-fallback node that reads no program input (only program
  /// constants and what nodes without operands make, like the rotary frequencies of a Llama
  /// block), kept from the replay that computed them with the operand forms they had: the same
  /// bits in every replay of the program, so later replays neither run nor copy them. Finite
  /// results are kept on the device too (as plan constants); one with a non-finite endpoint stays
  /// on the host, where the offers that need finite operands see it.
  struct Kept {
    std::string key;
    std::vector<Value> values;
  };
  std::vector<std::optional<Kept>> kept;
  /// Per node: it met an operand with a non-finite endpoint on the device in an earlier replay
  /// (which then ran again on the host); later replays run it on the host, where the CPU rule
  /// keeps ±inf exact, instead of evaluating the whole replay twice.
  std::vector<char> pinned;

  // Per replay.
  std::unordered_map<std::string, std::size_t> slotOf;
  std::vector<std::vector<Value>> values;
  ResidentStats* stats = nullptr;

  Value& valueOf(const ValueRef& r) {
    std::vector<Value>& v = values[slotOf.at(r.name)];
    if (static_cast<std::size_t>(r.index) >= v.size())
      throw EvaluationError("internal error: value " + refString(r) + " is not available");
    return v[static_cast<std::size_t>(r.index)];
  }

  /// How a copy-in is counted: a program input's or a boundary upload (by the value), or a
  /// kept result's, which later replays read as a plan constant.
  enum class Upload { ByValue, Constant };

  /// Copies a host value in (once), counting it as `kind` says.
  void ensureDevice(Value& v, Upload kind = Upload::ByValue) {
    if (v.onDevice()) return;
    const Tensor& t = *v.host;
    const std::int64_t n = t.numel();
    std::shared_ptr<double> lo = deviceArray(device, n), hi = lo;
    if (t.isInterval()) hi = deviceArray(device, n);
    device.copyIn(lo.get(), t.lo().data(), n);
    if (t.isInterval()) device.copyIn(hi.get(), t.hi().data(), n);
    const int arrays = t.isInterval() ? 2 : 1;
    if (kind == Upload::Constant)
      stats->constantUploads += arrays;
    else
      (v.leaf ? stats->inputUploads : stats->boundaryUploads) += arrays;
    v.lo = std::move(lo);
    v.hi = std::move(hi);
  }

  /// Copies a device value out (once); `downloads` counts the arrays.
  void ensureHost(Value& v, std::int64_t& downloads) {
    if (v.host) return;
    const auto n = static_cast<std::size_t>(numel(v.meta.shape));
    std::vector<double> lo(n);
    device.copyOut(lo.data(), v.lo.get(), static_cast<std::int64_t>(n));
    ++downloads;
    if (!v.meta.interval) {
      v.host = Tensor::point(v.meta.shape, v.meta.dtype, std::move(lo));
      return;
    }
    std::vector<double> hi(n);
    device.copyOut(hi.data(), v.hi.get(), static_cast<std::int64_t>(n));
    ++downloads;
    v.host = Tensor::interval(v.meta.shape, v.meta.dtype, std::move(lo), std::move(hi));
  }

  /// Keeps the results `vs` of host-fallback node i, which read no program input, for later
  /// replays (see `kept`): finite ones copied in now, as plan constants, and shared with `vs`.
  void keep(std::size_t i, const std::string& key, std::vector<Value>& vs) {
    for (Value& v : vs) {
      const Tensor& t = *v.host;
      bool finite = t.numel() > 0;
      for (double e : t.lo()) finite = finite && std::isfinite(e);
      for (double e : t.hi()) finite = finite && std::isfinite(e);
      if (!finite) continue;
      try {
        ensureDevice(v, Upload::Constant);
      } catch (const DeviceOutOfMemory&) {  // kept on the host only; a device reader copies it
      }
    }
    kept[i] = Kept{key, vs};
  }

  /// Returns the plan of node i for operands of these forms (recorded once per form). Operands
  /// marked in `fixed` are integer values no program input reaches (indices computed from arange
  /// in the program, as MViT's relative positions): the same bits in every replay from the same
  /// start node (`from`), so the plan is recorded with their values instead of placeholders (a
  /// rule that needs exact indices can then make its plan) and keyed on `from`. Their values are
  /// copied out (if on the device) only when a plan is recorded.
  Plan& planFor(std::size_t i, const OpRule& rule, const std::vector<ValueRef>& refs,
                const std::vector<Meta>& metas, const std::vector<char>& fixed, std::size_t from,
                const PrecisionModel& precision) {
    std::string key;
    for (std::size_t k = 0; k < metas.size(); ++k)
      key += fixed[k] ? (metas[k].interval ? 'I' : 'P') : (metas[k].interval ? 'i' : 'p');
    if (std::find(fixed.begin(), fixed.end(), 1) != fixed.end()) key += "@" + std::to_string(from);
    if (plans[i] && planKeys[i] == key) return *plans[i];
    const Node& node = program.nodes[i];
    std::vector<const Tensor*> values(refs.size(), nullptr);
    for (std::size_t k = 0; k < refs.size(); ++k)
      if (fixed[k]) {
        Value& v = valueOf(refs[k]);
        ensureHost(v, stats->boundaryDownloads);
        values[k] = &*v.host;
      }
    Plan a =
        recordPlan(node, rule, refs, metas, values, 0.5, 0x1p-12, 0.25, 17.25, precision, host);
    if (a.device) {
      const Plan b = recordPlan(node, rule, refs, metas, values, -1.75, -0x1p-11, 3.0, -2049.5,
                                precision, host);
      if (!samePlan(a, b)) a = Plan{false, "the rule's work depends on operand values", {}, {}};
    }
    plans[i] = std::move(a);
    planKeys[i] = key;
    return *plans[i];
  }

  /// Runs node i's plan on the device; returns false (nothing stored) when a host-side operand
  /// of a finite-only offer is not finite. Throws DeviceOutOfMemory.
  bool runOnDevice(std::size_t i, Plan& plan, const std::vector<ValueRef>& refs, double* flag) {
    const Node& node = program.nodes[i];
    // A host-side operand of an elementwise or sum offer: the CPU rule would decline it.
    for (const Call& c : plan.calls) {
      if (c.kind != HookKind::Unary && c.kind != HookKind::Binary && c.kind != HookKind::RowSum &&
          c.kind != HookKind::NllLoss && c.kind != HookKind::NllLossBackward &&
          c.kind != HookKind::MaxPool && c.kind != HookKind::AvgPool &&
          c.kind != HookKind::TakeRows)
        continue;
      for (const Source& s : c.in) {
        if (s.kind == Source::Kind::Const && !s.indexMap)  // shape-only index maps are finite
          for (std::size_t e = 0; e < s.lo.size(); ++e)
            if (!std::isfinite(s.lo[e]) || !std::isfinite(s.hi[e])) return false;
        if (s.kind != Source::Kind::Arg) continue;
        const Value& v = valueOf(refs[static_cast<std::size_t>(s.index)]);
        if (v.onDevice() || !v.host) continue;
        for (double e : v.host->lo())
          if (!std::isfinite(e)) return false;
        for (double e : v.host->hi())
          if (!std::isfinite(e)) return false;
      }
    }
    std::vector<std::vector<std::pair<std::shared_ptr<double>, std::shared_ptr<double>>>> outs;
    auto span = [&](Source& s) -> ConstIntervalSpan {
      switch (s.kind) {
        case Source::Kind::None:
          return {};
        case Source::Kind::Arg: {
          Value& v = valueOf(refs[static_cast<std::size_t>(s.index)]);
          ensureDevice(v);
          return {v.lo.get(), v.hi.get()};
        }
        case Source::Kind::Temp: {
          const auto& o = outs[static_cast<std::size_t>(s.index)][static_cast<std::size_t>(s.slot)];
          return {o.first.get(), o.second.get()};
        }
        case Source::Kind::Const:
          if (!s.dlo) {
            s.dlo = deviceArray(device, s.count);
            device.copyIn(s.dlo.get(), s.lo.data(), s.count);
            ++stats->constantUploads;
            s.dhi = s.dlo;
            if (!s.indexMap) {
              s.dhi = deviceArray(device, s.count);
              device.copyIn(s.dhi.get(), s.hi.data(), s.count);
              ++stats->constantUploads;
            }
          }
          return {s.dlo.get(), s.dhi.get()};
      }
      return {};
    };
    for (Call& c : plan.calls) {
      std::vector<ConstIntervalSpan> in;
      for (Source& s : c.in) in.push_back(span(s));
      auto& o = outs.emplace_back();
      std::vector<IntervalSpan> out;
      for (std::size_t k = 0; k < c.outCounts.size(); ++k) {
        std::shared_ptr<double> lo = deviceArray(device, c.outCounts[k]);
        std::shared_ptr<double> hi = c.outPoint[k] ? lo : deviceArray(device, c.outCounts[k]);
        o.emplace_back(std::move(lo), std::move(hi));
        out.push_back({o.back().first.get(), o.back().second.get()});
      }
      // Operands that the CPU rule would have checked for finiteness, not known on the host.
      if (c.kind == HookKind::Unary || c.kind == HookKind::Binary || c.kind == HookKind::RowSum ||
          c.kind == HookKind::NllLoss || c.kind == HookKind::NllLossBackward ||
          c.kind == HookKind::MaxPool || c.kind == HookKind::TakeRows)
        for (std::size_t s = 0; s < c.in.size(); ++s) {
          if (c.in[s].kind == Source::Kind::Const || c.in[s].kind == Source::Kind::None) continue;
          device.flagNonFinite(in[s], c.in[s].count, flag);
        }
      switch (c.kind) {
        case HookKind::Unary:
          device.unary(c.uop, c.em, in[0], out[0], c.n);
          break;
        case HookKind::Binary:
          device.binary(c.bop, c.em, in[0], in[1], c.yCount, out[0], c.n);
          break;
        case HookKind::Select:
          device.select(c.em, in[0], c.in[0].count, in[1], c.in[1].count, in[2], c.in[2].count,
                        out[0], c.n);
          break;
        case HookKind::TakeRows:
          // An index out of range sets the flag: the replay then runs again on the host, whose
          // rule reports it.
          device.takeRows(c.em, in[0], c.rows, c.cols, in[1].lo, c.n, out[0], flag);
          break;
        case HookKind::NllLoss:
          // A target out of range sets the flag, as for embedding.
          device.nllLoss(c.nll, in[0], in[1].lo, in[2], c.n, out[0], out[1], flag);
          break;
        case HookKind::NllLossBackward:
          device.nllLossBackward(c.nll, in[0], in[1].lo, in[2], in[3], c.n, out[0], flag);
          break;
        case HookKind::MaxPool:
          device.maxPoolRows(in[0], in[1].lo, in[2].lo, c.n, c.rows, c.cols, c.gin, out[0], out[1]);
          break;
        case HookKind::AvgPool:
          device.avgPoolRows(in[0], in[1].lo, in[2].lo, c.n, c.rows, c.cols, c.apm, out[0]);
          break;
        case HookKind::AvgPoolBackward:
          device.avgPoolBackward(c.apm, c.aps, in[0], in[1].lo, in[2].lo, out[0]);
          break;
        case HookKind::RowSum:
          device.rowSum(in[0], out[0], c.rows, c.cols, c.sm);
          break;
        case HookKind::Softmax:
          device.softmaxRows(c.smx, c.log, in[0], out[0], c.rows, c.cols);
          break;
        case HookKind::SoftmaxBackward:
          device.softmaxBackwardRows(c.smx, c.log, in[0], in[1], out[0], c.rows, c.cols);
          break;
        case HookKind::LayerNorm:
          device.layerNormRows(c.lnm, in[0], in[1], in[2], out[0], out[1], out[2], c.rows, c.cols);
          break;
        case HookKind::BatchNormBackward:
          device.batchNormBackwardRows(c.bbm, in[0], in[1], in[2], in[3], in[4], out[0], out[1],
                                       out[2], c.rows, c.cols);
          break;
        case HookKind::EmbeddingBackward:
          // An index out of range sets the flag, as for embedding.
          device.embeddingBackward(c.ebm, in[0], in[1].lo, c.n, c.cols, out[0], flag);
          break;
        case HookKind::MaxPoolBackward:
          // An index out of range sets the flag, as for embedding.
          device.maxPoolBackward(c.mpb, in[0], in[1], c.n, out[0], flag);
          break;
        case HookKind::GroupNormBackward:
          device.groupNormBackward(c.gnb, in[0], in[1], in[2], in[3], in[4], out[0], out[1],
                                   out[2]);
          break;
        case HookKind::LayerNormBackward:
          device.layerNormBackwardRows(c.lnb, in[0], in[1], in[2], in[3], in[4], out[0], out[1],
                                       out[2], c.rows, c.cols);
          break;
        case HookKind::BatchNorm:
          device.batchNormRows(c.bnm, in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2],
                               c.rows, c.cols);
          break;
        case HookKind::Gather:
          device.gather(in[0], c.cols, in[1].lo, in[2], c.in[2].count, out[0], c.n);
          break;
        case HookKind::IntervalGemm: {
          // Split both operands (once, or per product when the batch strides through them),
          // three strided-batched RN GEMMs (g4 always: whether it is needed is known on the
          // device only), finish with each product's own flags; the temporaries go with this
          // scope.
          const std::int64_t mk = c.gm * c.gk, kn = c.gk * c.gn, mn = c.gm * c.gn;
          const std::int64_t count = c.gb.count;
          const std::int64_t sa = c.gb.aStride == 0 ? 1 : count, sb = c.gb.bStride == 0 ? 1 : count;
          const auto midA = deviceArray(device, sa * mk), magA = deviceArray(device, sa * mk);
          const auto midB = deviceArray(device, sb * kn), magB = deviceArray(device, sb * kn);
          const auto flags = deviceArray(device, 3 * (sa + sb));
          const auto g1 = deviceArray(device, count * mn), g2 = deviceArray(device, count * mn),
                     g4 = deviceArray(device, count * mn);
          double* flagsB = flags.get() + 3 * sa;
          device.gemmSplit(in[0], mk, c.gin, midA.get(), magA.get(), flags.get(), sa);
          device.gemmSplit(in[1], kn, c.gin, midB.get(), magB.get(), flagsB, sb);
          device.gemm(midA.get(), midB.get(), g1.get(), c.gm, c.gk, c.gn, false, c.gb);
          device.gemm(midA.get(), midB.get(), g2.get(), c.gm, c.gk, c.gn, true, c.gb);
          device.gemm(magA.get(), magB.get(), g4.get(), c.gm, c.gk, c.gn, false, c.gb);
          device.gemmFinish(g1.get(), g2.get(), g4.get(), flags.get(), flagsB, in[2], c.gf, out[0],
                            mn, count, sa > 1 ? 3 : 0, sb > 1 ? 3 : 0);
          break;
        }
      }
    }
    std::vector<Value> results;
    bool launched = !plan.calls.empty(), aliased = false, constant = false;
    for (ResultMap& r : plan.results) {
      Value v;
      v.meta = Meta{r.shape, r.dtype, r.interval};
      switch (r.kind) {
        case ResultMap::Kind::Out: {
          const auto& o = outs[static_cast<std::size_t>(r.call)][static_cast<std::size_t>(r.slot)];
          v.lo = o.first;
          v.hi = o.second;
          break;
        }
        case ResultMap::Kind::Alias: {
          Value& a = valueOf(refs[static_cast<std::size_t>(r.arg)]);
          // A view of a program input: the input is copied in once, as for a gather of it.
          if (a.leaf && !a.onDevice()) ensureDevice(a);
          v.lo = a.lo;
          v.hi = a.hi;
          if (a.host) v.host = a.host->reshaped(r.shape).withDtype(r.dtype);
          aliased = true;
          break;
        }
        case ResultMap::Kind::Const:
          v.host = r.constant;
          constant = true;
          if (r.constant.numel() > 0) {  // kept on the device too, so no replay copies it in
            if (!r.dlo) {
              const std::int64_t n = r.constant.numel();
              r.dlo = deviceArray(device, n);
              device.copyIn(r.dlo.get(), r.constant.lo().data(), n);
              ++stats->constantUploads;
              r.dhi = r.dlo;
              if (r.constant.isInterval()) {
                r.dhi = deviceArray(device, n);
                device.copyIn(r.dhi.get(), r.constant.hi().data(), n);
                ++stats->constantUploads;
              }
            }
            v.lo = r.dlo;
            v.hi = r.dhi;
          }
          break;
      }
      results.push_back(std::move(v));
    }
    (void)node;
    if (launched)
      ++stats->nodesOnDevice;
    else if (aliased)
      ++stats->nodesAliased;
    else if (constant)
      ++stats->nodesConstant;
    values[slotOf.at(program.nodes[i].name)] = std::move(results);
    return true;
  }
};

ResidentEvaluator::ResidentEvaluator(const Program& program, Device& device, Backend& host)
    : mImpl(std::make_unique<Impl>(program, device, host)) {
  mImpl->plans.resize(program.nodes.size());
  mImpl->planKeys.resize(program.nodes.size());
  mImpl->kept.resize(program.nodes.size());
  mImpl->pinned.resize(program.nodes.size(), 0);
}

ResidentEvaluator::~ResidentEvaluator() = default;

const Program& ResidentEvaluator::program() const { return mImpl->program; }

std::size_t ResidentEvaluator::plannedDeviceNodes() const {
  std::size_t n = 0;
  for (const auto& p : mImpl->plans)
    if (p && p->device) ++n;
  return n;
}

ResidentResult ResidentEvaluator::evaluate(const TensorMap& inputs, const EvalOptions& options) {
  Impl& m = *mImpl;
  const Program& program = m.program;
  ResidentResult out;
  ResidentStats& stats = out.stats;
  if (options.domain != EvalDomain::Interval) {
    out.result = lossbound::evaluate(program, inputs, m.host, options);
    stats.messages.push_back(
        "only the interval domain runs device-resident; evaluated on the host");
    return out;
  }
  // Plans depend on the precision model: start again when it changes.
  const PrecisionModel& pm = options.precision;
  if (!m.planPrecision || m.planPrecision->override != pm.override ||
      m.planPrecision->tf32Matmul != pm.tf32Matmul ||
      m.planPrecision->truncatingAccumulation != pm.truncatingAccumulation) {
    for (auto& p : m.plans) p.reset();
    for (auto& k : m.kept) k.reset();
    m.planPrecision = pm;
  }
  m.device.resetCounters();
  m.stats = &stats;
  // Whatever ends the replay (an op error, cancellation), its values and their device memory go.
  struct Release {
    Impl& m;
    ~Release() {
      m.values.clear();
      m.stats = nullptr;
    }
  } release{m};

  // The schedule of evaluate(): needed nodes in program order, last uses, rules.
  const std::vector<std::string> outputNames =
      options.outputs.empty() ? std::vector<std::string>{"loss"} : options.outputs;
  const std::vector<std::size_t> order = neededNodes(program, outputNames);
  const std::size_t leaves = program.inputs.size() + program.constants.size();
  m.slotOf.clear();
  for (std::size_t k = 0; k < program.inputs.size(); ++k) m.slotOf[program.inputs[k].name] = k;
  for (std::size_t k = 0; k < program.constants.size(); ++k)
    m.slotOf[program.constants[k].name] = program.inputs.size() + k;
  for (std::size_t k = 0; k < program.nodes.size(); ++k)
    m.slotOf[program.nodes[k].name] = leaves + k;
  std::vector<ValueRef> outputRefs;
  for (const std::string& name : outputNames)
    for (const OutputSpec& o : program.outputs)
      if (o.name == name) outputRefs.push_back(o.ref);
  std::vector<std::size_t> lastUse(leaves + program.nodes.size(), 0);
  std::set<std::string> inputNeeded;
  for (std::size_t i : order)
    forEachRef(program.nodes[i], [&](const ValueRef& r) {
      lastUse[m.slotOf.at(r.name)] = i;
      inputNeeded.insert(r.name);
    });
  for (const ValueRef& r : outputRefs) {
    lastUse[m.slotOf.at(r.name)] = kNever;
    inputNeeded.insert(r.name);
  }
  // Values that depend on no program input: the program's constants and what nodes make from
  // them alone (a node without operands included; an operand read for its shape only, as
  // ones_like and fill read theirs, does not count).
  std::vector<char> fixed(leaves + program.nodes.size(), 0);
  for (std::size_t k = program.inputs.size(); k < leaves; ++k) fixed[k] = 1;
  for (std::size_t i : order) {
    const Node& node = program.nodes[i];
    bool all = true;
    const auto need = [&](const ValueRef& r) { all = all && fixed[m.slotOf.at(r.name)]; };
    for (std::size_t k = 0; k < node.args.size(); ++k)
      if (k > 0 || !readsFirstOperandShapeOnly(node.op)) forEachRef(node.args[k], need);
    for (const auto& [key, v] : node.kwargs) forEachRef(v, need);
    fixed[leaves + i] = all;
  }
  std::vector<const OpRule*> rules(program.nodes.size(), nullptr);
  for (std::size_t i : order) {
    rules[i] = opRegistry().find(program.nodes[i].op);
    if (!rules[i]) {
      // evaluate() builds the full message (every unsupported op); let it.
      out.result = lossbound::evaluate(program, inputs, m.host, options);
      return out;
    }
  }
  std::size_t intervalFrom = 0;
  if (!options.startNode.empty()) {
    const int s = findNode(program, options.startNode);
    if (s < 0)
      throw EvaluationError("the start node '" + options.startNode + "' is not in the program");
    intervalFrom = static_cast<std::size_t>(s);
  }

  m.values.assign(leaves + program.nodes.size(), {});
  for (std::size_t k = 0; k < program.inputs.size(); ++k) {
    const InputSpec& in = program.inputs[k];
    if (!inputNeeded.count(in.name)) continue;
    const auto it = inputs.find(in.name);
    if (it == inputs.end())
      throw EvaluationError("input '" + in.name + "' was not given (the program needs it as " +
                            shapeString(in.spec.shape) + " " +
                            std::string(dtypeName(in.spec.dtype)) + ")");
    const Tensor& t = it->second;
    if (t.shape() != in.spec.shape || t.dtype() != in.spec.dtype)
      throw EvaluationError("input '" + in.name + "' is " + shapeString(t.shape()) + " " +
                            std::string(dtypeName(t.dtype())) + ", the program expects " +
                            shapeString(in.spec.shape) + " " +
                            std::string(dtypeName(in.spec.dtype)));
    Value v;
    v.meta = Meta{t.shape(), t.dtype(), t.isInterval()};
    v.host = t;
    v.leaf = true;
    m.values[k] = {std::move(v)};
  }
  for (std::size_t k = 0; k < program.constants.size(); ++k) {
    const ConstantSpec& c = program.constants[k];
    Value v;
    v.meta = Meta{c.spec.shape, c.spec.dtype, false};
    v.host = Tensor::point(c.spec.shape, c.spec.dtype, c.data);
    v.leaf = true;
    m.values[program.inputs.size() + k] = {std::move(v)};
  }

  // The rerun flags (a non-finite operand, an index out of range): one double per node on the
  // device, zeroed now and read once at the end (one transfer each way).
  const auto flagCount = static_cast<std::int64_t>(std::max<std::size_t>(program.nodes.size(), 1));
  std::shared_ptr<double> flag;
  try {
    flag = deviceArray(m.device, flagCount);
    const std::vector<double> zeros(static_cast<std::size_t>(flagCount), 0.0);
    m.device.copyIn(flag.get(), zeros.data(), flagCount);
    ++stats.controlTransfers;
  } catch (const DeviceOutOfMemory& e) {
    stats.messages.push_back(std::string(e.what()) + ": the whole replay ran on the host");
  }

  // Reads the rerun flags now (one control transfer): true when a device node has set one.
  const auto deviceFlagged = [&] {
    if (!flag) return false;
    std::vector<double> set(static_cast<std::size_t>(flagCount), 0.0);
    m.device.copyOut(set.data(), flag.get(), flagCount);
    ++stats.controlTransfers;
    return std::any_of(set.begin(), set.end(), [](double f) { return f != 0.0; });
  };
  bool abandoned = false;  // a host node failed after a device node set its rerun flag
  OpContext hostCtx{pm, m.host, nullptr};
  const std::size_t total = order.size();
  std::size_t done = 0;
  for (std::size_t i : order) {
    if (options.cancel && options.cancel->load(std::memory_order_relaxed)) throw Cancelled();
    const Node& node = program.nodes[i];
    const OpRule& rule = *rules[i];
    std::vector<ValueRef> refs;
    forEachRef(node, [&](const ValueRef& r) {
      for (const ValueRef& q : refs)
        if (q.name == r.name && q.index == r.index) return;
      refs.push_back(r);
    });
    bool onDevice = false, hostView = false;
    std::string reason = i < intervalFrom ? "before the start node (point arithmetic)"
                                          : "no device memory for the replay";
    if (i >= intervalFrom && flag) {
      std::vector<Meta> metas;
      std::vector<char> fixedInts;
      for (const ValueRef& r : refs) {
        const Meta& meta = m.valueOf(r).meta;
        metas.push_back(meta);
        fixedInts.push_back(fixed[m.slotOf.at(r.name)] && !isFloating(meta.dtype) &&
                            meta.dtype != DType::Bool);
      }
      Plan& plan = m.planFor(i, rule, refs, metas, fixedInts, intervalFrom, pm);
      reason = plan.reason;
      if (plan.device) {
        reason = "an operand with a non-finite endpoint (the rule keeps it on the host)";
        // The trace's check, on the recorded results (shapes and dtypes are metadata).
        bool fits = plan.results.size() == node.outputs.size();
        for (std::size_t k = 0; fits && k < plan.results.size(); ++k)
          fits = node.outputs[k].none || (plan.results[k].shape == node.outputs[k].shape &&
                                          plan.results[k].dtype == node.outputs[k].dtype);
        if (!fits) reason = "its recorded results disagree with the trace";
        // Data movement follows its data: a view or gather of values that host nodes computed
        // runs on the host (moving them costs the same there, and copying them in would be a
        // transfer the next host node pays again to copy them out). A view of a program input
        // runs on the device: the input is copied in once (an input transfer), and the views of
        // it that device nodes read are not copied in one by one.
        bool movesHostData = !refs.empty();
        for (const Call& c : plan.calls)
          movesHostData = movesHostData && c.kind == HookKind::Gather;
        for (const ValueRef& r : refs) {
          const Value& v = m.valueOf(r);
          movesHostData = movesHostData && !v.onDevice() && !v.leaf;
        }
        if (fits && movesHostData) {
          fits = false;
          reason = "a view of host data (data movement stays with its data)";
          hostView = true;
        }
        if (fits && m.pinned[i]) {
          fits = false;
          reason = "an operand with a non-finite endpoint in an earlier replay";
          ++stats.nodesPinned;
        }
        if (fits) {
          try {
            onDevice = m.runOnDevice(i, plan, refs, flag.get() + i);
          } catch (const DeviceOutOfMemory& e) {
            ++stats.outOfMemoryNodes;
            reason = "out of device memory";
            if (stats.messages.size() < 8)
              stats.messages.push_back(std::string(e.what()) + " at " + nodeLabel(node) +
                                       ": the node ran on the host");
          }
        }
      }
    }
    // A kept result holds for the start node it was computed under: an interval node's value
    // depends on which of its producers ran in point arithmetic.
    std::string keptKey =
        i < intervalFrom ? "point:" : "interval@" + std::to_string(intervalFrom) + ":";
    for (const ValueRef& r : refs) keptKey += m.valueOf(r).meta.interval ? 'i' : 'p';
    if (!onDevice && fixed[leaves + i] && m.kept[i] && m.kept[i]->key == keptKey) {
      m.values[m.slotOf.at(node.name)] = m.kept[i]->values;  // device copies shared, not copied
      ++stats.nodesKept;
    } else if (!onDevice) {
      if (hostView) {
        ++stats.nodesHostViews;
      } else {
        ++stats.nodesOnHost;
        ++stats.hostOps[node.op];
        stats.hostReasons.emplace(node.op, reason);
      }
      stats.hostFallbackOperands += refs.size();
      for (const ValueRef& r : refs) m.ensureHost(m.valueOf(r), stats.boundaryDownloads);
      std::vector<Tensor> results;
      try {
        const OpArgs a(node,
                       [&](const ValueRef& r) -> const Tensor& { return *m.valueOf(r).host; });
        results = i < intervalFrom ? rule.point(a, hostCtx) : rule.interval(a, hostCtx);
      } catch (const Cancelled&) {
        throw;
      } catch (const std::exception& e) {
        // An operand a device node wrote after setting its rerun flag (an index it declined:
        // the whole line) makes this node fail where the CPU evaluation would not, or fail
        // with another error: the replay is evaluated again on the host, which gives the CPU's
        // values or its error.
        if (deviceFlagged()) {
          abandoned = true;
          break;
        }
        if (dynamic_cast<const EvaluationError*>(&e)) throw;
        std::string message = e.what();
        const std::string prefix = "node '" + node.name + "'";
        if (!message.starts_with(prefix)) message = nodeLabel(node) + ": evaluation: " + message;
        throw EvaluationError(message, node.name, node.op);
      }
      if (results.size() != node.outputs.size())
        throw EvaluationError(nodeLabel(node) + ": the rule returned " +
                                  std::to_string(results.size()) + " outputs, the trace has " +
                                  std::to_string(node.outputs.size()),
                              node.name, node.op);
      for (std::size_t k = 0; k < results.size(); ++k)
        if (!node.outputs[k].none && (results[k].shape() != node.outputs[k].shape ||
                                      results[k].dtype() != node.outputs[k].dtype))
          throw EvaluationError(nodeLabel(node) + ": output " + std::to_string(k) +
                                    " disagrees with the trace (" +
                                    shapeString(results[k].shape()) + " " +
                                    std::string(dtypeName(results[k].dtype())) + ", traced " +
                                    shapeString(node.outputs[k].shape) + " " +
                                    std::string(dtypeName(node.outputs[k].dtype)) + ")",
                                node.name, node.op);
      std::vector<Value> vs;
      for (Tensor& t : results) {
        Value v;
        v.meta = Meta{t.shape(), t.dtype(), t.isInterval()};
        v.host = std::move(t);
        vs.push_back(std::move(v));
      }
      stats.hostFallbackResults += vs.size();
      if (fixed[leaves + i] && flag) m.keep(i, keptKey, vs);
      m.values[m.slotOf.at(node.name)] = std::move(vs);
    }
    // Free what node i was the last user of (host copies and device copies alike).
    forEachRef(node, [&](const ValueRef& r) {
      const std::size_t s = m.slotOf.at(r.name);
      if (lastUse[s] == i) std::vector<Value>().swap(m.values[s]);
    });
    ++done;
    if (options.progress) options.progress(done, total);
  }

  for (std::size_t k = 0; k < outputNames.size() && !abandoned; ++k) {
    Value& v = m.valueOf(outputRefs[k]);
    m.ensureHost(v, stats.outputDownloads);
    out.result.outputs.emplace(outputNames[k], *v.host);
  }
  out.result.nodesEvaluated = total;
  out.result.nodesSkipped = program.nodes.size() - total;
  if (flag) {
    std::vector<double> set(static_cast<std::size_t>(flagCount), 0.0);
    m.device.copyOut(set.data(), flag.get(), flagCount);
    ++stats.controlTransfers;
    bool badIndex = false;
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (set[i] == 0.0) continue;
      stats.rerunOnHost = true;
      badIndex = badIndex || set[i] == kernels::kBadIndexFlag;
      if (set[i] != kernels::kBadIndexFlag) {  // a bad index is an error: the host reports it
        m.pinned[i] = 1;
        ++stats.nodesFlagged;
      }
    }
    if (stats.rerunOnHost)
      stats.messages.push_back(
          badIndex ? "an index was not a row of its table (or inside its plane) on the device: "
                     "the replay was evaluated again on the host"
                   : "a device-resident operand of an elementwise or sum kernel had a non-finite "
                     "endpoint, which the CPU rules keep exact on the host: the replay was "
                     "evaluated again on the host, and the " +
                         std::to_string(stats.nodesFlagged) +
                         " nodes that met one run on the host in later replays");
  }
  // A replay evaluated again on the host may have recorded plans from values of fixed operands
  // that device nodes made before a flag (wider than the host's), and pinned nodes make them on
  // the host from now on: such plans are recorded again.
  if (stats.rerunOnHost)
    for (std::size_t i = 0; i < m.plans.size(); ++i)
      if (m.planKeys[i].find('@') != std::string::npos) {
        m.plans[i].reset();
        m.planKeys[i].clear();
      }
  m.device.synchronize();
  m.values.clear();
  flag.reset();
  stats.device = m.device.counters();
  stats.constantBytes = stats.device.bytesInUse;  // what is left: the plans' constants
  m.stats = nullptr;
  if (stats.rerunOnHost) out.result = lossbound::evaluate(program, inputs, m.host, options);
  return out;
}

}  // namespace lossbound
