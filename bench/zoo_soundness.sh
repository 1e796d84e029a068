#!/usr/bin/env bash
# The model zoo's soundness and tightness, measured once (not a test: ~20-30 min on 2 cores).
#
#   bench/zoo_soundness.sh [BUILD_DIR] [EXECUTIONS]        (default build, 1000)
#
# 1. tests/zoo/zoo.py records every architecture's reference / correct / buggy runs (torch 1.13,
#    /usr/bin/python3) into a temporary folder and runs its lossbound-cli checks (verdicts, exit
#    codes, timings; 50 randomized executions at step 0).
# 2. bench-zoo replays step 0 of every correct pair (the candidate's program on the reference's
#    state) with the interval, first-order and probabilistic methods and EXECUTIONS randomized
#    executions, and counts the executions outside each envelope.
# 3. Prints one table row per architecture, with the replay time of each method (bench-zoo, one
#    thread) as a ratio to PyTorch's own fp32 step of the same program and batch (forward and
#    backward, one thread, measured by zoo.py in the same run: torch_step_seconds). The recordings are deleted unless KEEP=1.
# Needs build/app/lossbound-cli and build/bench/bench-zoo (cmake --build build --target
# lossbound-cli bench-zoo; benchmarks are on by default, LOSSBOUND_BENCHMARKS).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
EXECUTIONS="${2:-1000}"
PYTHON="${LOSSBOUND_PYTHON:-/usr/bin/python3}"
CLI="$BUILD/app/lossbound-cli"
BENCH="$BUILD/bench/bench-zoo"
for exe in "$CLI" "$BENCH"; do
  [ -x "$exe" ] || { echo "zoo_soundness: $exe not found (cmake --build $BUILD --target lossbound-cli bench-zoo)" >&2; exit 2; }
done
WORK="$(mktemp -d -t lossbound-zoo-XXXXXX)"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

echo "== zoo.py: record and check every architecture (work folder $WORK)"
start=$(date +%s)
OMP_NUM_THREADS=1 "$PYTHON" "$ROOT/tests/zoo/zoo.py" --cli "$CLI" --work "$WORK" \
  --json "$WORK/zoo.json" || echo "zoo.py: some checks failed (see above)"
echo "zoo.py: $(( $(date +%s) - start )) s"

names=$("$PYTHON" -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))))" "$WORK/zoo.json")
for name in $names; do
  echo "== bench-zoo $name: step 0 of the correct pair, $EXECUTIONS randomized executions"
  if [ -f "$WORK/$name/correct.h5" ]; then
    "$BENCH" "$WORK/$name/reference.h5" "$WORK/$name/correct.h5" 0 "$EXECUTIONS" \
      | tee "$WORK/$name/bench.txt" || true
  fi
done

"$PYTHON" - "$WORK" "$EXECUTIONS" <<'EOF'
import json, math, os, sys
work, executions = sys.argv[1], int(sys.argv[2])
zoo = json.load(open(os.path.join(work, "zoo.json")))

def rel(v):
    return "-" if v is None else ("inf" if v == "inf" or (isinstance(v, float) and math.isinf(v))
                                  else f"{float(v):.2g}")

print()
print(f"| architecture | interval | first-order | probabilistic | ensemble ({executions}) | "
      f"escapes (interval / first-order / probabilistic) | correct pair | buggy pair | "
      f"times (s): record, correct, buggy, FO / ensemble per execution | "
      f"replay / PyTorch fp32 step (FO, probabilistic, interval) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, z in zoo.items():
    bench = None
    path = os.path.join(work, name, "bench.txt")
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("json: "):
                bench = json.loads(line[6:])
    if bench is None:
        fails = "; ".join(f.splitlines()[0] for f in z.get("failures", [])[:2]) or z.get("error")
        print(f"| {name} | - | - | - | - | - | exit {z.get('correct_exit')} | exit "
              f"{z.get('buggy_exit')} | {fails} | - |")
        continue
    m = {k: bench[k] for k in ("interval", "first_order", "probabilistic")}
    escapes = " / ".join(str(m[k]["escapes"]) for k in m)
    finite = all(isinstance(m["interval"][e], float) for e in ("lo", "hi"))
    per = bench["ensemble"]["seconds"] * bench["ensemble"]["threads"] / executions
    buggy = f"exit {z.get('buggy_exit')}, first exit {z.get('buggy_first_exit')}"
    print(f"| {name} | {rel(m['interval']['rel_half_width'])}{'' if finite else ' (unbounded)'} | "
          f"{rel(m['first_order']['rel_half_width'])} | {rel(m['probabilistic']['rel_half_width'])}"
          f" | {rel(bench['ensemble']['rel_half_width'])} | {escapes} | exit "
          f"{z.get('correct_exit')} | {buggy} | {z.get('record_seconds')}, "
          f"{z.get('correct_seconds')}, {z.get('buggy_seconds')}, "
          f"{m['first_order']['seconds']:.2f} / {per:.3f} | "
          + ", ".join(f"{m[k]['seconds'] / z['torch_step_seconds']:.1f}x"
                      for k in ("first_order", "probabilistic", "interval")) + " |")
EOF
