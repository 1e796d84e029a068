#!/usr/bin/env bash
# Prints the exact envelopes (hex binary64) of the three sample pairs under the four methods,
# every checkpointed step, computed without the results cache. A refactoring that must not change
# a bound is checked by running this before and after and comparing the outputs (diff, or the
# sha256 on the last line).
#   bench/envelope_fingerprint.sh [BUILD_DIR] > fingerprint.txt
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
CLI="$BUILD/app/lossbound-cli"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for sample in gradaccum-hf-bug gradaccum-fixed kernel-path; do
  for method in interval first-order probabilistic ensemble; do
    csv="$TMP/$sample-$method.csv"
    "$CLI" analyze --reference "$ROOT/samples/$sample/reference.h5" \
      --candidate "$ROOT/samples/$sample/candidate.h5" --method "$method" --backend cpu \
      --no-cache --csv "$csv" >/dev/null 2>&1 || true  # exit 3/4 are verdicts, not failures
    [ -s "$csv" ] || { echo "no CSV for $sample $method" >&2; exit 1; }
    python3 - "$csv" "$sample" "$method" <<'PY'
import csv, sys
path, sample, method = sys.argv[1:]
with open(path, newline="") as f:
    for row in csv.DictReader(f):
        def h(k):
            try:
                return float(row[k]).hex()
            except ValueError:
                return row[k]
        print(sample, method, row["step"], h("envelope_lo"), h("envelope_hi"), row["verdict"])
PY
  done
done | tee "$TMP/all.txt"
echo "sha256 $(sha256sum < "$TMP/all.txt" | cut -d' ' -f1)"
