#!/usr/bin/env bash
# Creates (or reuses) the PyTorch 2.x virtual environment the recorder is tested on: Debian's
# /usr/bin/python3 -m venv with pinned torch, torchvision, transformers, h5py and numpy from PyPI.
#
#   scripts/torch2-env.sh            # prints the venv's python on the last line of stdout
#   PY=$(scripts/torch2-env.sh | tail -n 1)
#
# Where: ${LOSSBOUND_TORCH2_VENV:-$HOME/.cache/lossbound/venv-torch2}, never inside the repository
# (PyPI's torch brings its CUDA wheels: the venv is 5.7 GB). Idempotent: a stamp file in the venv
# lists the pins and the base Python; when it matches and the installed versions agree, nothing is
# installed and the script returns in well under a second. A venv with another stamp is updated in
# place to the pins; one without a working pip is recreated. A first install took 6.5 minutes on
# the 2-core development machine (measured with a fresh venv and no pip cache).
# Progress goes to stderr, only the python path to stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_PYTHON="${LOSSBOUND_TORCH2_BASE_PYTHON:-/usr/bin/python3}"
VENV="${LOSSBOUND_TORCH2_VENV:-$HOME/.cache/lossbound/venv-torch2}"

# The versions tests/python runs against (torch 2.15 pulls its CUDA 13 wheels from PyPI).
PINS=(torch==2.15.0 torchvision==0.29.2 transformers==5.23.0 h5py==3.16.0 numpy==2.4.6)

log() { printf '[torch2-env] %s\n' "$*" >&2; }

case "$VENV" in
  /*) ;;
  *) VENV="$PWD/$VENV" ;;
esac
VENV="${VENV%/}"
case "$VENV/" in
  "$ROOT"/*)
    log "refusing to create the venv inside the repository ($VENV): it holds several GB of"
    log "wheels. Set LOSSBOUND_TORCH2_VENV to a directory outside $ROOT."
    exit 2
    ;;
esac
if [ ! -x "$BASE_PYTHON" ]; then
  log "base python $BASE_PYTHON not found (Debian: apt-get install python3 python3-venv)"
  exit 2
fi

PY="$VENV/bin/python"
STAMP="$VENV/lossbound-torch2.stamp"
want="$(printf '%s\n' "python=$("$BASE_PYTHON" -c 'import sys; print(sys.version.split()[0])')" \
  "${PINS[@]}")"

# The installed distributions match the pins (package metadata only: fast).
check_versions() {
  "$PY" - "${PINS[@]}" <<'EOF'
import importlib.metadata, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    found = importlib.metadata.version(name).split("+")[0]
    if found != version:
        sys.exit(f"{name} {found} installed, {version} pinned")
EOF
}

# The pinned packages import (slow: loads torch and transformers; after an install only).
check_imports() {
  "$PY" -c 'import torch, torchvision, transformers, h5py, numpy'
}

if [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  if check_versions >/dev/null 2>&1; then
    log "reusing $VENV (pins match $STAMP)"
    echo "$PY"
    exit 0
  fi
  log "$VENV has a matching stamp but other package versions: reinstalling"
fi

if [ -x "$PY" ] && "$PY" -c 'import pip' >/dev/null 2>&1; then
  log "updating $VENV to the pins"
else
  log "creating $VENV with $BASE_PYTHON -m venv"
  mkdir -p "$(dirname "$VENV")"
  "$BASE_PYTHON" -m venv --clear "$VENV"
fi
rm -f "$STAMP"
log "installing ${PINS[*]} (a first install downloads several GB, ~6.5 min here)"
start=$(date +%s)
"$PY" -m pip install --disable-pip-version-check --no-input --progress-bar off "${PINS[@]}" >&2
if ! msg="$(check_versions 2>&1)"; then
  log "the installed packages do not match the pins: $msg"
  exit 1
fi
if ! msg="$(check_imports 2>&1)"; then
  log "the installed packages do not import: $msg"
  exit 1
fi
printf '%s\n' "$want" >"$STAMP"
log "installed in $(($(date +%s) - start)) s"
echo "$PY"
