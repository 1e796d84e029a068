#!/usr/bin/env bash
# Quick-start command 2: install what is missing, build everything, run the whole test suite.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
lb_install_missing
lb_log "style and layering checks (scripts/check-format.sh, scripts/check-layering.sh)"
"$LOSSBOUND_ROOT/scripts/check-format.sh"
"$LOSSBOUND_ROOT/scripts/check-layering.sh"
lb_configure
lb_build
lb_log "running the test suite (ctest)"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)"
lb_log "fuzz smoke run of the IR parser and the run-file reader (scripts/fuzz-smoke.sh, ~2 min)"
"$LOSSBOUND_ROOT/scripts/fuzz-smoke.sh"
# Sanitizers: the interval core's tests again, built with ASan + UBSan in a second build directory
# (measured ~3.5 min extra on 2 cores, most of it compiling lossbound_core; the other core-labelled
# tests are not built there, hence -R).
ASAN_DIR="$LOSSBOUND_ROOT/build-asan"
lb_log "ASan+UBSan: interval core tests in $ASAN_DIR"
BUILD_DIR="$ASAN_DIR" lb_configure -DLOSSBOUND_SANITIZE=ON -DLOSSBOUND_CUDA=OFF \
  -DLOSSBOUND_BENCHMARKS=OFF
BUILD_DIR="$ASAN_DIR" lb_build --target test_core_interval_rounding \
  test_core_interval_interval_mpfr test_core_interval_precision
ctest --test-dir "$ASAN_DIR" -L core -R '^core/interval/' --output-on-failure --timeout 900 \
  -j "$(nproc)"
