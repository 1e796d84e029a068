#!/usr/bin/env bash
# The Hugging Face stage: tiny GPT-2, Llama, BERT and Mixtral models recorded with
# samples/pytorch/record_hf.py on PyTorch 2.x, their gradient-accumulation pairs analysed with
# lossbound-cli (tests/python/hf_stage.py says what is checked).
#
#   tests/python/hf-stage.sh [--skip-without-venv] [LOSSBOUND_CLI [hf_stage.py options, e.g. --steps N]]
#
# The venv comes from scripts/torch2-env.sh, which creates it when it is missing (several GB of
# PyPI wheels, ~10 minutes; then reused in well under a second). With --skip-without-venv (how
# ctest runs it) a missing venv is not created: the stage prints why and exits 77 (skipped).
# LOSSBOUND_CLI defaults to build/app/lossbound-cli.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ "${1:-}" = "--skip-without-venv" ]; then
  shift
  venv="${LOSSBOUND_TORCH2_VENV:-$HOME/.cache/lossbound/venv-torch2}"
  if [ ! -x "$venv/bin/python" ]; then
    echo "SKIPPED: no PyTorch 2.x venv at $venv: create it with scripts/torch2-env.sh" \
      "(or set LOSSBOUND_TORCH2_VENV to an existing one)"
    exit 77
  fi
fi
cli="${1:-$root/build/app/lossbound-cli}"
[ $# -gt 0 ] && shift  # the rest goes to hf_stage.py (e.g. --steps N)
if [ ! -x "$cli" ]; then
  echo "hf-stage: $cli not found; build it first (cmake --build build --target lossbound-cli)" >&2
  exit 2
fi
start=$(date +%s)
py="$("$root/scripts/torch2-env.sh" | tail -n 1)"
echo "hf-stage: venv ready in $(($(date +%s) - start)) s ($py)"
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
exec "$py" "$root/tests/python/hf_stage.py" --cli "$cli" "$@"
