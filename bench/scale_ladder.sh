#!/bin/bash
# The scale ladder of issue 14: records each rung (bench/scale_ladder_record.py, PyTorch 1.13 at
# /usr/bin/python3 unless $LOSSBOUND_PYTHON says otherwise) unless its folder already holds a
# recording, then runs bench-scale-ladder over the rungs, smallest first.
#
#   bench/scale_ladder.sh [--smallest] [--executions N] [--first-step-only] [--out DIR]
#                         [--build DIR] [RUNG...]
#
#   RUNG          s0 s1 s2 s3 (default: all; `bench/scale_ladder_record.py --list` sizes them)
#   --executions  randomized executions per step (default 1000; --smallest: 4)
#   --out         where the rungs are recorded (default out/ladder)
#   --build       the build folder holding bench/bench-scale-ladder (default build)
#   --first-step-only  only the first checkpointed step of each rung (the large rungs are slow)
#   --smallest    CI's smoke test: rung s0 only, recorded with 2 steps, its first step, 4 executions
#
# Exit status: bench-scale-ladder's (0, or 1 on an escape of a rigorous envelope, a fixed pair
# called a bug under --smallest, or an error), 2 on bad usage.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${LOSSBOUND_PYTHON:-/usr/bin/python3}"
out="$root/out/ladder"
build="$root/build"
smallest=0
executions=()
first=()
rungs=()
steps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --smallest) smallest=1 ;;
    --executions) executions=(--executions "$2"); shift ;;
    --first-step-only) first=(--first-step-only) ;;
    --out) out="$2"; shift ;;
    --build) build="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    s[0-9]) rungs+=("$1") ;;
    *) echo "scale_ladder.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$smallest" = 1 ]; then
  rungs=(s0)
  steps=2
  out="$out-smoke"
fi
[ ${#rungs[@]} -gt 0 ] || rungs=(s0 s1 s2 s3)
bench="$build/bench/bench-scale-ladder"
[ -x "$bench" ] || { echo "scale_ladder.sh: $bench is missing (build with -DLOSSBOUND_BENCHMARKS=ON)" >&2; exit 2; }

dirs=()
for r in "${rungs[@]}"; do
  dir="$out/$r"
  if [ ! -f "$dir/torch.json" ]; then
    echo "recording rung $r into $dir" >&2
    OMP_NUM_THREADS=1 "$python" "$here/scale_ladder_record.py" --size "$r" --out "$dir" \
      --steps "$steps" --repeats $((smallest ? 1 : 3)) >/dev/null
  fi
  dirs+=("$dir")
done
flags=()
[ "$smallest" = 1 ] && flags+=(--smallest)
echo "+ $bench ${flags[*]} ${executions[*]} ${first[*]} ${dirs[*]}"
exec "$bench" "${flags[@]}" "${executions[@]}" "${first[@]}" "${dirs[@]}"
