// Scalar interval core benchmark: ns per operation of the directed-rounding primitives and of the
// interval operations, next to plain double and Boost.Interval on the same inputs, measured side by
// side in one run (best of several runs; every result is stored and summed, so no loop is dead).
//
// Boost.Interval columns: "Boost" is interval<double> with its default policies, which on x86-64
// is save_state<rounded_arith_opp<double>>: every operation saves the rounding mode, switches it
// with fesetround and restores it. "Boost held" sets the mode once around the whole loop (Boost's
// unprotected fast path, which needs the caller to manage the mode). Boost's exp needs a
// transcendental policy; rounded_transc_opp calls libm under the upward mode, with no guarantee.
// The plain loops are kept scalar (no auto-vectorization) so that every column is one operation
// after another. Usage: bench-interval [--quick]

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")
#endif

#include "core/interval/elementary.h"
#include "core/interval/interval.h"
#include "core/interval/rounding.h"

#include <boost/numeric/interval.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace bil = boost::numeric::interval_lib;
using BoostInterval = boost::numeric::interval<double>;
using BoostRounding = BoostInterval::traits_type::rounding;  // save_state<rounded_arith_opp>
using BoostTranscRounding = bil::save_state<bil::rounded_transc_opp<double>>;
using BoostTransc =
    boost::numeric::interval<double,
                             bil::policies<BoostTranscRounding, bil::checking_strict<double>>>;
using BoostHeld = bil::unprotect<BoostInterval>::type;
using BoostTranscHeld = bil::unprotect<BoostTransc>::type;

constexpr std::size_t kN = 4096;  // elements per pass: inputs and outputs stay in L1/L2
volatile double gSink = 0.0;      // every pass's results are summed into it

/// Inputs shared by every column.
struct Inputs {
  std::vector<double> a, b, pos, small;  // b nonzero, pos > 0, small in [-20, 20]
  std::vector<lossbound::Interval> x, y, xpos, xsmall;
  std::vector<BoostInterval> bx, by, bxpos;
  std::vector<BoostTransc> bxsmall;
  std::vector<BoostHeld> hx, hy, hxpos;
  std::vector<BoostTranscHeld> hxsmall;
};

Inputs makeInputs() {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> mant(1.0, 2.0), unit(0.0, 1.0);
  std::uniform_int_distribution<int> expo(-20, 20);
  auto value = [&] {
    const double v = std::ldexp(mant(rng), expo(rng));
    return rng() & 1 ? -v : v;
  };
  Inputs in;
  for (std::size_t i = 0; i < kN; ++i) {
    in.a.push_back(value());
    in.b.push_back(value());
    in.pos.push_back(std::fabs(value()));
    in.small.push_back(-20.0 + 40.0 * unit(rng));
    auto widen = [&](double v) {  // a narrow interval, as in a deep evaluation
      return lossbound::Interval{v, v + std::fabs(v) * std::ldexp(unit(rng), -20)};
    };
    in.x.push_back(widen(in.a.back()));
    in.y.push_back(widen(in.b.back()));  // never contains 0: |b| >= 2^-20
    in.xpos.push_back(widen(in.pos.back()));
    in.xsmall.push_back(widen(in.small.back()));
    in.bx.emplace_back(in.x.back().lo, in.x.back().hi);
    in.by.emplace_back(in.y.back().lo, in.y.back().hi);
    in.bxpos.emplace_back(in.xpos.back().lo, in.xpos.back().hi);
    in.bxsmall.emplace_back(in.xsmall.back().lo, in.xsmall.back().hi);
    in.hx.emplace_back(in.x.back().lo, in.x.back().hi);
    in.hy.emplace_back(in.y.back().lo, in.y.back().hi);
    in.hxpos.emplace_back(in.xpos.back().lo, in.xpos.back().hi);
    in.hxsmall.emplace_back(in.xsmall.back().lo, in.xsmall.back().hi);
  }
  return in;
}

using Body = std::function<double()>;  // processes kN elements, returns a checksum of its results

