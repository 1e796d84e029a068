#!/usr/bin/env bash
# Runs the tests of this folder with the PyTorch 2.x venv made by scripts/torch2-env.sh
# (${LOSSBOUND_TORCH2_VENV:-$HOME/.cache/lossbound/venv-torch2}). Without that venv it prints why
# and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE in CMakeLists.txt).
set -euo pipefail
tests_dir="$1"
venv="${LOSSBOUND_TORCH2_VENV:-$HOME/.cache/lossbound/venv-torch2}"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  echo "SKIPPED: no PyTorch 2.x venv at $venv: create it with scripts/torch2-env.sh" \
    "(or set LOSSBOUND_TORCH2_VENV to an existing one)"
  exit 77
fi
"$py" -c 'import torch; print("torch", torch.__version__, "from", torch.__file__)'
exec "$py" -m unittest discover -s "$tests_dir" -v
