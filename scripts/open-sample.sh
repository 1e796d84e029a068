#!/usr/bin/env bash
# Quick-start command 1: install what is missing, build, open the GUI on a sample session.
# Without a display it says so and renders the sample analysis to files under out/ instead.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
lb_install_missing
lb_configure
lb_build
REF="$LOSSBOUND_ROOT/samples/gradaccum-hf-bug/reference.h5"
CAND="$LOSSBOUND_ROOT/samples/gradaccum-hf-bug/candidate.h5"
args=()
[ -f "$REF" ] && [ -f "$CAND" ] && args=("$REF" "$CAND")
if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  lb_log "opening the GUI on the gradaccum-hf-bug sample"
  exec "$BUILD_DIR/app/lossbound" "${args[@]}"
fi
mkdir -p "$LOSSBOUND_ROOT/out"
lb_log "no display (DISPLAY and WAYLAND_DISPLAY are unset): running headless"
QT_QPA_PLATFORM=offscreen "$BUILD_DIR/app/lossbound" --analyze \
  --screenshot "$LOSSBOUND_ROOT/out/gradaccum-hf-bug.png" "${args[@]}"
lb_log "wrote $LOSSBOUND_ROOT/out/gradaccum-hf-bug.png"