/// Returns the best ns per element of each body (empty: -1, not available), timing them
/// interleaved, one run of `passes` passes of each in turn, `runs` times: a slow phase of a shared
/// machine then hits every column alike, and the best run dodges preemption.
std::vector<double> measure(const std::vector<Body>& bodies, int passes, int runs) {
  std::vector<double> best(bodies.size(), 1e300);
  for (int r = 0; r < runs; ++r)
    for (std::size_t b = 0; b < bodies.size(); ++b) {
      if (!bodies[b]) continue;
      const auto t0 = std::chrono::steady_clock::now();
      double sum = 0.0;
      for (int p = 0; p < passes; ++p) sum += bodies[b]();
      const auto t1 = std::chrono::steady_clock::now();
      gSink = gSink + sum;
      const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
      best[b] = std::min(best[b], ns / (double(passes) * double(kN)));
    }
  for (std::size_t b = 0; b < bodies.size(); ++b)
    if (!bodies[b]) best[b] = -1.0;
  return best;
}

double checksum(const std::vector<double>& v) {
  double s = 0.0;
  for (double d : v) s += d;
  return s;
}
double checksum(const std::vector<lossbound::Interval>& v) {
  double s = 0.0;
  for (const auto& d : v) s += d.lo + d.hi;
  return s;
}
template <class I>
double checksum(const std::vector<I>& v) {
  double s = 0.0;
  for (const auto& d : v) s += d.lower() + d.upper();
  return s;
}

/// One row of the table; a negative time means "not available".
struct Row {
  std::string name;
  double plain, ours, boost, boostHeld;
  bool agrees;  // our results equal Boost's bit for bit (value for zeros)
};

void printRow(const Row& r) {
  auto cell = [](double ns) {
    char buf[32];
    if (ns < 0)
      std::snprintf(buf, sizeof buf, "%10s", "n/a");
    else
      std::snprintf(buf, sizeof buf, "%10.2f", ns);
    return std::string(buf);
  };
  auto ratio = [](double a, double b) {
    char buf[32];
    if (a < 0 || b < 0)
      std::snprintf(buf, sizeof buf, "%12s", "n/a");
    else
      std::snprintf(buf, sizeof buf, "%11.2fx", a / b);
    return std::string(buf);
  };
  std::printf("%-16s%s%s%s %s%s%s%s  %s\n", r.name.c_str(), cell(r.plain).c_str(),
              cell(r.ours).c_str(), cell(r.boost).c_str(), cell(r.boostHeld).c_str(),
              ratio(r.ours, r.plain).c_str(), ratio(r.ours, r.boost).c_str(),
              ratio(r.ours, r.boostHeld).c_str(), r.agrees ? "yes" : "NO");
}

bool sameValues(const std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}
template <class I>
bool sameIntervals(const std::vector<lossbound::Interval>& a, const std::vector<I>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].lo != b[i].lower() || a[i].hi != b[i].upper()) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int passes = quick ? 2 : 5, runs = quick ? 20 : 120;  // short runs; the best one counts
  const Inputs in = makeInputs();
  std::vector<double> out(kN), ref(kN);
  std::vector<lossbound::Interval> iout(kN);
  std::vector<BoostInterval> bout(kN);
  std::vector<BoostTransc> btout(kN);
  std::vector<BoostHeld> hout(kN);
  std::vector<BoostTranscHeld> htout(kN);
  std::vector<Row> rows;

  // ---- primitives ----
  // Each primitive: plain double; ours; Boost's rounding policy with a save_state object per call
  // (as Boost's interval operations do); Boost's policy held for the whole loop.
  auto row = [&](const char* name, std::vector<Body> bodies, bool agrees) {
    const std::vector<double> t = measure(bodies, passes, runs);
    rows.push_back({name, t[0], t[1], t[2], t[3], agrees});
  };
#define LB_LOOP(OUT, EXPR)                              \
  [&] {                                                 \
    for (std::size_t i = 0; i < kN; ++i) OUT[i] = EXPR; \
    return checksum(OUT);                               \
  }
