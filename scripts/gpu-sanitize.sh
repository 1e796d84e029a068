#!/usr/bin/env bash
# Runs the GPU tests under compute-sanitizer (memcheck, racecheck, synccheck) on a machine with a
# CUDA device. Without a device it prints "skipped: no CUDA device" and exits 0.
#
# Usage: scripts/gpu-sanitize.sh [BUILD_DIR]     (default: $LOSSBOUND_BUILD_DIR or ./build)
# Needs a CUDA build (cmake -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc ...) with the test
# targets built: cmake --build BUILD_DIR --target test_gpu_cuda_backend
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-${LOSSBOUND_BUILD_DIR:-$ROOT/build}}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

log() { printf '\033[1m[gpu-sanitize]\033[0m %s\n' "$*" >&2; }

SANITIZER="$(command -v compute-sanitizer || true)"
[ -z "$SANITIZER" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && SANITIZER="$CUDA_HOME/bin/compute-sanitizer"
[ -z "$SANITIZER" ] && [ -x "$CUDA_HOME/compute-sanitizer/compute-sanitizer" ] && \
  SANITIZER="$CUDA_HOME/compute-sanitizer/compute-sanitizer"

# A device is present when nvidia-smi lists one (the driver is loaded and sees a GPU).
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skipped: no CUDA device (nvidia-smi is missing or lists no GPU)"
  exit 0
fi
if [ -z "$SANITIZER" ]; then
  log "compute-sanitizer not found (looked on PATH and under $CUDA_HOME); install the CUDA toolkit's sanitizer"
  exit 1
fi

TESTS=("$BUILD_DIR/tests/gpu/test_gpu_cuda_backend")
for t in "${TESTS[@]}"; do
  if [ ! -x "$t" ]; then
    log "missing $t: build it first (cmake --build $BUILD_DIR --target $(basename "$t"))"
    exit 1
  fi
done

status=0
for tool in memcheck racecheck synccheck; do
  for t in "${TESTS[@]}"; do
    log "$tool: $(basename "$t")"
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    # --error-exitcode makes any finding fail the run; the test itself must pass too.
    if ! QT_QPA_PLATFORM=offscreen "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$t"; then
      log "$tool reported errors (or the test failed) in $(basename "$t")"
      status=1
    fi
  done
done
[ "$status" -eq 0 ] && log "memcheck, racecheck and synccheck are clean"
exit "$status"
