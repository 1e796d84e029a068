#!/usr/bin/env bash
# Quick-start command 2: install what is missing, build everything, run the whole test suite.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
lb_install_missing
lb_configure
lb_build
lb_log "running the test suite (ctest)"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j "$(nproc)"
lb_log "fuzz smoke run of the IR parser and the run-file reader (scripts/fuzz-smoke.sh, ~2 min)"
"$LOSSBOUND_ROOT/scripts/fuzz-smoke.sh"
lb_sanitize_stage