#define LB_PRIMITIVE(NAME, PLAIN, OURS, BOOST)                  \
  {                                                             \
    const Body ours = LB_LOOP(out, OURS);                       \
    const Body boost = [&] {                                    \
      for (std::size_t i = 0; i < kN; ++i) {                    \
        BoostRounding rnd;                                      \
        ref[i] = BOOST;                                         \
      }                                                         \
      return checksum(ref);                                     \
    };                                                          \
    ours();                                                     \
    boost();                                                    \
    const bool agrees = sameValues(out, ref);                   \
    row(NAME,                                                   \
        {LB_LOOP(out, PLAIN), ours, boost,                      \
         [&] {                                                  \
           BoostRounding rnd;                                   \
           for (std::size_t i = 0; i < kN; ++i) ref[i] = BOOST; \
           return checksum(ref);                                \
         }},                                                    \
        agrees);                                                \
  }
  LB_PRIMITIVE("add_down", in.a[i] + in.b[i], lossbound::add_down(in.a[i], in.b[i]),
               rnd.add_down(in.a[i], in.b[i]))
  LB_PRIMITIVE("mul_up", in.a[i] * in.b[i], lossbound::mul_up(in.a[i], in.b[i]),
               rnd.mul_up(in.a[i], in.b[i]))
  LB_PRIMITIVE("div_down", in.a[i] / in.b[i], lossbound::div_down(in.a[i], in.b[i]),
               rnd.div_down(in.a[i], in.b[i]))
  LB_PRIMITIVE("sqrt_up", std::sqrt(in.pos[i]), lossbound::sqrt_up(in.pos[i]),
               rnd.sqrt_up(in.pos[i]))
#undef LB_PRIMITIVE
  row("fma_down",
      {LB_LOOP(out, std::fma(in.a[i], in.b[i], in.pos[i])),
       LB_LOOP(out, lossbound::fma_down(in.a[i], in.b[i], in.pos[i])), Body(), Body()},
      true);

  // ---- interval operations ----
  // "double" is the same operation on the lower endpoints as doubles (one rounding to nearest).
#define LB_INTERVAL(NAME, PLAIN, OURS, BOOST, BOUT, HELD, HOUT, MODE) \
  {                                                                   \
    const Body ours = LB_LOOP(iout, OURS);                            \
    const Body boost = LB_LOOP(BOUT, BOOST);                          \
    ours();                                                           \
    boost();                                                          \
    const bool agrees = sameIntervals(iout, BOUT);                    \
    row(NAME,                                                         \
        {LB_LOOP(out, PLAIN), ours, boost,                            \
         [&] {                                                        \
           MODE rnd; /* sets the rounding mode for the whole loop */  \
           for (std::size_t i = 0; i < kN; ++i) HOUT[i] = HELD;       \
           return checksum(HOUT);                                     \
         }},                                                          \
        agrees);                                                      \
  }
  LB_INTERVAL("interval add", in.a[i] + in.b[i], lossbound::add(in.x[i], in.y[i]),
              in.bx[i] + in.by[i], bout, in.hx[i] + in.hy[i], hout, BoostRounding)
  LB_INTERVAL("interval mul", in.a[i] * in.b[i], lossbound::mul(in.x[i], in.y[i]),
              in.bx[i] * in.by[i], bout, in.hx[i] * in.hy[i], hout, BoostRounding)
  LB_INTERVAL("interval div", in.a[i] / in.b[i], lossbound::div(in.x[i], in.y[i]),
              in.bx[i] / in.by[i], bout, in.hx[i] / in.hy[i], hout, BoostRounding)
  LB_INTERVAL("interval sqrt", std::sqrt(in.pos[i]), lossbound::sqrt(in.xpos[i]),
              boost::numeric::sqrt(in.bxpos[i]), bout, boost::numeric::sqrt(in.hxpos[i]), hout,
              BoostRounding)
  LB_INTERVAL("interval exp", std::exp(in.small[i]), lossbound::exp(in.xsmall[i]),
              boost::numeric::exp(in.bxsmall[i]), btout, boost::numeric::exp(in.hxsmall[i]), htout,
              BoostTranscRounding)
#undef LB_INTERVAL
#undef LB_LOOP
  rows.back().agrees = true;  // exp: different (documented) margins, not comparable bit for bit

  std::printf("ns per operation, best of %d runs of %d x %zu operations (lower is better)\n", runs,
              passes, kN);
  std::printf("%-16s%10s%10s%10s%11s%12s%12s%12s  %s\n", "operation", "double", "lossbound",
              "Boost", "Boost held", "vs double", "vs Boost", "vs held", "same as Boost");
  for (const Row& r : rows) printRow(r);
  std::printf("(checksum %g)\n", static_cast<double>(gSink));
  return 0;
}
