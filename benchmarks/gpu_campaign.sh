#!/usr/bin/env bash
# One GPU draw (benchmarks/campaign.py): checks, throughput, a trained model and its scores
# in at most 540 s of steps, each step's file in $OUT as it finishes.
#
#   here:            .venv/bin/python benchmarks/campaign_pack.py     # .campaign/: data + wheels (< 58 MiB)
#   on the GPU:      bash benchmarks/gpu_campaign.sh draw              # carry .campaign with the call
#                    bash benchmarks/gpu_campaign.sh draw --plan       # the steps and their time limits
#   back here:       .venv/bin/python benchmarks/campaign_unpack.py DIR   # join, load, score again on the CPU
#
# CAMPAIGN_SMOKE=1 runs the same steps on the CPU at toy sizes (tests/test_campaign.py).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" != draw ]; then
  echo "gpu_campaign: usage: gpu_campaign.sh draw [--plan]" >&2
  exit 2
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PACK=${CAMPAIGN_PACK:-$PWD/.campaign}
if [ "${2:-}" != --plan ] && [ "${CAMPAIGN_SMOKE:-0}" != 1 ] && compgen -G "$PACK/whl/*.whl" >/dev/null; then
  echo "[campaign] installing $(ls "$PACK"/whl | wc -l) carried wheels"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$PACK"/whl/*.whl \
    || { echo "gpu_campaign: installing the carried wheels failed: pack them again (benchmarks/campaign_pack.py)" >&2; exit 2; }
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
exec $PY benchmarks/campaign.py "$@"
